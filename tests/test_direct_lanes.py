"""The direct lanes of the factories and random draws (registry.py ``direct=``, dispatch.py
``_DIRECT_SOURCE``): a call they take gives what the op's forward gives, bit for bit (dtype, shape,
strides, values, the generator's offset after it, the version counter of an in-place draw), and every
switch still sees the call: a hook closes the lanes, the primitive observer (profiler, capture) sees the
forward's primitives, errors are the forward's named ones, NumPy's error state is the caller's."""

import importlib
import re
import sys

import numpy as np
import pytest
from helpers import WatchOps

import adcuda as t
from adcuda.errors import AdcudaError, AutogradError, InvalidArgumentError, ShapeError, UnsupportedDTypeError
from adcuda.ops import dispatch, registry
from adcuda.profiler import profile

F = t.nn.functional
DIRECT = sorted(o.name for o in registry.all_ops() if o.direct is not None)
_tensor_module = importlib.import_module("adcuda.tensor")  # (adcuda.tensor is the factory function)


class _Observed:
    """A stand-in backend passing every primitive through, as the profiler's and capture's do."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)


def _scope():
    x = t.tensor([[0.5, -1.0, 2.0], [0.0, -0.0, 3.5]])
    return {
        "t": t,
        "F": F,
        "np": np,
        "x": x,
        "x64": x.double(),
        "xi": x.long(),
        "s32": t.zeros(3, 5),
        "s64": t.zeros(3, 5, dtype=t.float64),
        "big": t.zeros(17, 19),
        "ints": t.zeros(4, 3, dtype=t.int64),
        "prob": t.tensor([[0.0, 0.3, 1.0], [0.5, 0.99, 0.01]]),
        "array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "gen": t.Generator().manual_seed(11),
        # the index family's (scatter, scatter_reduce, masked_scatter, diagflat)
        "y": t.tensor([[1.0, -2.0, 0.25], [4.0, -0.0, float("nan")]]),
        "idx": t.tensor([[2, 0, 2], [1, 1, 0]]),
        "far": t.tensor([[0, 3, 1], [1, 1, 0]]),  # 3: out of range along dim 1
        "mask": t.tensor([[True, False, True], [False, True, True]]),
        "index": importlib.import_module("adcuda.ops.index"),  # (getitem has the [] operator alone)
        "img": t.tensor(np.random.default_rng(3).standard_normal((2, 3, 7, 8)).astype(np.float32)),
        "seq": t.tensor(np.random.default_rng(4).standard_normal((2, 3, 9))),
    }


CALLS = [
    "t.zeros(2, 3)",
    # searchsorted's and bucketize's lane (1-d boundaries of the values' dtype, int64 positions, a 0-d
    # value) and the forward's (out_int32, rows of boundaries, dtypes to promote, a Python number)
    "t.searchsorted(t.tensor([0.0, 1.0, 2.5]), x)",
    "t.searchsorted(t.tensor([0.0, 1.0, 2.5]), x, right=True)",
    "t.searchsorted(t.tensor([1.0, 2.0]), t.tensor(1.5), side='right')",
    "t.bucketize(xi, t.tensor([0, 1, 3]))",
    "t.bucketize(x64, t.tensor([0.0, 2.0], dtype=t.float64), right=True)",
    "t.bucketize(t.tensor(2.0), t.tensor([1.0, 2.0]))",
    "t.searchsorted(t.tensor([0.0, 1.0]), x, out_int32=True)",
    "t.searchsorted(t.tensor([[0.0, 1.0], [2.0, 3.0]]), x[:, :2])",
    "t.searchsorted(t.tensor([0.0, 1.0]), xi)",
    "t.bucketize(1.5, t.tensor([1.0, 2.0]))",
    # pdist's lane (finite p >= 0, float32/float64, a strided matrix) and the forward's (p = inf)
    "t.pdist(x)",
    "F.pdist(x64, 1)",
    "t.pdist(big, 3.5)",
    "t.pdist(big.t(), 0)",
    "t.pdist(x, float('inf'))",
    # kaiser_window's lane (2 to 256 points) and the forward's (1 point, 300 points, a float16 window)
    "t.kaiser_window(8)",
    "t.kaiser_window(9, False, 2.5, dtype=t.float64)",
    "t.kaiser_window(2, True, -3)",
    "t.kaiser_window(256, beta=0.0)",
    "t.kaiser_window(1)",
    "t.kaiser_window(300)",
    "t.kaiser_window(6, dtype=t.float16)",
    "t.zeros((2, 3), dtype=t.int32)",
    "t.zeros(t.Size([4]))",
    "t.zeros([0, 3])",
    "t.zeros(())",
    "t.ones(3, dtype=t.float16)",
    "t.ones(2, 2, dtype=t.bool)",
    "t.empty(2, 3).shape",
    "t.zeros_like(x)",
    "t.ones_like(xi)",
    "t.full_like(x, 2.5)",
    "t.full_like(xi, 2.5)",
    "t.zeros_like(x.t())",
    "t.empty_like(x64).dtype",
    "t.full((2, 3), 7)",
    "t.full([2], 1.5, dtype=t.float64)",
    "t.full(3, True)",
    "t.scalar_tensor(2)",
    "t.scalar_tensor(2.5, dtype=t.int64)",
    "x.new_zeros((2, 2))",
    "xi.new_ones(3)",
    "x.new_empty(2, 1).dtype",
    "x.new_full((2,), 3)",
    "x.new(2, 3).shape",
    "x.new()",
    "x.new((1, 2))",
    "t.eye(3)",
    "t.eye(2, 4, dtype=t.int64)",
    "t.eye(4, 2)",
    "t.eye(0, 3)",
    "t.arange(8)",
    "t.arange(2, 11, 3)",
    "t.arange(5, -4, -2)",
    "t.arange(3, dtype=t.float32)",
    "t.arange(0.5, 3)",
    "t.from_numpy(array)",
    "t.tensor([[1.5, 2], [3, 4]])",
    "t.tensor([1, 2], dtype=t.float64)",
    "t.tensor([True, 2.5], dtype=t.int32)",
    "t.tensor([])",
    "t.tensor((1e40, -1e40))",
    "x.new_tensor([1, 2])",
    "xi.new_tensor([[1.5, 2.5]])",
    "x.new_tensor([1.5], dtype=t.int64)",
    "t.linspace(0, 1, 8)",
    "t.linspace(-2.5, 3, 1)",
    "t.linspace(1, 1, 5, dtype=t.float64)",
    "t.linspace(-1e20, 3e25, 70)",
    "t.logspace(0, 1, 8)",
    "t.logspace(-3, 2, 6, base=2.0)",
    "t.logspace(-45, -38, 4)",
    "t.rand(2, 3)",
    "t.rand(4, dtype=t.float64)",
    "t.rand(3, dtype=t.float16)",
    "t.rand(2, 2, generator=gen)",
    "t.randn(3, 4)",
    "t.randn((2, 2), dtype=t.float64)",
    "t.rand_like(x)",
    "t.randn_like(x64)",
    "t.randint(0, 8, (3, 4))",
    "t.randint(-5, 2**40, [5])",
    "t.randint(10, (3,))",
    "t.randint_like(x, 8)",
    "t.randint_like(xi, 3, 9)",
    "t.randperm(0)",
    "t.randperm(9)",
    "t.randperm(300)",
    "t.bernoulli(prob)",
    "t.bernoulli(prob.double())",
    "t.bernoulli(prob, 0.3)",
    "s32.normal_()",
    "s64.normal_(1.5, 2.0)",
    "big.normal_(generator=gen)",
    "s32.uniform_(-2, 3)",
    "s32.uniform_(**{'from': 1.0, 'to': 4.0})",
    "s32.bernoulli_(0.3)",
    "s64.bernoulli_(1)",
    "s32.exponential_()",
    "s64.exponential_(2.5)",
    "big.exponential_(0.5)",
    "s32.geometric_(0.3)",
    "s64.geometric_(0.05)",
    "s32.cauchy_()",
    "s64.cauchy_(1.0, 2.0)",
    "big.cauchy_(-3.0)",
    "s32.cauchy_(0.0, 0.5)",
    "s32.log_normal_()",
    "s64.log_normal_(0.5, 0.25)",
    "big.log_normal_(80.0, 5.0)",
    "s32.random_(0, 100)",
    "ints.random_(-3, 3)",
    # the host module's integer draw into each dtype it writes, bounds at int64's ends, and a dtype it
    # refuses (float16: the forward's)
    "t.zeros(9, dtype=t.int32).random_(-(2**31), 2**31)",
    "t.zeros(9, dtype=t.bool).random_(0, 2)",
    "t.zeros(9, dtype=t.int64).random_(-(2**63), 2**63 - 1)",
    "t.zeros(9, dtype=t.float64).random_(0, 2**53)",
    "t.zeros(9, dtype=t.float16).random_(0, 2**11)",
    "t.zeros(0).random_(0, 3)",
    "s64.random_(7)",
    "t.normal(x, x.abs())",
    "t.normal(x64, x64.abs() * 3)",
    "t.normal(big.normal_(), big.abs())",
    "t.normal(x, 1.0)",
    "t.normal(2.0, 3.0, (4,))",
    "F.rrelu(x, training=True)",
    "F.rrelu(x64, 0.1, 0.9, True)",
    "F.rrelu(big.normal_(), training=True)",
    # the index family's direct lanes (their common call first): the host loops against the forward's path
    "t.gather(x, 1, idx)",
    "t.gather(x64, 0, idx[:, :2] % 2)",
    "t.gather(x.t(), -1, idx.t()[:, :1] % 2)",
    "t.gather(xi, 1, far[:, :1])",
    "t.gather(x, 1, idx[:0])",
    "t.scatter_add(x, 1, idx, y)",
    "t.scatter_add(x64, 0, idx[:, :2] % 2, x64)",
    "t.scatter_add(x.t(), 0, idx.t(), y.t())",
    "t.scatter_add(xi, 1, idx[:1], xi)",
    "t.scatter(x, 1, idx, y)",
    "t.scatter(x64, 0, idx[:, :2] % 2, x64)",
    "t.scatter(x, -1, idx[:, :2], y)",
    "t.scatter(x.t(), 0, idx.t(), y.t())",
    "t.scatter(xi, 1, idx, xi * 2)",
    "t.scatter(x, 1, idx, 7.5)",
    "t.scatter(x, 1, idx, y, reduce='multiply')",
    "t.scatter(x, 1, idx[:0], y)",
    "t.scatter_reduce(x, 1, idx, y, 'amax')",
    "t.scatter_reduce(x, 1, idx, y, 'amin')",
    "t.scatter_reduce(x64, 0, idx % 2, x64, 'prod')",
    "t.scatter_reduce(xi, 1, idx, xi, 'sum')",
    "t.scatter_reduce(x, 1, idx, y, 'mean')",
    "t.scatter_reduce(x, 1, idx, y, 'amax', include_self=False)",
    "t.masked_scatter(x, mask, y)",
    "t.masked_scatter(xi, mask, t.arange(10))",
    "t.masked_scatter(x.t(), mask.t(), y)",
    "t.masked_scatter(x.t(), mask.reshape(3, 2), y)",
    "t.masked_scatter(x, mask[0], y)",
    "t.masked_scatter(x, mask, y.t())",
    "t.diagflat(x)",
    "t.diagflat(x, 2)",
    "t.diagflat(xi.t(), -3)",
    "t.diagflat(t.tensor(2.5))",
    "t.diagflat(t.zeros(0), -2)",
    "t.diagflat(mask)",
    "t.index_select(x, 1, idx[0])",
    "t.index_select(x64, 0, idx[1] % 2)",
    "t.index_select(x.t(), 1, idx[1] % 2)",
    "t.index_select(xi, -1, idx[0][:0])",
    "t.take(x, idx)",
    "t.take(x.t(), idx * 2 - 3)",
    "t.take(xi, idx[0])",
    "t.take(x, idx[0, 0])",
    "t.put(x, idx[0], y[0])",
    "t.put(x.t(), idx[0], y[0], accumulate=True)",
    "t.put(xi, idx, xi, True)",
    "t.put(x, -idx[0], y[0])",
    "t.index_add(x, 1, idx[0], y)",
    "t.index_add(x64, 0, idx[1, :2] % 2, x64)",
    "t.index_add(x, 1, idx[0], y, alpha=2.0)",
    "t.index_add(x.t(), 0, idx[0], y.t())",
    "t.index_add(xi, 1, idx[1], xi)",
    "t.index_copy(x, 1, idx[0], y)",
    "t.index_copy(x64, 0, idx[1, :2] % 2, x64)",
    "t.index_copy(xi, -1, idx[1], xi)",
    "t.index_fill(x, 1, idx[0], 2.5)",
    "t.index_fill(xi, 0, idx[1] - 2, 7)",
    "t.index_fill(mask, 1, idx[1], False)",
    "t.index_fill(xi, 1, idx[0], 2.5)",
    "t.index_fill(x, 1, idx[0], t.tensor(1.5))",
    "t.nonzero(mask)",
    "t.nonzero(mask[0])",
    "t.nonzero(x)",
    "t.argwhere(mask)",
    "t.argwhere(mask.t())",
    "t.diag_embed(x)",
    "t.diag_embed(x64, 1)",
    "t.diag_embed(xi, -2, 1, 2)",
    "t.diag_embed(x.t(), -1)",
    "t.diag_embed(x, -2, 0, 2)",
    "t.diagonal_scatter(x, y[0, :2])",
    "t.diagonal_scatter(x64, x64[0, :1], 2)",
    "t.diagonal_scatter(x, y[0, :1], -1)",
    "t.diagonal_scatter(x.t(), y[0, :2])",
    "t.diagonal_scatter(xi, xi[0, :2])",
    "F.one_hot(idx)",
    "F.one_hot(idx[0], 5)",
    "F.one_hot(idx.t())",
    "F.one_hot(idx[:0], 3)",
    "F.one_hot(idx.int(), 3)",
    "t.masked_fill(x, mask, 2.5)",
    "t.masked_fill(x64, mask, -1)",
    "t.masked_fill(x.t(), mask.t(), float('nan'))",
    "t.masked_fill(xi, mask, 3)",
    "t.masked_fill(x, mask[0], 1.0)",
    "t.masked_fill(x, mask, t.tensor(0.5))",
    "t.nonzero(mask.t())",
    "t.nonzero(t.zeros(0, 2, dtype=t.bool))",
    "t.argwhere(mask[:, :, None])",
    "s32.fill_diagonal_(2.5)",
    "t.zeros(7, 3).fill_diagonal_(4, True)",
    "t.zeros(7, 3, dtype=t.float64).fill_diagonal_(4, wrap=False)",
    "ints.fill_diagonal_(-3)",
    "x.t().clone().fill_diagonal_(1.0)",
    "t.zeros(3, 3, 3).fill_diagonal_(1.0)",
    "t.stack(t.unravel_index(idx * 3 - 4, (2, 3)))",
    "t.unravel_index(idx.t() * 5, (3, 4))[0]",
    "t.unravel_index(idx.t() * 5, [3, 4])[1]",
    "t.unravel_index(idx, 3)[0]",
    "t.unravel_index(idx[0, 0], (2, 3))[1]",
    "t.unravel_index(idx.int(), (2, 3))[1]",
    "t.unravel_index(idx, (2, 0))[1]",
    "t.tril_indices(3, 4)",
    "t.tril_indices(4, 3, -1)",
    "t.triu_indices(3, 3, 1)",
    "t.triu_indices(0, 5)",
    "t.tril_indices(3, 4, dtype=t.int32)",
    "index.getitem(x, 1)",
    "x[:, 1:]",
    "x[t.tensor(1) :, None]",
    "x[idx % 2]",
    "x[mask]",
    "x[0, idx[0]]",
    "x[[1, 0], ..., [2, 2]]",
    # pooling: the host module's forwards on the input's array
    "F.max_pool2d(img, 2)",
    "F.max_pool2d(img, 3, 2, 1, ceil_mode=True)",
    "F.max_pool2d(img[0], (2, 3), dilation=2)",  # unbatched
    "F.max_pool2d(img, 2, return_indices=True)[1]",
    "F.max_pool2d(img.double().mT, 2)",  # strided: the forward
    "F.max_pool1d(seq, 2)",
    "F.max_pool1d(seq[1], 3, 2, 1)",
    "F.avg_pool2d(img, 2)",
    "F.avg_pool2d(img.double(), 3, 2, 1, True, False)",
    "F.avg_pool2d(img, 2, divisor_override=3)",
    "F.avg_pool2d(img[:, :0], 2)",  # no channels: the forward
    "F.avg_pool1d(seq, 2)",
    "F.avg_pool1d(seq, 4, 3, 2, ceil_mode=True, count_include_pad=False)",
    "F.adaptive_max_pool2d(img, 4)",
    "F.adaptive_max_pool2d(img, (3, None))",
    "F.adaptive_max_pool2d(img[1], 3, return_indices=True)[1]",
    "F.adaptive_max_pool1d(seq, 4)",
    "t.adaptive_max_pool1d(seq[0], (3,))[1]",
    "F.max_pool1d(seq, 2, return_indices=True)[1]",
    "F.adaptive_avg_pool2d(img, 4)",
    "F.adaptive_avg_pool2d(img[1], (5, 3))",
    "F.adaptive_avg_pool1d(seq, 4)",
    "F.adaptive_avg_pool1d(seq, 1)",
    # the views' pieces, joined to compare (tests/test_view_lane.py compares the pieces themselves)
    "t.cat(big.chunk(3, 1), 1)",
    "t.cat(t.chunk(x64, 5), 0)",
    "t.stack(t.unbind(big, 1), 1)",
    "t.stack(x.unbind(), 0)",
    "t.cat(t.split(seq, 4, 2), 2)",  # (the last piece the rest)
    "t.cat(seq.split(1), 0)",
    "t.cat(t.hsplit(x64, 3), 1)",
    "t.cat(t.hsplit(seq[0, 0], 3), 0)",  # a vector's dim 0
    "t.cat(t.hsplit(x64, [1]), 1)",  # split points: the forward's
    "t.cat(t.vsplit(img[0, 0], 7), 0)",
    "t.cat(t.dsplit(seq, 3), 2)",
    "t.stack(t.meshgrid(seq[0, 0], seq[1, 2, :4], indexing='ij'), 0)",
    "t.stack(t.meshgrid([seq[0, 0], x64[1], seq[1, 1, :2]], indexing='xy'), 0)",
    "t.stack(t.meshgrid(seq[0, 0], x64[1]), 0)",
    "t.stack(t.meshgrid(seq[0, 0, 0], x64[1]), 0)",  # a 0-d tensor: the forward's
    "t.stack(t.meshgrid(seq[0, 0], x64[1].requires_grad_()), 0).detach()",  # one in the graph: the forward's
]


def _run(call, mode):
    """The call's result (as an array) and the default generator's offset after it: ``mode`` "lane"
    (nothing attached), "hook" (a hook attached: the forward) or "observed" (the primitive observer)."""
    scope = _scope()
    t.manual_seed(5)
    watch, previous = WatchOps(), None
    if mode == "hook":
        dispatch.add_hook(watch)
    elif mode == "observed":
        previous = _tensor_module.set_primitive_observer(_Observed)
    try:
        out = eval(call, scope)  # noqa: S307 (the calls above)
    finally:
        if mode == "hook":
            dispatch.remove_hook(watch)
        elif mode == "observed":
            _tensor_module.set_primitive_observer(previous)
    offset = t.default_generator.get_state()
    if isinstance(out, t.Tensor):
        arr = out.numpy()
        return (str(out.dtype), out.shape, out.stride(), out.requires_grad, arr.tobytes(), offset), watch.seen
    return (out, offset), watch.seen


@pytest.mark.parametrize("call", CALLS)
def test_a_direct_call_gives_what_the_forward_gives(call):
    lane, _ = _run(call, "lane")
    general, seen = _run(call, "hook")
    assert seen  # the hook saw the op call: the lanes were closed
    assert lane == general
    assert lane == _run(call, "observed")[0]


def test_the_calls_cover_every_direct_lane():
    named = {name for name in DIRECT if any(re.search(rf"(?<!\w){name}\(", call) for call in CALLS)}
    assert named == set(DIRECT)


def test_a_direct_lane_is_only_for_an_op_that_records_nothing():
    with pytest.raises(ValueError, match="direct"):
        registry.op("direct_lane_probe", doc="x", grads={"x": lambda grad: grad}, node="X", direct=lambda x: x)(
            lambda x: x
        )


@pytest.mark.parametrize("name", ["gather", "scatter_add"])
def test_an_op_that_records_records_what_its_lane_gives(name):
    """gather's and scatter_add's kernel lanes (registry.py's ``lane=``) compute the output of an input
    that requires grad too: the entry records it (the forward does not run), with the node and gradients
    of the forward's path."""
    call = {"gather": "t.gather(w, 1, idx)", "scatter_add": "t.scatter_add(w, 1, idx, w * 3)"}[name]
    assert registry.get(name).differentiable and not registry.get(name).composite

    def run():
        scope = {**_scope(), "w": t.tensor([[0.5, 1.5, -1.0], [2.0, 3.0, -4.0]], requires_grad=True)}
        out = eval(call, scope)  # noqa: S307 (the calls above)
        (out * t.arange(out.numel()).reshape(out.shape)).sum().backward()
        return type(out.grad_fn).__name__, out.detach().numpy().tobytes(), scope["w"].grad.numpy().tobytes()

    assert not _forward_ran(name, call.replace("w", "x.requires_grad_()"))
    watch = WatchOps()
    dispatch.add_hook(watch)
    try:
        general = run()
    finally:
        dispatch.remove_hook(watch)
    lane = run()
    assert lane == general and lane[0] == f"{name.title().replace('_', '')}Backward0"


def test_in_place_draws_bump_the_version_and_return_self():
    x = t.zeros(4, 4)
    for call in (
        lambda: x.fill_diagonal_(2.0),
        lambda: x.normal_(),
        lambda: x.exponential_(),
        lambda: x.geometric_(0.5),
        lambda: x.cauchy_(),
        lambda: x.log_normal_(),
        lambda: x.random_(0, 4),
    ):
        before = x._version.value
        assert call() is x
        assert x._version.value == before + 1


def test_the_lanes_leave_grad_and_history_to_the_forward():
    leaf = t.zeros(3, requires_grad=True)
    for call in (leaf.normal_, leaf.exponential_, leaf.cauchy_, lambda: leaf.random_(0, 3)):
        with pytest.raises(AutogradError):
            call()
    made = t.zeros(2, 2, requires_grad=True)
    assert made.requires_grad and made.is_leaf
    with pytest.raises(AdcudaError):
        t.zeros(2, dtype=t.int64, requires_grad=True)
    y = leaf * 2
    z = F.rrelu(y, training=True)
    assert z.requires_grad and z.grad_fn is not None


def test_pooling_lanes_leave_grad_views_and_errors_to_the_forward():
    img = t.ones(1, 2, 4, 4, requires_grad=True)
    for out in (F.max_pool2d(img, 2), F.avg_pool2d(img, 2), F.adaptive_avg_pool2d(img, 2), F.max_pool2d(img[:], 2)):
        assert out.grad_fn is not None
    plain = t.ones(1, 2, 4, 4)
    with t.no_grad():
        assert F.avg_pool2d(img, 2).grad_fn is None
    assert _forward_ran("avg_pool2d", "F.avg_pool2d(img[:1], 2)")  # a view: the forward
    assert F.max_pool2d(plain, 2).shape == (1, 2, 2, 2)  # its plan made first: not the float call's below
    for op, call in (
        ("max_pool2d", lambda: F.max_pool2d(plain, 2.0)),  # (2.0 == 2 in a plan's key)
        ("avg_pool2d", lambda: F.avg_pool2d(plain, 5)),
        ("avg_pool2d", lambda: F.avg_pool2d(plain, 2, padding=2)),
        ("avg_pool2d", lambda: F.avg_pool2d(plain, 2, divisor_override=0)),
        ("adaptive_avg_pool2d", lambda: F.adaptive_avg_pool2d(plain, (2, 2, 2))),
        ("max_pool1d", lambda: F.max_pool1d(t.ones(2, 3, 0), 1)),
        ("adaptive_max_pool1d", lambda: F.adaptive_max_pool1d(plain, 2)),
    ):
        with pytest.raises(AdcudaError, match=op):
            call()


def test_errors_are_the_forwards_and_nothing_is_drawn_first():
    with pytest.raises(ShapeError):
        t.zeros(2, -1)
    with pytest.raises(ShapeError):
        t.tensor([[1], [2, 3]])
    with pytest.raises(AdcudaError):
        t.tensor([2**70])
    with pytest.raises(InvalidArgumentError):
        t.full((2,), 1e40, dtype=t.float16)
    t.manual_seed(0)
    state = t.default_generator.get_state()
    with pytest.raises(ValueError):
        t.bernoulli(t.tensor([0.5, 1.5]))
    with pytest.raises(ValueError):
        t.bernoulli(t.tensor([0.5, float("nan")]))
    with pytest.raises(ValueError):
        t.zeros(3).normal_(0.0, -1.0)
    with pytest.raises(ValueError):
        t.zeros(3).geometric_(1.5)
    assert t.default_generator.get_state() == state


def test_numpy_error_state_is_the_callers():
    with np.errstate(all="raise"):
        t.logspace(-45, -38, 4)  # float32 underflow in the cast
        t.zeros(3).log_normal_(80.0, 5.0)  # exp overflows to inf
        t.zeros(3).cauchy_()
        t.linspace(-1e20, 3e25, 9)
        assert np.geterr()["over"] == "raise"


def test_the_profiler_sees_each_call():
    with profile() as prof:
        t.zeros(2, 3)
        t.zeros(2, 3).normal_()
    names = [e.name for e in prof.events()]
    assert names.count("zeros") == 2 and "normal_" in names
    assert dispatch._plain


def _forward_ran(name, call):
    """Whether op ``name``'s forward ran during ``call`` (eval'd with nothing attached)."""
    code = registry.get(name).forward.__code__
    entered = []

    def watch(frame, event, arg):
        if event == "call" and frame.f_code is code:
            entered.append(True)

    scope = _scope()
    sys.setprofile(watch)
    try:
        eval(call, scope)  # noqa: S307 (the calls below)
    finally:
        sys.setprofile(None)
    return bool(entered)


@pytest.mark.parametrize("name", DIRECT)
def test_the_lane_takes_the_common_call(name):
    # the bench's call of each op (benchmarks/dispatch_ops.py) takes its lane, not the forward
    call = next(c for c in CALLS if re.search(rf"(?<!\w){name}\(", c))
    assert not _forward_ran(name, call)
    hooked = WatchOps()
    dispatch.add_hook(hooked)
    try:
        assert _forward_ran(name, call)
    finally:
        dispatch.remove_hook(hooked)


@pytest.mark.parametrize(
    "data",
    [[1, 2], [1.5, 2], [True, False], [True, 1], [[1, 2], [3, 4.5]], [], [[]], [(1, 2), (3, 4)], [1, np.float64(2)]],
)
def test_tensor_infers_plain_data_as_pytorch(data):
    import torch

    made, expected = t.tensor(data), torch.tensor(data)
    assert str(made.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
    assert made.tolist() == expected.tolist()


def test_tensor_owns_its_memory():
    array = np.zeros(3, np.float32)
    data = [1.0, 2.0]
    made, copied = t.tensor(data), t.tensor(array)
    array[0] = 5.0
    assert copied.tolist() == [0.0, 0.0, 0.0] and made.tolist() == data


@pytest.mark.parametrize(
    "call",
    [
        "t.gather(x, 1, far)",
        "t.gather(x, 1, -idx)",
        "t.gather(x, 0, idx)",
        "t.gather(x[:, :1], 0, idx)",
        "t.scatter_add(x, 1, far, y)",
        "t.scatter_add(x, 1, idx, y64)",
        "t.scatter_add(x, 1, idx, y[:, :2])",
        "t.scatter(x, 1, far, y)",
        "t.scatter(x, 1, -idx, y)",
        "t.scatter(x, 2, idx, y)",
        "t.scatter(x, 1, idx, y64)",
        "t.scatter(x[:1], 1, idx, y)",
        "t.scatter(x, 1, idx, y[:1])",
        "t.scatter_reduce(x, 1, far, y, 'amax')",
        "t.scatter_reduce(x, 1, idx, y, 'max')",
        "t.masked_scatter(x, mask, y[:1, :2])",
        "t.masked_scatter(x, mask.int(), y)",
        "t.masked_scatter(x, mask, y64)",
        "t.diagflat(x, 1.5)",
        "F.one_hot(far, 3)",
        "F.one_hot(-idx)",
        "F.one_hot(idx[:0])",
        "t.masked_fill(x, mask, 1e40)",
        "t.masked_fill(x, mask.int(), 1.0)",
        "t.zeros(3, 3).fill_diagonal_(1e40)",
        "t.zeros(3, 3).expand(2, 3, 3)[0].fill_diagonal_(1.0)",
        "t.unravel_index(idx, (2, -3))",
        "t.tril_indices(-1, 3)",
        "t.triu_indices(2, -2)",
        "x[2]",
        "x[:, far]",
        "x['a']",
        "t.index_select(x, 0, idx[0])",
        "t.take(x, idx * 3)",
        "t.put(x, idx[0] * 3, y[0])",
        "t.index_add(x, 1, idx[0], y[:, :2])",
        "t.index_copy(x, 0, idx[0], y)",
        "t.index_fill(x, 1, idx[0] + 5, 1.0)",
        "t.diag_embed(x, 0, 1, 1)",
        "t.diagonal_scatter(x, y[0])",
    ],
)
def test_index_lanes_leave_errors_to_the_forward(call):
    """A call the host loops refuse (an index out of range or negative, a dim, dtype or shape that does
    not fit, too short a source) raises the forward's named error, as with the lanes closed."""
    scope = {**_scope(), "y64": t.zeros(2, 3, dtype=t.float64)}
    with pytest.raises(AdcudaError) as lane:
        eval(call, scope)  # noqa: S307 (the calls above)
    hooked = WatchOps()
    dispatch.add_hook(hooked)
    try:
        with pytest.raises(AdcudaError) as general:
            eval(call, scope)  # noqa: S307
    finally:
        dispatch.remove_hook(hooked)
    assert type(lane.value) is type(general.value) and str(lane.value) == str(general.value)


@pytest.mark.parametrize(
    "call",
    [
        "t.gather(w, 1, idx)",
        "t.gather(w[:, 1:], 1, idx % 2)",
        "t.scatter_add(w, 1, idx, y)",
        "t.scatter_add(x, 1, idx, w)",
        "t.scatter(w, 1, idx, y)",
        "t.scatter(x, 1, idx, w)",
        "t.scatter(w * 1, 1, idx, y)",
        "t.scatter(w[1:], 1, idx[1:], y)",
        "t.scatter_reduce(w, 1, idx, y, 'amax')",
        "t.scatter_reduce(x, 1, idx, w, 'sum')",
        "t.masked_scatter(w, mask, y)",
        "t.masked_scatter(x, mask, w)",
        "t.diagflat(w)",
        "t.diagflat(w[0])",
        "t.masked_fill(w, mask, 2.0)",
        "w[1]",
        "w[idx % 2]",
        "w[mask]",
        "w[:, idx[0]]",
        "t.index_select(w, 1, idx[0])",
        "t.take(w, idx)",
        "t.put(w, idx[0], y[0])",
        "t.put(x, idx[0], w[0])",
        "t.index_add(w, 1, idx[0], y)",
        "t.index_copy(x, 1, idx[0], w)",
        "t.index_fill(w, 1, idx[0], 2.0)",
        "t.diag_embed(w)",
        "t.diagonal_scatter(w, y[0, :2])",
        "t.diagonal_scatter(x, w[0, :2])",
    ],
)
def test_index_lanes_leave_recording_to_the_forward(call):
    """An input that takes part in a graph (a leaf that requires grad, a computed value, a view of
    one) takes the forward's path, which records: the gradient is the one with the lanes closed."""

    def run(hook):
        scope = {**_scope(), "w": t.tensor([[0.5, 1.5, -1.0], [2.0, 3.0, -4.0]], requires_grad=True)}
        watch = WatchOps()
        if hook:
            dispatch.add_hook(watch)
        try:
            out = eval(call, scope)  # noqa: S307 (the calls above)
        finally:
            dispatch.remove_hook(watch)
        assert out.grad_fn is not None
        (out * t.arange(out.numel()).reshape(out.shape)).sum().backward()
        return scope["w"].grad.numpy().tobytes()

    assert run(False) == run(True)


def test_the_search_lanes_leave_a_refused_dtype_to_the_forwards_error():
    # (the entry's dtype check is the forward's: the lane takes no bool boundaries)
    with pytest.raises(UnsupportedDTypeError, match="searchsorted: not implemented for adcuda.bool"):
        t.searchsorted(t.tensor([False, True]), t.tensor([True]))
    with pytest.raises(UnsupportedDTypeError, match="bucketize: not implemented for adcuda.bool"):
        t.bucketize(t.tensor([True]), t.tensor([False, True]))
