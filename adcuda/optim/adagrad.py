"""``Adagrad``: per-element learning rates shrinking with the accumulated squared gradients."""

from collections.abc import Callable
from typing import Any

from ..factories import full_like, tensor
from ..ops.optim import _foreach_add_
from .optimizer import Optimizer, ParamsT, decayed_gradient, hyperparameters


class Adagrad(Optimizer):
    """PyTorch's Adagrad: ``sum += g * g``, ``p -= clr * g / (sqrt(sum) + eps)`` with
    ``clr = lr / (1 + (step - 1) * lr_decay)``. As in PyTorch, every parameter's state (``step``,
    ``sum`` filled with ``initial_accumulator_value``) exists from construction on. ``foreach`` and
    ``fused`` are accepted for compatibility; the step runs public in-place ops per parameter."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-2,
        lr_decay: float = 0,
        weight_decay: float = 0,
        initial_accumulator_value: float = 0,
        eps: float = 1e-10,
        foreach: bool | None = None,
        *,
        maximize: bool = False,
        differentiable: bool = False,
        fused: bool | None = None,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = tensor(0.0)
                state["sum"] = full_like(p.detach(), group["initial_accumulator_value"])

    _nonnegative = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        return self._step_each_group(closure)

    def _step_group(self, group):
        params = self._params_with_grad(group)
        states = [self.state[p] for p in params]
        steps = [state["step"] for state in states]
        _foreach_add_(steps, 1)
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        for p, state, step in zip(params, states, steps):
            grad = decayed_gradient(p, group)
            clr = lr / (1 + (step.item() - 1) * lr_decay)
            state["sum"].add_(grad * grad)
            std = state["sum"].sqrt().add_(eps)
            p.add_(grad / std, alpha=-clr)
