"""F.cross_entropy on the GPU as the fused classifier (kernels/softmax_loss.cu, issue 29): the logits stay
in their dtype, the loss is float32 under autocast (PyTorch's policy) with no float32 copy of the logits,
and the gradient comes back in the logits' dtype; checked against the CPU backend (float32 on the same
rounded logits) for every reduction, ignore_index, label smoothing and class weights, on GPT-2's
50257-token vocabulary. Needs a usable CUDA device (or the emulator) and is skipped without one.
"""

import numpy as np
import pytest

import adcuda
import adcuda.nn.functional as F
from adcuda import dtypes as dt

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not adcuda.cuda.is_available(), reason="needs a usable CUDA device"),
]

VOCAB = 50257
# (rtol, atol) of a gradient rounded once to the dtype; losses are float32 sums of float32 row losses
GRAD_TOLERANCE = {dt.float32: (1e-4, 1e-6), dt.float16: (4e-3, 1e-5), dt.bfloat16: (2e-2, 1e-4)}


def logits_in(dtype, n, c, seed):
    """(the logits on the GPU in ``dtype``, the same rounded values as float32 on the CPU)."""
    values = np.random.default_rng(seed).standard_normal((n, c)).astype(np.float32) * 3
    on_gpu = adcuda.tensor(values, device="cuda").to(dtype=dtype)
    return on_gpu, on_gpu.float().cpu()


def loss_and_grad(logits, target, **kwargs):
    leaf = logits.detach().requires_grad_()
    loss = F.cross_entropy(leaf, target, **kwargs)
    (loss.sum() if loss.ndim else loss).backward()
    return loss.detach(), leaf.grad


@pytest.mark.parametrize("dtype", [dt.float32, dt.float16, dt.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize(
    "options",
    [{}, {"ignore_index": 3}, {"label_smoothing": 0.1}, {"weight": True}, {"weight": True, "label_smoothing": 0.2}],
    ids=["plain", "ignore_index", "label_smoothing", "weight", "weight+smoothing"],
)
def test_cross_entropy_matches_the_cpu_on_the_gpt2_vocabulary(dtype, reduction, options):
    n = 5
    logits, reference = logits_in(dtype, n, VOCAB, seed=1)
    target_host = np.random.default_rng(2).integers(0, VOCAB, n)
    target_host[1] = 3  # the row ignore_index=3 drops
    kwargs = dict(options, reduction=reduction)
    if kwargs.pop("weight", False):
        weight_host = np.random.default_rng(3).uniform(0.25, 2.0, VOCAB).astype(np.float32)
        kwargs["weight"] = adcuda.tensor(weight_host, device="cuda")
        reference_kwargs = dict(kwargs, weight=adcuda.tensor(weight_host))
    else:
        reference_kwargs = kwargs
    loss, grad = loss_and_grad(logits, adcuda.tensor(target_host, device="cuda"), **kwargs)
    expected_loss, expected_grad = loss_and_grad(reference, adcuda.tensor(target_host), **reference_kwargs)
    assert loss.dtype is dtype and grad.dtype is dtype  # outside autocast: PyTorch's dtypes
    rtol = {dt.float32: 1e-5, dt.float16: 1e-3, dt.bfloat16: 8e-3}[dtype]  # the loss's one rounding
    np.testing.assert_allclose(loss.float().cpu().numpy(), expected_loss.numpy(), rtol=rtol, atol=1e-5)
    rtol, atol = GRAD_TOLERANCE[dtype]
    np.testing.assert_allclose(grad.float().cpu().numpy(), expected_grad.numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("dtype", [dt.float16, dt.bfloat16], ids=str)
def test_autocast_keeps_the_logits_in_half_and_makes_no_float32_copy(dtype):
    """Under autocast the loss is float32 (PyTorch's cross_entropy policy) yet the half logits are read
    as they are: the step allocates far less than one float32 copy of the (rows, vocabulary) logits,
    and their gradient is half."""
    n = 16
    logits, reference = logits_in(dtype, n, VOCAB, seed=4)
    leaf = logits.detach().requires_grad_()
    target_host = np.random.default_rng(5).integers(0, VOCAB, n)
    target = adcuda.tensor(target_host, device="cuda")
    adcuda.cuda.synchronize()
    adcuda.cuda.reset_peak_memory_stats()
    before = adcuda.cuda.memory_allocated()
    with adcuda.amp.autocast("cuda", dtype=dtype):
        loss = F.cross_entropy(leaf, target, label_smoothing=0.1)
    loss.backward()
    adcuda.cuda.synchronize()
    grown = adcuda.cuda.max_memory_allocated() - before
    assert loss.dtype is dt.float32 and leaf.grad.dtype is dtype
    float32_copy = n * VOCAB * 4
    # the half gradient (n * VOCAB * 2 bytes) and a few per-row values; a float32 copy would add 2x that
    assert grown < float32_copy, f"{grown} bytes allocated; a float32 copy of the logits is {float32_copy}"
    expected_loss, expected_grad = loss_and_grad(reference, adcuda.tensor(target_host), label_smoothing=0.1)
    np.testing.assert_allclose(loss.item(), expected_loss.item(), rtol=1e-5)
    rtol, atol = GRAD_TOLERANCE[dtype]
    np.testing.assert_allclose(leaf.grad.float().cpu().numpy(), expected_grad.numpy(), rtol=rtol, atol=atol)


def test_class_weights_that_require_grad_get_their_gradient():
    logits, reference = logits_in(dt.float32, 6, 9, seed=6)
    target_host = np.array([0, 8, 3, -100, 3, 1])
    weight_host = np.linspace(0.5, 2.0, 9).astype(np.float32)
    grads = []
    for device, x in (("cuda", logits), ("cpu", reference)):
        weight = adcuda.tensor(weight_host, device=device, requires_grad=True)
        F.cross_entropy(x, adcuda.tensor(target_host, device=device), weight=weight, label_smoothing=0.1).backward()
        grads.append(weight.grad.cpu().numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_and_multi_margin_losses_match_the_cpu(reduction, weighted):
    # the class losses' one primitive each (the reduction inside): the CUDA backend composes its kernels
    rng = np.random.default_rng(4)
    scores = rng.standard_normal((6, 5)).astype(np.float32)
    scores[3, 2] = np.nan  # a NaN hinge adds nothing to multi_margin_loss; nll_loss's row 3 is ignored
    target = rng.integers(0, 5, 6)
    target[3] = -100
    weight = rng.random(5).astype(np.float32) if weighted else None
    cases = [
        lambda m, x, t, w: F.nll_loss(x, t, weight=w, reduction=reduction),
        lambda m, x, t, w: F.multi_margin_loss(x, m.where(t < 0, 0, t), p=2, margin=0.5, weight=w, reduction=reduction),
    ]
    for case in cases:
        results = []
        for device in ("cpu", "cuda"):
            x = adcuda.tensor(scores, device=device).requires_grad_()
            t = adcuda.tensor(target, device=device)
            w = None if weight is None else adcuda.tensor(weight, device=device)
            loss = case(adcuda, x, t, w)
            (loss.sum() if loss.ndim else loss).backward()
            results.append((loss.detach().cpu().numpy(), x.grad.cpu().numpy()))
        for got, want in zip(results[1], results[0]):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
