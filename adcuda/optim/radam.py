"""``RAdam``: Adam whose adaptive step is rectified while the second moment's variance is unreliable."""

import math
from collections.abc import Callable
from typing import Any

from ._adam_family import ADAM_NONNEGATIVE, first_moments
from .optimizer import Optimizer, ParamsT, decayed_gradient, hyperparameters


class RAdam(Optimizer):
    """PyTorch's RAdam: an SGD-with-momentum step (bias corrected) while the approximated SMA length
    ``rho_t`` is at most 5, then the rectified adaptive step; ``decoupled_weight_decay=True`` is
    RAdamW's. ``foreach``, ``capturable`` and ``differentiable`` are accepted for compatibility; the step
    runs public in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        decoupled_weight_decay: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        capturable: bool = False,
        differentiable: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _checks_betas = True
    _nonnegative = ADAM_NONNEGATIVE

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _step_group(self, group):
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        rho_inf = 2 / (1 - beta2) - 1
        for p in self._params_with_grad(group):
            state = first_moments(self.state[p], p, "exp_avg_sq")
            state["step"].add_(1)
            step = state["step"].item()
            grad = decayed_gradient(p, group)
            state["exp_avg"].lerp_(grad, 1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1**step
            bias_correction2 = 1 - beta2**step
            corrected = state["exp_avg"] / bias_correction1
            rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2
            if rho_t > 5.0:
                rect = math.sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t))
                adaptive = (bias_correction2**0.5) / state["exp_avg_sq"].sqrt().add_(eps)
                p.add_(corrected * lr * adaptive * rect, alpha=-1.0)
            else:
                p.add_(corrected * lr, alpha=-1.0)
