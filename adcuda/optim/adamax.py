"""``Adamax``: Adam with the infinity norm of past gradients in place of their second moment."""

from collections.abc import Callable
from typing import Any

from ..ops.elementwise import maximum
from ._adam_family import ADAM_NONNEGATIVE, first_moments
from .optimizer import Optimizer, ParamsT, decayed_gradient, hyperparameters


class Adamax(Optimizer):
    """PyTorch's Adamax: ``m = lerp(m, g, 1 - beta1)``, ``u = max(beta2 * u, |g| + eps)``,
    ``p -= lr / (1 - beta1**t) * m / u``. ``foreach``, ``capturable`` and ``differentiable`` are
    accepted for compatibility; the step runs public in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 2e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        capturable: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _checks_betas = True
    _nonnegative = ADAM_NONNEGATIVE

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _step_group(self, group):
        lr, eps = group["lr"], group["eps"]
        beta1, beta2 = group["betas"]
        for p in self._params_with_grad(group):
            state = first_moments(self.state[p], p, "exp_inf")
            state["step"].add_(1)
            grad = decayed_gradient(p, group)
            state["exp_avg"].lerp_(grad, 1 - beta1)
            exp_inf = state["exp_inf"]
            exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
            clr = lr / (1 - beta1 ** state["step"].item())
            p.addcdiv_(state["exp_avg"], exp_inf, value=-clr)
