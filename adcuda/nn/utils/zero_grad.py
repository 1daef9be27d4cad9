"""Clearing parameters' gradients for ``Module.zero_grad`` (``Optimizer.zero_grad`` applies the same
rule itself: adcuda.optim does not import adcuda.nn)."""

from ...ops.optim import _foreach_zero_


def zero_grads(parameters, set_to_none=True):
    """Drop each gradient (``set_to_none``, PyTorch's default: the next backward allocates fresh ones)
    or zero it in place, detached from any graph that produced it."""
    zeroed = []
    for p in parameters:
        if p.grad is None:
            continue
        if set_to_none:
            p.grad = None
            continue
        if p.grad.grad_fn is not None:
            p.grad.detach_()
        else:
            p.grad.requires_grad_(False)
        zeroed.append(p.grad)
    _foreach_zero_(zeroed)
