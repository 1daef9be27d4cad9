"""``SGD`` with momentum, dampening, Nesterov momentum, weight decay, ``maximize`` and (beyond
PyTorch) float32 master weights for half parameters."""
from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..factories import zeros_like
from .optimizer import Optimizer, OptimizerError, keeps_master_copy, required


class SGD(Optimizer):
    """PyTorch's SGD. ``foreach`` and ``fused`` are accepted for compatibility: every group is
    always stepped by one multi-tensor backend call (``sgd_step_``). ``master_weights=True`` steps
    float16/bfloat16 parameters through float32 masters with float32 momentum buffers (see
    ``adcuda.optim.optimizer``)."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, fused=None, master_weights=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize, foreach=foreach, fused=fused,
                        master_weights=master_weights)
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
        self._check_master_groups()
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def _step_group(self, group):
        momentum = group["momentum"]
        # (device, first step of the momentum buffer, stepped through masters) -> params, grads, buffers, masters
        batches = {}
        for p in group["params"]:
            if p.grad is None:
                continue
            grad = self._grad_of(p, group["maximize"])
            master = self._master_for(p) if keeps_master_copy(group, p) else None
            buf, first_step = None, False
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = zeros_like(
                        p.detach(), dtype=dt.float32 if master is not None else None)
                    first_step = True
            params, grads, bufs, masters = batches.setdefault((p.device, first_step, master is not None),
                                                              ([], [], [], []))
            params.append(p)
            grads.append(grad)
            bufs.append(buf)
            masters.append(master)
        for (_, first_step, with_masters), (params, grads, bufs, masters) in batches.items():
            params[0]._backend.sgd_step_(
                [p._data for p in params], grads, [b._data for b in bufs] if momentum != 0 else None,
                float(group["lr"]), momentum, group["dampening"], group["nesterov"], group["weight_decay"],
                first_step, [m._data for m in masters] if with_masters else None)
            for p in params:
                p._version.value += 1
            if with_masters:
                self._masters_written(params)
