"""``RMSprop``: gradients divided by a running root mean square, optionally centered and with momentum."""

from collections.abc import Callable
from typing import Any

from ..factories import tensor, zeros_like
from ..ops.optim import _foreach_add_
from .optimizer import Optimizer, ParamsT, decayed_gradient, hyperparameters


class RMSprop(Optimizer):
    """PyTorch's RMSprop: ``square_avg = alpha * square_avg + (1 - alpha) * g * g``; ``centered``
    subtracts the square of a running mean of the gradients (``grad_avg``) before the square root;
    ``momentum > 0`` steps through a buffer (``momentum_buffer``). ``foreach``, ``capturable`` and
    ``differentiable`` are accepted for compatibility; the step runs public in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        alpha: float = 0.99,
        eps: float = 1e-8,
        weight_decay: float = 0,
        momentum: float = 0,
        centered: bool = False,
        capturable: bool = False,
        foreach: bool | None = None,
        maximize: bool = False,
        differentiable: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _nonnegative = ("lr", "eps", "momentum", "weight_decay", "alpha")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _state_for(self, p, group):
        state = self.state[p]
        if "step" not in state:
            state["step"] = tensor(0.0)
            state["square_avg"] = zeros_like(p.detach())
            if group["momentum"] > 0:
                state["momentum_buffer"] = zeros_like(p.detach())
            if group["centered"]:
                state["grad_avg"] = zeros_like(p.detach())
        return state

    def _step_group(self, group):
        params = self._params_with_grad(group)
        states = [self._state_for(p, group) for p in params]
        _foreach_add_([state["step"] for state in states], 1)
        lr, alpha, eps, momentum = group["lr"], group["alpha"], group["eps"], group["momentum"]
        for p, state in zip(params, states):
            grad = decayed_gradient(p, group)
            square_avg = state["square_avg"]
            square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
            if group["centered"]:
                grad_avg = state["grad_avg"]
                _lerp_(grad_avg, grad, 1 - alpha)
                avg = square_avg.add(grad_avg * grad_avg, alpha=-1).sqrt_()
            else:
                avg = square_avg.sqrt()
            avg = avg.add_(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                buf.mul_(momentum).add_(grad / avg)
                p.add_(buf, alpha=-lr)
            else:
                p.add_(grad / avg, alpha=-lr)


def _lerp_(start, end, weight):
    """``start += weight * (end - start)`` in place, rounded as PyTorch's ``lerp_`` rounds (from the
    nearer end), so running means match it bit for bit."""
    if weight < 0.5:
        start.add_(end - start, alpha=weight)
    else:
        start.copy_(end - (end - start) * (1 - weight))
