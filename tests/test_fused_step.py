"""The GPT-2 step's fusions on the CPU backend (the reference the CUDA kernels are compared with in
tests/test_cuda_fused_step.py): Adam/AdamW writing the half working copy of float32 weights in the
same pass (read by autocast instead of a cast), and ``Optimizer.clip_grad_norm_`` whose coefficient
Adam/AdamW apply inside the step."""

import numpy as np
import pytest
from helpers import fused_adam_step

import adcuda
from adcuda.ops import autocast as regions

SIZES = [(1,), (7,), (1023,), (3, 5)]


def _model(seed=0):
    adcuda.manual_seed(seed)
    return adcuda.nn.Sequential(adcuda.nn.Linear(7, 33), adcuda.nn.Tanh(), adcuda.nn.Linear(33, 5))


def _batch():
    g = np.random.default_rng(1)
    return adcuda.tensor(g.standard_normal((9, 7)).astype(np.float32)), adcuda.tensor(g.integers(0, 5, 9))


def _train(opt_factory, clip, fused_clip, steps=4, half=False):
    model = _model()
    if half:
        model = model.half()
    opt = opt_factory(model.parameters())
    x, y = _batch()
    norms = []
    for _ in range(steps):
        opt.zero_grad()
        loss = adcuda.nn.functional.cross_entropy(model(x.half() if half else x).float(), y)
        loss.backward()
        if clip is not None:
            if fused_clip:
                norms.append(float(opt.clip_grad_norm_(clip)))
            else:
                norms.append(float(adcuda.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        opt.step()
    return [p.detach().float().numpy() for p in model.parameters()], norms


OPTIMIZERS = {
    "adamw": lambda ps: adcuda.optim.AdamW(ps, lr=1e-2),
    "adam_amsgrad_l2": lambda ps: adcuda.optim.Adam(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    "adam_maximize": lambda ps: adcuda.optim.Adam(ps, lr=1e-2, maximize=True),
    "sgd_momentum": lambda ps: adcuda.optim.SGD(ps, lr=1e-1, momentum=0.9),
    "adamw_masters": lambda ps: adcuda.optim.AdamW(ps, lr=1e-2, master_weights=True),
}


@pytest.mark.parametrize("name", OPTIMIZERS)
@pytest.mark.parametrize("clip", (0.05, 100.0))
def test_optimizer_clip_equals_clip_grad_norm_then_step(name, clip):
    """Bit for bit: the optimizer's clip (inside Adam's step; at once for SGD) and the separate
    nn.utils.clip_grad_norm_ give the same norms and weights, clipping (0.05) or not (100)."""
    half = name == "adamw_masters"
    fused, fused_norms = _train(OPTIMIZERS[name], clip, True, half=half)
    separate, separate_norms = _train(OPTIMIZERS[name], clip, False, half=half)
    assert fused_norms == separate_norms
    for a, b in zip(fused, separate):
        np.testing.assert_array_equal(a, b)


def test_adam_clip_leaves_the_gradients_until_the_step_and_zero_grad_drops_it():
    model = _model()
    opt = adcuda.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = _batch()
    adcuda.nn.functional.cross_entropy(model(x), y).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    norm = opt.clip_grad_norm_(1e-3)
    expected = adcuda.nn.utils.get_total_norm([p.grad for p in model.parameters()])
    assert float(norm) == float(expected) and float(norm) > 1e-3
    for p, g in zip(model.parameters(), grads):
        assert adcuda.equal(p.grad, g)
    opt.zero_grad()
    assert opt._grad_multipliers == {}


def test_clipping_twice_is_clipping_twice():
    """A second clip before the step sees the gradients the first one clipped (as with clip_grad_norm_)."""
    results = []
    for fused in (True, False):
        model = _model()
        opt = adcuda.optim.Adam(model.parameters(), lr=1e-2)
        x, y = _batch()
        adcuda.nn.functional.cross_entropy(model(x), y).backward()
        for clip in (0.5, 0.1):
            if fused:
                results.append(float(opt.clip_grad_norm_(clip)))
            else:
                results.append(float(adcuda.nn.utils.clip_grad_norm_(model.parameters(), clip)))
        opt.step()
        results.append([p.detach().numpy() for p in model.parameters()])
    assert results[0:2] == results[3:5]
    for a, b in zip(results[2], results[5]):
        np.testing.assert_array_equal(a, b)


def test_clip_rejects_a_bad_norm_type():
    opt = adcuda.optim.AdamW(_model().parameters())
    with pytest.raises(adcuda.optim.OptimizerError, match="norm_type"):
        opt.clip_grad_norm_(1.0, norm_type=0)


def test_working_copy_is_the_rounded_master_for_odd_sizes():
    """The fused op with float32 masters and float16 "parameters" (the copies) and float32
    gradients, over tensors of mixed odd sizes: masters as stepped alone, copies their rounding."""
    g = np.random.default_rng(2)
    masters = [adcuda.tensor(g.standard_normal(s).astype(np.float32)) for s in SIZES]
    grads = [adcuda.tensor(g.standard_normal(s).astype(np.float32)) for s in SIZES]
    alone = [m.clone() for m in masters]
    copies = [adcuda.empty(s, dtype=adcuda.float16) for s in SIZES]
    for params, pms in ((copies, masters), (alone, None)):
        m = [adcuda.zeros(s) for s in SIZES]
        v = [adcuda.zeros(s) for s in SIZES]
        steps = [adcuda.tensor(1.0) for _ in SIZES]
        fused_adam_step(params, grads, m, v, steps, master_params=pms)
    for master, a, c in zip(masters, alone, copies):
        np.testing.assert_array_equal(master.numpy(), a.numpy())
        np.testing.assert_array_equal(c.numpy(), master.numpy().astype(np.float16))


def _autocast_training(cache, monkeypatch, steps=4):
    reads = []
    real = regions.working_copy_cast
    monkeypatch.setattr(regions, "working_copy_cast", lambda t, c: reads.append(t) or real(t, c))
    model = _model()
    opt = adcuda.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = _batch()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with adcuda.amp.autocast("cpu", cache_enabled=cache):
            loss = adcuda.nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return model, opt, losses, reads


def test_autocast_reads_the_working_copies_and_trains_identically(monkeypatch):
    model, _, losses, reads = _autocast_training(True, monkeypatch)
    plain, _, plain_losses, plain_reads = _autocast_training(False, monkeypatch)
    assert losses == plain_losses
    for a, b in zip(model.parameters(), plain.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert len(reads) == 3 * 4 and plain_reads == []  # steps 2-4 read the copies of the 4 weights


def test_a_weight_written_elsewhere_is_cast_again(monkeypatch):
    """After an outside in-place write the copy is stale: the region casts the new value."""
    model, opt, _, reads = _autocast_training(True, monkeypatch, steps=2)
    weight = model[0].weight
    with adcuda.no_grad():
        weight.mul_(2.0)
    reads.clear()
    x, _ = _batch()
    with adcuda.amp.autocast("cpu"):
        out = model[0](x)
    assert len(reads) == 1 and reads[0] is model[0].bias  # the bias still reads its copy
    expected = adcuda.nn.functional.linear(x.half(), weight.detach().half(), model[0].bias.detach().half())
    np.testing.assert_array_equal(out.detach().numpy(), expected.numpy())


def test_a_backward_after_the_copies_were_rewritten_fails_loudly(monkeypatch):
    """A graph that saved a copy, kept across the optimizer's step, is not silently wrong."""
    model, opt, _, _ = _autocast_training(True, monkeypatch, steps=2)
    x, y = _batch()
    with adcuda.amp.autocast("cpu"):
        loss = adcuda.nn.functional.cross_entropy(model(x).float(), y)
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(adcuda.errors.AutogradError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("name", ("adamw", "sgd_momentum"))
def test_a_compiled_step_with_the_optimizer_clip_replays_like_eager(name):
    # the pending coefficient is the optimizer's Python state: adcuda.compile must run the clip again
    # on every replay (a host step), or replayed steps would go unclipped
    def run(compiled):
        model = _model()
        opt = OPTIMIZERS[name](model.parameters())
        x, y = _batch()

        def step():
            opt.zero_grad()
            loss = adcuda.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.clip_grad_norm_(0.05)
            opt.step()
            return loss

        step = adcuda.compile(step) if compiled else step
        return [float(step().item()) for _ in range(5)]

    assert run(compiled=True) == run(compiled=False)
