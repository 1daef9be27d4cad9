"""``DataLoader``: batches from a dataset, in the main process or in worker processes.

With ``num_workers > 0`` each worker reads its tasks from its own pipe (written synchronously, so no
feeder thread can be lost at garbage collection) and all share one result queue; the main process hands
out up to ``prefetch_factor`` tasks per worker round-robin, keeps results that arrive
early, and returns batches in sampler order. Waiting on the result queue wakes every
``STATUS_CHECK_INTERVAL`` seconds to check that the workers are alive, so a worker that dies becomes an
error with its exit code instead of a hang; workers exit when the main process goes away.
"""

import itertools
import multiprocessing
import numbers
import queue
import signal
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ... import cuda
from ... import random as adcuda_random
from ...factories import randint
from ...random import Generator
from ...tensor import Tensor
from . import _worker
from .collate import default_collate, default_convert
from .dataset import Dataset, IterableDataset
from .sampler import BatchSampler, RandomSampler, Sampler, SequentialSampler

__all__ = ["DataLoader"]

_pin_memory_warned = False


class _InfiniteConstantSampler(Sampler):
    """For an IterableDataset: the dataset decides what comes next, so every index is None."""

    def __iter__(self):
        while True:
            yield None


def _default_multiprocessing_context():
    """Fork (the platform default on Linux) is fast, but a forked child cannot use a CUDA context its
    parent created: spawn once the parent has initialised CUDA."""
    initialized = getattr(cuda, "is_initialized", None)
    if callable(initialized) and initialized():
        return multiprocessing.get_context("spawn")
    return multiprocessing.get_context()


def _as_multiprocessing_context(context):
    if context is None:
        return _default_multiprocessing_context()
    if isinstance(context, str):
        methods = multiprocessing.get_all_start_methods()
        if context not in methods:
            raise ValueError(
                f"DataLoader: multiprocessing_context {context!r} is not available here; choose one of {methods}"
            )
        return multiprocessing.get_context(context)
    if isinstance(context, multiprocessing.context.BaseContext):
        return context
    raise TypeError(
        f"DataLoader: multiprocessing_context must be a start method name or a multiprocessing "
        f"context, got {type(context).__name__}"
    )


class DataLoader:
    """Iterate over ``dataset`` in batches, with PyTorch's arguments and semantics."""

    def __init__(
        self,
        dataset: Dataset | IterableDataset,
        batch_size: int | None = 1,
        shuffle: bool | None = False,
        sampler: Sampler | Iterable | None = None,
        batch_sampler: Sampler | Iterable | None = None,
        num_workers: int = 0,
        collate_fn: Callable[[list], Any] | None = None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn: Callable[[int], None] | None = None,
        multiprocessing_context: str | multiprocessing.context.BaseContext | None = None,
        generator: Generator | None = None,
        *,
        prefetch_factor: int | None = None,
        persistent_workers: bool = False,
    ) -> None:
        if not isinstance(num_workers, numbers.Integral) or isinstance(num_workers, bool) or num_workers < 0:
            raise ValueError(f"DataLoader: num_workers option should be a non-negative integer, got {num_workers!r}")
        if timeout < 0:
            raise ValueError(f"DataLoader: timeout option should be non-negative, got {timeout!r}")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError(
                "DataLoader: prefetch_factor option could only be specified in multiprocessing; "
                "let num_workers > 0 to enable multiprocessing, otherwise set prefetch_factor to None"
            )
        if num_workers > 0 and prefetch_factor is None:
            prefetch_factor = 2
        if prefetch_factor is not None and (not isinstance(prefetch_factor, numbers.Integral) or prefetch_factor < 1):
            raise ValueError(
                f"DataLoader: prefetch_factor option should be a positive integer, got {prefetch_factor!r}"
            )
        if persistent_workers and num_workers == 0:
            raise ValueError("DataLoader: persistent_workers option needs num_workers > 0")
        if multiprocessing_context is not None and num_workers == 0:
            raise ValueError(
                f"DataLoader: multiprocessing_context can only be used with multi-process loading "
                f"(num_workers > 0), but got num_workers={num_workers}"
            )

        self.dataset = dataset
        self.num_workers = int(num_workers)
        self.prefetch_factor = prefetch_factor
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.persistent_workers = persistent_workers
        self.generator = generator
        self.multiprocessing_context = _as_multiprocessing_context(multiprocessing_context) if num_workers > 0 else None
        self._is_iterable = isinstance(dataset, IterableDataset)

        if self._is_iterable:
            if shuffle not in (False, None):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle={shuffle}"
                )
            if sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified sampler option, but got sampler={sampler}"
                )
            if batch_sampler is not None:
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified batch_sampler "
                    f"option, but got batch_sampler={batch_sampler}"
                )
        if sampler is not None and shuffle:
            raise ValueError("DataLoader: sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "DataLoader: batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "DataLoader: batch_size=None option disables auto-batching and is mutually exclusive with drop_last"
            )

        if sampler is None:
            if self._is_iterable:
                sampler = _InfiniteConstantSampler()
            elif shuffle:
                sampler = RandomSampler(dataset, generator=generator)
            else:
                sampler = SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)

        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn
        self._iterator = None

    @property
    def _auto_collation(self):
        return self.batch_sampler is not None

    @property
    def _index_sampler(self):
        return self.batch_sampler if self._auto_collation else self.sampler

    def __iter__(self) -> Iterator[Any]:
        if self.num_workers == 0:
            return _SingleProcessIter(self)
        if not self.persistent_workers:
            return _MultiProcessIter(self)
        if self._iterator is None or self._iterator._shutdown:
            # first epoch, or the workers were stopped (an error, a timeout): start new ones
            self._iterator = _MultiProcessIter(self)
        else:
            self._iterator._reset(self)
        return self._iterator

    def __len__(self) -> int:
        if self._is_iterable:
            length = len(self.dataset)
            if self.batch_size is not None:
                if self.drop_last:
                    return length // self.batch_size
                return (length + self.batch_size - 1) // self.batch_size
            return length
        return len(self._index_sampler)


def _draw_base_seed(generator):
    return int(randint(0, 2**62, (), generator=generator or adcuda_random.default_generator).item())


def _pin(data):
    """Copy tensors into page-locked memory where CUDA is usable; without it, warn once and go on."""
    global _pin_memory_warned
    if not cuda.is_available() or not hasattr(Tensor, "pin_memory"):
        if not _pin_memory_warned:
            _pin_memory_warned = True
            reason = cuda.unavailable_reason() or "this build has no pinned-memory support"
            warnings.warn(
                f"DataLoader: pin_memory=True but there is no usable CUDA device ({reason}); "
                "batches stay in pageable memory",
                UserWarning,
                stacklevel=4,
            )
        return data
    return _pin_nested(data)


def _pin_thread_loop(results, pinned, done):
    """The pinning thread: decode each worker result and copy its tensors into pinned memory while the
    main thread trains, so batches arrive pinned (PyTorch's pin_memory_thread)."""
    while not done.is_set():
        try:
            item = results.get(timeout=_worker.STATUS_CHECK_INTERVAL)
        except queue.Empty:
            continue
        except (EOFError, OSError):
            return  # the queue was closed: the iterator is shutting down
        if item is None:
            return  # the iterator's shutdown wakes the thread with None
        task_index, payload = item
        data = _worker.decode_result(payload)
        if (
            not isinstance(
                data, (_worker.ExceptionWrapper, _worker.IterableDatasetStopIteration, _worker.ResumeIteration)
            )
            and data is not None
        ):
            try:
                data = _pin_nested(data)
            except Exception:
                data = _worker.ExceptionWrapper(where="in the DataLoader pin-memory thread")
        pinned.put((task_index, data))


def _pin_nested(data):
    if isinstance(data, Tensor):
        return data.pin_memory()
    if isinstance(data, dict):
        return type(data)({k: _pin_nested(v) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_pin_nested(v) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(_pin_nested(v) for v in data)
    return data


class _BaseIter:
    def __init__(self, loader):
        self._dataset = loader.dataset
        self._is_iterable = loader._is_iterable
        self._auto_collation = loader._auto_collation
        self._drop_last = loader.drop_last
        self._index_sampler = loader._index_sampler
        self._collate_fn = loader.collate_fn
        self._pin_memory = loader.pin_memory
        self._timeout = loader.timeout
        self._sampler_iter = iter(self._index_sampler)
        self._base_seed = _draw_base_seed(loader.generator)
        self._num_yielded = 0

    def __iter__(self):
        return self

    def _reset(self, loader):
        self._sampler_iter = iter(self._index_sampler)
        self._num_yielded = 0

    def _next_index(self):
        return next(self._sampler_iter)

    _pinned_by_thread = False

    def __next__(self):
        data = self._next_data()
        self._num_yielded += 1
        if self._pin_memory and not self._pinned_by_thread:
            data = _pin(data)
        return data

    def __len__(self):
        return len(self._index_sampler)


class _SingleProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._fetcher = _worker.make_fetcher(
            self._is_iterable, self._dataset, self._auto_collation, self._collate_fn, self._drop_last
        )

    def _next_data(self):
        index = self._next_index()
        return self._fetcher.fetch(index)


def _describe_exit(exitcode):
    if exitcode is not None and exitcode < 0:
        try:
            return f"exit code {exitcode} (killed by signal {signal.Signals(-exitcode).name})"
        except ValueError:
            pass
    return f"exit code {exitcode}"


class _MultiProcessIter(_BaseIter):
    def __init__(self, loader):
        super().__init__(loader)
        self._num_workers = loader.num_workers
        self._prefetch_factor = loader.prefetch_factor
        self._persistent_workers = loader.persistent_workers
        self._shutdown = False
        self._workers = []
        self._index_conns = []
        self._workers_status = []
        context = loader.multiprocessing_context
        self._data_queue = context.Queue()
        self._done_event = context.Event()
        try:
            for worker_id in range(self._num_workers):
                task_reader, task_writer = context.Pipe(duplex=False)
                worker = context.Process(
                    target=_worker.worker_loop,
                    args=(
                        self._is_iterable,
                        self._dataset,
                        task_reader,
                        self._data_queue,
                        self._done_event,
                        self._auto_collation,
                        self._collate_fn,
                        self._drop_last,
                        self._base_seed,
                        loader.worker_init_fn,
                        worker_id,
                        self._num_workers,
                    ),
                    daemon=True,
                )
                self._index_conns.append(task_writer)
                try:
                    worker.start()
                finally:
                    # only the worker reads: with the main process's copy closed, a dead worker makes
                    # sending fail instead of filling the pipe
                    task_reader.close()
                self._workers.append(worker)
                self._workers_status.append(True)
            self._start_pin_thread()
        except BaseException:
            self._shutdown_workers()
            raise
        self._reset(loader, first_iter=True)

    def _start_pin_thread(self):
        self._pin_thread = None
        if not (self._pin_memory and cuda.is_available()):
            return  # without CUDA, __next__ warns once and the batches stay pageable
        self._pinned_queue = queue.Queue()
        self._pin_done = threading.Event()
        self._pin_thread = threading.Thread(
            target=_pin_thread_loop,
            name="adcuda DataLoader pin_memory",
            args=(self._data_queue, self._pinned_queue, self._pin_done),
            daemon=True,
        )
        self._pin_thread.start()
        self._pinned_by_thread = True

    def _reset(self, loader, first_iter=False):
        super()._reset(loader)
        self._send_idx = 0
        self._rcvd_idx = 0
        self._task_info = {}
        self._tasks_outstanding = 0
        self._workers_status = [True] * self._num_workers
        self._worker_queue_idx_cycle = itertools.cycle(range(self._num_workers))
        if not first_iter:
            # a persistent worker may still hold tasks of an abandoned epoch: everything it sends before
            # acknowledging the resume belongs to that epoch and is dropped
            for worker_id in range(self._num_workers):
                self._send_task(worker_id, _worker.ResumeIteration())
            waiting = self._num_workers
            while waiting > 0:
                task_index, _ = self._get_data()
                if isinstance(task_index, _worker.ResumeIteration):
                    waiting -= 1
        for _ in range(self._prefetch_factor * self._num_workers):
            self._try_put_index()

    def _try_get_data(self, timeout):
        try:
            if self._pinned_by_thread:
                return True, self._pinned_queue.get(timeout=timeout)
            task_index, payload = self._data_queue.get(timeout=timeout)
        except queue.Empty:
            self._raise_if_workers_died()
            return False, None
        return True, (task_index, _worker.decode_result(payload))

    def _raise_if_workers_died(self):
        dead = [
            (w.pid, w.exitcode) for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()
        ]
        if dead:
            self._shutdown_workers()
            details = ", ".join(f"pid {pid}: {_describe_exit(code)}" for pid, code in dead)
            raise RuntimeError(f"DataLoader worker exited unexpectedly ({details})") from None

    def _get_data(self):
        if self._timeout > 0:
            received, data = self._try_get_data(self._timeout)
            if not received:
                self._shutdown_workers()
                raise RuntimeError(f"DataLoader timed out after {self._timeout} seconds")
            return data
        while True:
            received, data = self._try_get_data(_worker.STATUS_CHECK_INTERVAL)
            if received:
                return data

    def _next_data(self):
        if self._shutdown:
            raise StopIteration
        while True:
            # skip tasks that went to a worker whose stream has ended (IterableDataset)
            while self._rcvd_idx < self._send_idx:
                info = self._task_info.get(self._rcvd_idx)
                if info is not None:
                    worker_id = info[0]
                    if len(info) == 2 or self._workers_status[worker_id]:
                        break
                    del self._task_info[self._rcvd_idx]
                self._rcvd_idx += 1
            else:
                if not self._persistent_workers:
                    self._shutdown_workers()
                raise StopIteration

            if len(self._task_info[self._rcvd_idx]) == 2:
                data = self._task_info.pop(self._rcvd_idx)[1]
                self._rcvd_idx += 1
                return self._process_data(data)

            self._raise_if_nothing_can_arrive()
            task_index, data = self._get_data()
            self._tasks_outstanding -= 1
            if isinstance(data, _worker.IterableDatasetStopIteration):
                # an exhausted worker drops the tasks it still holds: none of them will be answered
                self._tasks_outstanding -= sum(
                    1
                    for index, info in self._task_info.items()
                    if index != task_index and len(info) == 1 and info[0] == data.worker_id
                )
                if self._persistent_workers:
                    self._workers_status[data.worker_id] = False
                else:
                    self._mark_worker_as_unavailable(data.worker_id)
                self._try_put_index()
                continue
            if task_index != self._rcvd_idx:
                self._task_info[task_index] += (data,)
                continue
            del self._task_info[task_index]
            self._rcvd_idx += 1
            return self._process_data(data)

    def _raise_if_nothing_can_arrive(self):
        """Waiting for a result with no task left unanswered by an available worker would never end."""
        if self._tasks_outstanding <= 0:
            self._shutdown_workers()
            raise RuntimeError(
                f"DataLoader: waiting for batch {self._rcvd_idx} but no worker has an "
                f"outstanding task (tasks sent: {self._send_idx}, worker availability: "
                f"{self._workers_status}); this is a bug in the DataLoader's bookkeeping"
            )

    def _try_put_index(self):
        try:
            index = self._next_index()
        except StopIteration:
            return
        for _ in range(self._num_workers):
            worker_id = next(self._worker_queue_idx_cycle)
            if self._workers_status[worker_id]:
                break
        else:
            return
        self._send_task(worker_id, (self._send_idx, index))
        self._task_info[self._send_idx] = (worker_id,)
        self._tasks_outstanding += 1
        self._send_idx += 1

    def _process_data(self, data):
        self._try_put_index()
        if isinstance(data, _worker.ExceptionWrapper):
            # like PyTorch, the iterator stays usable: a caller may catch this and ask for the next batch
            data.reraise()
        return data

    def _send_task(self, worker_id, task):
        try:
            self._index_conns[worker_id].send(task)
        except OSError:
            # the worker is gone: report it as such
            self._workers[worker_id].join(timeout=_worker.STATUS_CHECK_INTERVAL)
            self._raise_if_workers_died()
            raise

    def _mark_worker_as_unavailable(self, worker_id):
        # a worker whose IterableDataset copy ran out is told to exit
        self._send_task(worker_id, None)
        self._workers_status[worker_id] = False

    def _shutdown_workers(self):
        if self._shutdown:
            return
        self._shutdown = True
        try:
            if getattr(self, "_pin_thread", None) is not None:
                self._pin_done.set()
                self._data_queue.put(None)
                self._pin_thread.join()
            self._done_event.set()
            for task_writer in self._index_conns:
                try:
                    task_writer.send(None)
                except OSError:
                    # the worker is gone, or (during garbage collection) the pipe was already closed
                    pass
                task_writer.close()
            for worker in self._workers:
                worker.join(timeout=_worker.STATUS_CHECK_INTERVAL)
        finally:
            for worker in self._workers:
                if worker.is_alive():
                    worker.terminate()
                    worker.join(timeout=_worker.STATUS_CHECK_INTERVAL)
                    if worker.is_alive():
                        worker.kill()
                        worker.join()
            self._data_queue.cancel_join_thread()
            self._data_queue.close()

    def __del__(self):
        try:
            self._shutdown_workers()
        except Exception:
            # at interpreter exit the modules this needs may already be gone; daemonic workers are
            # terminated by multiprocessing's own exit handler
            pass
