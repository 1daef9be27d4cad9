"""adcuda.set_num_threads / get_num_threads (PyTorch's meaning) and the CPU backend's BLAS thread policy
(adcuda/backends/cpu/threads.py): small products on one thread, large ones on get_num_threads()."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import adcuda
from adcuda.backends.cpu import threads
from adcuda.errors import SettingError
from adcuda.utils.data import DataLoader, Dataset

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def threads_at_import(**env):
    """get_num_threads() in a fresh process with only ``env`` of the thread variables set."""
    clean = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    proc = subprocess.run(
        [sys.executable, "-c", "import adcuda; print(adcuda.get_num_threads())"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return int(proc.stdout)


def test_the_default_follows_pytorchs_environment_variables():
    cores = len(os.sched_getaffinity(0))
    assert threads_at_import() == cores
    assert threads_at_import(OMP_NUM_THREADS="1") == 1
    assert threads_at_import(MKL_NUM_THREADS="1") == 1
    assert threads_at_import(OMP_NUM_THREADS="1", MKL_NUM_THREADS=str(cores)) == 1  # OMP first
    assert threads_at_import(OMP_NUM_THREADS=str(cores + 6)) == cores  # as PyTorch 2.13: no more than the cores
    assert threads_at_import(OMP_NUM_THREADS="abc") == cores  # ignored, as PyTorch ignores it
    assert threads_at_import(OPENBLAS_NUM_THREADS="1") == 1  # the products' threads are OpenBLAS's


@pytest.fixture
def restore_threads():
    before = adcuda.get_num_threads()
    yield
    adcuda.set_num_threads(before)


def test_set_num_threads_checks_its_argument_as_pytorch(restore_threads):
    adcuda.set_num_threads(np.int64(3))
    assert adcuda.get_num_threads() == 3 and type(adcuda.get_num_threads()) is int
    for bad, message in ((0, "positive integer"), (-2, "positive integer"), (1.5, "but got float"), (True, "bool")):
        with pytest.raises(SettingError, match=message) as caught:
            adcuda.set_num_threads(bad)
        assert isinstance(caught.value, RuntimeError)  # PyTorch raises RuntimeError
    assert adcuda.get_num_threads() == 3


class RecordingPool:
    """Stands in for the BLAS libraries' set_num_threads: records what the policy asks for."""

    def __init__(self):
        self.calls = []

    def __call__(self, n):
        self.calls.append(n)


@pytest.fixture
def recording_pool(monkeypatch, restore_threads):
    threads.set_up()
    if not threads._pool:
        pytest.skip("NumPy's BLAS has no thread pool that threadpoolctl can set")
    pool = RecordingPool()
    monkeypatch.setattr(threads, "_pool", [pool])
    return pool


def test_small_products_stay_on_one_thread_and_large_ones_use_the_threads(recording_pool):
    adcuda.set_num_threads(2)
    small, large = adcuda.ones(32, 256), adcuda.ones(256, 256)
    small @ large  # 2M multiply-adds: below two threads' worth
    assert recording_pool.calls == []
    out = large @ large  # 16.8M: raised for the call, then back to one
    assert recording_pool.calls == [2, 1]
    np.testing.assert_array_equal(out.numpy(), np.full((256, 256), 256, np.float32))
    adcuda.set_num_threads(1)
    large @ large
    assert recording_pool.calls == [2, 1]


def test_the_threads_given_a_product_grow_with_its_size(restore_threads):
    adcuda.set_num_threads(8)
    if not threads._pool:
        pytest.skip("NumPy's BLAS has no thread pool that threadpoolctl can set")
    per_thread = threads.WORK_PER_THREAD
    assert threads.product_threads(2 * per_thread - 1) == 1
    assert threads.product_threads(2 * per_thread) == 2
    assert threads.product_threads(5 * per_thread) == 5
    assert threads.product_threads(100 * per_thread) == 8


def test_batched_convolution_and_attention_products_follow_the_policy(recording_pool):
    adcuda.set_num_threads(2)
    a, b = adcuda.ones(4, 128, 256), adcuda.ones(4, 256, 128)  # 4 x 4.2M multiply-adds
    np.testing.assert_array_equal((a @ b).numpy(), np.full((4, 128, 128), 256, np.float32))
    assert recording_pool.calls == [2, 1]
    x, w = adcuda.ones(1, 1, 8, 8), adcuda.ones(2, 1, 3, 3)
    adcuda.nn.functional.conv2d(x, w)
    assert recording_pool.calls == [2, 1]


def test_the_pool_is_left_at_one_thread():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    adcuda.ones(300, 300) @ adcuda.ones(300, 300)
    blas = [info["num_threads"] for info in threadpoolctl.threadpool_info() if info["user_api"] == "blas"]
    assert blas and set(blas) == {1}


def test_a_compiled_program_multiplies_large_products_on_the_threads(recording_pool):
    adcuda.set_num_threads(2)
    a, b = adcuda.randn(256, 256), adcuda.randn(256, 256)

    def step(x, y):
        return (x @ y).relu()

    compiled = adcuda.compile(step)
    for _ in range(3):  # captured, then replayed
        compiled(a, b)
    recording_pool.calls.clear()
    out = compiled(a, b)
    assert recording_pool.calls == [2, 1]
    np.testing.assert_allclose(out.numpy(), step(a, b).numpy(), rtol=1e-5, atol=1e-5)


class ThreadsInWorker(Dataset):
    def __len__(self):
        return 2

    def __getitem__(self, i):
        return adcuda.tensor(adcuda.get_num_threads())


def test_dataloader_workers_start_with_one_thread(restore_threads):
    adcuda.set_num_threads(2)
    seen = [int(t) for t in DataLoader(ThreadsInWorker(), batch_size=None, num_workers=1)]
    assert seen == [1, 1] and adcuda.get_num_threads() == 2


def test_interop_threads_are_set_once_as_in_pytorch():
    script = (
        "import adcuda, json\n"
        "out = [adcuda.get_num_interop_threads()]\n"
        "adcuda.set_num_interop_threads(3)\n"
        "out.append(adcuda.get_num_interop_threads())\n"
        "try:\n"
        "    adcuda.set_num_interop_threads(2)\n"
        "except RuntimeError as e:\n"
        "    out.append(str(e))\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    default, after, error = json.loads(proc.stdout)
    assert default == len(os.sched_getaffinity(0)) and after == 3 and "cannot set number of interop threads" in error
    with pytest.raises(SettingError, match="positive integer"):
        adcuda.set_num_interop_threads(0)


def _spin_setting_at_import(script, **env):
    """OPENBLAS_THREAD_TIMEOUT after ``script`` in a fresh process whose environment has it only as ``env``."""
    clean = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    proc = subprocess.run(
        [sys.executable, "-c", script + "; import os; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'))"],
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()[-1]


def test_importing_adcuda_first_limits_how_long_openblas_workers_spin():
    # set before NumPy loads OpenBLAS (which reads it once): 2^20 cycles instead of 2^28
    assert _spin_setting_at_import("import sys, adcuda; assert 'numpy' in sys.modules") == "20"
    assert _spin_setting_at_import("import adcuda", OPENBLAS_THREAD_TIMEOUT="7") == "7"  # the user's value kept
    # NumPy first: OpenBLAS has read its setting already, so adcuda claims nothing
    assert _spin_setting_at_import("import numpy, adcuda") == "None"
