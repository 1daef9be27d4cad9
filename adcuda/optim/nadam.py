"""``NAdam``: Adam with Nesterov momentum and PyTorch's momentum-decay schedule."""

from collections.abc import Callable
from typing import Any

from .. import dtypes as dt
from ..factories import ones
from ._adam_family import ADAM_NONNEGATIVE, first_moments
from .optimizer import Optimizer, ParamsT, decayed_gradient, hyperparameters


class NAdam(Optimizer):
    """PyTorch's NAdam: ``mu_t = beta1 * (1 - 0.5 * 0.96**(t * momentum_decay))``, the product of the
    mu_t kept in float32 as PyTorch keeps it, and the Nesterov step from the gradient and from the first
    moment; ``decoupled_weight_decay=True`` is NAdamW's. ``foreach``, ``capturable`` and
    ``differentiable`` are accepted for compatibility; the step runs public in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum_decay: float = 4e-3,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _checks_betas = True
    _nonnegative = (*ADAM_NONNEGATIVE, "momentum_decay")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _step_group(self, group):
        lr, eps, momentum_decay = group["lr"], group["eps"], group["momentum_decay"]
        beta1, beta2 = group["betas"]
        for p in self._params_with_grad(group):
            state = self.state[p]
            if not state:
                first_moments(state, p, "exp_avg_sq")
                state["mu_product"] = ones((), dtype=dt.float32)
            state["step"].add_(1)
            step = state["step"].item()
            grad = decayed_gradient(p, group)
            bias_correction2 = 1 - beta2**step
            mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
            mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
            state["mu_product"].mul_(mu)
            mu_product = state["mu_product"].item()
            state["exp_avg"].lerp_(grad, 1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = state["exp_avg_sq"].div(bias_correction2).sqrt().add_(eps)
            p.addcdiv_(grad, denom, value=-lr * (1.0 - mu) / (1.0 - mu_product))
            p.addcdiv_(state["exp_avg"], denom, value=(-lr * mu_next) / (1.0 - mu_product * mu_next))
