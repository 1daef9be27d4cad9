"""``Adadelta``: step sizes from running averages of squared gradients and squared updates."""

from collections.abc import Callable
from typing import Any

from ..factories import tensor, zeros_like
from ..ops.optim import _foreach_add_
from .optimizer import Optimizer, OptimizerError, ParamsT, decayed_gradient, hyperparameters


class Adadelta(Optimizer):
    """PyTorch's Adadelta (Zeiler 2012): ``square_avg`` and ``acc_delta`` decay with ``rho``; the
    update ``sqrt(acc_delta + eps) / sqrt(square_avg + eps) * g`` is scaled by ``lr``. ``foreach``,
    ``capturable`` and ``differentiable`` are accepted for compatibility; the step runs public
    in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1.0,
        rho: float = 0.9,
        eps: float = 1e-6,
        weight_decay: float = 0,
        foreach: bool | None = None,
        *,
        capturable: bool = False,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _nonnegative = ("lr", "eps", "weight_decay")

    def _validate_group(self, group):
        super()._validate_group(group)
        if not 0.0 <= group["rho"] <= 1.0:
            raise OptimizerError(f"Adadelta: Invalid rho value: {group['rho']} (must be in [0, 1])")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _state_for(self, p):
        state = self.state[p]
        if "step" not in state:
            state["step"] = tensor(0.0)
            state["square_avg"] = zeros_like(p.detach())
            state["acc_delta"] = zeros_like(p.detach())
        return state

    def _step_group(self, group):
        params = self._params_with_grad(group)
        states = [self._state_for(p) for p in params]
        _foreach_add_([state["step"] for state in states], 1)
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        for p, state in zip(params, states):
            grad = decayed_gradient(p, group)
            square_avg, acc_delta = state["square_avg"], state["acc_delta"]
            square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
            acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
            p.add_(delta, alpha=-lr)
