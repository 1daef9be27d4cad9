"""The CPU backend's fast paths for eager programs: the float32 erf (and the exact GELU built on it)
keeps its accuracy without NumPy selects, and the heap setting that keeps freed arrays mapped is made
on glibc and can be turned off."""

import importlib
import math
import os
import platform
import subprocess
import sys

import numpy as np
import pytest

from adcuda.backends import cpu
from adcuda.backends.cpu import _heap
from adcuda.backends.cpu import optim as cpu_optim

cpu_sort = importlib.import_module("adcuda.backends.cpu.sort")  # the module (the package re-exports its sort)
cpu_index = importlib.import_module("adcuda.backends.cpu.index")  # (the package re-exports its index)

SPECIAL = [0.0, -0.0, 1e-30, -1e-30, 1e-4, -1e-4, 0.5, 3.99, 4.0, 4.01, 1e30, -1e30, np.inf, -np.inf]


def _erf_reference(values):
    return np.array([math.erf(float(v)) for v in values])


def test_float32_erf_is_accurate_everywhere():
    x = np.concatenate([np.linspace(-6, 6, 200001), SPECIAL]).astype(np.float32)
    got = cpu.unary("erf", x)
    assert got.dtype == np.float32
    ref = _erf_reference(x)
    relative = np.abs(got - ref) / np.maximum(np.abs(ref), 1e-38)
    assert relative.max() < 4e-7  # a few float32 ulp
    assert np.abs(got).max() <= 1.0
    assert np.signbit(got[x.size - len(SPECIAL) + 1])  # erf(-0.0) = -0.0
    np.testing.assert_array_equal(got[-2:], [1.0, -1.0])


def test_erf_nan_zero_d_and_float16():
    assert np.isnan(cpu.unary("erf", np.array([np.nan, 1.0], np.float32))[0])
    zero_d = cpu.unary("erf", np.array(0.3, np.float32))
    assert zero_d.shape == () and abs(float(zero_d) - math.erf(0.3)) < 1e-7
    half = cpu.unary("erf", np.array([0.25, -2.0], np.float16))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, _erf_reference([0.25, -2.0]), rtol=1e-3)


def test_float32_exact_gelu_and_its_gradient():
    """Within the float32 formula's own error: 1 + erf cancels where erf is near -1, so the absolute
    error there is the erf's (a few ulp of 1) times |x|."""
    x = np.concatenate([np.linspace(-10, 10, 20001), [0.0, -0.0, 1e-20]]).astype(np.float32)
    x64 = x.astype(np.float64)
    cdf = 0.5 * (1 + _erf_reference(x64 / math.sqrt(2)))
    bound = 2e-6 * np.abs(x64 * cdf) + 2e-7 * np.maximum(np.abs(x64), 1)
    assert np.all(np.abs(cpu.unary("gelu", x) - x64 * cdf) <= bound)
    g = np.linspace(-1, 1, x.size).astype(np.float32)
    grad = g * (cdf + x64 * np.exp(-0.5 * x64 * x64) / math.sqrt(2 * math.pi))
    bound = 2e-6 * np.abs(grad) + 2e-7 * np.maximum(np.abs(x64), 1)
    assert np.all(np.abs(cpu.unary_backward("gelu", x, None, g) - grad) <= bound)
    zero_d = cpu.unary_backward("gelu", np.array(0.5, np.float32), None, np.array(1.0, np.float32))
    assert zero_d.shape == ()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the heap setting is glibc's")
def test_heap_thresholds_are_raised_on_glibc():
    assert cpu.HEAP_TUNED is (os.environ.get("ADCUDA_CPU_HEAP_TUNING", "1") != "0")
    assert _heap.keep_freed_arrays_in_heap() is True


def test_heap_tuning_can_be_turned_off():
    code = "import adcuda.backends.cpu as c; print(c.HEAP_TUNED)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "ADCUDA_CPU_HEAP_TUNING": "0"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "decoupled, weight_decay, amsgrad", [(True, 0.01, False), (False, 0.1, True), (False, 0.0, False)]
)
def test_adam_over_many_tensors_matches_one_tensor_at_a_time(dtype, decoupled, weight_decay, amsgrad):
    """A call with many tensors of one float dtype updates the small ones gathered into flat arrays and
    the big ones in place: bit for bit what calls with one tensor each (the per-tensor path) give."""
    rng = np.random.default_rng(0)
    shapes = [(5, 3), (7,), (), (65, 64), (1, 4, 2), (0,), (3,)]

    def state():
        return [[np.array(rng.standard_normal(s), dtype) for s in shapes] for _ in range(5)]

    params, grads, exp_avgs, exp_avg_sqs, maxes = state()
    abs_state = [[np.array(np.abs(a)) for a in arrays] for arrays in (exp_avg_sqs, maxes)]
    together = [[a.copy() for a in arrays] for arrays in (params, grads, exp_avgs, *abs_state)]
    apart = [[a.copy() for a in arrays] for arrays in (params, grads, exp_avgs, *abs_state)]
    for step in (1, 2, 3):
        p, g, m, v, vmax = together
        cpu.adam_step_(
            p, g, m, v, step, 1e-2, 0.9, 0.99, 1e-8, weight_decay, decoupled, None, vmax if amsgrad else None
        )
        for i in range(len(shapes)):
            p, g, m, v, vmax = ([arrays[i]] for arrays in apart)
            cpu.adam_step_(
                p, g, m, v, step, 1e-2, 0.9, 0.99, 1e-8, weight_decay, decoupled, None, vmax if amsgrad else None
            )
    for got, want in zip(together, apart):
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
    assert not np.array_equal(together[0][0], params[0])  # the parameters moved


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # log(0) of the fully masked row, NumPy called directly
@pytest.mark.parametrize("spread", [1.0, 40.0], ids=["unshifted", "shifted by the row maximum"])
@pytest.mark.parametrize("is_causal", [False, True])
def test_attention_in_and_out_of_the_unshifted_score_range(spread, is_causal):
    """Scores within +-60 take exp(s) unshifted, others the shift by their row's maximum: both give the
    softmax (a fully masked row gives zeros), and the backward recomputes the forward's probabilities
    bit for bit (the same as when the forward keeps them for it)."""
    rng = np.random.default_rng(3)
    q, k, v = ((rng.standard_normal((2, 3, 5, 4)) * np.sqrt(spread)).astype(np.float32) for _ in range(3))
    mask = np.ones((5, 5), bool)
    mask[2] = False  # a row that sees no key
    out, lse = cpu.attention(q, k, v, mask, is_causal, 0.5)
    scores = (q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64)) * 0.5
    allowed = mask & np.tril(np.ones((5, 5), bool)) if is_causal else mask
    unshifted = np.abs(scores).max() <= 60
    assert unshifted == (spread == 1.0)
    scores = np.where(allowed, scores, -np.inf)
    top = np.max(scores, -1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0))
    sums = e.sum(-1, keepdims=True)
    probs = np.divide(e, sums, out=np.zeros_like(e), where=sums > 0)
    np.testing.assert_allclose(out, probs @ v.astype(np.float64), rtol=2e-5, atol=2e-5)
    assert np.all(out[:, :, 2] == 0) and np.all(np.isneginf(lse[:, :, 2]))
    g = rng.standard_normal(out.shape).astype(np.float32)
    recomputed = cpu.attention_backward(g, q, k, v, out, lse, mask, is_causal, 0.5)
    kept = np.empty(scores.shape, np.float32)
    out_kept, lse_kept = cpu.attention(q, k, v, mask, is_causal, 0.5, probs=kept)
    assert out_kept.tobytes() == out.tobytes() and lse_kept.tobytes() == lse.tobytes()
    given = cpu.attention_backward(g, q, k, v, out, lse, mask, is_causal, 0.5, probs=kept)
    for a, b in zip(recomputed, given):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("spread", [1.0, 40.0], ids=["unshifted", "shifted by the row maximum"])
def test_attention_with_a_mask_that_broadcasts_the_scores(spread):
    """A bool mask with more batch dims than q, k and v broadcasts the output; both score paths mask
    the same keys, and the backward recomputes the forward's probabilities."""
    rng = np.random.default_rng(4)
    q, k, v = ((rng.standard_normal((3, 5, 4)) * np.sqrt(spread)).astype(np.float32) for _ in range(3))
    mask = rng.uniform(size=(2, 3, 5, 5)) < 0.7
    mask[..., 0] = True  # every row sees a key
    out, lse = cpu.attention(q, k, v, mask, True, 0.5)
    assert out.shape == (2, 3, 5, 4)
    scores = (q.astype(np.float64) @ np.swapaxes(k, -1, -2)) * 0.5
    scores = np.where(mask & np.tril(np.ones((5, 5), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    np.testing.assert_allclose(out, (e / e.sum(-1, keepdims=True)) @ v, rtol=2e-5, atol=2e-5)
    g = rng.standard_normal(out.shape).astype(np.float32)
    kept = np.empty((2, 3, 5, 5), np.float32)
    cpu.attention(q, k, v, mask, True, 0.5, probs=kept)
    recomputed = cpu.attention_backward(g, q, k, v, out, lse, mask, True, 0.5)
    given = cpu.attention_backward(g, q, k, v, out, lse, mask, True, 0.5, probs=kept)
    for a, b in zip(recomputed, given):
        assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_where_by_bits_equals_numpy_where_bit_for_bit(dtype):
    # large floating selects go through a branch-free bitwise select: every value (NaN, signed
    # zeros, infinities) and every operand form (broadcast arrays, Python and 0-d scalars) must come
    # out bit-identical to np.where's
    import adcuda

    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 80)).astype(dtype)
    a[0, :5] = [np.nan, -0.0, np.inf, -np.inf, 0.0]
    b = rng.standard_normal(80).astype(dtype)
    cond = rng.random((64, 80)) > 0.5
    for x, y in [(a, b), (a, 0.0), (-0.0, b), (2, a), (a, np.array(3, dtype)), (b, a[::-1])]:
        got = cpu.where(cond, x, y, getattr(adcuda, np.dtype(dtype).name))
        ref = np.ascontiguousarray(np.where(cond, x, y).astype(dtype))
        assert got.dtype == dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("slope", [0.0, 0.2, 1.0, 1.5, -0.5])
def test_leaky_relu_equals_pytorch_bit_for_bit(slope):
    # leaky_relu is one op: for a slope in (0, 1] its forward is max(x, slope * x), elsewhere a
    # select; either way every value (signed zeros, infinities, NaN) and the gradient must be
    # PyTorch's
    torch = pytest.importorskip("torch")
    import adcuda

    values = np.array([0.0, -0.0, 1e-38, -1e-38, 2.5, -2.5, 3e38, -3e38, np.inf, -np.inf, np.nan], np.float32)
    x, tx = adcuda.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    y, ty = adcuda.nn.functional.leaky_relu(x, slope), torch.nn.functional.leaky_relu(tx, slope)
    np.testing.assert_array_equal(y.detach().numpy().view(np.uint32), ty.detach().numpy().view(np.uint32))
    g = np.linspace(-2, 2, values.size).astype(np.float32)
    y.backward(adcuda.tensor(g))
    ty.backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy().view(np.uint32), tx.grad.numpy().view(np.uint32))


def _optimizer_state(rng, shapes, count, dtype=np.float32):
    return [[np.array(rng.standard_normal(s), dtype) for s in shapes] for _ in range(count)]


_STEP_SHAPES = [(5, 3), (7,), (), (65, 64), (0,), (1000,)]


@pytest.mark.parametrize(
    "momentum, dampening, nesterov, weight_decay",
    [(0.0, 0.0, False, 0.0), (0.9, 0.0, False, 1e-3), (0.9, 0.1, False, 0.0), (0.8, 0.0, True, 0.05)],
)
def test_native_sgd_step_equals_the_numpy_path_bit_for_bit(monkeypatch, momentum, dampening, nesterov, weight_decay):
    """kernels/host/optim.cpp's one-pass SGD against the NumPy code it replaces for float32 (run with the
    native module hidden), over three steps (the first sets the momentum buffers)."""
    assert cpu_optim._NATIVE is not None, "the host module was built without the native steps"
    rng = np.random.default_rng(1)
    params, grads, bufs = _optimizer_state(rng, _STEP_SHAPES, 3)
    assert cpu_optim._native_float32(params, grads, bufs)  # the first run takes the native step
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_optim, "_NATIVE", None)
        p, b = [a.copy() for a in params], [a.copy() for a in bufs]
        for step in range(3):
            cpu.sgd_step_(
                p, grads, b if momentum else None, 0.05, momentum, dampening, nesterov, weight_decay, step == 0
            )
        runs[native] = p + b
    for a, b in zip(runs[True], runs[False]):
        assert a.tobytes() == b.tobytes()
    assert not np.array_equal(runs[True][0], params[0])


@pytest.mark.parametrize(
    "decoupled, weight_decay, amsgrad",
    [(True, 0.01, False), (False, 0.1, True), (False, 0.0, False), (True, 0.0, True)],
)
def test_native_adam_step_equals_the_numpy_path_bit_for_bit(monkeypatch, decoupled, weight_decay, amsgrad):
    """kernels/host/optim.cpp's one-pass Adam against the NumPy code (gathered and in place) it replaces
    for float32, over three steps; a NaN gradient spreads the same way on both."""
    assert cpu_optim._NATIVE is not None, "the host module was built without the native steps"
    rng = np.random.default_rng(2)
    params, grads, exp_avgs, exp_avg_sqs, maxes = _optimizer_state(rng, _STEP_SHAPES, 5)
    grads[1][3] = np.nan
    exp_avg_sqs, maxes = ([np.array(np.abs(a)) for a in arrays] for arrays in (exp_avg_sqs, maxes))
    assert cpu_optim._native_float32(params, grads, exp_avgs, exp_avg_sqs, maxes)
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_optim, "_NATIVE", None)
        p, m, v, vmax = ([a.copy() for a in arrays] for arrays in (params, exp_avgs, exp_avg_sqs, maxes))
        for step in (1, 2, 3):
            cpu.adam_step_(
                p, grads, m, v, step, 1e-2, 0.9, 0.99, 1e-8, weight_decay, decoupled, None, vmax if amsgrad else None
            )
        runs[native] = p + m + v + vmax
    for a, b in zip(runs[True], runs[False]):
        assert a.tobytes() == b.tobytes()
    assert np.isnan(runs[True][1][3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32, np.bool_])
@pytest.mark.parametrize("op", ["max", "min"])
def test_native_running_extreme_equals_the_numpy_path_bit_for_bit(monkeypatch, dtype, op):
    """kernels/host/sort.cpp's one-pass cummax/cummin loop against the NumPy path (run with the native
    loop hidden): ties of values and of zeros' signs, NaN runs, one-element and empty rows."""
    assert cpu_sort._native_running_extreme is not None, "the host module was built without running_extreme"
    rng = np.random.default_rng(2)
    lowest = 0 if dtype is np.bool_ else -3
    arrays = [rng.integers(lowest, 4, shape).astype(dtype) for shape in ((5, 9), (3, 1), (4, 0), (2, 3, 17), (33,))]
    if np.dtype(dtype).kind == "f":
        for a in arrays:
            a[rng.random(a.shape) < 0.15] = np.nan
            a[rng.random(a.shape) < 0.2] = -0.0
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_sort, "_native_running_extreme", None)
        runs[native] = [cpu.running_extreme(op, a, -1) for a in arrays]
    for (values, indices), (ref_values, ref_indices) in zip(runs[True], runs[False]):
        assert values.dtype == ref_values.dtype and values.tobytes() == ref_values.tobytes()
        assert indices.dtype == np.int64 and np.array_equal(indices, ref_indices)
    assert runs[True][0][1].max() > 0  # the indices moved along the rows


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_native_gather_and_scatter_equal_the_numpy_path_bit_for_bit(monkeypatch, dtype, axis):
    """kernels/host/index.cpp's loops over the index against the NumPy path (run with them hidden):
    duplicate positions (added, multiplied, compared in index order), NaN and signed zeros, a strided
    input and index, a src larger than the index, an empty index; a negative index value still counts
    from the end (NumPy's way) and one past the size still raises IndexError."""
    assert cpu_index._native_scatter is not None, "the host module was built without host_scatter_along"
    rng = np.random.default_rng(3)
    a = rng.integers(-3, 4, (4, 5, 6)).astype(dtype)
    src = rng.integers(-3, 4, (5, 6, 7)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        for x in (a, src):
            x[rng.random(x.shape) < 0.1] = np.nan
            x[rng.random(x.shape) < 0.2] = -0.0
    size = a.shape[axis]
    shapes = [(3, 4, 5), (4, 5, 6), (1, 1, 2), (0, 2, 3)]
    indices = [
        rng.integers(0, size, tuple(min(n, m) if d != axis else n for d, (n, m) in enumerate(zip(s, a.shape))))
        for s in shapes
    ]
    indices.append(rng.integers(0, size, (8, 10, 12))[::2, ::2, ::2])  # strided
    strided_a = np.ascontiguousarray(a[:, ::-1])[:, ::-1]  # negative strides

    def run():
        out = []
        for idx in indices:
            part = src[tuple(slice(0, n) for n in idx.shape)]
            out.append(cpu.gather(strided_a, axis, idx))
            out.append(cpu.scatter_add(a, axis, idx, src))
            for reduce in ("prod", "amax", "amin"):
                out.append(cpu.scatter_reduce(a, axis, idx, part, reduce, True))
        negative = -np.ones((1, 1, 1), np.int64)
        out.append(cpu.gather(a, axis, negative))
        out.append(cpu.scatter_add(a, axis, negative, src))
        with pytest.raises(IndexError):
            cpu.gather(a, axis, np.full((1, 1, 1), size))
        with pytest.raises(IndexError):
            cpu.scatter_add(a, axis, np.full((1, 1, 1), size), src)
        return out

    assert all(cpu_index._native_fits(a, idx) for idx in indices)  # (the loops ran, not the fallback)
    native = run()
    monkeypatch.setattr(cpu_index, "_native_scatter", None)
    reference = run()
    for x, y in zip(native, reference, strict=True):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_trace_and_triangles_equal_the_numpy_path_bit_for_bit(dtype):
    """kernels/host/index.cpp's diagonal sum and triangles (trace's, tril's and triu's fast-lane kernels)
    against the primitives the forwards call: the sum over the diagonal's strided view (NumPy's pairwise
    order, below 8, up to 128 and halved past it), np.where's triangles; NaN, infinities, signed zeros,
    wide and tall matrices, empty ones and a batch."""
    assert cpu_index._native_diagonal_sum is not None, "the host module was built without host_diagonal_sum"
    rng = np.random.default_rng(5)
    sizes = [0, 1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 136, 255, 300, 1000]
    for n in sizes:
        for cols in (n, n + 3):
            a = (rng.standard_normal((n, cols)) * 10.0 ** rng.integers(-6, 7, (n, cols))).astype(dtype)
            flat = a.reshape(-1)[: (n - 1) * (cols + 1) + 1 if n else 0 : cols + 1]
            expected = cpu.reduce("sum", flat, None, False)
            got = cpu_index.plain_index("trace")(a)
            assert got.shape == () and got.dtype == expected.dtype and got.tobytes() == expected.tobytes(), (n, cols)
    special = np.array([[-0.0, 1.0], [2.0, -0.0]], dtype)
    assert np.signbit(cpu_index.plain_index("trace")(special)) == np.signbit(
        cpu.reduce("sum", np.diagonal(special), None, False)
    )
    special[1, 1] = np.nan
    assert np.isnan(cpu_index.plain_index("trace")(special))
    matrices = [rng.standard_normal(shape).astype(dtype) for shape in [(4, 6), (6, 4), (0, 3), (2, 3, 5), (2, 0, 4)]]
    matrices[0][0, :3] = (np.nan, -np.inf, -0.0)
    matrices[0][2, 0] = np.nan
    for m in matrices:
        for name in ("tril", "triu"):
            got = cpu_index.plain_index(name)(m)
            expected = getattr(cpu, name)(m, 0)
            assert got.shape == expected.shape and got.flags.c_contiguous and got.tobytes() == expected.tobytes()


def test_native_index_range_check_equals_numpy():
    """kernels/host/index.cpp's range check and bounds of an index (the ops' check before a gather, scatter or
    index_* write) against NumPy's reading of the same values: negative values, the bounds, int32 and a
    strided vector."""
    check = importlib.import_module("adcuda._C").host_all_below
    bounds = importlib.import_module("adcuda._C").host_bounds
    rng = np.random.default_rng(4)
    for dtype in (np.int64, np.int32):
        cases = [rng.integers(-2, 9, (4, 5)), np.array([0, 7]), np.array([-1]), np.array([8]), np.array(3)]
        indices = [values.astype(dtype) for values in cases] + [np.arange(16, dtype=dtype)[::3]]
        for index in indices:
            for n in (1, 8, 16):
                assert check(index, n) == bool(((index >= 0) & (index < n)).all())
            assert bounds(index) == (int(index.min()), int(index.max()))  # (one_hot's classes, the errors')


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_native_index_writes_equal_numpy(dtype):
    """kernels/host/index.cpp's loops behind the index family's direct lanes (backends/cpu/index.py) against
    NumPy: index_copy's/index_add's slices along each dim (repeated positions in index order, a strided
    index), masked_scatter's ordered write, nonzero's coordinates and one_hot's rows; each refuses (None)
    what it was not written for: an index value out of range, a src of another dtype or too short."""
    rng = np.random.default_rng(7)
    a = rng.integers(-5, 6, (3, 4, 5)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        a[0, 0, :2] = (np.nan, -0.0)
    for dim in range(3):
        index = rng.integers(0, a.shape[dim], 12)[::2]  # strided, with repeats
        shape = list(a.shape)
        shape[dim] = index.size
        src = rng.integers(-5, 6, shape).astype(dtype)
        key = (slice(None),) * dim + (index,)
        copied, added = a.copy(), a.copy()
        copied[key] = src
        np.add.at(added, key, src)
        for how, expected in (("write", copied), ("add", added)):
            got = cpu_index.indexed_along(a, dim, index, src, how)
            assert got.dtype == a.dtype and got.tobytes() == expected.tobytes()
        assert cpu_index.indexed_along(a, dim, index + a.shape[dim], src, "add") is None
        assert cpu_index.indexed_along(a, dim, index, src.astype(np.float16), "add") is None
    mask = rng.random(a.shape) < 0.4
    src = rng.integers(-5, 6, 60).astype(dtype)
    expected = a.copy()
    expected[mask] = src[: mask.sum()]
    assert cpu_index.masked_scattered(a, mask, src).tobytes() == expected.tobytes()
    assert cpu_index.masked_scattered(a, mask, src[: mask.sum() - 1]) is None
    assert np.array_equal(cpu_index.nonzero_rows(mask), np.argwhere(mask))
    assert cpu_index.nonzero_rows(mask.T) is None  # (not row-major: the forward's grid)
    classes = rng.integers(0, 6, (4, 3))
    assert np.array_equal(cpu_index.one_hot_rows(classes, 7), np.eye(7, dtype=np.int64)[classes])
    assert np.array_equal(cpu_index.one_hot_rows(classes, -1), np.eye(classes.max() + 1, dtype=np.int64)[classes])
    assert cpu_index.one_hot_rows(classes, 3) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("descending", [False, True])
def test_native_sort_equals_the_numpy_path_bit_for_bit(monkeypatch, dtype, descending):
    """kernels/host/sort.cpp's stable sort of rows against the NumPy path (run with the native sort
    hidden): ties of values and of zeros' signs, NaNs (the largest, in their order), one-element rows,
    the flattened sort (axis None) and the last dim named either way."""
    assert cpu_sort._native_sort is not None, "the host module was built without host_sort_rows"
    rng = np.random.default_rng(3)
    arrays = [rng.integers(-3, 4, shape).astype(dtype) for shape in ((5, 9), (3, 1), (2, 3, 17), (33,))]
    if np.dtype(dtype).kind == "f":
        for a in arrays:
            a[rng.random(a.shape) < 0.15] = np.nan
            a[rng.random(a.shape) < 0.2] = -0.0
    # (the NumPy path sorts the flattened array ascending only: the ops ask no other)
    calls = [(a, axis) for a in arrays for axis in ((-1, a.ndim - 1) if descending else (None, -1, a.ndim - 1))]
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_sort, "_native_sort", None)
        runs[native] = [cpu.sort(a, axis, descending, True) for a, axis in calls]
    for (values, indices), (ref_values, ref_indices) in zip(runs[True], runs[False]):
        assert values.dtype == ref_values.dtype and values.shape == ref_values.shape
        assert values.tobytes() == ref_values.tobytes()
        assert indices.dtype == np.int64 and np.array_equal(indices, ref_indices)
    order = runs[True][0][1]
    assert (order != np.arange(order.shape[-1])).any()  # the sort moved the elements


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_native_row_variance_equals_the_numpy_path(monkeypatch, dtype):
    """kernels/host/reduce.cpp's variance of trailing dims against the NumPy path (the native loop
    hidden): every dim, the last, the last two, keepdim, corrections leaving 0 or fewer degrees of
    freedom (inf, NaN), inf and NaN inputs; other dims take the NumPy path either way."""
    cpu_reduce = importlib.import_module("adcuda.backends.cpu.reduce")
    assert cpu_reduce._native_row_variance is not None, "the host module was built without host_row_variance"
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 5)).astype(dtype)
    special = np.array([[1.0, np.inf, 2.0], [np.nan, 0.0, 1.0], [3.0, 3.0, 3.0]], dtype)
    calls = [
        (x, None, 1, False),
        (x, (2,), 1, True),
        (x, -1, 0, False),
        (x, (1, 2), 1, False),
        (x, (0,), 1, False),
        (x[:, :, :1], (2,), 1, False),
        (x[:, :, :2], (2,), 2, True),
        (special, (1,), 1, False),
        (np.array(2.5, dtype), (), 0, False),
    ]
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_reduce, "_native_row_variance", None)
        runs[native] = [cpu.var(a, axes, correction, keepdim) for a, axes, correction, keepdim in calls]
    for got, ref in zip(runs[True], runs[False]):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-6 if dtype is np.float32 else 1e-13, atol=0)


@pytest.mark.parametrize(
    "options",
    [
        ("sgd", 0.0, 0.0, False, 0.0, False),
        ("sgd", 0.9, 0.1, True, 1e-2, True),
        ("sgd", 0.9, 0.1, False, 1e-2, False),
        ("sgd", 0.8, 0.0, True, 0.0, False),
        ("adam", True, 0.01, False),
        ("adam", False, 0.1, True),
        ("adam", False, 0.0, False),
    ],
)
def test_native_steps_baseline_and_avx2_builds_agree_bit_for_bit(options):
    """kernels/host/optim_loops.h built twice (baseline x86-64 and AVX2, chosen at run time): both builds
    give the same numbers, NaN included, on every length (tails of the vector loops); the default build is
    the one checked against NumPy above. Where the CPU has no AVX2, asking for it raises."""
    from adcuda._native import _C

    rng = np.random.default_rng(4)
    shapes = [(5, 3), (7,), (), (65, 64), (0,), (1003,)]
    state = _optimizer_state(rng, shapes, 5)
    state[1][1][3] = np.nan
    state[3], state[4] = ([np.array(np.abs(a)) for a in arrays] for arrays in state[3:])

    def run(avx2):
        p, g, m, v, vmax = ([a.copy() for a in arrays] for arrays in state)
        for step in range(3):
            if options[0] == "sgd":
                momentum, dampening, nesterov, decay, first = options[1:]
                _C.cpu_sgd_step_(p, g, m, 0.05, momentum, dampening, nesterov, decay, first and step == 0, avx2=avx2)
            else:
                decoupled, decay, amsgrad = options[1:]
                correction = float(np.sqrt(1 - 0.99 ** (step + 1)))
                _C.cpu_adam_step_(
                    p,
                    g,
                    m,
                    v,
                    vmax if amsgrad else None,
                    1e-2,
                    0.9,
                    0.99,
                    1e-8,
                    decay,
                    decoupled,
                    correction,
                    0.1,
                    avx2=avx2,
                )
        return p + m + v + vmax

    baseline = run(False)
    assert not np.array_equal(baseline[3], state[0][3])
    if not _C.host_has_avx2():
        with pytest.raises(RuntimeError, match="no AVX2"):
            run(True)
        return
    for a, b in zip(run(True), baseline):
        assert a.tobytes() == b.tobytes()


cpu_layout = importlib.import_module("adcuda.backends.cpu.layout")  # (the package re-exports its cat)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int8, np.bool_, np.complex64])
def test_native_join_equals_numpy_concatenate_and_stack(dtype):
    if cpu_layout._native_join is None:
        pytest.skip("no host module")
    rng = np.random.default_rng(3)

    def made(shape):
        return np.asarray(rng.standard_normal(shape) * 10).astype(dtype)

    for shapes, axis in [
        ([(3,), (0,), (5,)], 0),
        ([(2, 3, 4), (2, 1, 4), (2, 0, 4)], 1),
        ([(2, 3, 1), (2, 3, 2)], 2),
        ([(4, 2), (1, 2)], 0),
    ]:
        arrays = [made(s) for s in shapes]
        got = cpu_layout._native_join(arrays, axis, False)
        want = np.concatenate(arrays, axis)
        assert got.dtype == want.dtype and got.flags.c_contiguous and got.flags.writeable
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(cpu.cat(arrays, axis), want)
    for shape in [(), (3,), (2, 3), (0, 2)]:
        arrays = [made(shape) for _ in range(5)]
        for axis in range(len(shape) + 1):
            got = cpu_layout.stacked(arrays, axis)
            want = np.stack(arrays, axis)
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)


def test_native_join_leaves_what_it_does_not_take_to_numpy():
    if cpu_layout._native_join is None:
        pytest.skip("no host module")
    join = cpu_layout._native_join
    a = np.arange(6.0).reshape(2, 3)
    assert join([a, a.copy()], 0, False) is not None
    assert join([a, np.arange(6.0).reshape(3, 2).T], 0, False) is None  # a transposed part
    assert join([a, a.astype(np.float32)], 0, False) is None  # another dtype: NumPy promotes or refuses
    assert join([a, np.arange(4.0).reshape(2, 2)], 0, False) is None  # other sizes but along the axis
    assert join([a, a[:1]], 1, False) is None
    assert join([a, a[:1]], 0, True) is None  # stacked parts of another shape
    assert join([a, a], 2, False) is None and join([a, a], 3, True) is None and join([a, a], -1, False) is None
    assert join([a, [1.0, 2.0, 3.0]], 0, False) is None  # not an array
    assert join([np.array([None, 1], dtype=object)] * 2, 0, False) is None  # references: not bytes to copy
    assert join([], 0, False) is None
    # the backend's cat: the same join either way
    t = np.arange(6.0).reshape(3, 2).T
    np.testing.assert_array_equal(cpu.cat([a, t], 0), np.concatenate([a, t]))
