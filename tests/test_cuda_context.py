"""init_cuda_context, fork safety and CUDA-aware data loading, on any machine (GPU behaviour of the
same functions is in test_cuda_runtime.py). The bad-fork error is tested by simulating "CUDA was
initialised in the parent" and forking."""

import os
import select
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest
from helpers import deadline

import adcuda
from adcuda.cuda import fork
from adcuda.utils.data import DataLoader, Dataset, DevicePrefetcher, TensorDataset, get_worker_info

no_cuda = pytest.mark.skipif(adcuda.cuda.is_available(), reason="checks the behaviour without a usable GPU")


@pytest.fixture
def rng_state():
    """Tests here reseed adcuda's generator: put it back afterwards."""
    state = adcuda.get_rng_state()
    yield
    adcuda.set_rng_state(state)


def in_fresh_thread(fn):
    """Run fn in a new thread (init_cuda_context remembers its contexts per thread) and return its result."""
    result = {}

    def run():
        try:
            result["value"] = fn()
        except BaseException as e:  # handed to the test thread
            result["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(60)
    if "error" in result:
        raise result["error"]
    return result["value"]


def run_in_child(fn, timeout=30):
    """Fork, run fn() in the child, and return what it returned as text (an exception as 'Name: message').
    The child never runs pytest's code again (os._exit) and the parent never waits forever."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            text = str(fn())
        except BaseException as e:
            text = f"{type(e).__name__}: {e}"
        os.write(write_end, text.encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    end = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([read_end], [], [], max(end - time.monotonic(), 0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                pytest.fail(f"the forked child did not answer within {timeout} s")
            chunk = os.read(read_end, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    return b"".join(chunks).decode()


# ------------------------------------------------------------------------------------------------
# init_cuda_context without a GPU
@no_cuda
def test_without_a_gpu_it_returns_the_cpu_context_and_says_why():
    context = in_fresh_thread(adcuda.init_cuda_context)
    assert context.device == adcuda.device("cpu") and not context.is_cuda
    assert adcuda.cuda.unavailable_reason() in context.reason
    assert context.stream is None and context.seed is None and context.pid == os.getpid()
    assert "cpu (CUDA is not available: " in repr(context)
    assert not adcuda.cuda.is_initialized(), "the CPU context must not initialise anything"


def test_it_is_idempotent_per_thread_and_exported_twice():
    assert adcuda.init_cuda_context is adcuda.cuda.init_cuda_context

    def twice():
        return adcuda.init_cuda_context(), adcuda.init_cuda_context()

    first, second = in_fresh_thread(twice)
    assert first is second


def test_a_worker_id_seeds_adcudas_generator_once(rng_state):
    def init_and_draw():
        context = adcuda.init_cuda_context(7)  # positional, as a DataLoader calls worker_init_fn
        drawn = adcuda.rand(4).tolist()
        again = adcuda.init_cuda_context(7)  # idempotent: no second reseeding
        return context, again, drawn, adcuda.rand(4).tolist()

    adcuda.manual_seed(1234)
    context, again, drawn, later = in_fresh_thread(init_and_draw)
    assert context is again
    assert context.seed == 1234 + 7 and context.worker_id == 7
    adcuda.manual_seed(1234 + 7)
    assert adcuda.rand(4).tolist() == drawn
    assert adcuda.rand(4).tolist() == later


def test_without_a_worker_id_the_generator_is_left_alone(rng_state):
    adcuda.manual_seed(99)
    expected = adcuda.rand(3).tolist()
    adcuda.manual_seed(99)
    context = in_fresh_thread(adcuda.init_cuda_context)
    assert context.seed is None
    assert adcuda.rand(3).tolist() == expected


# ------------------------------------------------------------------------------------------------
# fork safety
def test_fork_after_cuda_init_is_refused_with_advice():
    def child():
        assert fork.in_bad_fork() and not adcuda.cuda.is_initialized()
        try:
            adcuda.zeros(2, device="cuda")
        except adcuda.cuda.BadForkError as e:
            assert str(e).startswith("zeros: CUDA cannot be used in a process forked")
        else:
            return "zeros(device='cuda') did not raise BadForkError"
        return adcuda.init_cuda_context()

    with fork.simulate_initialized():
        assert adcuda.cuda.is_initialized()
        answer = run_in_child(child)
    assert not fork.in_bad_fork(), "the parent is not a bad fork"
    assert answer.startswith(
        "BadForkError: init_cuda_context: CUDA cannot be used in a process forked after its parent initialised CUDA"
    ), answer
    assert "'spawn'" in answer and "'forkserver'" in answer
    assert issubclass(adcuda.cuda.BadForkError, adcuda.DeviceError)


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device (a GPU or the emulator)")
def test_is_available_does_not_initialise_cuda_so_a_fork_can_use_it(tmp_path):
    code = (
        "import os, sys\n"
        "import adcuda, adcuda.cuda as c\n"
        "from adcuda import _native\n"
        "assert c.is_available() and c.device_count() >= 1\n"
        "assert not _native._C.cuda_was_used() and not c.is_initialized(), 'asking initialised CUDA'\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        ok = adcuda.ones(3, device='cuda').sum().item() == 3.0\n"
        "    except BaseException as e:\n"
        "        print('child:', type(e).__name__, e, flush=True)\n"
        "        ok = False\n"
        "    os._exit(0 if ok else 1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    package_parent = os.path.dirname(os.path.dirname(adcuda.__file__))
    env = dict(os.environ, PYTHONPATH=package_parent)
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_fork_before_cuda_init_is_fine():
    if adcuda.cuda.is_initialized():
        pytest.skip("CUDA is initialised in this test process already")
    answer = run_in_child(lambda: adcuda.init_cuda_context().device)
    assert answer == ("cuda:0" if adcuda.cuda.is_available() else "cpu")


def test_dataloader_picks_spawn_once_cuda_is_initialised():
    from adcuda.utils.data.dataloader import _default_multiprocessing_context

    with fork.simulate_initialized():
        assert _default_multiprocessing_context().get_start_method() == "spawn"
    if not adcuda.cuda.is_initialized():
        assert _default_multiprocessing_context().get_start_method() == "fork"


# ------------------------------------------------------------------------------------------------
# DataLoader workers that call init_cuda_context
class Augmented(Dataset):
    """Sample i with a random number from adcuda's generator and what the worker's context says."""

    def __len__(self):
        return 12

    def __getitem__(self, index):
        context = adcuda.init_cuda_context(get_worker_info().id)  # the worker_init_fn ran it already
        return {
            "index": index,
            "noise": adcuda.rand(()).item(),
            "seed": context.seed,
            "device": str(context.device),
            "worker_seed": get_worker_info().seed,
        }


def load(loader):
    rows = []
    for batch in loader:
        rows.extend(
            zip(
                batch["index"].tolist(),
                batch["noise"].tolist(),
                batch["seed"].tolist(),
                batch["device"],
                batch["worker_seed"].tolist(),
            )
        )
    return rows


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_workers_deliver_every_sample_once_per_epoch_reproducibly(start_method):
    if start_method == "fork" and adcuda.cuda.is_initialized():
        pytest.skip("CUDA is initialised in this process: forked workers cannot initialise it (tested below)")

    def epochs(seed):
        loader = DataLoader(
            Augmented(),
            batch_size=3,
            shuffle=True,
            num_workers=2,
            worker_init_fn=adcuda.init_cuda_context,
            multiprocessing_context=start_method,
            persistent_workers=True,
            generator=adcuda.Generator().manual_seed(seed),
        )
        return [load(loader) for _ in range(2)]

    with deadline(90):
        first, second = epochs(5), epochs(5)
        other = epochs(6)
    for epoch in first:
        assert sorted(row[0] for row in epoch) == list(range(12))
        assert all(row[2] == row[4] for row in epoch), "the context's seed is the one the DataLoader gave"
        assert {row[3] for row in epoch} == {"cuda:0" if adcuda.cuda.is_available() else "cpu"}
    assert first == second, "same generator seed, same samples and same random numbers"
    assert [row[1] for row in first[0]] != [row[1] for row in first[1]], "a new epoch draws new numbers"
    assert [row[1] for row in first[0]] != [row[1] for row in other[0]]


class FailsAt(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        if index == 5:
            raise KeyError(f"sample {index} is corrupt")
        return index


def test_an_exception_in_a_worker_reaches_the_caller_with_its_message():
    loader = DataLoader(FailsAt(), batch_size=2, num_workers=2, worker_init_fn=adcuda.init_cuda_context)
    with deadline(60), pytest.raises(KeyError, match="sample 5 is corrupt") as caught:
        list(loader)
    assert "in DataLoader worker process" in str(caught.value)


class Draws:
    """A map-style dataset (PyTorch's DataLoader takes any) of numbers from adcuda's generator."""

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return adcuda.rand(()).item()


def test_pytorch_dataloader_workers_get_distinct_reproducible_adcuda_seeds():
    torch = pytest.importorskip("torch")
    # PyTorch's DataLoader forks by default; CUDA initialised here needs spawn for workers that use it
    start_method = "spawn" if adcuda.cuda.is_initialized() else None

    def run():
        torch.manual_seed(11)
        loader = torch.utils.data.DataLoader(
            Draws(),
            batch_size=1,
            num_workers=2,
            worker_init_fn=adcuda.init_cuda_context,
            multiprocessing_context=start_method,
        )
        return [float(x) for x in loader]

    with deadline(90):
        first, second = run(), run()
    assert first == second
    # samples 0 and 1 come from different workers: without reseeding both would copy the parent's state
    assert first[0] != first[1]


def test_device_prefetcher_on_the_cpu_yields_the_same_batches():
    data = TensorDataset(adcuda.arange(10.0), adcuda.arange(10))
    loader = DataLoader(data, batch_size=4)
    moved = list(DevicePrefetcher(loader, "cpu"))
    assert len(moved) == len(loader) == 3
    for (x, y), (ex, ey) in zip(moved, loader):
        assert x.tolist() == ex.tolist() and y.tolist() == ey.tolist()


@no_cuda
def test_device_prefetcher_to_cuda_without_a_gpu_says_why():
    with pytest.raises(adcuda.DeviceError, match="^DevicePrefetcher: device 'cuda' requested but CUDA is not"):
        DevicePrefetcher([], "cuda")


@no_cuda
def test_pin_memory_with_workers_warns_and_delivers_pageable_batches():
    from adcuda.utils.data import dataloader

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataloader._pin_memory_warned = False
        loader = DataLoader(TensorDataset(adcuda.arange(6.0)), batch_size=3, num_workers=2, pin_memory=True)
        with deadline(60):
            batches = [b[0].tolist() for b in loader]
    assert batches == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert any("pin_memory" in str(w.message) for w in caught)


def test_numpy_array_pinning_needs_cuda_or_is_real():
    from adcuda.cuda import pinned

    array = np.arange(6, dtype=np.float32)
    if not adcuda.cuda.is_available():
        with pytest.raises(adcuda.DeviceError, match="^pin_memory: pinned .page-locked. host memory needs CUDA"):
            pinned.pin_array(array)
        assert not pinned.is_pinned_array(array)
    else:
        copy = pinned.pin_array(array)
        assert pinned.is_pinned_array(copy) and not pinned.is_pinned_array(array)
        assert copy.tolist() == array.tolist()
