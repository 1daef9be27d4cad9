"""What Adamax, NAdam and RAdam share: PyTorch's constructor checks, their lazily made state and the
gradient a step uses."""

from ..factories import tensor, zeros_like
from .optimizer import OptimizerError, required


def validate_adam_group(name, group):
    """PyTorch's checks of lr, eps, betas and weight_decay, raised as OptimizerError naming the value."""
    for key in ("lr", "eps", "weight_decay"):
        value = group[key]
        if value is not required and value < 0.0:
            raise OptimizerError(f"{name}: invalid {key} value: {value} (must be >= 0)")
    for i, beta in enumerate(group["betas"]):
        if not 0.0 <= beta < 1.0:
            raise OptimizerError(f"{name}: invalid beta parameter at index {i}: {beta} (must be in [0, 1))")


def first_moments(state, p, second):
    """The step counter and the zeroed moment buffers of a parameter's first step (PyTorch makes them
    lazily); ``second`` names the second buffer (exp_avg_sq or exp_inf)."""
    if not state:
        state["step"] = tensor(0.0)
        state["exp_avg"] = zeros_like(p.detach())
        state[second] = zeros_like(p.detach())
    return state


def decayed_gradient(p, group):
    """The gradient a step uses: ``p.grad`` (negated under ``maximize``) plus ``weight_decay * p``, or, with
    ``decoupled_weight_decay``, ``p.grad`` as it is and ``p`` shrunk in place by ``lr * weight_decay``."""
    grad = -p.grad if group["maximize"] else p.grad
    weight_decay = group["weight_decay"]
    if weight_decay != 0:
        if group.get("decoupled_weight_decay"):
            p.mul_(1 - group["lr"] * weight_decay)
        else:
            grad = grad.add(p.detach(), alpha=weight_decay)
    return grad
