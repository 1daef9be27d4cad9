"""Shape ops: values against NumPy (and PyTorch where installed), gradients by gradcheck in
float64, view semantics (shared memory and version counter, copies only where needed), and errors
that name the op and the shapes."""

import numpy as np
import pytest

import adcuda as A
from adcuda.autograd import gradcheck, gradgradcheck
from adcuda.errors import AutogradError, IndexOutOfRangeError, ShapeError

F64 = A.float64
BASE = np.arange(24.0).reshape(2, 3, 4)


def leaf(array):
    return A.tensor(np.asarray(array, dtype=np.float64), dtype=F64, requires_grad=True)


def shares(a, b):
    return np.shares_memory(a.detach().numpy(), b.detach().numpy())


def as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


# name: (adcuda/PyTorch call on a tensor, NumPy reference on an array)
CASES = {
    "reshape": (lambda t: t.reshape(4, -1), lambda a: a.reshape(4, -1)),
    "reshape_tuple": (lambda t: t.reshape((6, 4)), lambda a: a.reshape(6, 4)),
    "view": (lambda t: t.view(6, 4), lambda a: a.reshape(6, 4)),
    "view_-1": (lambda t: t.view(-1), lambda a: a.reshape(-1)),
    "flatten": (lambda t: t.flatten(), lambda a: a.reshape(-1)),
    "flatten_1": (lambda t: t.flatten(1), lambda a: a.reshape(2, 12)),
    "flatten_0_1": (lambda t: t.flatten(0, 1), lambda a: a.reshape(6, 4)),
    "unflatten": (lambda t: t.unflatten(2, (2, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    "unflatten_-1": (lambda t: t.unflatten(-1, (-1, 2)), lambda a: a.reshape(2, 3, 2, 2)),
    "squeeze": (lambda t: t[:, :1].squeeze(), lambda a: a[:, 0]),
    "squeeze_dim": (lambda t: t[:, :1].squeeze(1), lambda a: a[:, 0]),
    "squeeze_non_singleton": (lambda t: t.squeeze(0), lambda a: a),
    "unsqueeze": (lambda t: t.unsqueeze(1), lambda a: a[:, None]),
    "unsqueeze_-1": (lambda t: t.unsqueeze(-1), lambda a: a[..., None]),
    "transpose": (lambda t: t.transpose(0, 2), lambda a: a.transpose(2, 1, 0)),
    "transpose_neg": (lambda t: t.transpose(-1, -2), lambda a: a.swapaxes(-1, -2)),
    "permute": (lambda t: t.permute(2, 0, 1), lambda a: a.transpose(2, 0, 1)),
    "permute_list": (lambda t: t.permute([1, 2, 0]), lambda a: a.transpose(1, 2, 0)),
    "expand": (lambda t: t[:, :1].expand(2, 3, 4), lambda a: np.broadcast_to(a[:, :1], (2, 3, 4))),
    "expand_-1_new_dim": (lambda t: t[:, :1].expand(5, -1, 3, -1), lambda a: np.broadcast_to(a[:, :1], (5, 2, 3, 4))),
    "broadcast_to": (lambda t: t[0, :1].broadcast_to((2, 3, 4)), lambda a: np.broadcast_to(a[0, :1], (2, 3, 4))),
    "flip": (lambda t: t.flip((0, 2)), lambda a: a[::-1, :, ::-1]),
    "flip_list": (lambda t: t.flip([1]), lambda a: a[:, ::-1]),
    "repeat": (lambda t: t.repeat(2, 1, 1, 2), lambda a: np.tile(a, (2, 1, 1, 2))),
    "repeat_same_rank": (lambda t: t.repeat(1, 2, 3), lambda a: np.tile(a, (1, 2, 3))),
    "narrow": (lambda t: t.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
    "narrow_negative_start": (lambda t: t.narrow(-1, -3, 2), lambda a: a[:, :, 1:3]),
    "movedim": (lambda t: t.movedim(0, -1), lambda a: np.moveaxis(a, 0, -1)),
    "movedim_many": (lambda t: t.movedim((0, 1), (2, 0)), lambda a: np.moveaxis(a, (0, 1), (2, 0))),
    "T": (lambda t: t.T, lambda a: a.transpose(2, 1, 0)),
    "mT": (lambda t: t.mT, lambda a: a.swapaxes(-1, -2)),
    "contiguous": (lambda t: t.transpose(0, 1).contiguous(), lambda a: a.transpose(1, 0, 2)),
    "clone": (lambda t: t.clone(), lambda a: a),
    "split": (lambda t: t.split(3, 2), lambda a: (a[..., :3], a[..., 3:])),
    "split_sizes": (lambda t: t.split([1, 3], 2), lambda a: (a[..., :1], a[..., 1:])),
    "chunk": (lambda t: t.chunk(2, 1), lambda a: (a[:, :2], a[:, 2:])),
    "chunk_more_than_size": (lambda t: t.chunk(5, 1), lambda a: (a[:, :1], a[:, 1:2], a[:, 2:])),
    "unbind": (lambda t: t.unbind(1), lambda a: tuple(a[:, i] for i in range(3))),
    "select": (lambda t: t.select(1, -1), lambda a: a[:, -1]),
}


def _module_call(name):
    """cat/stack take lists: the same call through the module namespace (adcuda or torch)."""
    return {
        "cat": (lambda m, t: m.cat([t, t[:, :1]], 1), lambda a: np.concatenate([a, a[:, :1]], 1)),
        "cat_neg_dim": (lambda m, t: m.cat([t, t], -1), lambda a: np.concatenate([a, a], -1)),
        "cat_skips_legacy_empty": (lambda m, t: m.cat([t, m.zeros(0, dtype=t.dtype)]), lambda a: a),
        "stack": (lambda m, t: m.stack([t, t + 1], 1), lambda a: np.stack([a, a + 1], 1)),
        "stack_last": (lambda m, t: m.stack([t, t], -1), lambda a: np.stack([a, a], -1)),
    }[name]


MODULE_CASES = ["cat", "cat_neg_dim", "cat_skips_legacy_empty", "stack", "stack_last"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_numpy(name):
    op, ref = CASES[name]
    got = as_tuple(op(A.tensor(BASE, dtype=F64)))
    want = as_tuple(ref(BASE))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == w.shape
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("name", MODULE_CASES)
def test_list_ops_match_numpy(name):
    op, ref = _module_call(name)
    got = op(A, A.tensor(BASE, dtype=F64))
    np.testing.assert_array_equal(got.numpy(), ref(BASE))


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.parametrize("name", sorted(CASES))
def test_values_match_torch(name):
    torch = pytest.importorskip("torch")
    op, _ = CASES[name]
    got = as_tuple(op(A.tensor(BASE, dtype=F64)))
    want = as_tuple(op(torch.tensor(BASE)))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape)
        np.testing.assert_array_equal(g.numpy(), w.numpy())


@pytest.mark.parametrize("name", MODULE_CASES)
def test_list_ops_match_torch(name):
    torch = pytest.importorskip("torch")
    op, _ = _module_call(name)
    np.testing.assert_array_equal(op(A, A.tensor(BASE, dtype=F64)).numpy(), op(torch, torch.tensor(BASE)).numpy())


SMALL = np.random.default_rng(0).standard_normal((2, 3, 4))


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    op, _ = CASES[name]

    def fn(x):
        return tuple(o * 1.0 for o in as_tuple(op(x)))  # multiple outputs: all are checked

    assert gradcheck(fn, (leaf(SMALL),))


@pytest.mark.parametrize("name", MODULE_CASES)
def test_gradcheck_list_ops(name):
    op, _ = _module_call(name)
    assert gradcheck(lambda x: op(A, x), (leaf(SMALL),))


def test_gradcheck_cat_and_stack_of_different_inputs():
    a, b = leaf(SMALL[:, :1]), leaf(SMALL)
    assert gradcheck(lambda a, b: A.cat([a, b, a], 1), (a, b))
    assert gradcheck(lambda a, b: A.stack([a, b[:, :1]], 0), (a, b))
    c = A.tensor(SMALL, dtype=F64)  # a constant part gets no gradient, the others do
    out = A.cat([c, b], 0)
    out.sum().backward()
    assert b.grad.tolist() == np.ones_like(SMALL).tolist() and c.grad is None


def test_second_derivatives_through_shape_ops():
    assert gradgradcheck(lambda x: (x.permute(2, 0, 1).reshape(4, 6) ** 2).repeat(2, 1).flip(0), (leaf(SMALL),))


def test_gradient_of_a_non_contiguous_and_expanded_input():
    x = leaf(SMALL[0])
    assert gradcheck(lambda x: x.t().reshape(-1), (x,))  # reshape copies here
    assert gradcheck(lambda x: x[:, :1].expand(3, 5).contiguous().view(5, 3), (x,))


# ----------------------------------------------------------------------------------------------
# view semantics
VIEWS = {
    "view": lambda t: t.view(6, 4),
    "reshape_contiguous": lambda t: t.reshape(4, 6),
    "flatten": lambda t: t.flatten(),
    "unflatten": lambda t: t.unflatten(1, (3, 1)),
    "squeeze": lambda t: t[:, :1].squeeze(1),
    "unsqueeze": lambda t: t.unsqueeze(0),
    "transpose": lambda t: t.transpose(0, 1),
    "permute": lambda t: t.permute(2, 1, 0),
    "expand": lambda t: t[:1].expand(5, 3, 4),
    "narrow": lambda t: t.narrow(1, 1, 2),
    "split": lambda t: t.split(2, 2)[1],
    "chunk": lambda t: t.chunk(3, 1)[2],
    "unbind": lambda t: t.unbind(0)[1],
    "movedim": lambda t: t.movedim(2, 0),
    "T": lambda t: t.T,
    "mT": lambda t: t.mT,
    "select": lambda t: t.select(2, 0),
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_share_memory_and_version_counter(name):
    base = A.tensor(BASE, dtype=F64)
    view = VIEWS[name](base)
    assert shares(view, base)
    assert view._version is base._version
    before = base._version.value
    base.add_(1)
    assert view._version.value == before + 1
    want = VIEWS[name](A.tensor(BASE + 1, dtype=F64))
    np.testing.assert_array_equal(view.numpy(), want.numpy())  # the view sees the write


@pytest.mark.parametrize("name", ["view", "transpose", "narrow", "select", "unbind", "squeeze"])
def test_writing_through_a_view_changes_the_base(name):
    base = A.tensor(BASE, dtype=F64)
    VIEWS[name](base).mul_(0)
    assert (base.numpy() == 0).any()
    assert base._version.value == 1


@pytest.mark.parametrize("name", ["flip", "repeat", "cat", "clone", "contiguous_of_transposed"])
def test_copies_do_not_share_memory(name):
    base = A.tensor(BASE, dtype=F64)
    out = {
        "flip": lambda: base.flip(0),
        "repeat": lambda: base.repeat(1, 1, 1),
        "cat": lambda: A.cat([base]),
        "clone": lambda: base.clone(),
        "contiguous_of_transposed": lambda: base.transpose(0, 1).contiguous(),
    }[name]()
    assert not shares(out, base)
    assert out._version is not base._version


def test_repeat_is_a_writable_copy_even_where_strides_would_allow_a_view():
    for base, repeats in ((A.ones(1), (3,)), (A.ones(2, 1), (1, 3)), (A.ones(2), (1,))):
        out = base.repeat(*repeats)
        assert 0 not in out.stride() and not shares(out, base)
        out.add_(1)
        assert base.tolist() == A.ones(tuple(base.shape)).tolist()


def test_chunk_and_split_of_an_empty_dim():
    assert [tuple(c.shape) for c in A.ones(0, 3).chunk(2)] == [(0, 3), (0, 3)]
    assert [tuple(c.shape) for c in A.ones(0).split(2)] == [(0,)]


def test_shapes_must_be_ints():
    with pytest.raises(TypeError, match="view: shape must be a sequence of ints"):
        A.ones(4).view(2.0, 2)
    assert tuple(A.ones(4).view(A.tensor(2), 2).shape) == (2, 2)


def test_contiguous_of_a_contiguous_tensor_is_itself():
    base = A.tensor(BASE, dtype=F64)
    assert base.contiguous() is base
    assert base.is_contiguous() and not base.transpose(0, 1).is_contiguous()


def test_reshape_copies_only_when_it_must():
    base = A.tensor(BASE, dtype=F64)
    assert shares(base.reshape(6, 4), base)
    assert shares(base.transpose(0, 1).reshape(3, 2, 2, 2), base)  # still expressible by strides
    transposed = base.transpose(0, 2)
    copied = transposed.reshape(-1)
    assert not shares(copied, base)
    np.testing.assert_array_equal(copied.numpy(), BASE.transpose(2, 1, 0).reshape(-1))


def test_view_on_incompatible_strides_raises_like_pytorch():
    t = A.tensor(BASE, dtype=F64).transpose(0, 2)
    with pytest.raises(
        ShapeError,
        match=r"view size .*not compatible with input tensor's size \(4, 3, 2\) "
        r"and stride .*Use \.reshape\(\.\.\.\) instead",
    ):
        t.view(-1)
    assert tuple(t.reshape(-1).shape) == (24,)


def test_the_gradient_of_a_view_reaches_the_base():
    x = leaf(SMALL)
    v = x.transpose(0, 2)[1:3]
    (v * 2).sum().backward()
    want = np.zeros_like(SMALL)
    want[:, :, 1:3] = 2
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_stack_and_cat_promote_and_check_devices():
    out = A.cat([A.tensor([1, 2]), A.tensor([0.5])])
    assert out.dtype == A.float32 and out.tolist() == [1.0, 2.0, 0.5]


# ----------------------------------------------------------------------------------------------
# errors
ERRORS = [
    ("reshape", lambda t: t.reshape(5, -1), ShapeError, r"reshape: shape \(5, -1\) is invalid for input of size 24"),
    ("view size", lambda t: t.view(5, 5), ShapeError, r"view: shape \(5, 5\) is invalid for input of size 24"),
    ("two -1", lambda t: t.view(-1, -1), ShapeError, "only one dimension can be inferred"),
    ("negative size", lambda t: t.reshape(-2, 12), ShapeError, "invalid shape dimension -2"),
    (
        "unflatten",
        lambda t: t.unflatten(1, (2, 2)),
        ShapeError,
        r"unflatten: shape \(2, 2\) is invalid for input of size 3",
    ),
    ("flatten order", lambda t: t.flatten(2, 1), ValueError, "start_dim"),
    ("squeeze dim", lambda t: t.squeeze(3), IndexOutOfRangeError, r"squeeze: dimension out of range.*\[-3, 2\].*3"),
    ("unsqueeze dim", lambda t: t.unsqueeze(4), IndexOutOfRangeError, r"unsqueeze: dimension out of range"),
    ("transpose dim", lambda t: t.transpose(0, 3), IndexOutOfRangeError, "transpose"),
    ("permute count", lambda t: t.permute(0, 1), ShapeError, r"permute: number of dims 2 .*\(2, 3, 4\)"),
    ("permute repeat", lambda t: t.permute(0, 0, 1), ShapeError, "not a permutation"),
    (
        "expand",
        lambda t: t.expand(3, 3, 4),
        ShapeError,
        r"expand: the expanded size of the tensor \(3\) must match "
        r"the existing size \(2\) at non-singleton dimension 0",
    ),
    ("expand fewer", lambda t: t.expand(3, 4), ShapeError, "expand: the number of sizes provided"),
    ("expand -1 new", lambda t: t.expand(-1, 2, 3, 4), ShapeError, "-1 not allowed"),
    ("narrow", lambda t: t.narrow(2, 3, 2), ShapeError, r"narrow: start \(3\) \+ length \(2\) exceeds"),
    ("split sizes", lambda t: t.split([1, 2], 2), ShapeError, r"split: split sizes \[1, 2\] don't sum"),
    ("split zero", lambda t: t.split(0, 2), ValueError, "split_size must be positive"),
    ("chunk zero", lambda t: t.chunk(0), ValueError, "chunks must be positive"),
    ("repeat", lambda t: t.repeat(2, 2), ShapeError, "repeat: number of repeat dims"),
    ("t of 3-d", lambda t: t.t(), ShapeError, r"t: expects a tensor with <= 2 dimensions.*\(2, 3, 4\)"),
    ("mT of 1-d", lambda t: t[0, 0].mT, ShapeError, "mT"),
    (
        "cat shapes",
        lambda t: A.cat([t, t[:, :1, :1]], 1),
        ShapeError,
        r"cat: sizes of tensors must match except "
        r"in dimension 1.*\(2, 1, 1\)",
    ),
    ("cat empty list", lambda t: A.cat([]), ValueError, "non-empty"),
    ("cat 0-d", lambda t: A.cat([t[0, 0, 0], t[0, 0, 1]]), ShapeError, "zero-dimensional"),
    ("stack shapes", lambda t: A.stack([t, t[0]]), ShapeError, r"stack: expects each tensor to be equal size"),
    ("movedim", lambda t: t.movedim(3, 0), IndexOutOfRangeError, "movedim"),
    ("flip dim", lambda t: t.flip(3), IndexOutOfRangeError, "flip"),
]


@pytest.mark.parametrize("name,call,error,pattern", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name, call, error, pattern):
    with pytest.raises(error, match=pattern):
        call(A.tensor(BASE, dtype=F64))


@pytest.mark.parametrize("name,call,error,pattern", ERRORS, ids=[e[0] for e in ERRORS])
def test_pytorch_also_rejects(name, call, error, pattern):
    torch = pytest.importorskip("torch")
    if "cat" in name or "stack" in name:
        pytest.skip("list ops go through the module namespace")
    with pytest.raises((RuntimeError, IndexError, ValueError, TypeError)):
        call(torch.tensor(BASE))


def test_in_place_on_a_view_of_a_leaf_is_refused():
    x = leaf(SMALL)
    with pytest.raises(AutogradError, match="view of a leaf Variable"):
        x.view(-1).add_(1)


# ops of their own that used to be composites (issue 31): the same memory semantics as PyTorch's
def test_diagonal_is_a_view_even_where_the_two_dims_cannot_merge():
    base = A.tensor(np.arange(60.0).reshape(3, 4, 5)).transpose(1, 2)[:, :, ::2]
    d = A.diagonal(base, 0, 1, 2)  # dims of strides 1 and 10: no merged view, an as_strided one
    assert shares(d, base) and d.stride() == (20, 11)
    np.testing.assert_array_equal(d.numpy(), np.diagonal(base.numpy(), 0, 1, 2))
    d.add_(1)
    assert base[0, 0, 0].item() == 1.0


@pytest.mark.parametrize(
    "make",
    [
        lambda t: A.rot90(t, 0),
        lambda t: A.roll(t, 0),
        lambda t: A.roll(t, 4, 1),
        lambda t: t.repeat(1, 1),
        lambda t: A.flip(t, ()),
        lambda t: A.nn.functional.channel_shuffle(t.reshape(1, 8, 1), 1),
    ],
)
def test_copies_that_move_nothing_are_still_copies(make):
    t = A.tensor(np.arange(8.0).reshape(2, 4))
    out = make(t)
    assert not shares(out, t)
    out.fill_(-1.0)
    assert t.min().item() == 0.0


def test_flatten_gives_a_vector_and_a_single_dim_back_as_pytorch_does():
    v, m = A.ones(3), A.ones(2, 3)
    assert v.flatten() is v and m.flatten(1) is m and m.flatten(0, 0) is m
    assert m.ravel() is not m and m.squeeze() is not m
