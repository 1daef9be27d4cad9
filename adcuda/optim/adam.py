"""``Adam`` (L2 weight decay, optional AMSGrad) and ``AdamW`` (decoupled weight decay), with (beyond
PyTorch) float32 master weights for half parameters."""
from .. import dtypes as dt
from ..backends import backend_for
from ..autograd.grad_mode import no_grad
from ..factories import tensor, zeros_like
from .optimizer import Optimizer, OptimizerError, keeps_master_copy, required


class Adam(Optimizer):
    """PyTorch's Adam. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one multi-tensor backend call (``adam_step_``) per step count.
    ``master_weights=True`` steps float16/bfloat16 parameters through float32 masters with float32
    moments (see ``adcuda.optim.optimizer``)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, fused=None, decoupled_weight_decay=False, master_weights=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay, master_weights=master_weights)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        lr = group["lr"]
        if lr is not required and lr < 0.0:
            raise OptimizerError(f"Invalid learning rate: {lr}")
        if group["eps"] < 0.0:
            raise OptimizerError(f"Invalid epsilon value: {group['eps']}")
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise OptimizerError(f"Invalid betas: expected a pair (beta1, beta2), got {betas!r}")
        for i, beta in enumerate(betas):
            if not 0.0 <= beta < 1.0:
                raise OptimizerError(f"Invalid beta parameter at index {i}: {beta}")
        if group["weight_decay"] < 0.0:
            raise OptimizerError(f"Invalid weight_decay value: {group['weight_decay']}")

    def step(self, closure=None):
        loss = self._run_closure(closure)
        self._check_master_groups()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _state_for(self, p, amsgrad, dtype):
        state = self.state[p]
        if "step" not in state:
            state["step"] = tensor(0.0)
            state["exp_avg"] = zeros_like(p.detach(), dtype=dtype)
            state["exp_avg_sq"] = zeros_like(p.detach(), dtype=dtype)
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = zeros_like(p.detach(), dtype=dtype)
        return state

    def _step_group(self, group):
        amsgrad = group["amsgrad"]
        beta1, beta2 = group["betas"]
        # (device, step count, stepped through masters) -> params, grads, exp_avgs, exp_avg_sqs,
        # max_exp_avg_sqs, masters
        batches = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = self._grad_of(p, group["maximize"])
            master = self._master_for(p) if keeps_master_copy(group, p) else None
            state = self._state_for(p, amsgrad, dt.float32 if master is not None else None)
            state["step"] += 1
            batch = batches.setdefault((p.device, int(state["step"].item()), master is not None),
                                       ([], [], [], [], [], []))
            for lst, value in zip(batch, (p, grad, state["exp_avg"]._data, state["exp_avg_sq"]._data,
                                          state["max_exp_avg_sq"]._data if amsgrad else None,
                                          master._data if master is not None else None)):
                lst.append(value)
        for (device, step, with_masters), (params, grads, exp_avgs, exp_avg_sqs, maxes, masters) in batches.items():
            backend_for(device).adam_step_(
                [p._data for p in params], grads, exp_avgs, exp_avg_sqs, step, float(group["lr"]), beta1, beta2,
                group["eps"], group["weight_decay"], group["decoupled_weight_decay"],
                masters if with_masters else None, maxes if amsgrad else None)
            for p in params:
                p._version.value += 1
            if with_masters:
                self._masters_written(params)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter); PyTorch's default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 foreach=None, maximize=False, fused=None, master_weights=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         fused=fused, decoupled_weight_decay=True, master_weights=master_weights)
