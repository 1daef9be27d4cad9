"""Seeded CPU draws stay the numbers they were, and the host module's draws (kernels/host/random.cpp)
are the NumPy Generator's, bit for bit.

``RECORDED`` (random_streams_recorded.json) holds what each call gave after ``manual_seed(0)`` at
898fccd, when every CPU draw went through NumPy's Philox Generator: a user's seeded program must keep
drawing the same numbers."""

import importlib
import json
from pathlib import Path

import numpy as np
import pytest

import adcuda as t
from adcuda.backends.cpu import random as cpu_random

F = t.nn.functional

# each call, evaluated after manual_seed(0): (its result's dtype, its bytes in hex)
RECORDED = json.loads((Path(__file__).parent / "random_streams_recorded.json").read_text())["calls"]
# the names the calls read: fresh tensors to draw into
NAMES = {
    "t": t,
    "F": F,
    "x32": lambda: t.zeros(2, 3),
    "x64": lambda: t.zeros(2, 3, dtype=t.float64),
    "x16": lambda: t.zeros(5, dtype=t.float16),
}


@pytest.mark.parametrize("call", sorted(RECORDED))
def test_seeded_draws_are_the_recorded_numbers(call):
    t.manual_seed(0)
    out = eval(call, dict(NAMES)).numpy()  # noqa: S307 (the calls above, not outside input)
    dtype, data = RECORDED[call]
    assert [str(out.dtype), out.tobytes().hex()] == [dtype, data]


def test_the_host_draws_are_in_use():
    # the probe at import found them equal to the Generator's (a build with _C and NumPy's exports)
    assert cpu_random._NATIVE is not None


KEYS = [(0, 0), (3, 2**64 - 1), (2**64 - 1, 2**64 - 3), (0x9E3779B97F4A7C15, 12345), (7, 2**32 - 1)]
SHAPES = [(0,), (1,), (5,), (3, 7), (2, 3, 4)]


@pytest.mark.parametrize("seed, offset", KEYS)
@pytest.mark.parametrize("shape", SHAPES)
def test_host_draws_equal_the_generators(seed, offset, shape):
    native = cpu_random._NATIVE
    if native is None:
        pytest.skip("no host draws in this build")
    rng = cpu_random._rng
    pairs = [
        (native.host_random_uniform(seed, offset, shape, False), rng(seed, offset).random(shape)),
        (native.host_random_normal(seed, offset, shape, False), rng(seed, offset).standard_normal(shape)),
        (
            native.host_random_uniform(seed, offset, shape, True),
            cpu_random._rounded_below_one(rng(seed, offset).random(shape)),
        ),
        (
            native.host_random_normal(seed, offset, shape, True),
            rng(seed, offset).standard_normal(shape).astype(np.float32),
        ),
        (native.host_random_below(0.3, seed, offset, shape), rng(seed, offset).random(shape) < 0.3),
    ]
    for low, high in [
        (0, 1),
        (0, 10),
        (-(2**31), 2**31),
        (0, 2**32),
        (3, 2**32 + 3),
        (-5, 2**40),
        (-(2**63), 2**63 - 1),
    ]:
        pairs.append(
            (
                native.host_random_integers(low, high, seed, offset, shape),
                rng(seed, offset).integers(low, high, shape, dtype=np.int64),
            )
        )
    for fast, slow in pairs:
        assert fast.dtype == slow.dtype and fast.shape == slow.shape
        assert fast.tobytes() == slow.tobytes()


def test_a_large_draw_releases_the_gil_and_still_matches():
    native = cpu_random._NATIVE
    if native is None:
        pytest.skip("no host draws in this build")
    shape = (1 << 16,)
    fast = native.host_random_normal(11, 5, shape, False)
    assert fast.tobytes() == cpu_random._rng(11, 5).standard_normal(shape).tobytes()


@pytest.mark.parametrize("seed, offset", KEYS)
def test_branch_free_normals_equal_numpys_through_every_strip_and_the_tail(seed, offset):
    # the host module's ziggurat computes the common case without NumPy's function and hands it the
    # rest: 2**15 values meet every strip's edge and the tail beyond 3.65 (about 50 of them per draw)
    native = cpu_random._NATIVE
    if native is None:
        pytest.skip("no host draws in this build")
    assert native.host_random_branch_free_normals()  # (found equal at import, with this NumPy)
    shape = (1 << 15,)
    slow = cpu_random._rng(seed, offset).standard_normal(shape)
    assert (np.abs(slow) > 3.65).any()
    assert native.host_random_normal(seed, offset, shape, False).tobytes() == slow.tobytes()
    assert native.host_random_normal(seed, offset, shape, True).tobytes() == slow.astype(np.float32).tobytes()


def test_host_draws_refuse_bad_arguments():
    native = cpu_random._NATIVE
    if native is None:
        pytest.skip("no host draws in this build")
    with pytest.raises(ValueError):
        native.host_random_uniform(0, 0, (2, -1), False)
    with pytest.raises(ValueError):
        native.host_random_integers(5, 5, 0, 0, (2,))


class _Observed:
    """A stand-in backend that passes every primitive through (as the profiler's and graph capture's
    do): with it installed, in-place draws take the primitives' path instead of the host fill."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)


def _draws_both_ways(make, call):
    tensor_module = importlib.import_module("adcuda.tensor")  # (adcuda.tensor is the factory function)
    t.manual_seed(3)
    fast = call(make()).numpy().copy()
    previous = tensor_module.set_primitive_observer(_Observed)
    try:
        t.manual_seed(3)
        slow = call(make()).numpy().copy()
    finally:
        tensor_module.set_primitive_observer(previous)
    return fast, slow


@pytest.mark.parametrize("dtype", [t.float32, t.float64, t.float16])
@pytest.mark.parametrize(
    "call",
    [
        lambda x: x.uniform_(),
        lambda x: x.uniform_(-3.5, 0.25),
        lambda x: x.normal_(),
        lambda x: x.normal_(-1.0, 0.1),
        lambda x: x.bernoulli_(0.3),
        lambda x: x.bernoulli_(1),
        lambda x: x.exponential_(3),
        lambda x: x.cauchy_(1.0, 2.0),
        lambda x: x.log_normal_(),
        lambda x: x.geometric_(0.2),
        lambda x: x.random_(0, 50),
    ],
)
def test_in_place_draws_write_the_primitives_numbers(dtype, call):
    # the host fill straight into the tensor's memory against the primitives' path
    fast, slow = _draws_both_ways(lambda: t.zeros(3, 5, dtype=dtype), call)
    assert fast.dtype == slow.dtype and fast.tobytes() == slow.tobytes()


def test_in_place_draws_into_views_and_strided_tensors():
    for make in (lambda: t.zeros(4, 6)[:, 1:4], lambda: t.zeros(6, 4).t(), lambda: t.zeros(0, 3)):
        fast, slow = _draws_both_ways(make, lambda x: x.normal_(0.5, 2.0))
        assert fast.tobytes() == slow.tobytes()
    base = t.zeros(4, 6)
    view = base[1:3]
    view.uniform_()
    assert (base[1:3] == view).all() and (base[0] == 0).all() and (base[3] == 0).all()
    assert view._version.value == base._version.value == 1


def test_in_place_draws_bump_the_version_and_keep_history_rules():
    x = t.zeros(5)
    x.normal_()
    x.uniform_()
    assert x._version.value == 2
    leaf = t.zeros(3, requires_grad=True)
    with pytest.raises(t.errors.AutogradError):
        leaf.normal_()
    y = leaf * 2
    y.uniform_()  # a value with history: it becomes a constant, as in PyTorch
    assert y.requires_grad and y.grad_fn is not None
