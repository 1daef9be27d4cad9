"""The multi-tensor ops of adcuda/ops/optim.py (``adcuda._foreach_*``, ``_fused_*``, ``_amp_*``): each
against the same update written with per-tensor public ops (or PyTorch's fused op where PyTorch has one
on the CPU), the version bumps they own, and their errors. The ``cuda`` cases run every op on the GPU
(the emulator without one) against the CPU."""

import math

import numpy as np
import pytest
from helpers import DEVICES, fused_adam_step

import adcuda
from adcuda import dtypes as dt
from adcuda.errors import AutogradError, DeviceError, DTypeError, ResultTypeError, ShapeError

SHAPES = [(1,), (7,), (3, 5), (1023,), (0,), (2, 1, 4)]


def rng(seed):
    return np.random.default_rng(seed)


def tensors(seed, device="cpu", dtype=dt.float32, shapes=SHAPES, scale=1.0):
    g = rng(seed)
    return [adcuda.tensor(g.standard_normal(s).astype(np.float32) * scale, dtype=dtype, device=device) for s in shapes]


def host(ts):
    return [np.array(t.cpu().float().numpy()) for t in ts]  # a copy: a CPU tensor's numpy() is a view


def versions(ts):
    return adcuda._foreach_version(ts)


# ---------------------------------------------------------------------------------------------
# elementwise
@pytest.mark.parametrize("device", DEVICES)
def test_foreach_add_mul_clamp_zero_copy_match_per_tensor_ops(device):
    cases = {
        "add number": (lambda ts: adcuda._foreach_add_(ts, 1.5), lambda t: t.add_(1.5)),
        "add list with alpha": (lambda ts: adcuda._foreach_add_(ts, tensors(2, device), alpha=-0.5), None),
        "mul number": (lambda ts: adcuda._foreach_mul_(ts, 0.25), lambda t: t.mul_(0.25)),
        "mul 0-d tensor": (
            lambda ts: adcuda._foreach_mul_(ts, adcuda.tensor(3.0, device=device)),
            lambda t: t.mul_(adcuda.tensor(3.0, device=device)),
        ),
        "clamp": (lambda ts: adcuda._foreach_clamp_(ts, -0.5, 0.25), lambda t: t.clamp_(-0.5, 0.25)),
        "clamp max only": (lambda ts: adcuda._foreach_clamp_(ts, max=0.0), lambda t: t.clamp_(max=0.0)),
        "zero": (lambda ts: adcuda._foreach_zero_(ts), lambda t: t.zero_()),
        "copy": (lambda ts: adcuda._foreach_copy_(ts, tensors(3, device)), None),
    }
    others = {"add list with alpha": host(tensors(2)), "copy": host(tensors(3))}
    for name, (fused, single) in cases.items():
        ts = tensors(1, device)
        before = host(ts)
        versions_before = versions(ts)
        fused(ts)
        if single is not None:
            expected = tensors(1, device)
            for t in expected:
                single(t)
            expected = host(expected)
        elif name == "copy":
            expected = others[name]
        else:
            expected = [b - 0.5 * o for b, o in zip(before, others[name])]
        for got, want in zip(host(ts), expected):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, err_msg=name)
        assert versions(ts) == [v + 1 for v in versions_before], name


def test_foreach_ops_write_in_each_tensors_own_dtype():
    half = tensors(4, dtype=dt.float16)
    expected = [a * np.float32(0.1) for a in host(half)]
    adcuda._foreach_mul_(half, adcuda.tensor(0.1))  # a float32 0-d factor, as clip_grad_norm_'s
    for t, want in zip(half, expected):
        assert t.dtype is dt.float16
        np.testing.assert_array_equal(t.numpy(), want.astype(np.float16))
    ints = [adcuda.arange(4)]
    with pytest.raises(ResultTypeError, match="_foreach_add_: result type adcuda.float32 can't be cast"):
        adcuda._foreach_add_(ints, 0.5)
    adcuda._foreach_add_(ints, 2)
    assert ints[0].tolist() == [2, 3, 4, 5]


def test_foreach_copy_broadcasts_and_casts():
    dst = [adcuda.zeros(2, 3, dtype=dt.float16), adcuda.zeros(4)]
    adcuda._foreach_copy_(dst, [adcuda.tensor([1.0, 2.0, 3.0]), adcuda.tensor(7, dtype=dt.int64)])
    assert dst[0].tolist() == [[1, 2, 3], [1, 2, 3]] and dst[0].dtype is dt.float16
    assert dst[1].tolist() == [7, 7, 7, 7]
    with pytest.raises(ShapeError, match="_foreach_copy_: src of shape \\(3,\\) cannot be broadcast to \\(4,\\)"):
        adcuda._foreach_copy_([adcuda.zeros(4)], [adcuda.ones(3)])


def test_an_overwritten_saved_value_is_caught_by_backward():
    """The version bump is what makes a stepped-over saved value an error, as with any in-place op."""
    w = adcuda.ones(3, requires_grad=True)
    x = adcuda.ones(3, requires_grad=True)
    with adcuda.no_grad():
        buffer = adcuda.ones(3)
    y = (x * buffer).sum()  # saves buffer for x's gradient
    (w * 2).sum().backward()
    with adcuda.no_grad():
        adcuda._foreach_mul_([buffer], 0.5)
    with pytest.raises(AutogradError, match="modified by an inplace operation"):
        y.backward()


def test_errors_name_the_op_and_what_is_wrong():
    a, b = adcuda.zeros(3), adcuda.zeros(4)
    with pytest.raises(ShapeError, match="_foreach_add_: other has 1 tensors but self has 2"):
        adcuda._foreach_add_([a, b], [a])
    with pytest.raises(ShapeError, match="_foreach_add_: shapes \\(3,\\) and \\(4,\\) cannot be broadcast"):
        adcuda._foreach_add_([a], [b])
    with pytest.raises(TypeError, match="_foreach_mul_: self\\[1\\] must be a Tensor, got ndarray"):
        adcuda._foreach_mul_([a, np.zeros(3)], 2.0)
    with pytest.raises(ShapeError, match="_foreach_mul_: a tensor operand must have one element"):
        adcuda._foreach_mul_([a], adcuda.ones(2))
    with pytest.raises(ShapeError, match="_foreach_zero_: .*expanded tensor"):
        adcuda._foreach_zero_([adcuda.zeros(1).expand(3)])
    with pytest.raises(ValueError, match="_foreach_clamp_: at least one of min and max"):
        adcuda._foreach_clamp_([a])
    leaf = adcuda.zeros(2, requires_grad=True)
    with pytest.raises(
        AutogradError,
        match="_foreach_zero_: a tensor of shape \\(2,\\) requires grad, and "
        "_foreach_zero_ does not record a graph; call it under adcuda.no_grad",
    ):
        adcuda._foreach_zero_([leaf])
    with adcuda.no_grad():
        adcuda._foreach_add_([leaf], 1.0)
    assert leaf.tolist() == [1.0, 1.0]
    adcuda._foreach_zero_([])  # nothing to do is fine


@pytest.mark.cuda
@pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device")
def test_tensors_on_two_devices_are_refused():
    with pytest.raises(DeviceError, match="_foreach_add_: expected all tensors to be on the same device"):
        adcuda._foreach_add_([adcuda.zeros(2), adcuda.zeros(2, device="cuda")], 1.0)


# ---------------------------------------------------------------------------------------------
# norms
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("norm_type", [1.0, 2.0, 3.0, math.inf])
def test_global_norm_is_the_norm_of_everything_together(device, norm_type):
    ts = tensors(5, device, dt.float16)
    total = adcuda._global_norm(ts, norm_type)
    flat = np.concatenate([a.ravel() for a in host(ts)]).astype(np.float64)
    assert total.device == ts[0].device and total.dtype is dt.float32 and total.shape == ()
    assert float(total) == pytest.approx(np.linalg.norm(flat, norm_type), rel=1e-5)
    assert versions(ts) == [0] * len(ts)


def test_global_norm_edge_cases():
    assert float(adcuda._global_norm([])) == 0.0
    assert adcuda._global_norm([adcuda.zeros(2, dtype=dt.float64)]).dtype is dt.float64
    assert math.isnan(float(adcuda._global_norm([adcuda.tensor([math.inf]), adcuda.tensor([math.nan])])))
    with pytest.raises(ValueError, match="_global_norm: norm_type must be positive"):
        adcuda._global_norm([adcuda.zeros(2)], 0)
    with pytest.raises(DTypeError, match="_global_norm: tensors\\[0\\] must be floating point, got adcuda.int64"):
        adcuda._global_norm([adcuda.arange(3)])


# ---------------------------------------------------------------------------------------------
# fused optimizer steps, against PyTorch's fused CPU ops
def torch_or_skip():
    return pytest.importorskip("torch")


def as_torch(torch, ts):
    return [torch.tensor(a) for a in host(ts)]


@pytest.mark.parametrize("momentum,nesterov,first", [(0.0, False, False), (0.9, False, True), (0.9, True, False)])
@pytest.mark.parametrize("maximize", [False, True])
def test_fused_sgd_matches_pytorch(momentum, nesterov, first, maximize):
    torch = torch_or_skip()
    params, grads, bufs = tensors(6), tensors(7), tensors(8)
    tp, tg, tb = as_torch(torch, params), as_torch(torch, grads), as_torch(torch, bufs)
    kw = dict(
        weight_decay=0.01,
        momentum=momentum,
        lr=0.1,
        dampening=0.0,
        nesterov=nesterov,
        maximize=maximize,
        is_first_step=first,
    )
    with adcuda.no_grad():
        adcuda._fused_sgd_(params, grads, bufs if momentum else [], **kw)
    torch._fused_sgd_(tp, tg, tb if momentum else [], **kw)
    for got, want in zip(host(params) + (host(bufs) if momentum else []), tp + (tb if momentum else [])):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-6, atol=1e-7)
    assert versions(params) == [1] * len(params)
    assert versions(bufs) == ([1] if momentum else [0]) * len(bufs)
    assert versions(grads) == [0] * len(grads)


@pytest.mark.parametrize("decoupled", [False, True])
@pytest.mark.parametrize("amsgrad", [False, True])
@pytest.mark.parametrize("maximize", [False, True])
def test_fused_adam_matches_pytorch_over_mixed_step_counts(decoupled, amsgrad, maximize):
    torch = torch_or_skip()
    params, grads = tensors(9), tensors(10)
    exp_avgs, exp_avg_sqs = tensors(11, scale=0.1), [t.abs() for t in tensors(12, scale=0.1)]
    maxes = [t * 2 for t in exp_avg_sqs]
    steps = [adcuda.tensor(float(1 + i % 3)) for i in range(len(params))]  # three step counts in one call
    torch_args = [as_torch(torch, ts) for ts in (params, grads, exp_avgs, exp_avg_sqs, maxes, steps)]
    kw = dict(lr=0.01, beta1=0.9, beta2=0.99, weight_decay=0.1, eps=1e-8, amsgrad=amsgrad, maximize=maximize)
    fused = adcuda._fused_adamw_ if decoupled else adcuda._fused_adam_
    with adcuda.no_grad():
        fused(params, grads, exp_avgs, exp_avg_sqs, maxes if amsgrad else [], steps, **kw)
    torch_fused = torch._fused_adamw_ if decoupled else torch._fused_adam_
    tp, tg, tm, tv, tmax, ts = torch_args
    torch_fused(tp, tg, tm, tv, tmax if amsgrad else [], ts, **kw)
    for got, want in zip(
        host(params) + host(exp_avgs) + host(exp_avg_sqs) + (host(maxes) if amsgrad else []),
        tp + tm + tv + (tmax if amsgrad else []),
    ):
        np.testing.assert_allclose(got, want.numpy(), rtol=2e-5, atol=1e-7)
    for written in (params, exp_avgs, exp_avg_sqs) + ((maxes,) if amsgrad else ()):
        assert versions(written) == [1] * len(params)
    assert versions(steps) == [0] * len(steps)  # the caller increments the steps, as in PyTorch


@pytest.mark.parametrize("device", DEVICES)
def test_fused_steps_through_float32_masters(device):
    half = tensors(13, device, dt.float16)
    masters = [t.float() for t in half]
    grads = tensors(14, device, dt.float16)
    bufs = [adcuda.zeros_like(m) for m in masters]
    reference = [m.clone() for m in masters]
    with adcuda.no_grad():
        adcuda._fused_sgd_(
            half,
            grads,
            bufs,
            weight_decay=0.0,
            momentum=0.5,
            lr=1e-4,
            dampening=0.0,
            nesterov=False,
            maximize=False,
            is_first_step=True,
            master_params=masters,
        )
        for r, g in zip(reference, grads):
            r.sub_(g.float() * 1e-4)
    for h, m, r in zip(half, masters, reference):
        np.testing.assert_allclose(m.cpu().numpy(), r.cpu().numpy(), rtol=1e-6, atol=1e-8)
        np.testing.assert_array_equal(h.cpu().numpy(), m.cpu().half().numpy())
    assert versions(masters) == [1] * len(masters) and versions(half) == [1] * len(half)


def test_fused_step_errors():
    p, g = [adcuda.zeros(3)], [adcuda.zeros(4)]
    kw = dict(
        weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False, maximize=False, is_first_step=False
    )
    with pytest.raises(ShapeError, match=r"_fused_sgd_: grads\[0\] has shape \(4,\) but self\[0\] has shape \(3,\)"):
        adcuda._fused_sgd_(p, g, [], **kw)
    with pytest.raises(DTypeError, match="_fused_sgd_: self\\[0\\] must be floating point, got adcuda.int64"):
        adcuda._fused_sgd_([adcuda.arange(3)], [adcuda.zeros(3)], [], **kw)
    with pytest.raises(ValueError, match="_fused_sgd_: momentum=0.9 needs one momentum buffer per parameter"):
        adcuda._fused_sgd_(p, [adcuda.zeros(3)], [], **dict(kw, momentum=0.9))
    with pytest.raises(ShapeError, match="_fused_adam_: state_steps has 0 tensors but self has 1"):
        fused_adam_step(p, [adcuda.zeros(3)], [adcuda.zeros(3)], [adcuda.zeros(3)], [], op=adcuda._fused_adam_)
    param = adcuda.zeros(3, requires_grad=True)
    with pytest.raises(AutogradError, match="_fused_sgd_: .* requires grad"):
        adcuda._fused_sgd_([param], [adcuda.zeros(3)], [], **kw)


# ---------------------------------------------------------------------------------------------
# loss scaling
@pytest.mark.parametrize("device", DEVICES)
def test_unscale_sets_found_inf_and_never_clears_it(device):
    grads = tensors(15, device, scale=1024.0)
    expected = [a / 1024.0 for a in host(grads)]
    found_inf = adcuda.zeros((), device=device)
    inv_scale = adcuda.tensor(1 / 1024.0, device=device)
    adcuda._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)
    assert float(found_inf) == 0.0
    for got, want in zip(host(grads), expected):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    poisoned = [adcuda.tensor([1.0, math.inf], device=device)]
    adcuda._amp_foreach_non_finite_check_and_unscale_(poisoned, found_inf, inv_scale)
    assert float(found_inf) == 1.0
    adcuda._amp_foreach_non_finite_check_and_unscale_(tensors(16, device), found_inf, inv_scale)
    assert float(found_inf) == 1.0
    assert versions(grads) == [1] * len(grads) and versions([found_inf]) == [3]


@pytest.mark.parametrize("device", DEVICES)
def test_unscale_into_wider_outputs_leaves_the_gradients(device):
    grads = tensors(17, device, dt.float16, scale=64.0)
    before = host(grads)
    outs = [adcuda.empty(tuple(g.shape), dtype=dt.float32, device=device) for g in grads]
    found_inf = adcuda.zeros(1, device=device)
    adcuda._amp_foreach_non_finite_check_and_unscale_(grads, found_inf, adcuda.tensor(0.25, device=device), out=outs)
    for g, o, b in zip(host(grads), host(outs), before):
        np.testing.assert_array_equal(g, b)
        np.testing.assert_allclose(o, b * 0.25, rtol=1e-6)
    assert versions(grads) == [0] * len(grads) and versions(outs) == [1] * len(outs)


def test_unscale_errors():
    g = [adcuda.ones(2)]
    op = "_amp_foreach_non_finite_check_and_unscale_"
    with pytest.raises(
        DTypeError,
        match=f"{op}: found_inf must be a one-element adcuda.float32 tensor, got one of dtype adcuda.float64",
    ):
        adcuda._amp_foreach_non_finite_check_and_unscale_(g, adcuda.zeros((), dtype=dt.float64), adcuda.tensor(1.0))
    with pytest.raises(DTypeError, match=f"{op}: inv_scale must be a one-element adcuda.float32 tensor"):
        adcuda._amp_foreach_non_finite_check_and_unscale_(g, adcuda.zeros(()), adcuda.ones(2))
    with pytest.raises(ShapeError, match=f"{op}: self\\[0\\] has shape \\(2,\\) but out\\[0\\] has shape \\(3,\\)"):
        adcuda._amp_foreach_non_finite_check_and_unscale_(
            g, adcuda.zeros(()), adcuda.tensor(1.0), out=[adcuda.zeros(3)]
        )


def reference_update(scale, tracker, found, growth, backoff, interval, lo, hi):
    if found:
        return max(scale * backoff, lo), 0
    if tracker + 1 == interval:
        return min(scale * growth, hi), 0
    return scale, tracker + 1


@pytest.mark.parametrize("device", DEVICES)
def test_update_scale_follows_pytorchs_rule_within_bounds(device):
    scale = adcuda.full((), 8.0, device=device)
    tracker = adcuda.zeros((), dtype=dt.int32, device=device)
    expected = (8.0, 0)
    flags = [0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1]
    for i, flag in enumerate(flags):
        found = adcuda.tensor(float(flag), device=device)
        returned = adcuda._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2, min_scale=1.0, max_scale=32.0)
        expected = reference_update(*expected, flag, 2.0, 0.5, 2, 1.0, 32.0)
        assert returned is scale
        assert (float(scale), int(tracker)) == expected, i
    assert versions([scale, tracker]) == [len(flags)] * 2


def test_update_scale_matches_pytorch_without_bounds():
    torch = torch_or_skip()
    scale, tracker = adcuda.full((1,), 4.0), adcuda.zeros(1, dtype=dt.int32)
    t_scale, t_tracker = torch.full((1,), 4.0), torch.zeros(1, dtype=torch.int32)
    for flag in [0, 0, 0, 1, 0, 1, 1, 0, 0, 0]:
        adcuda._amp_update_scale_(scale, tracker, adcuda.tensor([float(flag)]), 2.0, 0.5, 3)
        torch._amp_update_scale_(t_scale, t_tracker, torch.tensor([float(flag)]), 2.0, 0.5, 3)
        assert (float(scale), int(tracker)) == (float(t_scale), int(t_tracker))
    with pytest.raises(
        DTypeError, match="_amp_update_scale_: growth_tracker must be a one-element adcuda.int32 tensor"
    ):
        adcuda._amp_update_scale_(scale, adcuda.zeros(1), adcuda.zeros(1), 2.0, 0.5, 3)


# ---------------------------------------------------------------------------------------------
# the alias nn.Parameter is built on
def test_make_subclass_aliases_memory_and_history():
    from adcuda.ops.optim import _make_subclass

    class Tagged(adcuda.nn.Parameter):  # a subclass with a __dict__ of its own, as users write them
        pass

    data = adcuda.zeros(3)
    alias = _make_subclass(Tagged, data, require_grad=True)
    alias.tag = "kept"
    assert type(alias) is Tagged and alias.tag == "kept" and alias.requires_grad and alias.is_leaf
    with adcuda.no_grad():
        data.add_(1.0)
    assert alias.tolist() == [1.0, 1.0, 1.0]
    assert versions([alias]) == versions([data]) == [1]
    with pytest.raises(TypeError, match="_make_subclass: cls must be a subclass of Tensor"):
        _make_subclass(dict, data)
