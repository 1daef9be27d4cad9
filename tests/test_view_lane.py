"""The view lane (adcuda/ops/dispatch.py, ``_VIEW_LANE_SOURCE``): a view op that declares its array
function (``view=`` in ops/layout.py) makes its output with it directly while no hook is attached. Each
such op is called here with the lane open and with it closed (a hook attached that does nothing, so
the general path runs): the views must agree in everything a program can see of them (values, shape,
strides, shared memory, base, version counter, history and gradients, errors), and the lane must be
the path taken."""

import sys

import numpy as np
import pytest

import adcuda as torch
from adcuda.ops import dispatch, registry
from adcuda.tensor import replay_view

# one call per op with an array function: (input shape, the call); a new such op needs a case here
CASES = {
    "view": [((4, 6), lambda x: x.view(6, 4)), ((4, 6), lambda x: x.view(-1)), ((4, 6), lambda x: x.view((2, -1, 3)))],
    "reshape": [((4, 6), lambda x: torch.reshape(x, (3, 8))), ((2, 3, 4), lambda x: x.reshape(-1, 4))],
    "view_as": [((4, 6), lambda x: x.view_as(torch.ones(24)))],
    "reshape_as": [((4, 6), lambda x: x.reshape_as(torch.ones(2, 12)))],
    "flatten": [
        ((2, 3, 4), lambda x: x.flatten()),
        ((2, 3, 4), lambda x: x.flatten(1)),
        ((2, 3), lambda x: x.flatten(1, 1)),
        ((), lambda x: x.flatten()),
        ((5,), lambda x: x.flatten()),
        ((2, 3), lambda x: x.flatten(0, -1)),
    ],
    "unflatten": [((2, 12), lambda x: x.unflatten(1, (3, 4))), ((2, 12), lambda x: x.unflatten(-1, [2, 2, 3]))],
    "squeeze": [
        ((1, 3, 1), lambda x: x.squeeze()),
        ((1, 3, 1), lambda x: x.squeeze(-1)),
        ((2, 3), lambda x: x.squeeze(0)),
    ],
    "unsqueeze": [
        ((2, 3), lambda x: x.unsqueeze(0)),
        ((2, 3), lambda x: x.unsqueeze(-1)),
        ((), lambda x: x.unsqueeze(0)),
    ],
    "ravel": [((2, 3, 4), lambda x: x.ravel())],
    "permute": [((2, 3, 4), lambda x: x.permute(2, 0, 1)), ((2, 3), lambda x: x.permute((1, 0)))],
    "transpose": [((2, 3, 4), lambda x: torch.transpose(x, 0, -1)), ((2, 3), lambda x: x.transpose(1, 1))],
    "swapaxes": [((2, 3), lambda x: x.swapaxes(0, 1))],
    "t": [((2, 3), lambda x: x.t()), ((3,), lambda x: x.t())],
    "T": [((2, 3, 4), lambda x: x.T)],
    "mT": [((5, 2, 3), lambda x: x.mT)],
    "movedim": [((2, 3, 4), lambda x: x.movedim(0, -1)), ((2, 3, 4), lambda x: x.movedim(-1, 1))],
    "expand": [
        ((3, 1), lambda x: x.expand(2, 3, 4)),
        ((3, 1), lambda x: x.expand(-1, 5)),
        ((3, 1), lambda x: x.expand(3, 1)),
    ],
    "expand_as": [((1, 4), lambda x: x.expand_as(torch.ones(3, 4)))],
    "broadcast_to": [((4,), lambda x: torch.broadcast_to(x, (2, 4)))],
    "expand_along": [
        ((4,), lambda x: torch.meshgrid(x, torch.ones(3), indexing="ij")[0]),
        ((4,), lambda x: torch.meshgrid(torch.ones(3), x, indexing="xy")[1]),
    ],
    "slice_key": [
        ((4, 6), lambda x: x[1:3]),
        ((4, 6), lambda x: x[:, ::2]),
        ((4, 6), lambda x: x[2]),
        ((4, 6), lambda x: x[None, 1, 2:]),
        ((4, 6), lambda x: x.chunk(2, 1)[1]),
        ((4, 6), lambda x: x.unbind(0)[3]),
    ],
    "as_strided": [
        ((4, 6), lambda x: torch.as_strided(x, (3, 3), (6, 1), 2)),
        ((4, 6), lambda x: x.as_strided((2, 2), (1, 6))),
        ((4, 6), lambda x: x.as_strided([2, 2], [1, 6], 3)),
        ((4, 6), lambda x: x[1:].as_strided((2,), (7,))),
        ((4, 6), lambda x: x.as_strided((4, 6), (6, 1), 0)),
    ],
}

# calls the array function declines (the general path makes the view, or names the error)
DECLINED = [
    ((4, 6), lambda x: x.t().reshape(24)),  # strides that allow no view: a copy
    ((4, 6), lambda x: x.view(6, -2)),  # NumPy takes any negative size; PyTorch only -1
    ((4, 6), lambda x: x.view(5, 5)),
    ((4, 6), lambda x: x.view(-1, -1)),
    ((4, 6), lambda x: x.transpose(0, 2)),
    ((4, 6), lambda x: x.permute(0, 0)),
    ((4, 6), lambda x: x.expand(5, 6)),
    ((4, 6), lambda x: x.unflatten(1, (4, 2))),
    ((4, 6), lambda x: x.flatten(1, 0)),
    ((2, 3, 4), lambda x: x.t()),
    ((4,), lambda x: x.mT),
    ((4, 6), lambda x: x.squeeze(2)),
    ((4, 6), lambda x: x[5]),
    ((4, 6), lambda x: x[:, 1, 2]),
    # a tuple equal to one just seen (kept by the array function), but not of ints
    ((4, 6), lambda x: (x.as_strided((3, 3), (6, 1), 2), x.as_strided((3.0, 3), (6, 1), 2))[1]),
    ((4, 6), lambda x: x.as_strided((3, 3), (6, 1), 2.0)),
    ((4, 6), lambda x: x.as_strided((5, 5), (6, 1))),  # past the memory's end
    ((4, 6), lambda x: x.as_strided((2, 2), (-1, 1), 4)),
    ((4, 6), lambda x: x.as_strided((2, 2), (1,))),
    ((4, 6), lambda x: x.as_strided((0, 2), (1, 1))),
    ((4, 6), lambda x: x.expand(2, 5, 6)),
]


def _lane_ops():
    return sorted(op.name for op in registry.all_ops() if callable(op.view))


def test_every_op_with_an_array_function_has_a_case():
    assert _lane_ops() == sorted(CASES)


class _Closed:
    """A hook with nothing to do: attached, it closes every lane (``dispatch._plain``)."""


def _general_path(fn, *args):
    hook = _Closed()
    dispatch.add_hook(hook)
    try:
        return fn(*args)
    finally:
        dispatch.remove_hook(hook)


def _source(shape):
    return torch.tensor(np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape).astype(np.float32))


def _outcome(call, x):
    try:
        return call(x)
    except Exception as error:  # noqa: BLE001 (the error is what is compared)
        return error


def _same_view(lane, general, x_lane, x_general):
    assert lane.shape == general.shape and lane.stride() == general.stride() and lane.dtype == general.dtype
    assert lane.is_contiguous() == general.is_contiguous()
    np.testing.assert_array_equal(lane.numpy(), general.numpy())
    assert (lane._data.__array_interface__["data"][0] - x_lane._data.__array_interface__["data"][0]) == (
        general._data.__array_interface__["data"][0] - x_general._data.__array_interface__["data"][0]
    )
    assert (lane._base is x_lane) == (general._base is x_general)
    assert (lane is x_lane) == (general is x_general)
    assert lane.storage_offset() == general.storage_offset()


def _all_cases():
    return [(name, i, shape, call) for name, calls in CASES.items() for i, (shape, call) in enumerate(calls)]


_each_case = pytest.mark.parametrize(
    ("name", "i", "shape", "call"), _all_cases(), ids=lambda v: str(v) if isinstance(v, (str, int)) else ""
)


@_each_case
def test_the_lane_makes_the_view_the_general_path_makes(name, i, shape, call):
    x_lane, x_general = _source(shape), _source(shape)
    lane, general = call(x_lane), _general_path(call, x_general)
    _same_view(lane, general, x_lane, x_general)
    if lane is x_lane:
        return
    # the version counter is shared with the base, both ways
    before = x_lane._version.value
    if lane._data.flags.writeable:
        lane.add_(1.0)
        assert x_lane._version.value == before + 1
        assert float(x_lane.sum()) == float(_source(shape).sum()) + lane.numel()
    x_lane.mul_(2.0)
    assert lane._version is x_lane._version


@_each_case
def test_the_lane_records_as_the_general_path(name, i, shape, call):
    x_lane, x_general = _source(shape).requires_grad_(), _source(shape).requires_grad_()
    lane, general = call(x_lane), _general_path(call, x_general)
    if general is x_general:
        assert lane is x_lane
        return
    assert lane.grad_fn.name() == general.grad_fn.name()
    assert lane._view_version == general._view_version == 0
    weights = torch.tensor(np.linspace(-1.0, 2.0, lane.numel()).reshape(tuple(lane.shape)).astype(np.float32))
    (lane * weights).sum().backward()
    (general * weights).sum().backward()
    np.testing.assert_array_equal(x_lane.grad.numpy(), x_general.grad.numpy())
    # a view of an intermediate result, written in place, gives its base a new history (its rebuild)
    y_lane, y_general = x_lane * 1.0, x_general * 1.0
    v_lane, v_general = call(y_lane), _general_path(call, y_general)
    if v_lane._data.flags.writeable:
        v_lane.mul_(3.0)
        v_general.mul_(3.0)
        assert y_lane.grad_fn.name() == y_general.grad_fn.name()
        x_lane.grad = x_general.grad = None
        y_lane.sum().backward()
        y_general.sum().backward()
        np.testing.assert_array_equal(x_lane.grad.numpy(), x_general.grad.numpy())


def test_a_view_made_without_grad_is_marked_so():
    x = _source((2, 3)).requires_grad_()
    y = x * 1.0
    with torch.no_grad():
        v = y.view(6)
    assert v._view_version is None and v._base is y
    with pytest.raises(torch.AutogradError, match="no_grad mode"):
        v.mul_(2.0)


def test_a_view_of_a_view_links_to_the_root():
    x = _source((2, 3, 4))
    v = x.transpose(0, 1)
    w = v.permute(2, 0, 1)
    u = w.expand(2, 4, 3, 2)
    assert v._base is x and w._base is x and u._base is x
    x.add_(1.0)
    assert w._version is x._version and u._version is x._version
    g = _general_path(lambda t: t.transpose(0, 1).permute(2, 0, 1).expand(2, 4, 3, 2), x)
    assert u.stride() == g.stride()
    np.testing.assert_array_equal(u.numpy(), g.numpy())


@pytest.mark.parametrize(("shape", "call"), DECLINED)
def test_declined_calls_take_the_general_path(shape, call):
    lane, general = _outcome(call, _source(shape)), _general_path(_outcome, call, _source(shape))
    assert type(lane) is type(general)
    if isinstance(lane, Exception):
        assert str(lane) == str(general)
    else:
        assert lane.shape == general.shape and lane.stride() == general.stride()
        np.testing.assert_array_equal(lane.numpy(), general.numpy())


def _called_codes(fn):
    """The code objects of the Python functions ``fn()`` calls."""
    codes = set()
    sys.setprofile(lambda frame, event, arg: codes.add(frame.f_code) if event == "call" else None)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return codes


@_each_case
def test_the_lane_is_the_path_taken(name, i, shape, call):
    op = registry.get(name)
    x = _source(shape)
    lane = _called_codes(lambda: call(x))
    assert op.view.__code__ in lane and op.forward.__code__ not in lane
    general = _called_codes(lambda: _general_path(call, x))
    assert op.forward.__code__ in general


@pytest.mark.parametrize(
    "pieces",
    [lambda x: x.unbind(1), lambda x: x.split(2), lambda x: x.chunk(3, 1), lambda x: torch.tensor_split(x, 3)],
)
@pytest.mark.parametrize("of_a_view", [False, True])
@pytest.mark.parametrize("grad_mode", [True, False])
def test_pieces_made_in_one_call_link_as_the_entry_links_each(pieces, of_a_view, grad_mode):
    # slice_key's ``views`` (the pieces of unbind, split, chunk in one call) against its entry per piece
    outs = []
    for run in (lambda f: f(), lambda f: _general_path(f)):
        x = _source((4, 6))
        base = x.t().t() if of_a_view else x
        x.add_(1.0)  # (a version counter that has counted)
        with torch.set_grad_enabled(grad_mode):
            made = run(lambda base=base: pieces(base))
        outs.append((x, base, made))
    (x, base, lane), (x_general, base_general, general) = outs
    assert len(lane) == len(general)
    for a, b in zip(lane, general):
        _same_view(a, b, base, base_general)
        assert (a._base is x) == (b._base is x_general) and (a._base is base) == (b._base is base_general)
        assert a._view_version == b._view_version and a._version.value == b._version.value
        assert a._version is x._version
        np.testing.assert_array_equal(replay_view(a._view_fn, a._base).numpy(), a.numpy())
    x.mul_(2.0)
    assert all(a._version.value == x._version.value for a in lane)
