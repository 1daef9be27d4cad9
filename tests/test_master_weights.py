"""Optimizers with ``master_weights=True``: float16 parameters stepped through float32 masters.

The masters must accumulate updates far below float16 resolution, step exactly like float32
parameters fed the same gradients, survive a state-dict round trip bit for bit, follow outside
writes to the working weights, and refuse inconsistent parameter groups.
"""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
from adcuda.optim import SGD, Adam, AdamW, OptimizerError

F16, F32 = adcuda.float16, adcuda.float32

# one tiny step size each: every optimizer below moves a weight by 1e-4 per step on a constant gradient
SMALL_STEP = {
    "sgd": lambda ps, mw: SGD(ps, lr=1e-4, master_weights=mw),
    "adam": lambda ps, mw: Adam(ps, lr=1e-4, master_weights=mw),
    "adamw": lambda ps, mw: AdamW(ps, lr=1e-4, weight_decay=0.0, master_weights=mw),
}

# hyperparameters that use every state buffer (momentum, Nesterov, weight decay, AMSGrad)
FULL = {
    "sgd_nesterov_wd": lambda ps, mw: SGD(
        ps, lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01, master_weights=mw
    ),
    "sgd_dampening": lambda ps, mw: SGD(ps, lr=0.05, momentum=0.8, dampening=0.3, master_weights=mw),
    "adam_amsgrad_wd": lambda ps, mw: Adam(ps, lr=0.01, amsgrad=True, weight_decay=0.1, master_weights=mw),
    "adamw": lambda ps, mw: AdamW(ps, lr=0.01, weight_decay=0.1, master_weights=mw),
}


def _np(t):
    return t.detach().numpy().copy()


def _half_param(values):
    return nn.Parameter(adcuda.tensor(values, dtype=F16))


def _grads(step, shape):
    """Deterministic float16-representable gradients for step ``step``."""
    rng = np.random.default_rng(step)
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("name", sorted(SMALL_STEP))
def test_updates_below_half_resolution_accumulate_in_the_master(name):
    master_run = _half_param([1.0, 1.0])
    pure_run = _half_param([1.0, 1.0])
    opt = SMALL_STEP[name]([master_run], True)
    pure = SMALL_STEP[name]([pure_run], False)
    for _ in range(20):
        master_run.grad = adcuda.ones(2, dtype=F16)
        pure_run.grad = adcuda.ones(2, dtype=F16)
        opt.step()
        pure.step()
    master = opt.state[master_run]["master_param"]
    assert master.dtype is F32
    np.testing.assert_allclose(_np(master), 0.998, atol=2e-6)
    # the float16 copy is the master rounded: 0.998 lies 4 float16 steps (2**-11) below 1
    np.testing.assert_array_equal(_np(master_run), np.float16(0.998))
    assert abs(float(_np(master_run)[0]) - 0.998) < 1e-4
    # pure float16: 1 - 1e-4 rounds back to 1 every time
    np.testing.assert_array_equal(_np(pure_run), [1.0, 1.0])


@pytest.mark.parametrize("name", sorted(FULL))
def test_masters_step_exactly_like_float32_parameters(name):
    """Fed the same gradients, a float32 run and the masters agree bit for bit, with float32 state."""
    start = np.array([[0.5, -1.25, 2.0], [0.75, 1.5, -0.375]], dtype=np.float16)
    half = nn.Parameter(adcuda.tensor(start))
    full = nn.Parameter(adcuda.tensor(start.astype(np.float32)))
    opt_half, opt_full = FULL[name]([half], True), FULL[name]([full], True)
    for t in range(6):
        g = _grads(t, start.shape)
        half.grad = adcuda.tensor(g)
        full.grad = adcuda.tensor(g.astype(np.float32))
        opt_half.step()
        opt_full.step()
    np.testing.assert_array_equal(_np(opt_half.state[half]["master_param"]), _np(full))
    np.testing.assert_array_equal(_np(half), _np(full).astype(np.float16))
    state = opt_half.state[half]
    assert {k: v.dtype for k, v in state.items() if k != "step"} == {k: F32 for k in state if k != "step"}
    # float32 parameters are their own masters: no copy is kept for them
    assert "master_param" not in opt_full.state[full]


def test_master_weights_on_float32_parameters_changes_nothing():
    runs = []
    for master_weights in (False, True):
        p = nn.Parameter(adcuda.tensor([0.3, -0.7]))
        opt = Adam([p], lr=0.01, master_weights=master_weights)
        for t in range(4):
            p.grad = adcuda.tensor(_grads(t, (2,)).astype(np.float32))
            opt.step()
        runs.append(_np(p))
        assert sorted(opt.state[p]) == ["exp_avg", "exp_avg_sq", "step"]
    np.testing.assert_array_equal(runs[0], runs[1])


def test_masters_are_made_at_the_first_step_so_half_can_come_after_the_optimizer():
    model = nn.Linear(3, 2)
    opt = SGD(model.parameters(), lr=0.1, momentum=0.9, master_weights=True)
    model.half()
    model(adcuda.randn(4, 3).half()).float().sum().backward()
    opt.step()
    for p in model.parameters():
        assert p.dtype is F16
        assert opt.state[p]["master_param"].dtype is F32
        assert opt.state[p]["momentum_buffer"].dtype is F32


# ------------------------------------------------------------------------------------------ state dicts
def _run(opt, params, steps):
    for t in steps:
        for i, p in enumerate(params):
            p.grad = adcuda.tensor(_grads(10 * t + i, tuple(p.shape)))
        opt.step()


def _fresh_params():
    rng = np.random.default_rng(3)
    return [nn.Parameter(adcuda.tensor(rng.standard_normal(s).astype(np.float16))) for s in ((4, 3), (3,))]


@pytest.mark.parametrize("name", sorted(FULL))
@pytest.mark.parametrize("through_file", [False, True])
def test_state_dict_round_trip_resumes_bit_for_bit(name, through_file, tmp_path):
    ref_params = _fresh_params()
    ref = FULL[name](ref_params, True)
    _run(ref, ref_params, range(3))
    saved = ref.state_dict()
    assert saved["state"][0]["master_param"].dtype is F32
    if through_file:
        adcuda.save(saved, tmp_path / "opt.adcuda")
        saved = adcuda.load(tmp_path / "opt.adcuda")
    params = [nn.Parameter(p.detach().clone()) for p in ref_params]
    resumed = FULL[name](params, True)
    resumed.load_state_dict(saved)
    for p in params:  # the fix: loaded masters and buffers stay float32 for float16 parameters
        assert all(v.dtype is F32 for k, v in resumed.state[p].items() if k != "step")
    # without the masters, the same continuation starts from the float16 values and drifts
    restarted_params = [nn.Parameter(p.detach().clone()) for p in ref_params]
    restarted = FULL[name](restarted_params, True)
    _run(ref, ref_params, range(3, 7))
    _run(resumed, params, range(3, 7))
    _run(restarted, restarted_params, range(3, 7))
    for a, b in zip(ref_params, params):
        np.testing.assert_array_equal(_np(a), _np(b))
        np.testing.assert_array_equal(_np(ref.state[a]["master_param"]), _np(resumed.state[b]["master_param"]))
    assert any(
        not np.array_equal(_np(ref.state[a]["master_param"]), _np(restarted.state[b]["master_param"]))
        for a, b in zip(ref_params, restarted_params)
    )


def test_loading_model_weights_after_the_optimizer_keeps_the_loaded_masters():
    """The usual resume order either way round: model weights equal to the masters' rounding do
    not replace the masters."""
    ref_params = _fresh_params()
    ref = Adam(ref_params, lr=0.01, master_weights=True)
    _run(ref, ref_params, range(3))
    saved = ref.state_dict()
    params = [nn.Parameter(adcuda.zeros(tuple(p.shape), dtype=F16)) for p in ref_params]
    resumed = Adam(params, lr=0.01, master_weights=True)
    resumed.load_state_dict(saved)
    with adcuda.no_grad():
        for p, r in zip(params, ref_params):
            p.copy_(r)  # like model.load_state_dict after optimizer.load_state_dict
    _run(ref, ref_params, range(3, 5))
    _run(resumed, params, range(3, 5))
    for a, b in zip(ref_params, params):
        np.testing.assert_array_equal(_np(ref.state[a]["master_param"]), _np(resumed.state[b]["master_param"]))


def test_a_master_follows_an_outside_write_to_its_parameter():
    p = _half_param([1.0, 2.0])
    opt = SGD([p], lr=1e-4, master_weights=True)
    p.grad = adcuda.ones(2, dtype=F16)
    opt.step()
    with adcuda.no_grad():
        p.mul_(0.0)  # pruning the weights after a step
    opt.step()
    np.testing.assert_allclose(_np(opt.state[p]["master_param"]), [-1e-4, -1e-4], rtol=1e-6)
    np.testing.assert_array_equal(_np(p), np.float16([-1e-4, -1e-4]))


def test_a_pure_float16_state_loads_into_a_master_optimizer():
    src_param = _half_param([0.5, 0.25])
    src = Adam([src_param], lr=0.01)
    _run(src, [src_param], range(2))
    assert src.state[src_param]["exp_avg"].dtype is F16
    p = nn.Parameter(src_param.detach().clone())
    dst = Adam([p], lr=0.01, master_weights=True)
    dst.load_state_dict(src.state_dict())
    assert dst.param_groups[0]["master_weights"] is True
    assert dst.state[p]["exp_avg"].dtype is F32
    _run(dst, [p], range(2, 3))
    np.testing.assert_array_equal(_np(dst.state[p]["master_param"]).astype(np.float16), _np(p))


# ------------------------------------------------------------------------------------------ bad input
def test_half_parameters_split_between_master_and_plain_groups_is_an_error():
    a, b = _half_param([1.0]), _half_param([2.0])
    with pytest.raises(
        OptimizerError,
        match=r"group 1 has float16/bfloat16 parameters without master weights "
        r"while group 0 keeps float32 master copies",
    ):
        SGD([{"params": [a]}, {"params": [b], "master_weights": False}], lr=0.1, master_weights=True)
    # a float32 group without masters next to a half group with masters is fine
    c = nn.Parameter(adcuda.ones(1))
    SGD([{"params": [a], "master_weights": True}, {"params": [c]}], lr=0.1)


def test_the_group_rule_is_checked_again_when_parameters_become_half_later():
    first, second = nn.Linear(2, 2), nn.Linear(2, 2)
    opt = Adam([{"params": first.parameters(), "master_weights": True}, {"params": second.parameters()}])
    first.half()
    second.half()
    for p in list(first.parameters()) + list(second.parameters()):
        p.grad = adcuda.zeros(tuple(p.shape), dtype=F16)
    with pytest.raises(OptimizerError, match="group 1 has float16/bfloat16 parameters without master weights"):
        opt.step()


def test_bad_master_weights_values_are_reported():
    with pytest.raises(OptimizerError, match=r"master_weights must be True or False, got 'yes'"):
        SGD([_half_param([1.0])], lr=0.1, master_weights="yes")
    counts = adcuda.zeros(3, dtype=adcuda.int64)
    with pytest.raises(
        OptimizerError,
        match=r"master_weights=True needs floating point parameters, but parameter 0 "
        r"of group 0 \(shape \(3,\)\) is adcuda.int64",
    ):
        SGD([counts], lr=0.1, master_weights=True)


def test_loading_masters_into_an_optimizer_without_master_weights_is_an_error():
    p = _half_param([1.0, 2.0])
    src = AdamW([p], master_weights=True)
    _run(src, [p], range(1))
    with pytest.raises(
        OptimizerError,
        match=r"holds a float32 master copy of parameter 0 .* group 0 here has "
        r"master_weights=False",
    ):
        AdamW([nn.Parameter(p.detach().clone())]).load_state_dict(src.state_dict())
