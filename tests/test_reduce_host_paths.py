"""The reductions' and orderings' host-module paths (kernels/host/reduce.cpp, sort.cpp) for small CPU
tensors that record nothing: each op gives the same values, dtypes and shapes as its composition of
primitives (run with the native function hidden), on ties, zeros of either sign, NaN and inf; the
path is really taken; and a tensor that requires grad still records its node."""

import importlib

import numpy as np
import pytest

import adcuda

cpu_reduce = importlib.import_module("adcuda.backends.cpu.reduce")
cpu_sort = importlib.import_module("adcuda.backends.cpu.sort")

# (module, attribute of the native function) behind each call below
REDUCE_NATIVES = (
    "_native_extremes",
    "_native_truth",
    "_native_renorm",
    "_native_var_mean",
    "_native_norm2",
    "_native_nansum",
)
SORT_NATIVES = ("_native_mode", "_native_median", "_native_first_sorted", "_native_accumulate")


def _inputs(dtype):
    rng = np.random.default_rng(7)
    plain = rng.integers(-3, 4, (5, 8)).astype(dtype)
    arrays = {
        "plain": plain,
        "row": rng.integers(-3, 4, 9).astype(dtype),
        "3d": rng.integers(-2, 3, (2, 3, 4)).astype(dtype),
    }
    if np.dtype(dtype).kind == "f":
        arrays["normal"] = rng.standard_normal((6, 7)).astype(dtype)
        zeros = plain.copy()
        zeros[rng.random(zeros.shape) < 0.4] = -0.0
        arrays["zeros"] = zeros
        nan = plain.copy()
        nan[rng.random(nan.shape) < 0.2] = np.nan
        arrays["nan"] = nan
        arrays["all nan"] = np.full((2, 3), np.nan, dtype)
        inf = plain.copy()
        inf[0, 0], inf[1, 1] = np.inf, -np.inf
        arrays["inf"] = inf
    return arrays


CALLS = {
    "max": lambda t: t.max(),
    "min": lambda t: t.min(),
    "amax": lambda t: t.amax(),
    "amin keepdim": lambda t: t.amin(tuple(range(t.ndim)), keepdim=True),
    "aminmax": lambda t: t.aminmax(),
    "any": lambda t: t.any(),
    "all": lambda t: t.all(),
    "any keepdim": lambda t: t.any(None, keepdim=True) if t.dtype.is_floating_point else t.any(),
    "count_nonzero": lambda t: adcuda.count_nonzero(t),
    "mode": lambda t: t.mode(),
    "mode keepdim": lambda t: t.mode(-1, keepdim=True),
    "median": lambda t: t.median(),
    "nanmedian": lambda t: t.nanmedian(),
    "topk": lambda t: t.topk(3),
    "topk smallest, all": lambda t: t.topk(t.shape[-1], largest=False),
    "topk none": lambda t: t.topk(0),
    "kthvalue": lambda t: t.kthvalue(2),
    "kthvalue keepdim": lambda t: t.kthvalue(t.shape[-1], keepdim=True),
    "median dim": lambda t: t.median(-1),
}
FLOAT_CALLS = {
    "renorm p=2": lambda t: adcuda.renorm(t, 2, 0, 1.0) if t.ndim > 1 else t,
    "renorm p=1 dim=-1": lambda t: adcuda.renorm(t, 1, -1, 2.0) if t.ndim > 1 else t,
    "renorm p=3 middle": lambda t: adcuda.renorm(t, 3.0, 1, 0.5) if t.ndim > 1 else t,
    "renorm p=inf": lambda t: adcuda.renorm(t, float("inf"), 0, 1.5) if t.ndim > 1 else t,
    "var_mean": lambda t: adcuda.var_mean(t),
    "std_mean correction=0": lambda t: adcuda.std_mean(t, correction=0),
    "nansum": lambda t: t.nansum(),
    "norm": lambda t: t.norm(),
    "nanmean": lambda t: t.nanmean(),
    "cumsum": lambda t: t.cumsum(-1),
    "cumprod": lambda t: t.cumprod(t.ndim - 1),
    "cumsum dim 0": lambda t: t.cumsum(0),
    "bool any": lambda t: (t > 0).any(),
    "bool all": lambda t: (t == t).all(),
}


def _flat(result):
    return list(result) if isinstance(result, tuple) else [result]


def _run_all(dtype):
    calls = dict(CALLS, **(FLOAT_CALLS if np.dtype(dtype).kind == "f" else {}))
    return {
        (name, case): [(r.dtype, tuple(r.shape), r.numpy().tobytes()) for r in _flat(call(adcuda.tensor(a)))]
        for name, call in calls.items()
        for case, a in _inputs(dtype).items()
    }


def _counted(monkeypatch, module, attribute, counts):
    native = getattr(module, attribute)
    assert native is not None, f"the host module was built without {attribute}"

    def counting(*args):
        counts[attribute] = counts.get(attribute, 0) + 1
        return native(*args)

    monkeypatch.setattr(module, attribute, counting)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_host_paths_equal_the_primitives_bit_for_bit(monkeypatch, dtype):
    counts = {}
    with monkeypatch.context() as m:
        for attribute in REDUCE_NATIVES:
            _counted(m, cpu_reduce, attribute, counts)
        for attribute in SORT_NATIVES:
            _counted(m, cpu_sort, attribute, counts)
        native = _run_all(dtype)
    # every host function of the ops this dtype has was called
    expected = {"_native_extremes", "_native_mode", "_native_median", "_native_first_sorted"}
    if np.dtype(dtype).kind == "f":
        expected |= {
            "_native_accumulate",
            "_native_truth",
            "_native_renorm",
            "_native_var_mean",
            "_native_norm2",
            "_native_nansum",
        }
    assert expected <= set(counts), counts
    for attribute in REDUCE_NATIVES:
        monkeypatch.setattr(cpu_reduce, attribute, None)
    for attribute in SORT_NATIVES:
        monkeypatch.setattr(cpu_sort, attribute, None)
    reference = _run_all(dtype)
    for key, got in native.items():
        if key[0].startswith("renorm"):  # the host loop accumulates the norms in double: within rounding
            for (dtype_, shape, data), (ref_dtype, ref_shape, ref_data) in zip(got, reference[key]):
                assert (dtype_, shape) == (ref_dtype, ref_shape), key
                values, expected = (np.frombuffer(b, np.dtype(dtype)) for b in (data, ref_data))
                np.testing.assert_allclose(values, expected, rtol=4 * np.finfo(dtype).eps, atol=0, err_msg=str(key))
        else:
            assert got == reference[key], key


def test_the_primitives_path_agrees_with_pytorch_on_the_edge_cases():
    """The host paths' cases checked against PyTorch itself (the conformance database's samples have no
    NaN in a mode's row, no all-NaN median)."""
    torch = pytest.importorskip("torch")
    a = np.array([[3.0, np.nan, 1.0, 1.0, np.nan], [2.0, 2.0, -0.0, 0.0, 5.0]], np.float32)
    t, ref = adcuda.tensor(a), torch.tensor(a)
    for name in ("median", "nanmedian", "amax", "amin", "max", "min"):
        got, want = _flat(getattr(t, name)()), getattr(ref, name)()
        want = list(want) if isinstance(want, tuple) else [want]
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=name)
    # (a row with NaN: PyTorch's mode index there follows no rule of its documentation)
    ties = np.array([[5.0, 3.0, 5.0, 3.0, 3.0, 5.0], [2.0, 2.0, -0.0, 0.0, 5.0, 1.0]], np.float32)
    for got, want in zip(adcuda.tensor(ties).mode(), torch.tensor(ties).mode()):
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    nan_free = adcuda.tensor(a[1:])
    np.testing.assert_array_equal(nan_free.median().numpy(), torch.tensor(a[1:]).median().numpy())
    np.testing.assert_array_equal(adcuda.renorm(t, 2, 0, 1.0).numpy(), torch.renorm(ref, 2, 0, 1.0).numpy())
    x = np.random.default_rng(1).standard_normal((4, 6)).astype(np.float32)
    for got, want in zip(adcuda.std_mean(adcuda.tensor(x)), torch.std_mean(torch.tensor(x))):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)


@pytest.mark.parametrize(
    "call",
    [
        lambda t: t.mode()[0].sum(),
        lambda t: adcuda.renorm(t, 2, 0, 1.0).sum(),
        lambda t: t.median(),
        lambda t: t.nanmedian(),
        lambda t: t.max(),
        lambda t: t.aminmax()[1],
        lambda t: adcuda.std_mean(t)[0],
        lambda t: adcuda.var_mean(t)[1],
        lambda t: t.nansum(),
        lambda t: t.nanmean(),
        lambda t: t.norm(),
        lambda t: t.topk(2)[0].sum(),
        lambda t: t.kthvalue(2)[0].sum(),
    ],
)
def test_a_tensor_that_requires_grad_records(call):
    x = adcuda.tensor(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, requires_grad=True)
    out = call(x)
    assert out.grad_fn is not None
    out.backward()
    assert x.grad is not None and x.grad.shape == x.shape


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_logsumexp_of_rows_equals_the_numpy_path(monkeypatch, dtype):
    """kernels/host/reduce.cpp's log-sum-exp of trailing dims (computed in double) against the NumPy
    path (the native loop hidden), within the dtype's rounding: every dim, the last, the last two,
    keepdim, and rows of inf, -inf, NaN and large values; other dims take the NumPy path either way."""
    assert cpu_reduce._native_row_logsumexp is not None, "the host module was built without host_row_logsumexp"
    x = np.random.default_rng(5).standard_normal((3, 4, 5)).astype(dtype) * 4
    special = np.array(
        [[1.0, np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [np.nan, 0.0, 1.0], [500.0, 499.0, -500.0]], dtype
    )
    calls = [(x, None, False), (x, (2,), True), (x, (1, 2), False), (x, (0,), False), (special, (1,), False)]
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_reduce, "_native_row_logsumexp", None)
        runs[native] = [cpu_reduce.logsumexp(a, axes, keepdim) for a, axes, keepdim in calls]
    for got, ref in zip(runs[True], runs[False]):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        eps = np.finfo(dtype).eps  # (the NumPy path rounds in the dtype: near 0, an absolute error)
        np.testing.assert_allclose(got, ref, rtol=4 * eps, atol=4 * eps)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf in NumPy's accumulate, called outside an entry
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_logcumsumexp_equals_numpy_accumulate(monkeypatch, dtype):
    """kernels/host/sort.cpp's logaddexp scan of rows against NumPy's logaddexp.accumulate (the native
    loop hidden): equal values, infinities of either sign, NaN, a one-element row, the last dim named
    either way; another dim takes NumPy's path either way."""
    assert cpu_sort._native_logcumsumexp is not None, "the host module was built without host_logcumsumexp_rows"
    x = np.random.default_rng(6).standard_normal((3, 4, 9)).astype(dtype) * 30
    special = np.array(
        [[1.0, 1.0, np.inf, 2.0], [-np.inf, -np.inf, 0.0, -np.inf], [np.nan, 0.0, 1.0, 1.0], [5.0, np.inf, np.inf, 1]],
        dtype,
    )
    calls = [(x, -1), (x, 2), (x, 1), (special, 1), (x[:, :, :1], 2)]
    runs = {}
    for native in (True, False):
        if not native:
            monkeypatch.setattr(cpu_sort, "_native_logcumsumexp", None)
        runs[native] = [cpu_sort.scan("logaddexp", a, axis) for a, axis in calls]
    for got, ref in zip(runs[True], runs[False]):
        assert got.dtype == ref.dtype and got.shape == ref.shape
        eps = np.finfo(dtype).eps
        np.testing.assert_allclose(got, ref, rtol=2 * eps, atol=2 * eps)


def test_bincount_by_numpy_count_equals_the_checked_path(monkeypatch):
    """bincount's one NumPy call (CPU int64, no weights) against the op's checked path: counts and
    dtype, minlength below and above the largest value; a negative value still names the op."""
    ops_reduce = importlib.import_module("adcuda.ops.reduce")
    slots = adcuda.tensor(np.array([3, 0, 3, 7, 1, 0, 3]))
    calls = [
        lambda: adcuda.bincount(slots),
        lambda: adcuda.bincount(slots, minlength=12),
        lambda: slots.bincount(None, 2),
    ]
    seen = []
    original = ops_reduce.count_slots
    monkeypatch.setattr(ops_reduce, "count_slots", lambda *a: seen.append(a) or original(*a))
    fast = [call() for call in calls]
    assert len(seen) == len(calls)
    monkeypatch.setattr(ops_reduce, "count_slots", lambda *a: None)
    for got, ref in zip(fast, [call() for call in calls]):
        assert got.dtype == ref.dtype == adcuda.int64 and np.array_equal(got.numpy(), ref.numpy())
    monkeypatch.setattr(ops_reduce, "count_slots", original)
    with pytest.raises(ValueError, match="bincount"):
        adcuda.bincount(adcuda.tensor(np.array([1, -2])))
