"""Losses added for PyTorch scripts: smooth_l1_loss, huber_loss, binary_cross_entropy, kl_div (function
and nn module), and nll_loss / cross_entropy with class weights and probability targets.

Each has a float64 gradcheck; where PyTorch is installed, values and gradients are compared with it.
"""

import numpy as np
import pytest

import adcuda
import adcuda.nn as nn
import adcuda.nn.functional as F
from adcuda.autograd import gradcheck
from adcuda.errors import IndexOutOfRangeError, ShapeError

f64 = adcuda.float64


def rnd(*shape, seed=0, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def probs(*shape, seed=0):
    return 1.0 / (1.0 + np.exp(-rnd(*shape, seed=seed, scale=2.0)))


def log_probs(*shape, seed=0):
    x = rnd(*shape, seed=seed)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


TARGET = np.array([0, 3, -100, 2, 3])
WEIGHT = np.array([0.5, 1.0, 2.0, 0.25])

# name -> (adcuda/torch call taking (F, input, *other tensors), input array, other arrays)
CASES = {
    "smooth_l1": (lambda F, x, t: F.smooth_l1_loss(x, t), rnd(3, 5, scale=2), [rnd(3, 5, seed=1)]),
    "smooth_l1_beta_sum": (
        lambda F, x, t: F.smooth_l1_loss(x, t, beta=0.5, reduction="sum"),
        rnd(3, 5, scale=2),
        [rnd(3, 5, seed=1)],
    ),
    "smooth_l1_beta0_none": (
        lambda F, x, t: F.smooth_l1_loss(x, t, beta=0.0, reduction="none"),
        rnd(4, scale=2),
        [rnd(4, seed=1)],
    ),
    "huber": (lambda F, x, t: F.huber_loss(x, t), rnd(3, 5, scale=2), [rnd(3, 5, seed=1)]),
    "huber_delta_none": (
        lambda F, x, t: F.huber_loss(x, t, reduction="none", delta=0.3),
        rnd(2, 3, scale=2),
        [rnd(2, 3, seed=1)],
    ),
    "bce": (lambda F, x, t: F.binary_cross_entropy(x, t), probs(4, 3), [probs(4, 3, seed=1)]),
    "bce_weight_sum": (
        lambda F, x, t, w: F.binary_cross_entropy(x, t, weight=w, reduction="sum"),
        probs(4, 3),
        [probs(4, 3, seed=1), np.abs(rnd(3, seed=2))],
    ),
    "bce_logits_weight_pos_weight": (
        lambda F, x, t, w, p: F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=p),
        rnd(4, 3, scale=3),
        [probs(4, 3, seed=1), np.abs(rnd(4, 3, seed=2)), np.abs(rnd(3, seed=3)) + 0.5],
    ),
    "kl_div_batchmean": (
        lambda F, x, t: F.kl_div(x, t, reduction="batchmean"),
        log_probs(3, 4),
        [np.exp(log_probs(3, 4, seed=1))],
    ),
    "kl_div_mean": (lambda F, x, t: F.kl_div(x, t), log_probs(3, 4), [np.exp(log_probs(3, 4, seed=1))]),
    "kl_div_zero_target_none": (
        lambda F, x, t: F.kl_div(x, t, reduction="none"),
        log_probs(2, 3),
        [np.array([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]])],
    ),
    "kl_div_log_target_sum": (
        lambda F, x, t: F.kl_div(x, t, reduction="sum", log_target=True),
        log_probs(3, 4),
        [log_probs(3, 4, seed=1)],
    ),
    "nll_weight_ignore": (lambda F, x, t, w: F.nll_loss(x, t, weight=w), log_probs(5, 4), [TARGET, WEIGHT]),
    "nll_weight_sum_3d": (
        lambda F, x, t, w: F.nll_loss(x, t, weight=w, reduction="sum"),
        rnd(2, 4, 3),
        [np.array([[0, 1, 3], [2, 2, 0]]), WEIGHT],
    ),
    "cross_entropy_weight": (lambda F, x, t, w: F.cross_entropy(x, t, weight=w), rnd(5, 4), [TARGET, WEIGHT]),
    "cross_entropy_weight_smoothing": (
        lambda F, x, t, w: F.cross_entropy(x, t, weight=w, label_smoothing=0.1),
        rnd(5, 4),
        [TARGET, WEIGHT],
    ),
    "cross_entropy_probabilities": (
        lambda F, x, t: F.cross_entropy(x, t),
        rnd(3, 4),
        [np.exp(log_probs(3, 4, seed=1))],
    ),
    "cross_entropy_probabilities_weight_3d": (
        lambda F, x, t, w: F.cross_entropy(x, t, weight=w),
        rnd(2, 4, 3),
        [np.exp(log_probs(2, 3, 4, seed=1)).transpose(0, 2, 1).copy(), WEIGHT],
    ),
}


# targets with zeros: t log t has no derivative at t = 0, so only the input is differentiated
INPUT_ONLY = {"kl_div_zero_target_none"}


def _ours(array, requires_grad=False):
    if array.dtype.kind in "iu":
        return adcuda.tensor(array)
    return adcuda.tensor(array, dtype=f64, requires_grad=requires_grad)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradcheck(name):
    fn, x, others = CASES[name]
    # the differentiable inputs: the input and every floating point extra (targets, weights)
    inputs = [_ours(x, True)] + [_ours(o, o.dtype.kind == "f" and name not in INPUT_ONLY) for o in others]
    assert gradcheck(lambda *a: fn(F, *a), tuple(inputs), eps=1e-6, atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_pytorch(name):
    torch = pytest.importorskip("torch")
    fn, x, others = CASES[name]
    # gradients for the input and a floating point target (PyTorch differentiates no class weights)
    wants = [True] + [i == 0 and o.dtype.kind == "f" and name not in INPUT_ONLY for i, o in enumerate(others)]
    ours = [_ours(a, w) for a, w in zip([x] + others, wants)]
    theirs = [torch.tensor(a, requires_grad=w) for a, w in zip([x] + others, wants)]
    out, expected = fn(F, *ours), fn(torch.nn.functional, *theirs)
    np.testing.assert_allclose(out.detach().numpy(), expected.detach().numpy(), rtol=1e-10, atol=1e-12)
    out.sum().backward()
    expected.sum().backward()
    for a, b in zip(ours, theirs):
        if b.grad is not None:
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_bce_saturated_probabilities_have_finite_gradients():
    # sigmoid of a large logit is exactly 1.0 in float32: PyTorch bounds the log at -100 and keeps
    # the gradient finite, and so must we
    x = adcuda.tensor([0.0, 1.0, 0.5], requires_grad=True)
    t = adcuda.tensor([1.0, 0.0, 1.0])
    loss = F.binary_cross_entropy(x, t, reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [100.0, 100.0, np.log(2.0)], rtol=1e-6)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()


@pytest.mark.parametrize(
    "module, functional, kwargs",
    [
        (nn.SmoothL1Loss, F.smooth_l1_loss, {"beta": 0.5, "reduction": "sum"}),
        (nn.HuberLoss, F.huber_loss, {"delta": 0.5, "reduction": "none"}),
        (nn.BCELoss, F.binary_cross_entropy, {"reduction": "mean"}),
        (nn.KLDivLoss, F.kl_div, {"reduction": "batchmean", "log_target": False}),
    ],
)
def test_modules_call_their_functions(module, functional, kwargs):
    x, t = adcuda.tensor(probs(3, 4)), adcuda.tensor(probs(3, 4, seed=1))
    if module is nn.KLDivLoss:
        x = x.log()
    np.testing.assert_allclose(module(**kwargs)(x, t).numpy(), functional(x, t, **kwargs).numpy())


def test_modules_take_pytorch_positional_arguments():
    w = adcuda.tensor(WEIGHT)
    assert nn.CrossEntropyLoss(w, None, 2).ignore_index == 2
    assert nn.NLLLoss(w, None, 1, None, "sum").reduction == "sum"
    assert nn.MSELoss(None, False).reduction == "none"
    assert nn.KLDivLoss(reduction="batchmean").reduction == "batchmean"
    with pytest.raises(ValueError, match="batchmean"):
        nn.KLDivLoss(reduction="avg")


def test_bad_input_names_the_op_and_shapes():
    x = adcuda.tensor(probs(3, 4))
    with pytest.raises(ShapeError, match=r"binary_cross_entropy.*\(3, 1\).*\(3, 4\)"):
        F.binary_cross_entropy(x, adcuda.tensor(probs(3, 1)))
    with pytest.raises(ValueError, match="binary_cross_entropy.*between 0 and 1"):
        F.binary_cross_entropy(x * 2.0, x)
    with pytest.raises(ShapeError, match=r"smooth_l1_loss.*\(3, 4\) and \(2, 4\)"):
        F.smooth_l1_loss(x, adcuda.tensor(rnd(2, 4)))
    with pytest.raises(ShapeError, match=r"kl_div.*\(3, 4\) and \(5,\)"):
        F.kl_div(x, adcuda.tensor(rnd(5)))
    with pytest.raises(ValueError, match="huber_loss: delta"):
        F.huber_loss(x, x, delta=0.0)
    with pytest.raises(ShapeError, match=r"nll_loss.*weight.*\(3,\)"):
        F.nll_loss(x, adcuda.tensor([0, 1, 2]), weight=adcuda.tensor([1.0, 2.0, 3.0]))


def test_class_target_check_names_the_first_target_out_of_range():
    x = adcuda.tensor(rnd(2, 3, 4))  # (N, C, d): the targets (N, d) are checked in row-major order
    with pytest.raises(IndexOutOfRangeError, match=r"cross_entropy: target 5 is out of bounds for 3 classes"):
        F.cross_entropy(x, adcuda.tensor([[0, -100, 5, 7], [-1, 2, 2, 2]]))
    with pytest.raises(IndexOutOfRangeError, match=r"nll_loss: target -2 .*ignore_index=-1\)"):
        F.nll_loss(x, adcuda.tensor([[0, -1, 2, 1], [-2, 2, 3, 2]]), ignore_index=-1)
    F.nll_loss(x, adcuda.tensor([[0, -1, 2, 1], [-1, 2, 1, 2]]), ignore_index=-1)  # ignore_index passes
    empty = F.cross_entropy(adcuda.tensor(rnd(0, 3, 4)), adcuda.zeros(0, 4, dtype=adcuda.int64), reduction="sum")
    assert empty.item() == 0.0  # no targets: nothing to check


@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_the_plain_class_loss_path_keeps_values_errors_and_recording(loss):
    # float32 (N, C) input, int64 targets and nothing to record take the primitives' direct path
    # (ops/softmax_loss.py's _plain_classes): the same values as PyTorch's, the targets checked and named
    # by the op, and an input that requires grad still recorded
    torch = pytest.importorskip("torch")

    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    t = np.array([0, 4, -100, 2, 1, 4])
    w = rng.random(5).astype(np.float32)
    f, ref = getattr(F, loss), getattr(torch.nn.functional, loss)
    for reduction in ("mean", "sum", "none"):
        for weight in (None, w):
            got = f(
                adcuda.tensor(x),
                adcuda.tensor(t),
                None if weight is None else adcuda.tensor(weight),
                reduction=reduction,
            )
            expected = ref(
                torch.tensor(x), torch.tensor(t), None if weight is None else torch.tensor(weight), reduction=reduction
            )
            assert got.dtype == adcuda.float32 and tuple(got.shape) == tuple(expected.shape)
            np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(IndexOutOfRangeError, match=f"^{loss}: target 5 is out of bounds"):
        f(adcuda.tensor(x), adcuda.tensor([0, 1, 2, 3, 4, 5]))
    leaf = adcuda.tensor(x, requires_grad=True)
    f(leaf, adcuda.tensor(t)).backward()
    expected = torch.tensor(x, requires_grad=True)
    ref(expected, torch.tensor(t)).backward()
    np.testing.assert_allclose(leaf.grad.numpy(), expected.grad.numpy(), rtol=1e-5, atol=1e-6)
