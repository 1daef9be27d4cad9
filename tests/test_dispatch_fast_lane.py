"""The dispatch point's fast lane (adcuda/ops/dispatch.py ``_LANE_SOURCE``, ops declared ``plain=``):
a plain call (CPU tensors of one floating dtype, no hook) gives what the op's general path gives, bit
for bit, records the same graph, and every switch the dispatch point honours still sees the call:
the profiler, graph capture, autograd, anomaly mode, NumPy's error state, the named errors."""

import warnings

import numpy as np
import pytest
import torch
from helpers import general_path as _general

import adcuda
from adcuda.errors import AdcudaError, ShapeError
from adcuda.ops import dispatch, registry
from adcuda.profiler import profile

# the elementwise and reduction lanes (the products have their own tests: test_product_lane.py)
PLAIN = sorted(o.name for o in registry.all_ops() if o.plain is not None and not o.plain.endswith("product"))


def _operands(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(dtype)
    a[0, :3] = (np.inf, -np.inf, np.nan)
    a[1, 0] = 0.0
    b = rng.standard_normal((3, 4)).astype(dtype)
    b[0, :3] = (np.inf, 0.0, 1.0)
    b[1, 0] = -0.0
    return a, b


def _kind(name):
    return dispatch._PLAIN_KERNELS[registry.get(name).plain]


def _function(lib, name):
    return getattr(lib, name, None) or getattr(lib.nn.functional, name)


def _parameter_values(name):
    """Argument tuples for the parameters a ``scalars`` op's lane passes on: their defaults (where they
    have them), floats of both signs, zero and NaN for all of them at once, then a few mixed (clamp's
    open sides, hardtanh's bounds in the wrong order, a negative lambd)."""
    passed = _passed(name)
    rows = [tuple(p.default for p in passed)] if all(p.default is not p.empty for p in passed) else []
    rows += [(v,) * len(passed) for v in (0.5, -1.5, 2.0, 0.0, 1.0, 3.0, float("nan"))]
    if len(passed) == 2:
        rows += [(-0.5, 0.75), (0.75, -0.5), (None, 0.25), (0.25, None), (None, None)]
    return rows


def _passed(name):
    """The parameters after the tensors that a ``scalars`` kind's lane passes on."""
    parameters = list(registry.get(name).signature.parameters.values())[_kind(name).tensors :]
    return [p for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def _calls(name, dtype):
    """The argument lists op ``name``'s lane is tried with: its first case is the plain call whose lane
    must be taken (``test_every_plain_op_takes_its_lane``)."""
    a, b = _operands(dtype)
    kind = _kind(name)
    c = (b * 0.5 + 2).astype(dtype)  # (addcdiv's divisor: no zero)
    if registry.get(name).plain == "index":  # matrices: tall, wide, transposed (a view), empty, a batch
        return [(a,), (a.T,), (b[:, :3],), (a[:0],), (a[0, 2],)] + ([] if name == "trace" else [(np.stack([a, b]),)])
    if kind.dtypes == "mask":
        mask = a > 0
        return [(mask, a, b), (mask[0, 0], a[0, 0], b[0, 1]), (mask, a, b[1]), (mask.T, a.T, b.T), (mask[0], a, b)]
    if kind.tensors == 3:
        pairs = [(a, b, c), (a[0, 0], b[0, 1], c[1, 1]), (a, b[1], c), (a.T, b.T, c.T)]
    elif kind.tensors == 2:  # (and a one-element second: prelu's single weight)
        pairs = [(a, b), (a[0, 0], b[0, 1]), (a, b[1]), (a.T, b.T), (a, b[0, :1])]
    else:
        pairs = [(a,), (a[0, 2],), (a.T,)]
    if kind.scalars:
        return [(*tensors, *values) for values in _parameter_values(name) for tensors in pairs]
    if not kind.wraps:  # equal: equal values (-0.0 and 0.0), and a NaN, which is unequal to itself
        zero = b.copy()
        zero[1, 0] = 0.0
        pairs += [(b, zero), (b.T, zero.T), (a, a.copy())]
    if kind.dtypes == "any":
        rng = np.random.default_rng(1)
        for other in (np.int64, np.int32, np.uint8, np.bool_):
            i, j = rng.integers(-3, 4, (2, 3, 4)).astype(other)
            pairs += [(i, j)[: kind.tensors], (i.T, j.T)[: kind.tensors]]
    return pairs


def _tensor(x):
    return adcuda.tensor(np.ascontiguousarray(x)) if isinstance(x, (np.ndarray, np.generic)) else x


def _as_called(name, arguments):
    """``arguments`` as adcuda tensors (views where the array is a transposed one) and floats: the
    positional ones, and the keyword-only ones by name."""
    tensors = [_tensor(x) for x in arguments]
    if getattr(arguments[0], "ndim", 0) == 2 and arguments[0].strides != tensors[0]._data.strides:
        tensors = [_tensor(x.T).t() if isinstance(t, adcuda.Tensor) else t for t, x in zip(tensors, arguments)]
    keywords = [p.name for p in _passed(name) if p.kind == p.KEYWORD_ONLY] if _kind(name).scalars else []
    at = len(tensors) - len(keywords)
    return tensors[:at], dict(zip(keywords, tensors[at:]))


def _run(fn, called):
    return fn(*called[0], **called[1])


def _outcome(fn):
    try:
        return fn()
    except AdcudaError as error:
        return type(error)


def test_the_brief_ops_are_declared_plain():
    for name in ("add", "sub", "mul", "div", "eq", "lt", "neg", "exp", "relu", "sigmoid", "tanh", "leaky_relu"):
        assert name in PLAIN
    for name in ("clamp", "isnan", "logical_and", "bitwise_xor", "signbit", "pow", "hypot", "hardswish", "erfinv"):
        assert name in PLAIN


def test_the_table_s_unary_ops_are_plain():
    from adcuda.backends.elementwise_table import UNARY_BY_NAME

    ops = {o.name: o for o in registry.all_ops()}
    for name in UNARY_BY_NAME:
        if name in ops and all(p.default is not p.empty for p in list(ops[name].signature.parameters.values())[1:]):
            assert ops[name].plain in ("unary", "unary_any"), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", PLAIN)
def test_the_lane_gives_what_the_general_path_gives(name, dtype):
    fn = _function(adcuda, name)
    for arguments in _calls(name, dtype):
        called = _as_called(name, arguments)
        fast = _outcome(lambda called=called: _run(fn, called))
        general, seen = _general(lambda called=called: _outcome(lambda: _run(fn, called)))
        assert seen[0] == name
        if isinstance(general, (type, bool)):  # the path's named error, which the lane leaves to it; a bool
            assert fast is general, (name, arguments)
            if isinstance(general, bool):
                assert general is _function(torch, name)(*(torch.from_numpy(x.numpy()) for x in called[0]))
            continue
        assert fast.dtype == general.dtype and fast.shape == general.shape
        assert fast._data.__class__ is np.ndarray
        np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)
        try:
            expected = _function(torch, name)(
                *(torch.from_numpy(x.numpy()) if isinstance(x, adcuda.Tensor) else x for x in called[0]),
                **called[1],
            )
        except (RuntimeError, TypeError, ValueError):
            continue  # (PyTorch refuses it too, or names the case another way: the conformance tests')
        assert fast.dtype.name == str(expected.dtype).removeprefix("torch.")


@pytest.mark.parametrize("name", PLAIN)
def test_every_plain_op_takes_its_lane(name):
    """The lane's first case runs no line of the op's forward (a lane that always declined would give
    the path's results too)."""
    import sys

    op = registry.get(name)
    fn = _function(adcuda, name)
    # (the first case the op takes: a bitwise op's first of integers)
    cases = (_as_called(name, c) for c in _calls(name, np.float32))
    called = next(c for c in cases if not isinstance(_outcome(lambda c=c: _run(fn, c)), type))
    ran = set()

    def watch(frame, event, arg):
        if event == "call":
            ran.add(frame.f_code)

    sys.setprofile(watch)
    try:
        _run(fn, called)
    finally:
        sys.setprofile(None)
    assert op.forward.__code__ not in ran
    assert getattr(op.forward, "__wrapped__", op.forward).__code__ not in ran


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [name for name in PLAIN if registry.get(name).plain == "binary"])
def test_a_float_second_operand_gives_what_the_general_path_gives(name, dtype):
    a, _ = _operands(dtype)
    fn = getattr(adcuda, name)
    for x in (adcuda.tensor(a), adcuda.tensor(a[0, 1])):
        for value in (2.5, -0.0, 0.0, float("nan"), float("inf"), 1e40, 1 / 3):
            fast = fn(x, value)
            general, seen = _general(lambda x=x, value=value: fn(x, value))
            assert seen[0] == name
            assert fast.dtype == general.dtype == x.dtype or fast.dtype == general.dtype == adcuda.bool
            np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)
            try:
                expected = getattr(torch, name)(torch.from_numpy(x.numpy()), value)
            except TypeError:
                continue  # (PyTorch takes a tensor only: adcuda's path takes the number too)
            assert fast.dtype.name == str(expected.dtype).removeprefix("torch.")


@pytest.mark.parametrize(
    "name", [n for n in PLAIN if registry.get(n).inplace_entry is not None and dispatch._inplace_lane(registry.get(n))]
)
def test_in_place_forms_write_what_the_general_path_writes(name):
    a, b = _operands(np.float32)
    binary = _kind(name).tensors == 2
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


@pytest.mark.parametrize("name", [n for n in PLAIN if _kind(n).dtypes != "any"])
def test_every_plain_op_records_what_its_path_records(name):
    """With an input that requires grad, each op's lane records its node (a composite's lane stays
    closed: its pieces record), and backward gives the path's gradients."""
    fn = _function(adcuda, name)
    cases = (_as_called(name, c) for c in _calls(name, np.float64))
    called = next(c for c in cases if not isinstance(_outcome(lambda c=c: _run(fn, c)), type))

    finite = np.random.default_rng(2).standard_normal((3, 4)) + 0.25

    def grads():
        # (finite values, of each tensor's shape: the gradients of inf and NaN are the conformance tests')
        leaves = [
            adcuda.tensor(finite[: t.shape[0], : t.shape[1]] if t.ndim == 2 else finite[0, 0], requires_grad=True)
            if isinstance(t, adcuda.Tensor) and t.dtype.is_floating_point
            else t
            for t in called[0]
        ]
        out = fn(*leaves, **called[1])
        node = out.grad_fn.name() if out.grad_fn is not None else None
        if out.requires_grad:
            out.sum().backward()
        return node, [t.grad for t in leaves if isinstance(t, adcuda.Tensor)]

    fast = grads()
    general, _ = _general(grads)
    assert fast[0] == general[0]
    for a, b in zip(fast[1], general[1]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a.numpy(), b.numpy(), strict=True)


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
    # a lane before its op's dtype rule: the rule still refuses what the lane does not take
    with pytest.raises(AdcudaError, match="gelu"):
        adcuda.nn.functional.gelu(adcuda.tensor([1, 2]))
    with pytest.raises(AdcudaError, match="leaky_relu"):
        adcuda.nn.functional.leaky_relu(adcuda.tensor([1, 2]), 0.5)
    with pytest.raises(AdcudaError, match="addcmul"):
        adcuda.addcmul(*[adcuda.tensor([True])] * 3, value=0.5)
    assert (x + adcuda.ones(4, dtype=adcuda.float64)).dtype == adcuda.float64  # mixed: promoted
    assert (x + 1).tolist() == [2.0] * 4 and x.add(x, alpha=2).tolist() == [3.0] * 4
