"""Faster stand-ins a replay calls for some host steps (``dispatch.host_step``), doing what the host
step does:

- An optimizer's ``step()`` (without a closure): the optimizer's own ``_step_with_scratch``, graph
  capture's protocol (adcuda/optim/optimizer.py), with the program's scratch arrays, so its fused
  op's primitive reuses its temporaries from one replay to the next instead of allocating them. It
  is the step itself, the same multi-tensor op and primitive: hyperparameters, step counts and state
  are read afresh on each replay, and a configuration the fused op does not take is the step's own
  business. An optimizer without the protocol (or a subclass with a ``step`` of its own) is replayed
  by its ``step``.
- ``SGD.step`` (an optimizer whose class declares ``_fused_op = adcuda._fused_sgd_``): while no dispatch
  hook is attached and every parameter with a gradient is a float32 CPU array (with a float32
  gradient of its shape where it has one) (momentum buffers made, no ``maximize``), one backend ``sgd_step_`` call per
  group on those arrays, and the versions bumped: the primitive and numbers ``_fused_sgd_`` gives
  them, without the Python layers above it (the optimizer's batching and the op's checks cost the
  MLP step's replay about 80 us, caches cold after its products, against about 200 us of update).
  Anything else is the optimizer's ``_step_with_scratch``.

Other host steps (the losses' class-target check among them) are replayed by calling them.
"""

import numpy as np

from ..backends import cpu
from ..ops import dispatch
from ..ops.optim import _fused_sgd_
from ..tensor import version_counter

_F32 = np.dtype(np.float32)


def host_step_replay(step, scratch):
    """(a callable doing what host step ``step`` does, faster, with its arguments; what it is, for a
    printed program), or None where there is none (the host step itself runs then)."""
    fn = step.fn
    if len(step.args) != 1 or step.kwargs:
        return None  # an optimizer step with a closure runs it: the host step itself
    step_with_scratch = _optimizer_protocol(step.args[0], fn)
    if step_with_scratch is None:
        return None

    if _defining_class(step.args[0]).__dict__.get("_fused_op") is _fused_sgd_:

        def sgd_step(opt):
            if dispatch._hooks or not _plain_sgd_step(opt, scratch):
                step_with_scratch(opt, scratch)

        return sgd_step, "its _step_with_scratch, or where its groups are plain float32 ones, one sgd_step_ each"

    def optimizer_step(opt):
        return step_with_scratch(opt, scratch)

    return optimizer_step, "its _step_with_scratch: the step, with the program's scratch arrays"


def _plain_sgd_step(opt, scratch):
    """Step SGD ``opt`` as its ``_step_with_scratch`` would, by the backend's ``sgd_step_`` straight away
    (its temporaries, where it takes any, from ``scratch``), and return True; or do nothing and return
    False where any group is not plain: a parameter or gradient that is not a C-contiguous float32
    NumPy array (another device, half precision and its master copies), a gradient of another shape,
    ``maximize``, a missing momentum buffer (the first step makes them) or a hyperparameter that is
    not a number. Every group is checked before any is stepped."""
    calls = []
    for group in opt.param_groups:
        momentum, lr = group["momentum"], group["lr"]
        dampening, weight_decay = group["dampening"], group["weight_decay"]
        if group["maximize"] or not all(v.__class__ in (int, float) for v in (momentum, lr, dampening, weight_decay)):
            return False
        params, weights, grads, bufs = [], [], [], []
        for p in group["params"]:
            w, g = p._data, p.grad
            if not _plain_f32(w):  # (half parameters too: the optimizer's own checks of them run)
                return False
            if g is None:
                continue
            d = g._data
            if not _plain_f32(d) or w.shape != d.shape:
                return False
            if momentum:
                buf = opt.state.get(p, {}).get("momentum_buffer")
                if buf is None or not _plain_f32(buf._data):
                    return False
                bufs.append(buf)
            params.append(p)
            weights.append(w)
            grads.append(d)
        if params:
            calls.append((params, weights, grads, bufs, lr, momentum, dampening, group["nesterov"], weight_decay))
    for params, weights, grads, bufs, lr, momentum, dampening, nesterov, weight_decay in calls:
        buffers = [b._data for b in bufs] if momentum else None
        cpu.sgd_step_(
            weights,
            grads,
            buffers,
            float(lr),
            float(momentum),
            float(dampening),
            bool(nesterov),
            float(weight_decay),
            False,
            scratch=scratch,
        )
        for t in params + bufs:  # (as _fused_sgd_ bumps them)
            version_counter(t).value += 1
    return True


def _plain_f32(a):
    return a.__class__ is np.ndarray and a.dtype == _F32 and a.flags.c_contiguous


def _defining_class(opt):
    """The class of ``opt`` that defines its ``step`` (its own class where none does)."""
    for cls in type(opt).__mro__:
        if "step" in cls.__dict__:
            return cls
    return type(opt)


def _optimizer_protocol(opt, fn):
    """The optimizer's ``_step_with_scratch`` (graph capture's protocol, adcuda/optim/optimizer.py) if
    host step ``fn`` is its class's ``step`` and the class that defines that ``step`` also defines
    it (a subclass with a ``step`` of its own is replayed by its ``step``), else None."""
    cls = _defining_class(opt)
    if getattr(cls.__dict__.get("step"), "host_step", None) is not fn:
        return None
    return cls.__dict__.get("_step_with_scratch")


__all__ = ["host_step_replay"]
