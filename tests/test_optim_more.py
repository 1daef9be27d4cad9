"""Adagrad, RMSprop, Adadelta, LBFGS and the schedulers ExponentialLR, LinearLR, SequentialLR,
ReduceLROnPlateau and OneCycleLR: their defaults, errors and state dicts everywhere; with torch
installed, 25-step trajectories and lr (and momentum) sequences equal to torch's on the same problem."""

import numpy as np
import pytest
from helpers import least_squares_problem, least_squares_trajectory

import adcuda
from adcuda import nn
from adcuda.optim import LBFGS, Adadelta, Adagrad, OptimizerError, RMSprop
from adcuda.optim import lr_scheduler as sched

OPTIMIZERS = {
    "adagrad": lambda lib, ps: lib.optim.Adagrad(ps, lr=0.1),
    "adagrad_decay_wd_init": lambda lib, ps: lib.optim.Adagrad(
        ps, lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3, eps=1e-6
    ),
    "adagrad_maximize": lambda lib, ps: lib.optim.Adagrad(ps, lr=0.05, maximize=True),
    "rmsprop": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01),
    "rmsprop_momentum": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01, momentum=0.9, weight_decay=0.05),
    "rmsprop_centered": lambda lib, ps: lib.optim.RMSprop(ps, lr=0.01, alpha=0.9, centered=True),
    "rmsprop_centered_momentum": lambda lib, ps: lib.optim.RMSprop(
        ps, lr=0.01, alpha=0.3, momentum=0.5, centered=True, maximize=True
    ),
    "adadelta": lambda lib, ps: lib.optim.Adadelta(ps),
    "adadelta_rho_wd": lambda lib, ps: lib.optim.Adadelta(ps, lr=0.5, rho=0.8, eps=1e-4, weight_decay=0.1),
    "adadelta_maximize": lambda lib, ps: lib.optim.Adadelta(ps, maximize=True),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_trajectory_matches_torch(name):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(
        least_squares_trajectory(adcuda, OPTIMIZERS[name], 25),
        least_squares_trajectory(torch, OPTIMIZERS[name], 25),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize("name", ["adagrad_decay_wd_init", "rmsprop_centered_momentum", "adadelta_rho_wd"])
def test_float32_trajectory_matches_torch(name):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(
        least_squares_trajectory(adcuda, OPTIMIZERS[name], 25, dtype="float32"),
        least_squares_trajectory(torch, OPTIMIZERS[name], 25, dtype="float32"),
        rtol=2e-5,
        atol=2e-6,
    )


def test_first_steps_closed_form():
    """One step of each from known values, everywhere (no torch needed)."""

    def one_step(make, grad):
        p = nn.Parameter(adcuda.tensor([1.0, -2.0], dtype=adcuda.float64))
        opt = make([p])
        p.grad = adcuda.tensor(grad, dtype=adcuda.float64)
        opt.step()
        return p.detach().numpy(), opt

    g = np.array([0.5, -4.0])
    p, _ = one_step(lambda ps: Adagrad(ps, lr=0.1), g)
    np.testing.assert_allclose(p, [1.0, -2.0] - 0.1 * g / (np.abs(g) + 1e-10))
    p, _ = one_step(lambda ps: RMSprop(ps, lr=0.01, alpha=0.9), g)
    np.testing.assert_allclose(p, [1.0, -2.0] - 0.01 * g / (np.sqrt(0.1 * g * g) + 1e-8))
    p, _ = one_step(lambda ps: RMSprop(ps, lr=0.01, alpha=0.9, centered=True), g)
    np.testing.assert_allclose(p, [1.0, -2.0] - 0.01 * g / (np.sqrt(0.1 * g * g - (0.1 * g) ** 2) + 1e-8))
    p, opt = one_step(lambda ps: Adadelta(ps, lr=1.0, rho=0.9, eps=1e-6), g)
    delta = np.sqrt(1e-6) / np.sqrt(0.1 * g * g + 1e-6) * g
    np.testing.assert_allclose(p, [1.0, -2.0] - delta)
    state = next(iter(opt.state.values()))
    np.testing.assert_allclose(state["acc_delta"].numpy(), 0.1 * delta * delta)
    assert state["step"].item() == 1


def test_defaults_match_torch():
    torch = pytest.importorskip("torch")
    for name in ("Adagrad", "RMSprop", "Adadelta", "LBFGS"):
        theirs = getattr(torch.optim, name)([torch.zeros(1, requires_grad=True)]).defaults
        ours = getattr(adcuda.optim, name)([adcuda.zeros(1, requires_grad=True)]).defaults
        for key, value in ours.items():
            if key in theirs:
                assert theirs[key] == value, (name, key)
        assert set(theirs) - {"fused", "capturable", "differentiable", "foreach"} <= set(ours), name


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda ps: Adagrad(ps, lr=-1.0), "lr"),
        (lambda ps: Adagrad(ps, initial_accumulator_value=-0.1), "initial_accumulator_value"),
        (lambda ps: RMSprop(ps, alpha=-0.5), "alpha"),
        (lambda ps: RMSprop(ps, momentum=-0.5), "momentum"),
        (lambda ps: Adadelta(ps, rho=1.5), "rho"),
        (lambda ps: LBFGS(ps, line_search_fn="armijo"), "line_search_fn"),
    ],
)
def test_bad_hyperparameters_raise(make, message):
    with pytest.raises(OptimizerError, match=message):
        make([nn.Parameter(adcuda.zeros(2))])


def test_lbfgs_needs_one_group_and_a_closure():
    with pytest.raises(OptimizerError, match="parameter groups"):
        LBFGS([{"params": [nn.Parameter(adcuda.zeros(1))]}, {"params": [nn.Parameter(adcuda.zeros(1))]}])
    with pytest.raises(OptimizerError, match="closure"):
        LBFGS([nn.Parameter(adcuda.zeros(1))]).step()


@pytest.mark.parametrize("name", ["adagrad_decay_wd_init", "rmsprop_centered_momentum", "adadelta_rho_wd"])
def test_state_dict_round_trip_continues_the_trajectory(name):
    """Saving after 5 steps and loading into a fresh optimizer gives the same next 5 steps."""
    make = OPTIMIZERS[name]
    At, bt, w, c = least_squares_problem(adcuda)
    opt = make(adcuda, [{"params": [w]}, {"params": [c], "lr": 0.02}])

    def run(opt, w, c, steps):
        out = []
        for _ in range(steps):
            opt.zero_grad()
            ((At @ w + c - bt) ** 2).sum().backward()
            opt.step()
            out.append(np.concatenate([w.detach().numpy().copy(), c.detach().numpy().copy()]))
        return np.array(out)

    run(opt, w, c, 5)
    saved = opt.state_dict()
    w2 = w.detach().clone().requires_grad_()
    c2 = c.detach().clone().requires_grad_()
    opt2 = make(adcuda, [{"params": [w2]}, {"params": [c2], "lr": 0.02}])
    opt2.load_state_dict(saved)
    np.testing.assert_array_equal(run(opt2, w2, c2, 5), run(opt, w, c, 5))


def test_state_dict_keys_match_torch():
    torch = pytest.importorskip("torch")
    for name, kwargs in (("Adagrad", {}), ("RMSprop", {"momentum": 0.9, "centered": True}), ("Adadelta", {})):
        t = torch.ones(3, requires_grad=True)
        a = nn.Parameter(adcuda.ones(3))
        topt, aopt = getattr(torch.optim, name)([t], **kwargs), getattr(adcuda.optim, name)([a], **kwargs)
        t.grad, a.grad = torch.ones(3), adcuda.ones(3)
        topt.step()
        aopt.step()
        assert sorted(topt.state_dict()["state"][0]) == sorted(aopt.state_dict()["state"][0]), name


# ------------------------------------------------------------------------------------------ LBFGS
def _rosenbrock_lbfgs(lib, steps=6, dtype="float64", **kwargs):
    xy = lib.tensor([-1.5, 2.0], dtype=getattr(lib, dtype)).requires_grad_()
    opt = lib.optim.LBFGS([xy], **kwargs)

    def closure():
        opt.zero_grad()
        x, y = xy[0], xy[1]
        loss = (1 - x) ** 2 + 100 * (y - x * x) ** 2
        loss.backward()
        return loss

    history = []
    for _ in range(steps):
        loss = opt.step(closure)
        history.append([float(loss.detach()), *xy.detach().numpy().tolist()])
    return np.array(history), opt


LBFGS_CASES = {
    "fixed_step": dict(lr=0.1, max_iter=10),
    "fixed_step_short_history": dict(lr=0.2, max_iter=7, history_size=3),
    "strong_wolfe": dict(lr=1, max_iter=20, line_search_fn="strong_wolfe"),
    "strong_wolfe_short_history": dict(lr=1, max_iter=5, history_size=2, line_search_fn="strong_wolfe"),
}


@pytest.mark.parametrize("name", sorted(LBFGS_CASES))
def test_lbfgs_matches_torch(name):
    torch = pytest.importorskip("torch")
    ours, opt = _rosenbrock_lbfgs(adcuda, **LBFGS_CASES[name])
    theirs, topt = _rosenbrock_lbfgs(torch, **LBFGS_CASES[name])
    # last-bit differences of the dot products grow over the iterations on this ill-conditioned valley
    np.testing.assert_allclose(ours, theirs, rtol=1e-7, atol=1e-10)
    state, tstate = opt.state[opt._params[0]], topt.state[topt._params[0]]
    assert (state["func_evals"], state["n_iter"]) == (tstate["func_evals"], tstate["n_iter"])


def test_lbfgs_strong_wolfe_solves_rosenbrock():
    history, _ = _rosenbrock_lbfgs(adcuda, steps=5, lr=1, max_iter=50, line_search_fn="strong_wolfe")
    np.testing.assert_allclose(history[-1, 1:], [1.0, 1.0], atol=1e-5)


def test_lbfgs_trains_a_module_float32():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    X = rng.standard_normal((16, 5)).astype(np.float32)
    Y = rng.standard_normal((16, 2)).astype(np.float32)
    W = (rng.standard_normal((2, 5)) * 0.3).astype(np.float32)

    def run(lib):
        model = lib.nn.Linear(5, 2)
        with lib.no_grad():
            model.weight.copy_(lib.tensor(W))
            model.bias.zero_()
        opt = lib.optim.LBFGS(model.parameters(), history_size=5, max_iter=8, line_search_fn="strong_wolfe")
        x, y = lib.tensor(X), lib.tensor(Y)

        def closure():
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            return loss

        return [float(opt.step(closure)) for _ in range(3)], model.weight.detach().numpy()

    (ours, w_ours), (theirs, w_theirs) = run(adcuda), run(torch)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
    np.testing.assert_allclose(w_ours, w_theirs, rtol=1e-3, atol=1e-4)


# ------------------------------------------------------------------------------------------ schedulers
def _lrs(lib, make_sched, steps=25, base_lr=0.1, optimizer="SGD", metrics=None):
    p = lib.zeros(1, requires_grad=True)
    groups = [{"params": [p]}, {"params": [lib.zeros(1, requires_grad=True)], "lr": base_lr * 3}]
    opt = lib.optim.SGD(groups, lr=base_lr, momentum=0.9) if optimizer == "SGD" else lib.optim.Adam(groups, lr=base_lr)
    scheduler = make_sched(lib, opt)
    rows = []

    def record():
        momenta = [g["momentum"] if optimizer == "SGD" else g["betas"][0] for g in opt.param_groups]
        rows.append(list(scheduler.get_last_lr()) + momenta)

    record()
    for i in range(steps):
        p.grad = lib.ones(1)
        opt.step()
        if metrics is None:
            scheduler.step()
        else:
            scheduler.step(metrics[i])
        record()
        assert [g["lr"] for g in opt.param_groups] == rows[-1][:2]
    return np.array(rows)


SCHEDULERS = {
    "exponential": lambda lib, opt: lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.9),
    "linear_default": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt),
    "linear_down": lambda lib, opt: lib.optim.lr_scheduler.LinearLR(
        opt, start_factor=1.0, end_factor=0.1, total_iters=12
    ),
    "sequential_warmup_cosine": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt,
        [
            lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=5),
            lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=15, eta_min=1e-3),
        ],
        milestones=[5],
    ),
    "sequential_three": lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt,
        [
            lib.optim.lr_scheduler.ExponentialLR(opt, gamma=0.8),
            lib.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5),
            lib.optim.lr_scheduler.LinearLR(opt, start_factor=0.5, total_iters=4),
        ],
        milestones=[4, 12],
    ),
    "onecycle_cos": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=25),
    "onecycle_linear_per_group": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(
        opt,
        max_lr=[0.5, 2.0],
        epochs=5,
        steps_per_epoch=5,
        pct_start=0.4,
        anneal_strategy="linear",
        base_momentum=0.8,
        max_momentum=[0.9, 0.99],
        div_factor=10.0,
        final_div_factor=100.0,
    ),
    "onecycle_three_phase": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.3, total_steps=25, three_phase=True
    ),
    "onecycle_no_momentum": lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=0.3, total_steps=30, cycle_momentum=False
    ),
}


@pytest.mark.parametrize("optimizer", ["SGD", "Adam"])
@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_scheduler_sequences_match_torch(name, optimizer):
    torch = pytest.importorskip("torch")
    np.testing.assert_allclose(
        _lrs(adcuda, SCHEDULERS[name], optimizer=optimizer),
        _lrs(torch, SCHEDULERS[name], optimizer=optimizer),
        rtol=1e-12,
    )


_METRICS = [
    1.0,
    0.9,
    0.95,
    0.95,
    0.94,
    0.96,
    0.97,
    0.9,
    0.91,
    0.92,
    0.93,
    0.94,
    0.95,
    0.96,
    0.8,
    0.8,
    0.8,
    0.8,
    0.8,
    0.81,
    0.82,
    0.83,
    0.84,
    0.85,
    0.86,
]
PLATEAU = {
    "default_patience_2": dict(patience=2),
    "max_abs_cooldown": dict(mode="max", patience=1, threshold=0.02, threshold_mode="abs", cooldown=2, factor=0.5),
    "min_lr_per_group": dict(patience=0, factor=0.3, min_lr=[0.01, 0.05]),
    "rel_threshold": dict(patience=1, threshold=0.05, cooldown=1),
}


@pytest.mark.parametrize("name", sorted(PLATEAU))
def test_reduce_on_plateau_matches_torch(name):
    torch = pytest.importorskip("torch")

    def make(lib, opt):
        return lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **PLATEAU[name])

    np.testing.assert_allclose(_lrs(adcuda, make, metrics=_METRICS), _lrs(torch, make, metrics=_METRICS), rtol=1e-12)


def test_reduce_on_plateau_closed_form_and_state_dict():
    p = nn.Parameter(adcuda.zeros(1))
    opt = adcuda.optim.SGD([p], lr=1.0)
    s = sched.ReduceLROnPlateau(opt, patience=1, factor=0.5, min_lr=0.2)
    lrs = []
    for metric in [1.0, 1.0, 1.0, 1.0, 1.0, 0.5, 1.0, 1.0, 1.0, 1.0]:
        s.step(metric)
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25, 0.25, 0.2, 0.2, 0.2]
    s2 = sched.ReduceLROnPlateau(adcuda.optim.SGD([p], lr=1.0))
    s2.load_state_dict(s.state_dict())
    assert (s2.best, s2.num_bad_epochs, s2.patience, s2.min_lrs) == (0.5, s.num_bad_epochs, 1, [0.2])


def test_sequential_state_dict_round_trip():
    def build():
        opt = adcuda.optim.SGD([nn.Parameter(adcuda.zeros(1))], lr=0.1)
        return opt, sched.SequentialLR(
            opt,
            [sched.LinearLR(opt, start_factor=0.1, total_iters=3), sched.ExponentialLR(opt, gamma=0.5)],
            milestones=[3],
        )

    opt, s = build()
    for _ in range(4):
        s.step()
    opt2, s2 = build()
    s2.load_state_dict(s.state_dict())
    opt2.param_groups[0]["lr"] = opt.param_groups[0]["lr"]
    s.step()
    s2.step()
    assert s2.get_last_lr() == s.get_last_lr()
    assert s2._schedulers[1].last_epoch == s._schedulers[1].last_epoch


def test_scheduler_errors():
    opt = adcuda.optim.SGD([nn.Parameter(adcuda.zeros(1))], lr=0.1)
    with pytest.raises(ValueError, match="start_factor"):
        sched.LinearLR(opt, start_factor=0.0)
    with pytest.raises(ValueError, match="milestone"):
        sched.SequentialLR(opt, [sched.ExponentialLR(opt, 0.9)], milestones=[3])
    with pytest.raises(ValueError, match="ReduceLROnPlateau"):
        sched.SequentialLR(opt, [sched.ExponentialLR(opt, 0.9), sched.ReduceLROnPlateau(opt)], milestones=[3])
    with pytest.raises(ValueError, match="factor"):
        sched.ReduceLROnPlateau(opt, factor=1.5)
    with pytest.raises(ValueError, match="mode"):
        sched.ReduceLROnPlateau(opt, mode="lowest")
    with pytest.raises(ValueError, match="total_steps"):
        sched.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="momentum"):
        sched.OneCycleLR(adcuda.optim.Adagrad([nn.Parameter(adcuda.zeros(1))]), max_lr=1.0, total_steps=5)
    one_cycle = sched.OneCycleLR(opt, max_lr=1.0, total_steps=2, cycle_momentum=False)
    one_cycle.step()
    one_cycle.step()
    with pytest.raises(ValueError, match="total steps"):
        one_cycle.step()
