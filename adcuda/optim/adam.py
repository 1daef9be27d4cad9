"""``Adam`` (L2 weight decay, optional AMSGrad) and ``AdamW`` (decoupled weight decay), with (beyond
PyTorch) float32 master weights for half parameters."""

from collections.abc import Callable
from typing import Any

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..factories import empty_like, tensor, zeros_like
from ..ops.autocast import publish_working_copy, wanted_working_dtype
from ..ops.optim import _foreach_add_, _fused_adam_, _fused_adamw_
from ._adam_family import ADAM_NONNEGATIVE
from .optimizer import Optimizer, ParamsT, hyperparameters, keeps_master_copy


class Adam(Optimizer):
    """PyTorch's Adam. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one fused multi-tensor op per device (``adcuda._fused_adam_``, or
    ``_fused_adamw_`` with decoupled weight decay).
    ``master_weights=True`` steps float16/bfloat16 parameters through float32 masters with float32
    moments (see ``adcuda.optim.optimizer``). Beyond PyTorch, in the same kernel pass: the
    float16/bfloat16 working copy of each float32 parameter that autocast casts, and the clip
    coefficient of ``clip_grad_norm_`` called on the optimizer (see ``adcuda.optim.optimizer``)."""

    _fuses_clip = True

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        fused: bool | None = None,
        decoupled_weight_decay: bool = False,
        master_weights: bool = False,
    ) -> None:
        super().__init__(params, hyperparameters(locals()))

    _checks_betas = True
    _nonnegative = ADAM_NONNEGATIVE

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        loss = self._run_closure(closure)
        self._step_with_scratch(None)
        return loss

    def _step_with_scratch(self, scratch):
        """``step()`` without a closure, its fused op taking its temporaries from ``scratch`` (None:
        new ones); graph capture's replay calls it (see ``Optimizer``)."""
        self._check_master_groups()
        multipliers, self._grad_multipliers = self._grad_multipliers, {}
        with no_grad():
            for group in self.param_groups:
                self._step_group(group, scratch, multipliers)

    def _state_for(self, p, amsgrad, dtype):
        state = self.state[p]
        if "step" not in state:
            state["step"] = tensor(0.0)
            state["exp_avg"] = zeros_like(p.detach(), dtype=dtype)
            state["exp_avg_sq"] = zeros_like(p.detach(), dtype=dtype)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = zeros_like(p.detach(), dtype=dtype)
        return state

    def _step_group(self, group, scratch, multipliers):
        amsgrad = group["amsgrad"]
        beta1, beta2 = group["betas"]
        fused = _fused_adamw_ if group["decoupled_weight_decay"] else _fused_adam_
        batches = {}  # (device, stepped through masters, working copy dtype) -> parameters
        for p in self._params_with_grad(group):
            with_masters = keeps_master_copy(group, p)
            working = wanted_working_dtype(p) if not with_masters and p.dtype is dt.float32 else None
            batches.setdefault((p.device, with_masters, working), []).append(p)
        for (device, with_masters, working), params in batches.items():
            masters = self._masters_for(params) if with_masters else None
            states = [self._state_for(p, amsgrad, dt.float32 if with_masters else None) for p in params]
            steps = [state["step"] for state in states]
            _foreach_add_(steps, 1)
            # with working copies, the float32 parameters are the masters the kernel steps, and the
            # copies the half "parameters" it writes from them
            copies = self._working_copies_for(params, working) if working is not None else None
            fused(
                copies if copies is not None else params,
                [p.grad for p in params],
                [state["exp_avg"] for state in states],
                [state["exp_avg_sq"] for state in states],
                [state["max_exp_avg_sq"] for state in states] if amsgrad else [],
                steps,
                lr=float(group["lr"]),
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                amsgrad=amsgrad,
                maximize=group["maximize"],
                master_params=masters if copies is None else params,
                scratch=scratch,
                grad_multiplier=multipliers.get(device),
            )
            if with_masters:
                self._masters_written(params)
            if copies is not None:
                for p, c in zip(params, copies):
                    publish_working_copy(p, c)

    def _working_copies_for(self, params, dtype):
        """Each parameter's working copy in ``dtype`` (made on first use; the step writes all of it)."""
        copies = self.__dict__.setdefault("_working_copies", {})
        out = []
        for p in params:
            c = copies.get(p)
            if c is None or c.dtype is not dtype:
                c = copies[p] = empty_like(p.detach(), dtype=dtype)
            out.append(c)
        return out


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter); PyTorch's default ``weight_decay=1e-2``."""

    def __init__(
        self,
        params: ParamsT,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        amsgrad: bool = False,
        *,
        foreach: bool | None = None,
        maximize: bool = False,
        fused: bool | None = None,
        master_weights: bool = False,
    ) -> None:
        super().__init__(
            params,
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
            foreach=foreach,
            maximize=maximize,
            fused=fused,
            decoupled_weight_decay=True,
            master_weights=master_weights,
        )
