"""Clearing parameters' gradients: what ``Module.zero_grad`` and ``Optimizer.zero_grad`` share."""


def zero_grads(parameters, set_to_none=True):
    """Drop each gradient (``set_to_none``, PyTorch's default: the next backward allocates fresh ones)
    or zero it in place, detached from any graph that produced it."""
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
        p.grad.zero_()
