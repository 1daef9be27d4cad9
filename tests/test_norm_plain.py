"""The norms' plain case (ops/norm.py ``_plain``): a call on CPU float32/float64 tensors that take no part
in a graph, with no hook attached, calls the primitive straight away; it gives what the op's general
path gives, bit for bit, and every other call (a hook, an input or a parameter that takes part, a
parameter of another dtype or shape) still takes the path that checks, promotes and records."""

import importlib

import numpy as np
import pytest
from helpers import general_path

import adcuda
import adcuda.nn.functional as F
from adcuda.errors import AdcudaError

CALLS = {
    "layer_norm": lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b),
    "layer_norm, an int shape": lambda x, w, b: F.layer_norm(x, x.shape[-1], w, b, eps=1e-3),
    "group_norm": lambda x, w, b: F.group_norm(x, 2, w, b),
    "instance_norm": lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
    "rms_norm": lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w),
    "batch_norm": lambda x, w, b: F.batch_norm(x, adcuda.zeros(4), adcuda.ones(4), w, b, training=True),
}
_SIZE = {"layer_norm": 6, "layer_norm, an int shape": 6, "rms_norm": 6}  # the others: per channel (4)


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_plain_case_gives_what_the_general_path_gives(name, dtype):
    rng = np.random.default_rng(5)
    x = adcuda.tensor(rng.standard_normal((2, 4, 6)), dtype=dtype)
    size = _SIZE.get(name, 4)
    w, b = (adcuda.tensor(rng.standard_normal(size), dtype=dtype) for _ in range(2))
    for args in ((x, w, b), (x, None, None), (x.transpose(0, 1).contiguous().transpose(0, 1), w, None)):
        fast = CALLS[name](*args)
        general, seen = general_path(lambda args=args: CALLS[name](*args))
        assert seen  # the hook closed the plain case: the op's path ran
        assert fast.dtype == general.dtype == dtype and fast.shape == general.shape
        np.testing.assert_array_equal(fast.numpy(), general.numpy(), strict=True)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_call_that_takes_part_records(name):
    size = _SIZE.get(name, 4)
    x = adcuda.ones(2, 4, 6) + adcuda.arange(6.0)
    for which in range(2 if name == "rms_norm" else 3):  # (rms_norm has no bias)
        args = [x, adcuda.ones(size), adcuda.zeros(size)]
        args[which] = args[which].clone().requires_grad_()
        out = CALLS[name](*args)
        assert out.grad_fn is not None
        out.sum().backward()
        assert args[which].grad is not None
    view = adcuda.ones(size, requires_grad=True)[:]  # a view with a history takes part too
    assert CALLS[name](x, view, None).grad_fn is not None


def test_other_dtypes_and_shapes_take_the_path():
    x = adcuda.ones(2, 4, 6)
    wide = adcuda.ones(6, dtype=adcuda.float64)  # a parameter of another dtype: the path's rule
    assert F.layer_norm(x, (6,), wide).dtype == general_path(lambda: F.layer_norm(x, (6,), wide))[0].dtype
    with pytest.raises(AdcudaError, match="layer_norm"):
        F.layer_norm(x, (6,), adcuda.ones(5))
    with pytest.raises(AdcudaError, match="layer_norm"):
        F.layer_norm(x, (5,))
    with pytest.raises(AdcudaError, match="group_norm"):
        F.group_norm(x, 3)
    with pytest.raises(AdcudaError, match="group_norm"):
        F.group_norm(x, 2, adcuda.ones(3))
    assert F.layer_norm(adcuda.ones(0, 6), (6,)).shape == (0, 6)
    with adcuda.autocast("cpu", dtype=adcuda.float16):
        assert F.layer_norm(x, (6,)).dtype == adcuda.float32  # autocast's float32 policy: its hook


@pytest.mark.parametrize("dtype", [adcuda.float32, adcuda.float64])
def test_batch_norm_updates_the_running_statistics_as_the_general_path(dtype):
    x = adcuda.tensor(np.random.default_rng(7).standard_normal((3, 4, 5)), dtype=dtype)

    def run():
        mean, var = adcuda.zeros(4, dtype=dtype), adcuda.ones(4, dtype=dtype)
        out = F.batch_norm(x, mean, var, training=True, momentum=0.25)
        return out.numpy(), mean.numpy(), var.numpy(), mean._version.value, var._version.value

    fast = run()
    general, _ = general_path(run)
    for f, g in zip(fast[:3], general[:3]):
        np.testing.assert_array_equal(f, g, strict=True)
    assert fast[3:] == general[3:]
    with pytest.raises(AdcudaError, match="batch_norm"):
        F.batch_norm(adcuda.ones(1, 4), adcuda.zeros(4), adcuda.ones(4), training=True)  # one value per channel
    with pytest.raises(AdcudaError, match="instance_norm"):
        F.instance_norm(adcuda.ones(2, 4, 1))


def test_the_running_statistics_host_update_is_the_ops(monkeypatch):
    """The backend's one-call update (kernels/host/norm_running.cpp) against the ops' (``_RUNNING`` None),
    bit for bit, for either statistic alone, a strided running tensor (a view: written through to its
    base) and a running tensor of another dtype (the ops' path: its cast)."""
    cpu_norm = importlib.import_module("adcuda.backends.cpu.norm")
    x = adcuda.tensor(np.random.default_rng(8).standard_normal((3, 4, 5)), dtype=adcuda.float32)

    def run():
        rng = np.random.default_rng(9)
        strided = adcuda.tensor(rng.uniform(1, 2, 8), dtype=adcuda.float32)
        cases = [
            (adcuda.tensor(rng.standard_normal(4), dtype=adcuda.float32), None),
            (None, adcuda.tensor(rng.uniform(1, 2, 4), dtype=adcuda.float32)),
            (adcuda.zeros(4, dtype=adcuda.float64), strided[::2]),
        ]
        for mean, var in cases:
            F.batch_norm(x, mean, var, training=True, momentum=0.3)
        return [None if t is None else (t.numpy(), t._version.value) for case in cases for t in case] + [
            strided.numpy()
        ]

    host = run()
    calls = []
    monkeypatch.setattr(cpu_norm, "_RUNNING", lambda *args: calls.append(args))  # the host update: noted only
    run()
    assert len(calls) == 2  # the first two cases; the third (a strided and a float64 tensor) the ops'
    monkeypatch.setattr(cpu_norm, "_RUNNING", None)
    for got, want in zip(host, run()):
        if want is None:
            assert got is None
        elif isinstance(want, tuple):
            np.testing.assert_array_equal(got[0], want[0], strict=True)
            assert got[1] == want[1]
        else:
            np.testing.assert_array_equal(got, want, strict=True)
