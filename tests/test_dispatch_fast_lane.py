"""The dispatch point's fast lane (adcuda/ops/dispatch.py ``_LANE_SOURCE``, ops declared ``plain=``):
a plain call (CPU tensors of one floating dtype, no hook) gives what the op's general path gives, bit
for bit, records the same graph, and every switch the dispatch point honours still sees the call:
the profiler, graph capture, autograd, anomaly mode, NumPy's error state, the named errors."""

import warnings

import numpy as np
import pytest
import torch

import adcuda
from adcuda.errors import AdcudaError, ShapeError
from adcuda.ops import dispatch, registry
from adcuda.profiler import profile

# the elementwise and reduction lanes (the products have their own tests: test_product_lane.py)
PLAIN = sorted(o.name for o in registry.all_ops() if o.plain is not None and not o.plain.endswith("product"))


class _Watch:
    """A hook that only passes op calls on: attached, it closes the lanes (every call takes the
    general path) and counts what it saw."""

    def __init__(self):
        self.seen = []

    def around_op(self, name, op, call, args, kwargs):
        self.seen.append(name)
        return call(*args, **kwargs)


def _general(fn):
    watch = _Watch()
    dispatch.add_hook(watch)
    try:
        return fn(), watch.seen
    finally:
        dispatch.remove_hook(watch)


def _operands(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(dtype)
    a[0, :3] = (np.inf, -np.inf, np.nan)
    a[1, 0] = 0.0
    b = rng.standard_normal((3, 4)).astype(dtype)
    b[0, :3] = (np.inf, 0.0, 1.0)
    b[1, 0] = -0.0
    return a, b


def test_the_brief_ops_are_declared_plain():
    for name in ("add", "sub", "mul", "div", "eq", "lt", "neg", "exp", "relu", "sigmoid", "tanh"):
        assert name in PLAIN


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", PLAIN)
def test_the_lane_gives_what_the_general_path_gives(name, dtype):
    a, b = _operands(dtype)
    fn = getattr(adcuda, name, None) or getattr(adcuda.nn.functional, name)
    binary = registry.get(name).plain.startswith("binary")
    cases = [(a, b), (a[0, 0], b[0, 1]), (a, b[1]), (a.T, b.T)] if binary else [(a,), (a[0, 2],), (a.T,)]
    for arrays in cases:
        tensors = [adcuda.tensor(np.ascontiguousarray(x)) for x in arrays]
        if len(arrays[0].shape) == 2 and arrays[0].strides != tensors[0]._data.strides:
            tensors = [t.t() for t in (adcuda.tensor(np.ascontiguousarray(x.T)) for x in arrays)]  # views
        fast = fn(*tensors)
        general, seen = _general(lambda tensors=tensors: fn(*tensors))
        assert seen == [name]
        assert fast.dtype == general.dtype and fast.shape == general.shape
        assert fast._data.__class__ is np.ndarray
        np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)
        reference = getattr(torch, name, None) or getattr(torch.nn.functional, name)
        expected = reference(*(torch.from_numpy(np.ascontiguousarray(x)) for x in arrays))
        assert fast.dtype.name == str(expected.dtype).removeprefix("torch.")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [name for name in PLAIN if registry.get(name).plain == "binary"])
def test_a_float_second_operand_gives_what_the_general_path_gives(name, dtype):
    a, _ = _operands(dtype)
    fn = getattr(adcuda, name)
    for x in (adcuda.tensor(a), adcuda.tensor(a[0, 1])):
        for value in (2.5, -0.0, 0.0, float("nan"), float("inf"), 1e40, 1 / 3):
            fast = fn(x, value)
            general, seen = _general(lambda x=x, value=value: fn(x, value))
            assert seen == [name]
            assert fast.dtype == general.dtype == x.dtype or fast.dtype == general.dtype == adcuda.bool
            np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)
            assert fast.dtype.name == str(getattr(torch, name)(torch.from_numpy(x.numpy()), value).dtype)[6:]


@pytest.mark.parametrize("name", [n for n in PLAIN if registry.get(n).inplace_entry is not None])
def test_in_place_forms_write_what_the_general_path_writes(name):
    a, b = _operands(np.float32)
    binary = registry.get(name).plain.startswith("binary")
    method = registry.get(name).forms["inplace"][0]

    def written(second):
        x = adcuda.tensor(a)
        version = x._version.value
        out = getattr(x, method)(*((second(),) if binary else ()))
        return out is x, x.numpy(), x._version.value - version

    seconds = [lambda: adcuda.tensor(b), lambda: adcuda.tensor(b[1])] if binary else [None]
    if registry.get(name).plain == "binary":
        seconds.append(lambda: 0.75)
    for second in seconds:
        fast = written(second)
        general, _ = _general(lambda second=second: written(second))
        assert fast[0] and fast[2] == general[2] == 1
        np.testing.assert_array_equal(fast[1], general[1], strict=True)


def test_in_place_checks_and_history_stay_the_general_paths():
    leaf = adcuda.ones(3, requires_grad=True)
    with pytest.raises(AdcudaError, match="leaf"):
        leaf.add_(adcuda.ones(3))
    with adcuda.no_grad():
        leaf.mul_(2.0)  # an optimizer's update: allowed, counted
    assert leaf.tolist() == [2.0, 2.0, 2.0] and leaf._version.value == 1
    base = adcuda.zeros(3)
    base.add_(leaf)  # a constant written with a tensor that takes part: the path records it
    assert base.grad_fn is not None
    base.sum().backward()
    assert leaf.grad.tolist() == [1.0, 1.0, 1.0]
    x = adcuda.zeros(1).expand(3)
    with pytest.raises(AdcudaError, match="single memory location"):
        x.add_(adcuda.ones(3))
    with pytest.raises(AdcudaError):
        adcuda.ones(3).add_(adcuda.ones(2, 3))  # the result's shape is not self's


def test_large_operands_of_a_host_loop_take_the_general_path():
    x = adcuda.linspace(-5, 5, 1000).reshape(10, 100).t()  # large and not contiguous: NumPy's formula
    np.testing.assert_array_equal(x.sigmoid().numpy(), _general(lambda: x.sigmoid())[0].numpy())


def test_the_profiler_sees_each_call():
    x, y = adcuda.ones(4), adcuda.ones(4)
    with profile() as prof:
        x + y
        x.exp()
        x.eq(y)
    assert [(e.name, e.launches) for e in prof.events()] == [("add", 1), ("exp", 1), ("eq", 1)]
    assert dispatch._plain  # open again once the profiler detached


def test_graph_capture_records_the_calls():
    @adcuda.compile
    def f(x, y):
        return ((x + y).relu() * y).sigmoid() - x.exp()

    y = adcuda.tensor([0.5, -1.0, 2.0])
    for values in ([1.0, 2.0, 3.0], [-3.0, 0.25, 1.0], [4.0, -4.0, 0.0]):
        x = adcuda.tensor(values)
        np.testing.assert_allclose(
            f(x, y).numpy(), (((x + y).relu() * y).sigmoid() - x.exp()).numpy(), rtol=1e-6
        )  # a replay that had missed a call would give the first values again


def test_grad_is_recorded_when_an_input_takes_part():
    leaf = adcuda.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = adcuda.tensor([4.0, 5.0, 6.0])
    assert (leaf * y).grad_fn.name() == "MulBackward0"
    assert (y * leaf).grad_fn.name() == "MulBackward0"
    assert leaf.exp().grad_fn.name() == "ExpBackward0"
    view = leaf[1:]  # a view with a history: it takes part too
    out = view + y[1:]
    assert out.grad_fn.name() == "AddBackward0"
    (out.sum() + (leaf * y).sum()).backward()
    assert leaf.grad.tolist() == [4.0, 6.0, 7.0]
    with adcuda.no_grad():
        assert (leaf * y).grad_fn is None and not (leaf * y).requires_grad
    detached = leaf.detach()
    assert (detached + y).grad_fn is None and not (detached + y).requires_grad


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "exp", "sigmoid", "relu", "sum", "mean"])
def test_recorded_graphs_and_gradients_are_the_general_paths(name):
    fn = getattr(adcuda, name)
    binary = registry.get(name).plain.startswith("binary")

    def grads():
        a = adcuda.tensor([[0.5, -1.0, 2.0], [3.0, 0.25, -0.5]], dtype=adcuda.float64, requires_grad=True)
        b = adcuda.tensor([1.5, 2.0, -3.0], dtype=adcuda.float64, requires_grad=True)  # broadcast
        out = fn(a, b) if binary else fn(a)
        name_of_node = out.grad_fn.name()
        out.sum().backward()  # (sum's own lane: a plain call of a tensor with history)
        return name_of_node, a.grad.numpy(), b.grad.numpy() if binary else None

    fast = grads()
    general, _ = _general(grads)
    assert fast[0] == general[0]
    np.testing.assert_array_equal(fast[1], general[1], strict=True)
    if binary:
        np.testing.assert_array_equal(fast[2], general[2], strict=True)


def test_anomaly_mode_sees_the_lanes_nodes():
    with adcuda.autograd.detect_anomaly():
        x = adcuda.tensor([0.0], requires_grad=True)
        y = x.sqrt()
        assert y.grad_fn.trace  # where the forward ran, for the report below
        with pytest.raises(AdcudaError, match="SqrtBackward0"):
            (y * 0).sum().backward()  # 0 / (2 sqrt(0)): NaN


def test_numpy_error_state_is_the_callers_after_and_nothing_warns():
    x = adcuda.tensor([0.0, 1.0, -1.0, np.inf])
    zero = adcuda.zeros(4)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        before = np.geterr()
        assert np.isnan((x / zero).numpy()[0]) and (x / zero).numpy()[1] == np.inf
        assert np.isnan((x - x).numpy()[3])
        assert adcuda.tensor([1e30]).mul(adcuda.tensor([1e30])).item() == np.inf
        assert adcuda.tensor([-1.0]).log().isnan().item()
        assert np.geterr() == before
        with pytest.raises(FloatingPointError):
            np.float64(1.0) / np.float64(0.0)  # the caller's own NumPy still raises
    with np.errstate(all="warn"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (x / zero).exp().sqrt()


def test_a_bad_operand_still_raises_the_named_error():
    x = adcuda.ones(4)
    with pytest.raises(ShapeError, match="add"):
        x + adcuda.ones(3)
    with pytest.raises(ShapeError, match="mul"):
        x * adcuda.ones(2, 3)
    with pytest.raises(AdcudaError, match="maximum"):
        adcuda.maximum(x, [1.0])
    with pytest.raises(AdcudaError, match="neg"):
        -adcuda.tensor([True])
    assert (x + adcuda.ones(4, dtype=adcuda.float64)).dtype == adcuda.float64  # mixed: promoted
    assert (x + 1).tolist() == [2.0] * 4 and x.add(x, alpha=2).tolist() == [3.0] * 4
