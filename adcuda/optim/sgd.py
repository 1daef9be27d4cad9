"""``SGD`` with momentum, dampening, Nesterov momentum, weight decay, ``maximize`` and (beyond
PyTorch) float32 master weights for half parameters."""

from collections.abc import Callable
from typing import Any

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..factories import zeros_like
from ..ops.optim import _fused_sgd_
from .optimizer import Optimizer, OptimizerError, ParamsT, hyperparameters, keeps_master_copy


class SGD(Optimizer):
    """PyTorch's SGD. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one fused multi-tensor op per device (``adcuda._fused_sgd_``). ``master_weights=True`` steps
    float16/bfloat16 parameters through float32 masters with float32 momentum buffers (see
    ``adcuda.optim.optimizer``)."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        momentum: float = 0,
        dampening: float = 0,
        weight_decay: float = 0,
        nesterov: bool = False,
        *,
        maximize: bool = False,
        foreach: bool | None = None,
        fused: bool | None = None,
        master_weights: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _nonnegative = ("lr", "momentum", "weight_decay")
    # the op each group's step is (graph capture's replay steps plain float32 groups by its primitive
    # directly: adcuda/capture/host_steps.py)
    _fused_op = _fused_sgd_

    def _validate_group(self, group):
        super()._validate_group(group)
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError("Nesterov momentum requires a momentum and zero dampening")

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        self._step_with_scratch(None)
        return loss

    def _step_with_scratch(self, scratch):
        """``step()`` without a closure, its fused op taking its temporaries from ``scratch`` (None:
        new ones); graph capture's replay calls it (see ``Optimizer``)."""
        self._check_master_groups()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group, scratch)

    def _step_group(self, group, scratch):
        momentum = group["momentum"]
        # (device, stepped through masters, first step of the momentum buffers) -> parameters
        batches = {}
        for p in self._params_with_grad(group):
            first_step = momentum != 0 and "momentum_buffer" not in self.state[p]
            batches.setdefault((p.device, keeps_master_copy(group, p), first_step), []).append(p)
        for (_, with_masters, first_step), params in batches.items():
            masters = self._masters_for(params) if with_masters else None
            bufs = [self._momentum_buffer(p, with_masters) for p in params] if momentum != 0 else []
            _fused_sgd_(
                params,
                [p.grad for p in params],
                bufs,
                weight_decay=group["weight_decay"],
                momentum=momentum,
                lr=float(group["lr"]),
                dampening=group["dampening"],
                nesterov=group["nesterov"],
                maximize=group["maximize"],
                is_first_step=first_step,
                master_params=masters,
                scratch=scratch,
            )
            if with_masters:
                self._masters_written(params)

    def _momentum_buffer(self, p, in_float32):
        state = self.state[p]
        buf = state.get("momentum_buffer")
        if buf is None:
            buf = state["momentum_buffer"] = zeros_like(p.detach(), dtype=dt.float32 if in_float32 else None)
        return buf
