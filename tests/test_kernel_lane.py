"""The kernel lanes of the joins (registry.py ``lane=``, dispatch.py ``_KERNEL_LANE_SOURCE``): cat,
stack and the stack family make their output with one function while no hook is attached. Each call
here runs with the lane open and closed (``general_path``): the outputs must agree in everything a
program sees (values, dtype, shape, strides, history and gradients, errors), the lane must be the path
taken, and the cases it declines must reach the general path's promotion and named errors."""

import sys

import numpy as np
import pytest
from helpers import general_path

import adcuda as t
from adcuda.ops import registry

LANE_OPS = sorted(o.name for o in registry.all_ops() if o.lane is not None)


def _tensors(*shapes, dtype=np.float32):
    start = 1.0
    out = []
    for shape in shapes:
        n = int(np.prod(shape))
        out.append(t.tensor(np.arange(start, start + n).reshape(shape).astype(dtype)))
        start += n
    return out


# op -> calls its lane takes: (the tensors' shapes, the call)
CASES = {
    "cat": [
        (((2, 3), (4, 3)), lambda ts: t.cat(ts)),
        (((2, 3), (2, 1)), lambda ts: t.cat(tuple(ts), -1)),
        (((3,), (0,)), lambda ts: t.cat(ts)),
        (((2, 3), (2, 3)), lambda ts: t.cat([ts[0], ts[1].t().t()], dim=1)),
        (((1, 2), (1, 2)), lambda ts: t.concat(ts, 1)),
        (((1, 2), (1, 2)), lambda ts: t.concatenate(ts, axis=0)),
    ],
    "stack": [
        (((3,), (3,), (3,)), lambda ts: t.stack(ts)),
        (((2, 2), (2, 2)), lambda ts: t.stack(ts, 0)),
        (((3,), (3,)), lambda ts: t.stack(ts, 1)),
        (((2, 3), (2, 3)), lambda ts: t.stack(ts, -2)),
        (((), ()), lambda ts: t.stack(ts)),
        (((2, 3), (2, 3)), lambda ts: t.stack([ts[0], ts[1].t().contiguous().t()], 2)),  # a transposed part
    ],
    "roll": [
        (((3, 4),), lambda ts: t.roll(ts[0], 1)),
        (((3, 4),), lambda ts: t.roll(ts[0], -5, 1)),
        (((3, 4),), lambda ts: t.roll(ts[0].t(), 2, 0)),  # a transposed input along a dim
        (((2, 3, 2),), lambda ts: t.roll(ts[0], 7, -2)),
    ],
    "block_diag": [
        (((2, 3), (1, 2)), lambda ts: t.block_diag(*ts)),
        (((2, 2), (0, 3), (1, 1)), lambda ts: t.block_diag(*ts)),
        (((2, 2), (3, 2)), lambda ts: t.block_diag(ts[0], ts[1].t())),
    ],
    "vstack": [
        (((3,), (3,)), lambda ts: t.vstack(ts)),
        (((2, 3), (1, 3)), lambda ts: t.vstack(ts)),
        (((3,), (3,)), lambda ts: t.row_stack(ts)),
    ],
    "hstack": [(((3,), (2,)), lambda ts: t.hstack(ts)), (((2, 3), (2, 1)), lambda ts: t.hstack(ts))],
    "dstack": [(((3,), (3,)), lambda ts: t.dstack(ts)), (((2, 2), (2, 2)), lambda ts: t.dstack(ts))],
    "column_stack": [(((3,), (3, 2)), lambda ts: t.column_stack(ts)), ((((), ())), lambda ts: t.column_stack(ts))],
    # the index family's (ops/index.py)
    "gather": [
        (((2, 3),), lambda ts: t.gather(ts[0], 1, t.tensor([[2, 0, 2], [1, 1, 0]]))),
        (((3, 2),), lambda ts: t.gather(ts[0].t(), -1, t.tensor([[2], [0]]))),
    ],
    "scatter_add": [
        (((2, 3), (2, 3)), lambda ts: t.scatter_add(ts[0], 1, t.tensor([[2, 0, 2], [1, 1, 0]]), ts[1])),
        (((2, 3), (3, 4)), lambda ts: t.scatter_add(ts[0], 0, t.tensor([[1, 1], [0, 1]]), ts[1])),
    ],
    "diag_embed": [(((2, 3),), lambda ts: t.diag_embed(ts[0])), (((4,),), lambda ts: t.diag_embed(ts[0], -1))],
    "diagonal_scatter": [
        (((3, 4), (3,)), lambda ts: t.diagonal_scatter(ts[0], ts[1])),
        (((3, 4), (2,)), lambda ts: t.diagonal_scatter(ts[0], ts[1], 2)),
    ],
    # the shuffles (ops/layout.py's ``_rearranged_lane``): a new contiguous array, never input's memory
    "channel_shuffle": [
        (((2, 6, 3, 2),), lambda ts: t.nn.functional.channel_shuffle(ts[0], 3)),
        (((2, 4, 3),), lambda ts: t.nn.functional.channel_shuffle(ts[0].transpose(0, 2).transpose(0, 2), 2)),
        (((1, 4, 1),), lambda ts: t.nn.functional.channel_shuffle(ts[0], 1)),  # moves no data: still a copy
    ],
    "pixel_shuffle": [
        (((2, 8, 2, 3),), lambda ts: t.nn.functional.pixel_shuffle(ts[0], 2)),
        (((4, 1, 1),), lambda ts: t.nn.functional.pixel_shuffle(ts[0], 2)),
    ],
    "pixel_unshuffle": [
        (((2, 1, 4, 6),), lambda ts: t.nn.functional.pixel_unshuffle(ts[0], 2)),
        (((1, 2, 3, 3),), lambda ts: t.nn.functional.pixel_unshuffle(ts[0], 1)),
    ],
}

# calls the lane declines: the general path promotes, or names the error
DECLINED = [
    (((2, 3), (4, 3)), lambda ts: t.cat([ts[0], ts[1].double()])),  # promoted
    (((2, 3), (0,)), lambda ts: t.cat(ts)),  # a legacy empty tensor, skipped
    (((2, 3), (2, 4)), lambda ts: t.cat(ts)),
    (((2, 3), (2, 3)), lambda ts: t.cat(ts, 2)),
    (((), ()), lambda ts: t.cat(ts)),
    (((2, 3),), lambda ts: t.cat([ts[0], 1.0])),
    ((), lambda ts: t.cat([])),
    (((3,), (3,)), lambda ts: t.stack(ts, 2)),  # no such dim
    (((3,), (4,)), lambda ts: t.stack(ts)),
    (((3,), (3, 1)), lambda ts: t.stack(ts)),
    (((3,), (3,)), lambda ts: t.stack([ts[0], ts[1].long()])),
    (((3,), (2,)), lambda ts: t.vstack(ts)),
    (((3,), (3,)), lambda ts: t.hstack([ts[0], ts[1].double()])),
    (((3,), (3,)), lambda ts: t.column_stack(iter(ts))),
    (((3,), (2, 2)), lambda ts: t.block_diag(*ts)),  # a vector: the forward's own
    (((2, 2), (1, 2)), lambda ts: t.block_diag(ts[0], ts[1].double())),  # promoted
    ((), lambda ts: t.block_diag()),
    (((3, 4),), lambda ts: t.roll(ts[0], 4, 1)),  # nothing moved: the forward's copy
    (((3, 4),), lambda ts: t.roll(ts[0], 12)),
    (((3, 4),), lambda ts: t.roll(ts[0].t(), 1)),  # flattened from another layout
    (((3, 4),), lambda ts: t.roll(ts[0], (1, 2), (0, 1))),
    (((3, 4),), lambda ts: t.roll(ts[0], 1, 2)),  # no such dim
    (((0, 4),), lambda ts: t.roll(ts[0], 1)),
    (((),), lambda ts: t.roll(ts[0], 1)),
    (((2, 5, 3),), lambda ts: t.nn.functional.channel_shuffle(ts[0], 2)),
    (((2, 6, 3),), lambda ts: t.nn.functional.channel_shuffle(ts[0], 2.0)),
    (((2, 6),), lambda ts: t.nn.functional.pixel_shuffle(ts[0], 2)),
    (((2, 3, 5, 4),), lambda ts: t.nn.functional.pixel_unshuffle(ts[0], 2)),
]


def _outcome(call, ts):
    try:
        return call(ts)
    except Exception as error:  # noqa: BLE001 (the error is what is compared)
        return error


def _same(lane, general):
    assert type(lane) is type(general)
    if isinstance(lane, Exception):
        assert str(lane) == str(general)
        return
    assert lane.shape == general.shape and lane.dtype == general.dtype and lane.stride() == general.stride()
    np.testing.assert_array_equal(lane.numpy(), general.numpy())


def test_every_op_with_a_kernel_lane_has_a_case():
    assert sorted(CASES) == LANE_OPS


_each_case = pytest.mark.parametrize(
    ("name", "shapes", "call"), [(name, shapes, call) for name, calls in CASES.items() for shapes, call in calls]
)


@_each_case
def test_the_lane_gives_what_the_general_path_gives(name, shapes, call):
    ts = _tensors(*shapes)
    lane = call(ts)
    general, seen = general_path(lambda: call(ts))
    _same(lane, general)
    assert seen[-1] == name
    assert lane.grad_fn is None and not lane.requires_grad


@_each_case
def test_the_lane_records_as_the_general_path(name, shapes, call):
    grads = []
    for run in (lambda f: f(), lambda f: general_path(f)[0]):
        ts = [x.double().requires_grad_() for x in _tensors(*shapes)]
        out = run(lambda ts=ts: call(ts))
        assert out.grad_fn is not None
        names = out.grad_fn.name()
        weights = t.tensor(np.linspace(-1.0, 2.0, out.numel()).reshape(tuple(out.shape)))
        (out * weights).sum().backward()
        grads.append((names, [x.grad.numpy().copy() for x in ts]))
    assert grads[0][0] == grads[1][0]
    for ours, theirs in zip(grads[0][1], grads[1][1]):
        np.testing.assert_array_equal(ours, theirs)
    # one input in the graph, the other a constant
    ts = _tensors(*shapes)
    ts[0].requires_grad_()
    assert call(ts).grad_fn is not None
    with t.no_grad():
        assert call(ts).grad_fn is None


@pytest.mark.parametrize(("shapes", "call"), DECLINED)
def test_declined_calls_take_the_general_path(shapes, call):
    ts = _tensors(*shapes)
    _same(_outcome(call, ts), general_path(lambda: _outcome(call, ts))[0])


def test_the_lane_is_taken_and_leaves_the_numpy_error_state_as_it_was():
    ts = _tensors((2, 3), (2, 3))
    forward = registry.get("cat").forward.__code__
    codes = set()
    with np.errstate(all="raise"):
        sys.setprofile(lambda frame, event, arg: codes.add(frame.f_code) if event == "call" else None)
        try:
            t.cat(ts)
        finally:
            sys.setprofile(None)
        assert np.geterr()["over"] == "raise"
    assert forward not in codes


@pytest.mark.parametrize("name", ["channel_shuffle", "pixel_shuffle", "pixel_unshuffle"])
def test_a_shuffle_lane_never_returns_its_input_s_memory(name):
    for shapes, call in CASES[name]:
        ts = _tensors(*shapes)
        out = call(ts)
        assert not np.shares_memory(out.numpy(), ts[0].numpy())
        assert out.is_contiguous()
