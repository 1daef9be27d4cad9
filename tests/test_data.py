"""adcuda.utils.data: collation, samplers, datasets and the DataLoader, with and without workers."""

import collections
import gc
import multiprocessing
import os
import random
import signal
import threading
import time
import warnings

import numpy as np
import pytest
from helpers import deadline

import adcuda
from adcuda.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)


def child_pids():
    """Live or zombie processes whose parent is this one (except multiprocessing's resource tracker,
    which spawn starts once and keeps)."""
    me = str(os.getpid())
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me and not _is_resource_tracker(entry):
            pids.add(int(entry))
    return pids


def _is_resource_tracker(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"resource_tracker" in f.read()
    except OSError:
        return False


@pytest.fixture
def no_leftover_workers():
    before = child_pids()
    yield
    gc.collect()
    deadline_at = time.monotonic() + 5
    while child_pids() - before and time.monotonic() < deadline_at:
        time.sleep(0.05)
    assert child_pids() - before == set(), "DataLoader left worker processes behind"


def ints_dataset(n):
    return TensorDataset(adcuda.arange(n), adcuda.arange(n).float() * 2)


def labels(loader):
    return [batch[0].tolist() for batch in loader]


# ---------------------------------------------------------------- default_collate / default_convert


def test_collate_stacks_tensors_and_converts_numbers():
    batch = default_collate([adcuda.tensor([1.0, 2.0]), adcuda.tensor([3.0, 4.0])])
    assert batch.shape == (2, 2) and batch.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    ints = default_collate([1, 2, 3])
    assert ints.dtype is adcuda.int64 and ints.tolist() == [1, 2, 3]
    floats = default_collate([0.5, 1.5])
    assert floats.dtype is adcuda.float64 and floats.tolist() == [0.5, 1.5]
    bools = default_collate([True, False])
    assert bools.dtype is adcuda.bool and bools.tolist() == [True, False]


def test_collate_keeps_dtype_and_gradients():
    halves = default_collate([adcuda.ones(2, dtype=adcuda.float16), adcuda.zeros(2, dtype=adcuda.float16)])
    assert halves.dtype is adcuda.float16 and halves.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    strided = default_collate([adcuda.arange(6)[::2], adcuda.arange(3)])
    assert strided.tolist() == [[0, 2, 4], [0, 1, 2]]
    leaf = adcuda.ones(3, requires_grad=True)
    batch = default_collate([leaf, adcuda.zeros(3)])
    assert batch.grad_fn is not None
    batch.sum().backward()
    assert leaf.grad.tolist() == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="equal size"):
        default_collate([adcuda.ones(2), adcuda.ones(3)])


def test_collate_numpy_arrays_and_scalars_become_tensors():
    batch = default_collate([np.array([1, 2], dtype=np.int32), np.array([3, 4], dtype=np.int32)])
    assert batch.dtype is adcuda.int32 and batch.tolist() == [[1, 2], [3, 4]]
    scalars = default_collate([np.float32(1.5), np.float32(2.5)])
    assert scalars.dtype is adcuda.float32 and scalars.tolist() == [1.5, 2.5]
    zero_d = default_collate([np.array(1.0), np.array(2.0)])
    assert zero_d.shape == (2,) and zero_d.dtype is adcuda.float64
    with pytest.raises(TypeError, match="numpy arrays"):
        default_collate([np.array(["a"]), np.array(["b"])])


def test_collate_containers_follow_pytorch_rules():
    Point = collections.namedtuple("Point", "x y")
    batch = default_collate(
        [
            {"img": adcuda.ones(3), "label": 1, "name": "a", "pair": (1.0, 2)},
            {"img": adcuda.zeros(3), "label": 0, "name": "b", "pair": (3.0, 4)},
        ]
    )
    assert set(batch) == {"img", "label", "name", "pair"}
    assert batch["img"].shape == (2, 3)
    assert batch["label"].tolist() == [1, 0]
    assert batch["name"] == ["a", "b"]
    assert isinstance(batch["pair"], list) and batch["pair"][0].tolist() == [1.0, 3.0]
    points = default_collate([Point(1, 2.0), Point(3, 4.0)])
    assert isinstance(points, Point) and points.x.tolist() == [1, 3] and points.y.tolist() == [2.0, 4.0]
    lists = default_collate([[1, 2], [3, 4]])
    assert isinstance(lists, list) and [t.tolist() for t in lists] == [[1, 3], [2, 4]]


def test_collate_rejects_ragged_and_unknown_samples():
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found <class 'object'>"):
        default_collate([object(), object()])


def test_default_convert_keeps_structure():
    converted = default_convert({"a": np.arange(3), "b": [np.float32(1.0), "s"], "c": 5})
    assert isinstance(converted["a"], adcuda.Tensor) and converted["a"].tolist() == [0, 1, 2]
    assert isinstance(converted["b"][0], adcuda.Tensor) and converted["b"][1] == "s"
    assert converted["c"] == 5


# ---------------------------------------------------------------- datasets, samplers, random_split


def test_tensor_dataset_subset_and_concat():
    ds = ints_dataset(5)
    assert len(ds) == 5 and ds[3][0].item() == 3 and ds[3][1].item() == 6.0
    with pytest.raises(ValueError, match="size mismatch"):
        TensorDataset(adcuda.zeros(3), adcuda.zeros(4))
    sub = Subset(ds, [4, 0])
    assert len(sub) == 2 and sub[0][0].item() == 4
    both = ConcatDataset([ds, sub])
    assert len(both) == 7 and both[5][0].item() == 4 and both[-1][0].item() == 0
    assert len(ds + sub) == 7
    with pytest.raises(IndexError):
        both[7]


def test_samplers():
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    batches = BatchSampler(SequentialSampler(range(7)), 3, drop_last=False)
    assert list(batches) == [[0, 1, 2], [3, 4, 5], [6]] and len(batches) == 3
    dropped = BatchSampler(SequentialSampler(range(7)), 3, drop_last=True)
    assert list(dropped) == [[0, 1, 2], [3, 4, 5]] and len(dropped) == 2
    with pytest.raises(ValueError, match="batch_size"):
        BatchSampler(range(3), 0, False)
    g = adcuda.Generator().manual_seed(3)
    perm = list(RandomSampler(range(50), generator=g))
    assert sorted(perm) == list(range(50)) and perm != list(range(50))
    draws = list(RandomSampler(range(5), replacement=True, num_samples=70))
    assert len(draws) == 70 and set(draws) <= set(range(5))


def test_random_split_lengths_fractions_and_disjointness():
    ds = ints_dataset(11)
    parts = random_split(ds, [0.5, 0.3, 0.2], generator=adcuda.Generator().manual_seed(0))
    assert [len(p) for p in parts] == [6, 3, 2]
    seen = [i for p in parts for i in p.indices]
    assert sorted(seen) == list(range(11))
    again = random_split(ds, [6, 3, 2], generator=adcuda.Generator().manual_seed(0))
    assert [p.indices for p in again] == [p.indices for p in parts]
    other = random_split(ds, [6, 3, 2], generator=adcuda.Generator().manual_seed(1))
    assert [p.indices for p in other] != [p.indices for p in parts]
    with pytest.raises(ValueError, match="does not equal"):
        random_split(ds, [5, 5])


# ---------------------------------------------------------------- DataLoader, single process and workers


@pytest.mark.parametrize("num_workers", [0, 2])
def test_every_sample_once_in_order(num_workers, no_leftover_workers):
    loader = DataLoader(ints_dataset(23), batch_size=4, num_workers=num_workers)
    assert len(loader) == 6
    got = labels(loader)
    assert got == [list(range(i, min(i + 4, 23))) for i in range(0, 23, 4)]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_shuffle_is_reproducible_and_differs_between_epochs(num_workers, no_leftover_workers):
    loader = DataLoader(ints_dataset(30), batch_size=7, shuffle=True, num_workers=num_workers)
    adcuda.manual_seed(123)
    first, second = labels(loader), labels(loader)
    assert sorted(sum(first, [])) == list(range(30)) and sorted(sum(second, [])) == list(range(30))
    assert first != second
    adcuda.manual_seed(123)
    assert labels(loader) == first

    def seeded():
        generator = adcuda.Generator().manual_seed(9)
        return DataLoader(ints_dataset(30), batch_size=7, shuffle=True, num_workers=num_workers, generator=generator)

    assert labels(seeded()) == labels(seeded())


def test_shuffled_order_does_not_depend_on_workers(no_leftover_workers):
    orders = []
    for num_workers in (0, 2):
        adcuda.manual_seed(7)
        orders.append(labels(DataLoader(ints_dataset(20), batch_size=3, shuffle=True, num_workers=num_workers)))
    assert orders[0] == orders[1]


@pytest.mark.parametrize("num_workers", [0, 2])
def test_drop_last_and_batch_size_edges(num_workers, no_leftover_workers):
    ds = ints_dataset(10)
    assert labels(DataLoader(ds, batch_size=4, drop_last=True, num_workers=num_workers)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(DataLoader(ds, batch_size=4, drop_last=True)) == 2
    assert labels(DataLoader(ds, batch_size=50, num_workers=num_workers)) == [list(range(10))]
    assert labels(DataLoader(ds, batch_size=50, drop_last=True, num_workers=num_workers)) == []
    assert labels(DataLoader(ds, batch_size=10, num_workers=num_workers)) == [list(range(10))]
    unbatched = list(DataLoader(ds, batch_size=None, num_workers=num_workers))
    assert len(unbatched) == 10 and unbatched[3][0].ndim == 0 and unbatched[3][0].item() == 3
    empty = DataLoader(ints_dataset(0), batch_size=3, num_workers=num_workers)
    assert list(empty) == [] and len(empty) == 0


def test_argument_validation():
    ds = ints_dataset(4)
    with pytest.raises(ValueError, match="mutually exclusive with shuffle"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="batch_sampler"):
        DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), 2, False), batch_size=2)
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(ds, prefetch_factor=2)
    with pytest.raises(ValueError, match="persistent_workers"):
        DataLoader(ds, persistent_workers=True)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    assert DataLoader(ds, num_workers=1).prefetch_factor == 2


class WorkerReport(Dataset):
    """Each sample says which worker made it and what its random generators gave."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        info = get_worker_info()
        return {
            "index": index,
            "worker": info.id,
            "num_workers": info.num_workers,
            "seed": info.seed,
            "same_dataset": isinstance(info.dataset, WorkerReport),
            "init": _init_calls.get(info.id, 0),
            "py": random.random(),
            "np": float(np.random.rand()),
            "ad": adcuda.rand(1).item(),
        }


_init_calls = {}


def record_init(worker_id):
    _init_calls[worker_id] = _init_calls.get(worker_id, 0) + 1
    assert get_worker_info().id == worker_id


def test_worker_info_seeding_and_worker_init_fn(no_leftover_workers):
    assert get_worker_info() is None
    loader = DataLoader(WorkerReport(), batch_size=2, num_workers=2, worker_init_fn=record_init)
    adcuda.manual_seed(42)
    batches = list(loader)
    rows = [{k: (v.tolist() if isinstance(v, adcuda.Tensor) else v) for k, v in b.items()} for b in batches]
    assert [r["index"] for r in rows] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [r["worker"] for r in rows] == [[0, 0], [1, 1], [0, 0], [1, 1]]
    assert all(r["num_workers"] == [2, 2] and r["same_dataset"] == [True, True] for r in rows)
    assert all(r["init"] == [1, 1] for r in rows), "worker_init_fn must run once in each worker"
    seed0, seed1 = rows[0]["seed"][0], rows[1]["seed"][0]
    assert seed1 == seed0 + 1
    # the two workers draw different numbers from all three generators
    for key in ("py", "np", "ad"):
        assert rows[0][key] != rows[1][key]
    adcuda.manual_seed(42)
    again = list(loader)
    assert [b["seed"].tolist() for b in again] == [r["seed"] for r in rows]
    for key in ("py", "np", "ad"):
        assert [b[key].tolist() for b in again] == [r[key] for r in rows]


@pytest.mark.skipif(not hasattr(adcuda, "init_cuda_context"), reason="adcuda.init_cuda_context not built yet")
def test_init_cuda_context_as_worker_init_fn(no_leftover_workers):
    loader = DataLoader(ints_dataset(6), batch_size=2, num_workers=2, worker_init_fn=adcuda.init_cuda_context)
    assert labels(loader) == [[0, 1], [2, 3], [4, 5]]


class FailingAt(Dataset):
    def __init__(self, bad):
        self.bad = bad

    def __len__(self):
        return 10

    def __getitem__(self, index):
        if index == self.bad:
            raise ValueError(f"bad sample {index}")
        return index


@pytest.mark.parametrize("num_workers", [0, 2])
def test_exception_in_dataset_reaches_caller(num_workers, no_leftover_workers):
    with deadline(20):
        with pytest.raises(ValueError, match="bad sample 5") as caught:
            list(DataLoader(FailingAt(5), batch_size=2, num_workers=num_workers))
    if num_workers:
        message = str(caught.value)
        assert "in DataLoader worker process" in message and "Traceback" in message
        assert "FailingAt" not in message or "__getitem__" in message


def failing_init(worker_id):
    raise ZeroDivisionError(f"init failed in worker {worker_id}")


def test_exception_in_worker_init_fn_reaches_caller(no_leftover_workers):
    with deadline(20), pytest.raises(ZeroDivisionError, match="init failed in worker 0"):
        list(DataLoader(ints_dataset(4), num_workers=2, worker_init_fn=failing_init))


def test_unpicklable_batch_is_an_error_not_a_hang(no_leftover_workers):
    def collate_to_lock(batch):
        return threading.Lock()

    # fork explicitly: the collate function is local to this test, so only a forked worker can have it
    # (the loader itself picks spawn once CUDA is initialised, e.g. on a GPU machine)
    with deadline(20), pytest.raises(TypeError, match="sending a batch"):
        list(DataLoader(ints_dataset(4), num_workers=1, collate_fn=collate_to_lock, multiprocessing_context="fork"))


class KillsItself(Dataset):
    def __len__(self):
        return 20

    def __getitem__(self, index):
        if index == 6:
            os.kill(os.getpid(), signal.SIGKILL)
        return index


def test_killed_worker_raises_instead_of_hanging(no_leftover_workers):
    start = time.monotonic()
    with deadline(20), pytest.raises(RuntimeError, match=r"exited unexpectedly.*exit code -9.*SIGKILL"):
        list(DataLoader(KillsItself(), batch_size=2, num_workers=2))
    assert time.monotonic() - start < 10


class Slow(Dataset):
    delay = 3.0

    def __len__(self):
        return 4

    def __getitem__(self, index):
        time.sleep(self.delay)
        return index


def test_timeout_raises(no_leftover_workers):
    with deadline(20), pytest.raises(RuntimeError, match="timed out after 0.3 seconds"):
        list(DataLoader(Slow(), num_workers=1, timeout=0.3))


def test_persistent_loader_recovers_after_its_workers_were_stopped(no_leftover_workers):
    dataset = Slow()
    # fork explicitly: a spawned worker's start-up alone can exceed the 0.3 s timeout
    loader = DataLoader(
        dataset, batch_size=2, num_workers=1, timeout=0.3, persistent_workers=True, multiprocessing_context="fork"
    )
    with deadline(20), pytest.raises(RuntimeError, match="timed out"):
        list(loader)
    dataset.delay = 0.0
    with deadline(20):
        assert [b.tolist() for b in loader] == [[0, 1], [2, 3]]
    del loader


def test_abandoned_iterator_shuts_workers_down(no_leftover_workers):
    loader = DataLoader(ints_dataset(100), batch_size=2, num_workers=2)
    it = iter(loader)
    next(it)
    pids = [w.pid for w in it._workers]
    assert set(pids) <= child_pids()
    del it
    gc.collect()
    for _ in range(3):
        for _batch in loader:
            break
    # the fixture checks that nothing is left


def test_persistent_workers_survive_epochs(no_leftover_workers):
    loader = DataLoader(ints_dataset(9), batch_size=2, num_workers=2, persistent_workers=True)
    adcuda.manual_seed(0)
    first = labels(loader)
    pids = [w.pid for w in loader._iterator._workers]
    it = iter(loader)
    next(it)  # abandon the second epoch half-way: its tasks must not leak into the third
    third = labels(loader)
    assert [w.pid for w in loader._iterator._workers] == pids
    assert all(w.is_alive() for w in loader._iterator._workers)
    assert first == [[0, 1], [2, 3], [4, 5], [6, 7], [8]] == third
    del loader, it


@pytest.mark.parametrize("prefetch_factor", [1, 4])
def test_prefetch_factor_limits_outstanding_tasks(prefetch_factor, no_leftover_workers):
    loader = DataLoader(ints_dataset(40), batch_size=2, num_workers=2, prefetch_factor=prefetch_factor)
    it = iter(loader)
    assert it._tasks_outstanding == 2 * prefetch_factor
    assert [b[0].tolist() for b in it] == [[i, i + 1] for i in range(0, 40, 2)]


class Stream(IterableDataset):
    def __init__(self, n, shard):
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        if not self.shard or info is None:
            return iter(range(self.n))
        return iter(range(info.id, self.n, info.num_workers))

    def __len__(self):
        return self.n


def test_iterable_dataset_sharding_with_workers(no_leftover_workers):
    got = [b.tolist() for b in DataLoader(Stream(11, shard=True), batch_size=2, num_workers=2)]
    assert sorted(sum(got, [])) == list(range(11))
    assert got[0] == [0, 2] and got[1] == [1, 3]
    duplicated = sum((b.tolist() for b in DataLoader(Stream(5, shard=False), batch_size=2, num_workers=2)), [])
    assert sorted(duplicated) == sorted(list(range(5)) * 2)
    single = [b.tolist() for b in DataLoader(Stream(5, shard=True), batch_size=2, drop_last=True)]
    assert single == [[0, 1], [2, 3]] and len(DataLoader(Stream(5, True), batch_size=2, drop_last=True)) == 2
    persistent = DataLoader(Stream(7, shard=True), batch_size=3, num_workers=2, persistent_workers=True)
    assert sorted(sum((b.tolist() for b in persistent), [])) == list(range(7))
    assert sorted(sum((b.tolist() for b in persistent), [])) == list(range(7))
    del persistent
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(Stream(3, True), shuffle=True)


def test_batches_survive_the_trip_from_workers():
    ds = TensorDataset(adcuda.randn(12, 3, 4), adcuda.arange(12))
    for a, b in zip(DataLoader(ds, batch_size=5), DataLoader(ds, batch_size=5, num_workers=2)):
        assert a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()
        assert b[0].dtype is adcuda.float32 and b[1].dtype is adcuda.int64


@pytest.mark.skipif(adcuda.cuda.is_available(), reason="pinning is real where CUDA is usable")
def test_pin_memory_without_cuda_warns_once_and_continues(monkeypatch):
    from adcuda.utils.data import dataloader

    monkeypatch.setattr(dataloader, "_pin_memory_warned", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert labels(DataLoader(ints_dataset(4), batch_size=2, pin_memory=True)) == [[0, 1], [2, 3]]
        assert labels(DataLoader(ints_dataset(4), batch_size=2, pin_memory=True)) == [[0, 1], [2, 3]]
    pin_warnings = [w for w in caught if "pin_memory" in str(w.message)]
    assert len(pin_warnings) == 1


class Squares(Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, index):
        return index * index


def test_spawn_context_works(no_leftover_workers):
    loader = DataLoader(Squares(), batch_size=5, num_workers=1, multiprocessing_context="spawn")
    with deadline(60):
        assert [b.tolist() for b in loader] == [[0, 1, 4, 9, 16]]


def hold_queue_write_lock_after_each_send(worker_id):
    """worker_init_fn: make the result queue's feeder thread keep its cross-process write lock a while
    after each send, so the main process reads an exhausted worker's marker and tells it to exit while
    the lock is still held (the race that hung spawn loaders on a loaded machine)."""
    import multiprocessing.queues

    feed = multiprocessing.queues.Queue._feed

    class SlowRelease:
        def __init__(self, lock):
            self.acquire, self._release = lock.acquire, lock.release

        def release(self):
            time.sleep(0.2)
            self._release()

    def slow_feed(buffer, notempty, send_bytes, writelock, *rest):
        return feed(buffer, notempty, send_bytes, SlowRelease(writelock), *rest)

    multiprocessing.queues.Queue._feed = staticmethod(slow_feed)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_exhausted_worker_exit_does_not_block_the_others(context, no_leftover_workers):
    # a worker that exits with its feeder inside the write lock leaves the lock held forever: the other
    # worker's batches never arrive (the loader's timeout turns that hang into an error)
    loader = DataLoader(
        Stream(11, shard=True),
        batch_size=2,
        num_workers=2,
        multiprocessing_context=context,
        timeout=10,
        worker_init_fn=hold_queue_write_lock_after_each_send,
    )
    with deadline(20):
        assert [b.tolist() for b in loader] == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]


def test_spawn_iterable_sharding_and_map_style_finish(no_leftover_workers):
    with deadline(20):
        got = [
            b.tolist()
            for b in DataLoader(
                Stream(11, shard=True), batch_size=2, num_workers=2, multiprocessing_context="spawn", timeout=10
            )
        ]
        assert got == [[0, 2], [1, 3], [4, 6], [5, 7], [8, 10], [9]]
        duplicated = DataLoader(
            Stream(5, shard=False), batch_size=2, num_workers=2, multiprocessing_context="spawn", timeout=10
        )
        assert sorted(sum((b.tolist() for b in duplicated), [])) == sorted(list(range(5)) * 2)
        mapped = DataLoader(ints_dataset(9), batch_size=2, num_workers=2, multiprocessing_context="spawn", timeout=10)
        assert labels(mapped) == [[0, 1], [2, 3], [4, 5], [6, 7], [8]]


def test_waiting_with_no_outstanding_task_raises_instead_of_hanging(no_leftover_workers):
    it = iter(DataLoader(ints_dataset(4), batch_size=2, num_workers=1, multiprocessing_context="fork"))
    it._tasks_outstanding = 0  # bookkeeping that says no worker will answer: waiting would never end
    with deadline(20), pytest.raises(RuntimeError, match="no worker has an outstanding task"):
        next(it)
    del it


def test_start_method_is_spawn_once_cuda_is_initialised(monkeypatch):
    ds = ints_dataset(4)
    assert (
        DataLoader(ds, num_workers=1).multiprocessing_context.get_start_method() == multiprocessing.get_start_method()
    )
    monkeypatch.setattr(adcuda.cuda, "is_initialized", lambda: True)
    assert DataLoader(ds, num_workers=1).multiprocessing_context.get_start_method() == "spawn"
    assert (
        DataLoader(ds, num_workers=1, multiprocessing_context="fork").multiprocessing_context.get_start_method()
        == "fork"
    )
