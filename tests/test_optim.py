"""adcuda.optim: SGD, Adam, AdamW and the lr schedulers.

Closed-form checks run everywhere; with torch installed, 10-step trajectories and lr sequences must
equal torch's on the same problem.
"""

import math

import numpy as np
import pytest
from helpers import least_squares_trajectory

import adcuda
import adcuda.nn as nn
from adcuda.optim import SGD, Adam, AdamW, lr_scheduler


def _np(t):
    return t.detach().numpy()


# ------------------------------------------------------------------------------------------ closed forms
def test_sgd_one_step_closed_form():
    p = nn.Parameter(adcuda.tensor([1.0, -2.0]))
    opt = SGD([p], lr=0.1, weight_decay=0.5)
    p.grad = adcuda.tensor([0.5, 1.0])
    opt.step()
    # p - lr * (g + wd * p)
    np.testing.assert_allclose(_np(p), [1.0 - 0.1 * (0.5 + 0.5), -2.0 - 0.1 * (1.0 - 1.0)], rtol=1e-6)


def test_sgd_momentum_and_nesterov_closed_form():
    g = np.array([1.0, 2.0])
    for nesterov in (False, True):
        p = nn.Parameter(adcuda.zeros(2))
        opt = SGD([p], lr=0.1, momentum=0.9, nesterov=nesterov)
        buf = np.zeros(2)
        w = np.zeros(2)
        for step in range(3):
            p.grad = adcuda.tensor(g * (step + 1))
            opt.step()
            d = g * (step + 1)
            buf = d if step == 0 else 0.9 * buf + d
            w = w - 0.1 * (d + 0.9 * buf if nesterov else buf)
        np.testing.assert_allclose(_np(p), w, rtol=1e-5)
        np.testing.assert_allclose(_np(opt.state[p]["momentum_buffer"]), buf, rtol=1e-6)


def test_adam_first_step_moves_each_weight_by_lr_times_sign():
    # bias-corrected m_hat = g and v_hat = g^2 after one step, so the update is lr * g / (|g| + eps)
    p = nn.Parameter(adcuda.zeros(3))
    opt = Adam([p], lr=0.01)
    p.grad = adcuda.tensor([2.0, -0.5, 0.0])
    opt.step()
    np.testing.assert_allclose(_np(p), [-0.01, 0.01, 0.0], rtol=1e-5)
    assert float(opt.state[p]["step"]) == 1.0


def test_adamw_decays_weights_decoupled_from_the_gradient():
    p = nn.Parameter(adcuda.tensor([1.0, 1.0]))
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = adcuda.zeros(2)
    opt.step()  # zero gradient: only the decay acts, p *= 1 - lr * wd
    np.testing.assert_allclose(_np(p), [0.95, 0.95], rtol=1e-6)
    q = nn.Parameter(adcuda.tensor([1.0, 1.0]))
    opt = Adam([q], lr=0.1, weight_decay=0.5)
    q.grad = adcuda.zeros(2)
    opt.step()  # L2 enters the gradient instead: the first Adam step moves by lr
    np.testing.assert_allclose(_np(q), [0.9, 0.9], rtol=1e-5)


def test_maximize_and_params_without_grad_are_skipped():
    p = nn.Parameter(adcuda.tensor([1.0]))
    idle = nn.Parameter(adcuda.tensor([5.0]))
    opt = SGD([p, idle], lr=0.5, maximize=True)
    p.grad = adcuda.tensor([2.0])
    opt.step()
    assert _np(p).tolist() == [2.0] and _np(idle).tolist() == [5.0]
    assert idle not in opt.state


def test_param_groups_fill_defaults_and_use_their_own_lr():
    a, b = nn.Parameter(adcuda.ones(1)), nn.Parameter(adcuda.ones(1))
    opt = SGD([{"params": [a]}, {"params": b, "lr": 1.0}], lr=0.1, momentum=0.5)
    assert opt.param_groups[0]["lr"] == 0.1 and opt.param_groups[1]["lr"] == 1.0
    assert opt.param_groups[1]["momentum"] == 0.5 and opt.param_groups[1]["params"] == [b]
    a.grad, b.grad = adcuda.ones(1), adcuda.ones(1)
    opt.step()
    assert _np(a).tolist() == pytest.approx([0.9]) and _np(b).tolist() == pytest.approx([0.0])
    c = nn.Parameter(adcuda.ones(1))
    opt.add_param_group({"params": [c], "momentum": 0.0})
    assert opt.param_groups[2]["lr"] == 0.1


def test_zero_grad_and_closure():
    p = nn.Parameter(adcuda.tensor([3.0]))
    opt = SGD([p], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    with adcuda.no_grad():  # the closure runs with grad enabled anyway
        loss = opt.step(closure)
    assert float(loss) == 9.0 and _np(p).tolist() == pytest.approx([3.0 - 0.1 * 6.0])
    opt.zero_grad(set_to_none=False)
    assert _np(p.grad).tolist() == [0.0]
    opt.zero_grad()
    assert p.grad is None


def test_step_bumps_the_version_so_stale_saved_values_are_caught():
    p = nn.Parameter(adcuda.tensor([1.0, 2.0]))
    opt = SGD([p], lr=0.1)
    loss = (p * p).sum()
    p.grad = adcuda.ones(2)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_a_custom_optimizer_on_the_base_class():
    class SignSGD(adcuda.optim.Optimizer):
        def __init__(self, params, lr=0.1):
            super().__init__(params, dict(lr=lr))

        @adcuda.no_grad()
        def step(self, closure=None):
            for group in self.param_groups:
                for p in group["params"]:
                    state = self.state[p]  # empty on first use, as with PyTorch's defaultdict
                    state["count"] = state.get("count", 0) + 1
                    p.add_(p.grad.sign(), alpha=-group["lr"])

    p = nn.Parameter(adcuda.tensor([1.0, -1.0]))
    opt = SignSGD([p], lr=0.25)
    p.grad = adcuda.tensor([3.0, -0.1])
    opt.step()
    assert _np(p).tolist() == [0.75, -0.75] and opt.state[p]["count"] == 1
    assert opt.state_dict()["state"] == {0: {"count": 1}}


def test_a_model_trains():
    adcuda.manual_seed(0)
    x = adcuda.randn(64, 4)
    y = x @ adcuda.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.3
    model = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
    opt = AdamW(model.parameters(), lr=0.02)
    first = None
    for _ in range(150):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        first = first if first is not None else float(loss)
    assert float(loss) < 0.02 * first


# ------------------------------------------------------------------------------------------ bad input
def test_bad_arguments_raise_clear_errors():
    p = nn.Parameter(adcuda.ones(2))
    with pytest.raises(ValueError, match="optimizer got an empty parameter list"):
        SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate: -0.1"):
        SGD([p], lr=-0.1)
    with pytest.raises(ValueError, match="Invalid momentum value"):
        SGD([p], momentum=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires a momentum and zero dampening"):
        SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="Invalid beta parameter at index 1: 1.0"):
        Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="Invalid beta parameter at index 0"):
        AdamW([p], betas=(-0.1, 0.9))
    with pytest.raises(ValueError, match="Invalid betas"):
        Adam([p], betas=(0.9,))
    with pytest.raises(ValueError, match="Invalid epsilon value"):
        Adam([p], eps=-1e-8)
    with pytest.raises(ValueError, match="Invalid weight_decay value"):
        AdamW([p], weight_decay=-1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        SGD([{"params": [p], "lr": -1.0}], lr=0.1)
    nonleaf = p * 2
    with pytest.raises(ValueError, match="can't optimize a non-leaf Tensor"):
        Adam([nonleaf])
    with pytest.raises(TypeError, match="iterable of Tensors"):
        SGD(p, lr=0.1)
    with pytest.raises(TypeError, match="ordered collections"):
        SGD({p}, lr=0.1)
    with pytest.raises(TypeError, match="can only optimize Tensors"):
        SGD([p, 3.0], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        SGD([{"params": [p]}, {"params": [p]}], lr=0.1)


def test_gradient_on_the_wrong_device_or_shape_is_reported():
    p = nn.Parameter(adcuda.ones(2))
    opt = SGD([p], lr=0.1)
    p.grad = adcuda.ones(3)
    with pytest.raises(ValueError, match=r"shape \(2,\) has a gradient of shape \(3,\)"):
        opt.step()


# ------------------------------------------------------------------------------------------ state dicts
def _quadratic_grads(params, t):
    for i, p in enumerate(params):
        p.grad = (p * (i + 1) + math.sin(t)).detach()


def test_state_dict_round_trip_resumes_identically():
    def fresh():
        adcuda.manual_seed(5)
        return [nn.Parameter(adcuda.randn(3, 2)), nn.Parameter(adcuda.randn(4))]

    for make in (lambda ps: Adam(ps, lr=0.05, amsgrad=True), lambda ps: SGD(ps, lr=0.05, momentum=0.9)):
        ref_params = fresh()
        ref = make(ref_params)
        for t in range(3):
            _quadratic_grads(ref_params, t)
            ref.step()
        sd = ref.state_dict()
        assert sorted(sd["state"]) == [0, 1] and sd["param_groups"][0]["params"] == [0, 1]
        params = [nn.Parameter(p.detach().clone()) for p in ref_params]
        resumed = make(params)
        resumed.load_state_dict(sd)
        for t in range(3, 6):
            _quadratic_grads(ref_params, t)
            _quadratic_grads(params, t)
            ref.step()
            resumed.step()
        for a, b in zip(ref_params, params):
            np.testing.assert_array_equal(_np(a), _np(b))
        # the loaded state is a copy: stepping one optimizer never moves the other's buffers
        key = "exp_avg" if isinstance(ref, Adam) else "momentum_buffer"
        assert ref.state[ref_params[0]][key] is not resumed.state[params[0]][key]


def test_load_state_dict_checks_groups_and_restores_hyperparameters():
    p, q = nn.Parameter(adcuda.ones(1)), nn.Parameter(adcuda.ones(1))
    src = SGD([p, q], lr=0.3)
    with pytest.raises(ValueError, match="different number of parameter groups"):
        SGD([{"params": [p]}, {"params": [q]}], lr=0.1).load_state_dict(src.state_dict())
    with pytest.raises(ValueError, match="doesn't match the size of optimizer's group"):
        SGD([p], lr=0.1).load_state_dict(src.state_dict())
    dst = SGD([nn.Parameter(adcuda.ones(1)), nn.Parameter(adcuda.ones(1))], lr=0.1)
    dst.load_state_dict(src.state_dict())
    assert dst.param_groups[0]["lr"] == 0.3


def test_optimizer_state_is_cast_to_the_parameter_dtype_on_load():
    p = nn.Parameter(adcuda.ones(2))
    src = Adam([p])
    p.grad = adcuda.ones(2)
    src.step()
    q = nn.Parameter(adcuda.ones(2, dtype=adcuda.float64))
    dst = Adam([q])
    dst.load_state_dict(src.state_dict())
    assert dst.state[q]["exp_avg"].dtype is adcuda.float64
    assert dst.state[q]["step"].dtype is adcuda.float32


# ------------------------------------------------------------------------------------------ torch parity
OPTIMIZERS = {
    "sgd": lambda lib, ps: lib.optim.SGD(ps, lr=0.01),
    "sgd_momentum_dampening_wd": lambda lib, ps: lib.optim.SGD(
        ps, lr=0.01, momentum=0.9, dampening=0.3, weight_decay=0.1
    ),
    "sgd_nesterov": lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.8, nesterov=True, weight_decay=0.01),
    "sgd_maximize": lambda lib, ps: lib.optim.SGD(ps, lr=0.01, momentum=0.5, maximize=True),
    "adam": lambda lib, ps: lib.optim.Adam(ps, lr=0.05),
    "adam_wd_betas": lambda lib, ps: lib.optim.Adam(ps, lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1),
    "adam_amsgrad_maximize": lambda lib, ps: lib.optim.Adam(ps, lr=0.05, amsgrad=True, maximize=True),
    "adamw": lambda lib, ps: lib.optim.AdamW(ps, lr=0.05),
    "adamw_amsgrad": lambda lib, ps: lib.optim.AdamW(ps, lr=0.05, weight_decay=0.3, amsgrad=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trajectory_matches_torch(name):
    torch = pytest.importorskip("torch")
    ours = least_squares_trajectory(adcuda, OPTIMIZERS[name], 10)
    theirs = least_squares_trajectory(torch, OPTIMIZERS[name], 10)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-12)


def test_float32_adam_matches_torch_closely():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    grads = rng.standard_normal((10, 5, 3)).astype(np.float32)
    tw = torch.tensor(w0, requires_grad=True)
    aw = nn.Parameter(adcuda.tensor(w0))
    topt = torch.optim.AdamW([tw], lr=1e-2)
    aopt = AdamW([aw], lr=1e-2)
    for g in grads:
        tw.grad = torch.tensor(g)
        aw.grad = adcuda.tensor(g)
        topt.step()
        aopt.step()
    np.testing.assert_allclose(_np(aw), tw.detach().numpy(), rtol=1e-6, atol=1e-7)


def test_state_dict_layout_matches_torch():
    torch = pytest.importorskip("torch")
    tp = [torch.ones(2, requires_grad=True), torch.ones(3, requires_grad=True)]
    ap = [nn.Parameter(adcuda.ones(2)), nn.Parameter(adcuda.ones(3))]
    topt, aopt = torch.optim.Adam(tp, lr=0.1), Adam(ap, lr=0.1)
    for t, a in zip(tp, ap):
        t.grad, a.grad = torch.ones_like(t), adcuda.ones_like(a)
    topt.step()
    aopt.step()
    tsd, asd = topt.state_dict(), aopt.state_dict()
    assert sorted(tsd["state"]) == sorted(asd["state"])
    assert sorted(tsd["state"][0]) == sorted(asd["state"][0])
    assert tsd["param_groups"][0]["params"] == asd["param_groups"][0]["params"]
    for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"):
        assert tsd["param_groups"][0][key] == asd["param_groups"][0][key]


# ------------------------------------------------------------------------------------------ schedulers
def _lrs(lib, make_sched, steps=25, base_lr=0.1):
    p = lib.zeros(1, requires_grad=True)
    opt = lib.optim.SGD(
        [{"params": [p]}, {"params": [lib.zeros(1, requires_grad=True)], "lr": base_lr * 3}], lr=base_lr
    )
    sched = make_sched(lib, opt)
    lrs = [sched.get_last_lr()]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
        assert [g["lr"] for g in opt.param_groups] == lrs[-1]
    return np.array(lrs)


def _warmup(step):
    return min(1.0, (step + 1) / 5)


SCHEDULERS = {
    "step": lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, step_size=4, gamma=0.5),
    "cosine": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.001),
    "cosine_past_t_max": lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=7),
    "lambda_warmup": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, _warmup),
    "lambda_per_group": lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [_warmup, lambda s: 0.9**s]),
}


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_sequences_match_torch(name):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(_lrs(adcuda, SCHEDULERS[name]), _lrs(torch, SCHEDULERS[name]), rtol=1e-12)


def test_scheduler_closed_forms():
    lrs = _lrs(adcuda, SCHEDULERS["step"], steps=9)[:, 0]
    np.testing.assert_allclose(lrs, [0.1] * 4 + [0.05] * 4 + [0.025] * 2)
    lrs = _lrs(adcuda, SCHEDULERS["cosine"], steps=10)[:, 0]
    expected = [0.001 + (0.1 - 0.001) * (1 + math.cos(math.pi * t / 10)) / 2 for t in range(11)]
    np.testing.assert_allclose(lrs, expected, rtol=1e-9)
    lrs = _lrs(adcuda, SCHEDULERS["lambda_warmup"], steps=6)
    np.testing.assert_allclose(lrs[:, 0], [0.02, 0.04, 0.06, 0.08, 0.1, 0.1, 0.1])
    np.testing.assert_allclose(lrs[:, 1], [0.06, 0.12, 0.18, 0.24, 0.3, 0.3, 0.3], rtol=1e-12)


def test_scheduler_state_dict_resume_and_errors():
    p = nn.Parameter(adcuda.zeros(1))
    opt = SGD([p], lr=1.0)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    for _ in range(3):
        opt.step()
        sched.step()
    state = sched.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 3
    opt2 = SGD([nn.Parameter(adcuda.zeros(1))], lr=1.0)
    opt2.load_state_dict(opt.state_dict())
    sched2 = lr_scheduler.StepLR(opt2, step_size=2, gamma=0.1, last_epoch=2)
    sched2.load_state_dict(state)
    for _ in range(2):
        sched.step()
        sched2.step()
    assert sched2.get_last_lr() == sched.get_last_lr() == [pytest.approx(0.01)]
    with pytest.raises(KeyError, match="initial_lr"):
        lr_scheduler.StepLR(SGD([nn.Parameter(adcuda.zeros(1))], lr=1.0), step_size=2, last_epoch=4)
    with pytest.raises(TypeError, match="not an Optimizer"):
        lr_scheduler.StepLR("adam", step_size=2)
    with pytest.raises(ValueError, match="Expected 1 lr_lambdas"):
        lr_scheduler.LambdaLR(opt, [_warmup, _warmup])


def test_lambda_lr_state_dict_skips_plain_functions():
    class Warmup:
        def __init__(self, n):
            self.n = n

        def __call__(self, step):
            return min(1.0, (step + 1) / self.n)

    opt = SGD([nn.Parameter(adcuda.zeros(1))], lr=1.0)
    sched = lr_scheduler.LambdaLR(opt, Warmup(4))
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"n": 4}]
    other = lr_scheduler.LambdaLR(SGD([nn.Parameter(adcuda.zeros(1))], lr=1.0), Warmup(10))
    other.load_state_dict(state)
    assert other.lr_lambdas[0].n == 4
    assert lr_scheduler.LambdaLR(opt, _warmup).state_dict()["lr_lambdas"] == [None]
