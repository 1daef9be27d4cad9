"""``Adam`` (L2 weight decay, optional AMSGrad) and ``AdamW`` (decoupled weight decay)."""
from ..autograd.grad_mode import no_grad
from ..factories import tensor, zeros_like
from .optimizer import Optimizer, OptimizerError, required


class Adam(Optimizer):
    """PyTorch's Adam. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one multi-tensor backend call (``adam_step_``) per step count."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False, *,
                 foreach=None, maximize=False, fused=None, decoupled_weight_decay=False):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                        maximize=maximize, foreach=foreach, fused=fused,
                        decoupled_weight_decay=decoupled_weight_decay)
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
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _state_for(self, p, amsgrad):
        state = self.state[p]
        if not state:
            state["step"] = tensor(0.0)
            state["exp_avg"] = zeros_like(p.detach())
            state["exp_avg_sq"] = zeros_like(p.detach())
        if amsgrad and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = zeros_like(p.detach())
        return state

    def _step_group(self, group):
        amsgrad = group["amsgrad"]
        beta1, beta2 = group["betas"]
        batches = {}  # (device, step count) -> params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = self._grad_of(p, group["maximize"])
            state = self._state_for(p, amsgrad)
            state["step"] += 1
            batch = batches.setdefault((p.device, int(state["step"].item())), ([], [], [], [], []))
            for lst, value in zip(batch, (p._data, grad, state["exp_avg"]._data, state["exp_avg_sq"]._data,
                                          state["max_exp_avg_sq"]._data if amsgrad else None)):
                lst.append(value)
            p._version.value += 1
        for (device, step), (params, grads, exp_avgs, exp_avg_sqs, maxes) in batches.items():
            device.backend.adam_step_(
                params, grads, exp_avgs, exp_avg_sqs, step, float(group["lr"]), beta1, beta2, group["eps"],
                group["weight_decay"], group["decoupled_weight_decay"], None, maxes if amsgrad else None)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter); PyTorch's default ``weight_decay=1e-2``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, amsgrad=False, *,
                 foreach=None, maximize=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach, maximize=maximize,
                         fused=fused, decoupled_weight_decay=True)
