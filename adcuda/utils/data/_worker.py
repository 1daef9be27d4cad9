"""What runs inside a DataLoader worker process: seeding, ``get_worker_info()``, the fetch loop, and
how results and errors travel back to the main process."""

import os
import pickle
import random
import sys
import threading
import traceback
from dataclasses import dataclass

import numpy as np

from ... import random as adcuda_random
from ...backends.cpu import threads as cpu_threads
from ...cuda.context import note_loader_worker_seed

__all__ = ["WorkerInfo", "get_worker_info"]

# How often a waiting process looks up from its queue to check on the other side (seconds).
STATUS_CHECK_INTERVAL = 1.0


@dataclass(frozen=True)
class WorkerInfo:
    """What ``get_worker_info()`` returns inside a worker: its ``id`` in ``0..num_workers-1``, the
    ``seed`` its random generators got, and its own copy of the ``dataset``."""

    id: int
    num_workers: int
    seed: int
    dataset: object


_worker_info = None


def get_worker_info() -> WorkerInfo | None:
    """This worker's ``WorkerInfo``; None in the main process."""
    return _worker_info


class ExceptionWrapper:
    """An exception caught in a worker, carried to the main process with its traceback as text (the
    exception object itself may not pickle) and raised there again."""

    def __init__(self, where):
        exc_type, exc_value, exc_tb = sys.exc_info()
        self.exc_type = exc_type
        self.where = where
        self.traceback_text = "".join(traceback.format_exception(exc_type, exc_value, exc_tb))

    def reraise(self):
        message = f"Caught {self.exc_type.__name__} {self.where}.\nOriginal {self.traceback_text}"
        if self.exc_type is KeyError:
            # KeyError shows its argument with repr(), which would turn the newlines into "\n"
            message = _KeyErrorMessage(message)
        try:
            error = self.exc_type(message)
        except Exception:
            # an exception type whose constructor needs other arguments
            error = RuntimeError(message)
        try:
            raise error
        finally:
            # the traceback holds this frame: dropping the local breaks the cycle, so the iterator that
            # raised is freed (and its workers stopped) as soon as the caller lets go of the exception
            del error


class _KeyErrorMessage(str):
    def __repr__(self):
        return str(self)


@dataclass(frozen=True)
class IterableDatasetStopIteration:
    """A worker's IterableDataset copy is exhausted."""

    worker_id: int


@dataclass(frozen=True)
class ResumeIteration:
    """Tells a persistent worker that a new epoch starts; it answers with the same object."""


class MapDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset = dataset
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn

    def fetch(self, index):
        if self.auto_collation:
            getitems = getattr(self.dataset, "__getitems__", None)
            data = getitems(index) if callable(getitems) else [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class IterableDatasetFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last):
        self.dataset_iter = iter(dataset)
        self.auto_collation = auto_collation
        self.collate_fn = collate_fn
        self.drop_last = drop_last
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if not self.auto_collation:
            return self.collate_fn(next(self.dataset_iter))
        data = []
        for _ in index:
            try:
                data.append(next(self.dataset_iter))
            except StopIteration:
                self.ended = True
                break
        if not data or (self.drop_last and len(data) < len(index)):
            raise StopIteration
        return self.collate_fn(data)


def make_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last):
    fetcher_type = IterableDatasetFetcher if is_iterable else MapDatasetFetcher
    return fetcher_type(dataset, auto_collation, collate_fn, drop_last)


def seed_worker_rngs(seed):
    """Seed adcuda's, Python's and NumPy's global generators for one worker."""
    adcuda_random.manual_seed(seed)
    random.seed(seed)
    # NumPy's legacy seed takes at most 32 bits per word: spread the 64-bit seed over four words
    np.random.seed(np.random.SeedSequence(seed).generate_state(4))


def encode_result(index, data):
    """Pickle a result here, in the worker, so that an unpicklable batch becomes an error the main
    process sees (a pickling error in the queue's feeder thread would lose the batch and hang it)."""
    try:
        return index, pickle.dumps(data, pickle.HIGHEST_PROTOCOL)
    except Exception:
        wrapper = ExceptionWrapper(where="while sending a batch from a DataLoader worker process")
        return index, pickle.dumps(wrapper, pickle.HIGHEST_PROTOCOL)


def decode_result(payload):
    return pickle.loads(payload)


def worker_loop(
    is_iterable,
    dataset,
    index_conn,
    data_queue,
    done_event,
    auto_collation,
    collate_fn,
    drop_last,
    base_seed,
    init_fn,
    worker_id,
    num_workers,
):
    """Receive ``(task index, sampler indices)`` on ``index_conn`` and put ``(task index, pickled batch)``
    on ``data_queue`` until told to stop (None), the main process closes the pipe, or it is gone."""
    global _worker_info
    parent_pid = os.getppid()
    try:
        # one thread per worker, as PyTorch's workers start (a worker_init_fn may raise it): the main
        # process and the other workers have the cores
        cpu_threads.set_num_threads(1)
        seed = base_seed + worker_id
        seed_worker_rngs(seed)
        note_loader_worker_seed(seed)
        _worker_info = WorkerInfo(id=worker_id, num_workers=num_workers, seed=seed, dataset=dataset)
        where = f"in DataLoader worker process {worker_id}"
        init_error = None
        fetcher = None
        try:
            if init_fn is not None:
                init_fn(worker_id)
            fetcher = make_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
        except Exception:
            init_error = ExceptionWrapper(where=where)

        iteration_ended = False
        while os.getppid() == parent_pid:
            if not index_conn.poll(STATUS_CHECK_INTERVAL):
                if done_event.is_set():
                    break
                continue
            task = index_conn.recv()
            if task is None:
                break
            if isinstance(task, ResumeIteration):
                iteration_ended = False
                if init_error is None:
                    fetcher = make_fetcher(is_iterable, dataset, auto_collation, collate_fn, drop_last)
                data_queue.put(encode_result(task, None))
                continue
            if done_event.is_set() or iteration_ended:
                # shutting down, or this worker's stream is exhausted: wait for None
                continue
            task_index, sampler_indices = task
            if init_error is not None:
                data = init_error
            else:
                try:
                    data = fetcher.fetch(sampler_indices)
                except StopIteration:
                    if not is_iterable:
                        data = ExceptionWrapper(where=where)
                    else:
                        data = IterableDatasetStopIteration(worker_id)
                        iteration_ended = True
                except Exception:
                    data = ExceptionWrapper(where=where)
            data_queue.put(encode_result(task_index, data))
            del data, task, sampler_indices
    except (KeyboardInterrupt, EOFError, OSError):
        # an interrupt reaches the main process too, which shuts the workers down; EOF or a closed pipe
        # means the main process has stopped talking to this worker
        pass
    finish_sending(data_queue, done_event, parent_pid)


def finish_sending(data_queue, done_event, parent_pid):
    """Let the queue's feeder thread finish before this worker exits.

    The feeder writes under a lock shared by every worker; the main process can read a result (say the
    IterableDatasetStopIteration marker) and tell this worker to exit before the feeder has released
    that lock. Exiting then leaves the lock held forever and every other worker's results stuck behind
    it: the loader hangs. So the feeder is joined while the main process still reads the queue; only
    when it is shutting down (done_event) or gone is the flush skipped, as nobody would read it."""
    data_queue.close()
    if done_event.is_set() or os.getppid() != parent_pid:
        data_queue.cancel_join_thread()
        return
    # join_thread has no timeout: wait on it from a helper thread so that a main process that dies
    # while the pipe is full cannot leave this worker waiting forever
    joiner = threading.Thread(target=data_queue.join_thread, daemon=True)
    joiner.start()
    while joiner.is_alive():
        joiner.join(STATUS_CHECK_INTERVAL)
        if done_event.is_set() or os.getppid() != parent_pid:
            data_queue.cancel_join_thread()
            return
