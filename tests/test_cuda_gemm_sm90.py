"""The sm_90a GEMM (kernels/gemm_sm90.cu: TMA, wgmma, mbarrier stages, persistent tiles) against the
CPU backend, and the dispatch that picks it: compute capability 9.0 with sm_90a code (the emulator's
default device, or an H100/H200 with a 90a build), single fp16/bf16 products whose A has K contiguous.

On the emulator every case also runs under the reverse and a random thread schedule: TMA copies land
only when a thread waits on their mbarrier and wgmma results only at wgmma.wait_group, so a missing
wait or an early stage release changes the result. The mma.sync kernel keeps its own tests
(tests/test_cuda_gemm.py, with ADCUDA_GEMM_SM90=0)."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import adcuda
from adcuda import dtypes as dt

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

HALF_TYPES = (dt.float16, dt.bfloat16)
EPSILON = {dt.float16: 2.0**-10, dt.bfloat16: 2.0**-7}
SCHEDULES = ("forward", "reverse", "random:7")


@pytest.fixture(scope="module")
def cb():
    from adcuda.backends import cuda

    return cuda


@pytest.fixture(scope="module")
def native():
    from adcuda import _native

    return _native._C


def emulated():
    from adcuda import _native

    return bool(_native._C.build_info().get("cuda_emulated"))


def hopper_here():
    from adcuda import _native

    props = adcuda.cuda.get_device_properties(0)
    return (props.major, props.minor) == (9, 0) and any(
        arch.startswith("90a") for arch in _native._C.build_info()["cuda_architectures"]
    )


@pytest.fixture
def on_sm90(native, monkeypatch):
    """Runs the test's products on the sm_90a kernel (skips where it cannot run), split-K off unless the
    test sets it; returns a check that the last product really ran there."""
    if not hopper_here():
        pytest.skip("needs compute capability 9.0 and a build with sm_90a code")
    monkeypatch.setenv("ADCUDA_GEMM_SPLIT_K", "1")
    monkeypatch.delenv("ADCUDA_GEMM_SM90", raising=False)

    def ran_there():
        assert native.gemm_last_half_kernel() == "sm90_wgmma"

    return ran_there


@pytest.fixture(params=SCHEDULES)
def schedule(request, monkeypatch):
    """The emulator's thread order (read at each launch); one pass where there is a real GPU."""
    if request.param != "forward" and not emulated():
        pytest.skip("thread schedules are the emulator's")
    monkeypatch.setenv("ADCUDA_EMULATOR_SCHEDULE", request.param)
    return request.param


def held(cb, x, dtype):
    host_dtype = dt.float32 if dtype is dt.bfloat16 else dtype
    a = cb.from_numpy(np.asarray(x, dtype=host_dtype.numpy), dtype)
    return a, np.array(cb.to_numpy(a)).astype(np.float64)


def operand(cb, g, rows, cols, dtype, layout):
    """row: contiguous (rows x cols); col: the transpose of a contiguous (cols x rows) array."""
    if layout == "row":
        return held(cb, g.standard_normal((rows, cols)), dtype)
    store, host = held(cb, g.standard_normal((cols, rows)), dtype)
    return cb.permute(store, (1, 0)), host.T


def check(cb, got, expected, dtype, k):
    got_host = np.array(cb.to_numpy(got)).astype(np.float64)
    assert got_host.shape == expected.shape
    scale = math.sqrt(max(k, 1)) * max(1.0, float(np.abs(expected).max(initial=0.0)) / math.sqrt(max(k, 1)))
    np.testing.assert_allclose(got_host, expected, rtol=4 * EPSILON[dtype], atol=4 * EPSILON[dtype] * scale)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize(
    "m, k, n, b_layout",
    [
        (256, 128, 256, "col"),  # whole tiles, two K tiles through the stage ring
        (130, 200, 300, "col"),  # M, N, K all past a tile edge (TMA zero fill, predicated stores)
        (37, 40, 45, "row"),  # K below one stage; B N-contiguous, copied K-major first
        (9, 8, 12, "col"),  # K = 8: one 16-byte chunk per row (TMA needs rows 16 bytes apart)
        (64, 1024, 64, "col"),  # 16 K tiles through 4 stages: a stage released early is refilled under a pending wgmma
        (1, 70, 33, "row"),  # one row
    ],
)
def test_matches_cpu_under_every_schedule(cb, native, on_sm90, schedule, dtype, m, k, n, b_layout):
    g = np.random.default_rng(m * 7 + k)
    a, a_host = operand(cb, g, m, k, dtype, "row")
    b, b_host = operand(cb, g, k, n, dtype, b_layout)
    out = native.matmul(a, b)
    on_sm90()
    check(cb, out, a_host @ b_host, dtype, k)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
def test_language_model_head_width(cb, native, on_sm90, dtype):
    """x @ W^T with W (50257, 16): 197 column tiles over the persistent blocks, the last 81 wide."""
    g = np.random.default_rng(3)
    a, a_host = operand(cb, g, 3, 16, dtype, "row")
    b, b_host = operand(cb, g, 16, 50257, dtype, "col")
    out = native.matmul(a, b)
    on_sm90()
    check(cb, out, a_host @ b_host, dtype, 16)


def test_more_work_units_than_blocks(cb, native, on_sm90):
    """More output tiles than SMs: each block walks several units, the stage ring's phases carrying over."""
    g = np.random.default_rng(11)
    sms = adcuda.cuda.get_device_properties(0).multi_processor_count
    n = 256 * (sms + 3)
    a, a_host = operand(cb, g, 2, 72, dt.bfloat16, "row")
    b, b_host = operand(cb, g, 72, n, dt.bfloat16, "col")
    out = native.matmul(a, b)
    on_sm90()
    check(cb, out, a_host @ b_host, dt.bfloat16, 72)


@pytest.mark.parametrize("dtype", HALF_TYPES, ids=str)
@pytest.mark.parametrize("splits", [2, 3, 64])
def test_split_k_matches_and_is_deterministic(cb, native, on_sm90, monkeypatch, dtype, splits):
    """K = 328: 6 tiles of 64 (the last partial); splits of whole 64-wide tiles, 64 cut down."""
    monkeypatch.setenv("ADCUDA_GEMM_SPLIT_K", str(splits))
    g = np.random.default_rng(6)
    a, a_host = operand(cb, g, 24, 328, dtype, "row")
    b, b_host = operand(cb, g, 328, 36, dtype, "col")
    first = native.matmul(a, b)
    on_sm90()
    check(cb, first, a_host @ b_host, dtype, 328)
    again = native.matmul(a, b)
    np.testing.assert_array_equal(np.array(cb.to_numpy(first)), np.array(cb.to_numpy(again)))


@pytest.mark.parametrize("splits", [1, 2])
def test_epilogue_bias_gelu_and_preactivation(cb, native, on_sm90, monkeypatch, splits):
    monkeypatch.setenv("ADCUDA_GEMM_SPLIT_K", str(splits))
    g = np.random.default_rng(8)
    a, a_host = operand(cb, g, 21, 136, dt.bfloat16, "row")
    b, b_host = operand(cb, g, 136, 33, dt.bfloat16, "col")
    bias, bias_host = held(cb, g.standard_normal(33), dt.bfloat16)
    out, pre = native.matmul(a, b, bias=bias, activation="gelu_tanh", save_preactivation=True)
    on_sm90()
    expected_pre = a_host @ b_host + bias_host
    gelu = 0.5 * expected_pre * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (expected_pre + 0.044715 * expected_pre**3)))
    check(cb, pre, expected_pre, dt.bfloat16, 136)
    check(cb, out, gelu, dt.bfloat16, 136)


def test_dispatch_keeps_other_problems_on_mma_sync(cb, native, on_sm90, monkeypatch):
    """A with M contiguous or rows not 16 bytes apart, a batch that does not fold, and ADCUDA_GEMM_SM90=0
    take the mma.sync kernel."""
    g = np.random.default_rng(12)
    a_t, a_t_host = operand(cb, g, 20, 24, dt.float16, "col")
    b, b_host = operand(cb, g, 24, 16, dt.float16, "row")
    check(cb, native.matmul(a_t, b), a_t_host @ b_host, dt.float16, 24)
    assert native.gemm_last_half_kernel() == "sm80_mma_sync"
    odd, odd_host = operand(cb, g, 20, 25, dt.float16, "row")
    b_odd, b_odd_host = operand(cb, g, 25, 16, dt.float16, "col")
    check(cb, native.matmul(odd, b_odd), odd_host @ b_odd_host, dt.float16, 25)
    assert native.gemm_last_half_kernel() == "sm80_mma_sync"
    batched, batched_host = held(cb, g.standard_normal((3, 20, 24)), dt.float16)
    b_batched, b_batched_host = held(cb, g.standard_normal((3, 24, 16)), dt.float16)
    check(cb, native.matmul(batched, b_batched), np.matmul(batched_host, b_batched_host), dt.float16, 24)
    assert native.gemm_last_half_kernel() == "sm80_mma_sync"
    a, a_host = operand(cb, g, 20, 24, dt.float16, "row")
    native.matmul(a, b)
    on_sm90()
    monkeypatch.setenv("ADCUDA_GEMM_SM90", "0")
    check(cb, native.matmul(a, b), a_host @ b_host, dt.float16, 24)
    assert native.gemm_last_half_kernel() == "sm80_mma_sync"
    monkeypatch.setenv("ADCUDA_GEMM_SM90", "yes")
    with pytest.raises(ValueError, match="ADCUDA_GEMM_SM90"):
        native.matmul(a, b)


def test_gemm_path_names_the_hopper_kernel(on_sm90):
    from adcuda.backends.cuda import gemm as cuda_gemm

    assert "sm_90a TMA + wgmma" in cuda_gemm.gemm_path()


@pytest.mark.skipif(not emulated(), reason="the emulator's compute capability is what changes here")
def test_an_emulated_sm80_device_keeps_the_mma_sync_kernel():
    """The same product on an emulated compute capability 8.0 device runs the mma.sync kernel."""
    script = (
        "import numpy as np, adcuda\n"
        "from adcuda import _native, dtypes as dt\n"
        "from adcuda.backends import cuda as cb\n"
        "C = _native._C\n"
        "a = cb.from_numpy(np.ones((20, 24), np.float32), dt.bfloat16)\n"
        "b = cb.permute(cb.from_numpy(np.ones((16, 24), np.float32), dt.bfloat16), (1, 0))\n"
        "out = np.array(cb.to_numpy(C.matmul(a, b)))\n"
        "assert (out == 24).all(), out\n"
        "print(adcuda.cuda.get_device_properties(0).major, C.gemm_last_half_kernel(), 'sm_90a' in C.gemm_path(0))\n"
    )
    for capability, expected in (("8.0", "8 sm80_mma_sync False"), ("9.0", "9 sm90_wgmma True")):
        env = dict(os.environ, ADCUDA_EMULATOR_COMPUTE_CAPABILITY=capability)
        env.pop("ADCUDA_GEMM_SM90", None)
        run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split("\n")[-2] == expected, run.stdout
