"""``SGD`` with momentum, dampening, Nesterov momentum, weight decay and ``maximize``."""
from ..autograd.grad_mode import no_grad
from ..factories import zeros_like
from .optimizer import Optimizer, OptimizerError, required


class SGD(Optimizer):
    """PyTorch's SGD. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one multi-tensor backend call (``sgd_step_``)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, fused=None):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, fused=fused)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        lr = group["lr"]
        if lr is not required and lr < 0.0:
            raise OptimizerError(f"Invalid learning rate: {lr}")
        if group["momentum"] < 0.0:
            raise OptimizerError(f"Invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0.0:
            raise OptimizerError(f"Invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise OptimizerError("Nesterov momentum requires a momentum and zero dampening")

    def step(self, closure=None):
        loss = self._run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group):
        momentum = group["momentum"]
        batches = {}  # (device, first step of the momentum buffer) -> params, grads, buffers
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = self._grad_of(p, group["maximize"])
            buf, first_step = None, False
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = zeros_like(p.detach())
                    first_step = True
            params, grads, bufs = batches.setdefault((p.device, first_step), ([], [], []))
            params.append(p)
            grads.append(grad)
            bufs.append(buf)
        for (_, first_step), (params, grads, bufs) in batches.items():
            params[0]._backend.sgd_step_(
                [p._data for p in params], grads, [b._data for b in bufs] if momentum != 0 else None,
                float(group["lr"]), momentum, group["dampening"], group["nesterov"], group["weight_decay"],
                first_step)
            for p in params:
                p._version.value += 1
