"""In-place ops (add_ sub_ mul_ div_ zero_ fill_ copy_ clamp_ masked_fill_ and += -= *= /=) on
plain tensors, on views and on tensors in a graph: values against NumPy and PyTorch, version
counters, gradients, and the errors for leaves, expanded tensors, shapes and dtypes."""

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck
from adcuda.errors import AutogradError, DTypeError, ResultTypeError, ShapeError

F64 = A.float64
BASE = np.arange(12.0).reshape(3, 4) - 5.0


def other(module, kind):
    return {
        "full": lambda: module.ones(2, 2, dtype=module.float64) * 4,
        "row": lambda: module.tensor([2.0, -3.0], dtype=module.float64),
        "mask": lambda: module.tensor([True, False]),
    }[kind]


# name: (method, arguments with placeholders for tensors, NumPy reference on the written region)
OPS = {
    "add_ scalar": ("add_", (2.0,), lambda r: r + 2),
    "add_ alpha": ("add_", ("row",), lambda r: r + np.array([2.0, -3.0])),
    "sub_ tensor": ("sub_", ("full",), lambda r: r - 4),
    "mul_ broadcast": ("mul_", ("row",), lambda r: r * np.array([2.0, -3.0])),
    "div_ scalar": ("div_", (2.0,), lambda r: r / 2),
    "zero_": ("zero_", (), lambda r: r * 0),
    "fill_": ("fill_", (7.0,), lambda r: np.full_like(r, 7.0)),
    "copy_": ("copy_", ("full",), lambda r: np.full_like(r, 4.0)),
    "copy_ broadcast": ("copy_", ("row",), lambda r: np.broadcast_to([2.0, -3.0], r.shape)),
    "clamp_": ("clamp_", (-1.0, 1.0), lambda r: np.clip(r, -1, 1)),
    "clamp_ min only": ("clamp_", (0.0,), lambda r: np.maximum(r, 0)),
    "masked_fill_": ("masked_fill_", ("mask", 0.5), lambda r: np.where([True, False], 0.5, r)),
}


def _apply(module, name, view):
    method, args, _ = OPS[name]
    t = module.tensor(BASE.copy())
    target = t[1:, ::2] if view else t[:2, :2]
    version = t._version.value if module is A else t._version
    args = [other(module, a)() if isinstance(a, str) else a for a in args]
    out = getattr(target, method)(*args)
    assert out is target
    new_version = t._version.value if module is A else t._version
    return t, new_version - version


@pytest.mark.parametrize("view", [False, True], ids=["block", "strided view"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_values_and_version(name, view):
    t, bumps = _apply(A, name, view)
    want = BASE.copy()
    region = (slice(1, None), slice(None, None, 2)) if view else (slice(None, 2), slice(None, 2))
    want[region] = OPS[name][2](BASE[region])
    np.testing.assert_array_equal(t.numpy(), want)
    assert bumps == 1


@pytest.mark.parametrize("name", sorted(OPS))
def test_values_match_torch(name):
    torch = pytest.importorskip("torch")
    for view in (False, True):
        ours, _ = _apply(A, name, view)
        theirs, _ = _apply(torch, name, view)
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("op,method", [("+=", "add"), ("-=", "sub"), ("*=", "mul"), ("/=", "div")])
def test_augmented_assignment_is_in_place(op, method):
    t = A.tensor(BASE, dtype=F64)
    view = t[0]
    alias = view
    value = A.tensor([1.0, 2.0, 4.0, 8.0], dtype=F64)
    namespace = {"v": view, "value": value}
    exec(f"v {op} value", namespace)
    assert namespace["v"] is alias  # the same tensor, not a new one
    want = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply", "div": "divide"}[method])(
        BASE[0], [1.0, 2.0, 4.0, 8.0]
    )
    np.testing.assert_array_equal(t[0].numpy(), want)
    assert t._version.value == 1


def test_views_see_each_others_writes():
    t = A.zeros(4, dtype=F64)
    a, b = t[:2], t.view(2, 2)
    a.add_(1)
    b[1].fill_(3)
    assert t.tolist() == [1.0, 1.0, 3.0, 3.0] and a.tolist() == [1.0, 1.0]
    assert t._version.value == a._version.value == b._version.value == 2


# ----------------------------------------------------------------------------------------------
# in a graph
GRAPH_OPS = {
    "add_": lambda y, w: y.add_(w),
    "sub_": lambda y, w: y.sub_(w * 2),
    "mul_": lambda y, w: y.mul_(w),
    "div_": lambda y, w: y.div_(w + 3),
    "iadd": lambda y, w: y.__iadd__(w),
    "imul": lambda y, w: y.__imul__(w),
    "clamp_": lambda y, w: y.clamp_(-0.5, 0.5),
    "copy_": lambda y, w: y.copy_(w * 3),
    "fill_ with a 0-d tensor": lambda y, w: y.fill_(w.flatten()[0]),
    "zero_": lambda y, w: y.zero_(),
    "masked_fill_": lambda y, w: y.masked_fill_(A.tensor([True, False, True]), 2.0),
}


@pytest.mark.parametrize("on_view", [False, True], ids=["tensor", "view"])
@pytest.mark.parametrize("name", sorted(GRAPH_OPS))
def test_gradcheck_in_a_graph(name, on_view):
    def fn(x, w):
        y = x * 1.5
        target = y[1] if on_view else y
        GRAPH_OPS[name](target, w if on_view else w.expand(2, 3))
        return y * y

    x = A.tensor([[0.3, -0.7, 1.1], [0.4, 0.9, -1.3]], dtype=F64, requires_grad=True)
    w = A.tensor([0.6, -0.2, 1.7], dtype=F64, requires_grad=True)
    assert gradcheck(fn, (x, w))


def test_graph_gradients_match_torch():
    torch = pytest.importorskip("torch")
    grads = []
    for m in (A, torch):
        x = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64, requires_grad=True)
        w = m.tensor([0.5, -2.0], dtype=m.float64, requires_grad=True)
        y = x * 2
        y += w
        y[0] *= w
        y.t()[1].sub_(w.exp())
        y /= 3
        (y**2).sum().backward()
        grads.append((x.grad.numpy().copy(), w.grad.numpy().copy()))
    np.testing.assert_allclose(grads[0][0], grads[1][0])
    np.testing.assert_allclose(grads[0][1], grads[1][1])


def test_in_place_records_the_new_history_and_bumps_the_version():
    x = A.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v0 = y._version.value
    y.add_(1)
    assert y.grad_fn.name == "AddBackward0" and y._version.value == v0 + 1
    y.mul_(x)
    assert y.grad_fn.name == "MulBackward0"


def test_in_place_ops_refuse_leaves_that_require_grad():
    x = A.tensor([1.0, 2.0], requires_grad=True)
    for call in (
        lambda: x.add_(1),
        lambda: x.zero_(),
        lambda: x.fill_(2.0),
        lambda: x.copy_(A.ones(2)),
        lambda: x.clamp_(0, 1),
        lambda: x.masked_fill_(A.tensor([True, False]), 0.0),
        lambda: x.__imul__(2),
    ):
        with pytest.raises(AutogradError, match="leaf Variable that requires grad"):
            call()
    assert x.tolist() == [1.0, 2.0] and x._version.value == 0


def test_saved_value_changed_in_place_is_detected():
    x = A.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    z = y * y  # MulBackward0 saved y
    y += 1
    with pytest.raises(AutogradError, match=r"modified by an inplace operation.*MulBackward0"):
        z.sum().backward()


# ----------------------------------------------------------------------------------------------
# errors
def test_writing_into_an_expanded_tensor_raises_a_clear_error():
    e = A.tensor([1.0, 2.0]).expand(3, 2)
    for op, call in (
        ("add_", lambda: e.add_(1)),
        ("mul_", lambda: e.__imul__(2)),
        ("fill_", lambda: e.fill_(0)),
        ("zero_", lambda: e.zero_()),
        ("copy_", lambda: e.copy_(A.ones(3, 2))),
        ("index_put_", lambda: e.__setitem__(0, 1.0)),
        ("masked_fill_", lambda: e.masked_fill_(A.tensor([True, False]), 0.0)),
    ):
        with pytest.raises(
            ShapeError,
            match=rf"{op}: .*more than one element of the written-to tensor refers "
            rf"to a single memory location.*clone\(\)",
        ):
            call()
    e[0:1].clone().add_(1)  # a clone is writable


def test_shape_and_dtype_errors():
    with pytest.raises(ShapeError, match=r"add_: output with shape \(2,\) doesn't match the broadcast shape \(3, 2\)"):
        A.ones(2).add_(A.ones(3, 2))
    with pytest.raises(ShapeError, match=r"copy_: src of shape \(3,\) cannot be broadcast to \(2,\)"):
        A.ones(2).copy_(A.ones(3))
    with pytest.raises(
        ResultTypeError, match="div_: result type .*float32 can't be cast to the desired output type .*int64"
    ):
        A.tensor([1, 2]).div_(2)
    with pytest.raises(ShapeError, match="fill_: only supports a 0-dimensional value tensor"):
        A.ones(2).fill_(A.ones(2))
    with pytest.raises(DTypeError, match="copy_: src must be a Tensor"):
        A.ones(2).copy_([1.0, 2.0])


def test_integer_and_mixed_dtype_in_place_ops():
    t = A.tensor([1, 2, 3])
    t.mul_(2)
    t += A.tensor([1, 1, 1])
    assert t.dtype == A.int64 and t.tolist() == [3, 5, 7]
    f = A.zeros(3)
    f.copy_(A.tensor([1, 2, 3]))  # copy_ converts
    f += A.tensor([1, 1, 1])  # int into float is allowed
    assert f.dtype == A.float32 and f.tolist() == [2.0, 3.0, 4.0]
    h = A.ones(2, dtype=A.float16)
    h.add_(A.tensor([0.5, 0.25]))
    assert h.dtype == A.float16 and h.tolist() == [1.5, 1.25]


# a write in place through an as_strided view of an intermediate: the base's new history (CopySlices)
# replays the view over the gradient laid out as the base is, and as_strided's rule saves only its
# input's layout (the write bumps the version its values would be checked against)
STRIDED_WRITES = {
    "block": (lambda y: y.as_strided((2, 2), (4, 1), 1), lambda y: y),
    "storage offset and column": (lambda y: y.as_strided((3,), (4,), 3), lambda y: y),
    "of a transposed base": (lambda y: y.as_strided((2, 3), (1, 4)), lambda y: y.t().contiguous().t()),
    "of a view of a view": (lambda y: y[1:].as_strided((2,), (5,), 5), lambda y: y),
    # as_strided of a view reading memory beside that view's elements (its gradient as a read reaches only
    # the view's elements; the write's reaches the base's memory, as PyTorch's CopySlices hands it)
    "of a column, beside it": (lambda y: y[:, 1].as_strided((2, 2), (4, 1), 1), lambda y: y),
    "of a row, across rows": (lambda y: y[1].as_strided((3,), (4,), 1), lambda y: y),
    "of rows, before them": (lambda y: y[1:].as_strided((2,), (1,), 0), lambda y: y),
    "of a block, then a view of it": (lambda y: y[1:, 1:].as_strided((2, 3), (4, 1), 0)[:, 1:], lambda y: y),
    "of a transposed row": (lambda y: y.t()[1].as_strided((2, 2), (1, 4), 2), lambda y: y),
}


@pytest.mark.parametrize("name", sorted(STRIDED_WRITES))
def test_a_write_through_an_as_strided_view_differentiates_as_torch(name):
    torch = pytest.importorskip("torch")
    view, base = STRIDED_WRITES[name]
    results = []
    for m in (A, torch):
        x = m.tensor(BASE.copy(), requires_grad=True)
        w = m.tensor(1.5, dtype=m.float64, requires_grad=True)
        y = base(x * 1.0)
        v = view(y)
        v.mul_(w)
        v.add_(1.0)
        weights = m.tensor(np.linspace(-1.0, 2.0, 12).reshape(3, 4))
        (y * weights * y).sum().backward()
        results.append((y.detach().numpy().copy(), x.grad.numpy().copy(), w.grad.numpy().copy()))
    for ours, theirs in zip(*results):
        np.testing.assert_allclose(ours, theirs)


def test_a_write_through_an_as_strided_view_passes_gradcheck():
    def fn(x, w):
        y = x * 1.5
        y.as_strided((2, 2), (3, 1), 1).mul_(w)
        return y * y

    x = A.tensor([[0.3, -0.7, 1.1], [0.4, 0.9, -1.3]], dtype=F64, requires_grad=True)
    w = A.tensor([0.6, -0.2], dtype=F64, requires_grad=True)
    assert gradcheck(fn, (x, w))


RETAINED_VIEWS = {
    "a column": lambda y: y[:, 1],
    "as_strided of a column": lambda y: y[:, 1].as_strided((2, 2), (4, 1), 1),
}


@pytest.mark.parametrize("name", sorted(RETAINED_VIEWS))
def test_a_write_through_a_view_that_retains_grad_differentiates_as_torch(name):
    # the write replaces the view's history: its retained gradient follows (PyTorch leaves .grad unset
    # here, the view's new history being outside the loss's graph), the base's gradient as torch's
    torch = pytest.importorskip("torch")
    results = []
    for m in (A, torch):
        x = m.tensor(BASE.copy(), requires_grad=True)
        y = x * 1.0
        v = RETAINED_VIEWS[name](y)
        v.retain_grad()
        v.mul_(2.0)
        (y * y).sum().backward()
        results.append((v.grad, x.grad.numpy().copy()))
    (ours_v, ours_x), (theirs_v, theirs_x) = results
    assert ours_v is None and theirs_v is None
    np.testing.assert_allclose(ours_x, theirs_x)
