"""Replay kernels that do in fewer passes what eager does with a temporary per operation: each writes
its result into a given buffer (``out``) and its intermediates into scratch arrays of the program
(``Scratch``), and rounds exactly as the CPU primitive it stands for (the same operations on the
same operands in the same order: NumPy rounds each one alone, so only the allocations go), so a
compiled run stays bit-identical to an eager one (tests/test_compile_fusion.py holds each kernel to
its primitive).

- ``gelu_tanh`` forward and backward: the tanh approximation's chain of about a dozen operations in
  one scratch array (three for the backward) instead of a fresh array per operation.
- Optimizer steps (``SGD.step``, ``Adam.step``, ``AdamW.step``, host steps in eager): one in-place
  pass per tensor over the parameter, its gradient and its state, the learning rate, weight decay
  and step count read from the optimizer at each replay, so they never go stale. Each replay first
  checks that the optimizer is still in the configuration the kernel handles (the same parameters,
  every one with a gradient, its state made, float32 or float64, no master weights, no AMSGrad, no
  ``maximize``); where it is not, the optimizer's own ``step`` runs instead, as in eager.
- The class-target check of the losses (a host step that reads the targets): the same test in three
  NumPy calls, and the library's check, which raises the error naming the bad target, only when it
  fails.
"""

import math

import numpy as np

from ..backends.cpu.elementwise import _SQRT_2_OVER_PI
from ..ops.softmax_loss import _check_class_targets
from ..tensor import version_counter

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


class Scratch:
    """Scratch arrays of a program by (shape, dtype), shared by its kernels: a replay runs one kernel
    at a time, and each kernel is done with its scratch when it returns. ``get(shape, dtype, k)`` is
    the k-th array of that layout (a kernel needing two takes k = 0 and 1)."""

    def __init__(self):
        self.arrays = {}

    def get(self, shape, dtype, k=0):
        key = (tuple(shape), np.dtype(dtype), k)
        a = self.arrays.get(key)
        if a is None:
            a = self.arrays[key] = np.empty(key[0], key[1])
        return a

    @property
    def nbytes(self):
        """Bytes of the scratch arrays made so far (the optimizer kernels make theirs at the first replay)."""
        return sum(a.nbytes for a in self.arrays.values())


# ---------------------------------------------------------------------------------------------- gelu_tanh
# The CPU primitive computes 0.5 x (1 + tanh(c (x + 0.044715 x^3))) and, for the gradient,
# s = 1 / (1 + exp(-2 u)) with u = c (x + 0.044715 x^3), then s + 2 x s (1 - s) c (1 + 3 * 0.044715 x^2):
# below, the same operations in the same order (a commuted operand rounds the same), in place.
_CUBIC = 0.044715
_CUBIC_SLOPE = 3 * _CUBIC


def _inner_(x, u):
    """u = c (x + 0.044715 x x x), written into ``u``."""
    np.multiply(x, _CUBIC, out=u)
    u *= x
    u *= x
    u += x
    u *= _SQRT_2_OVER_PI
    return u


def gelu_tanh_kernel(shape, dtype, scratch):
    """``unary('gelu_tanh', x)`` into ``out`` (which may be ``x``) with one scratch array."""
    t = scratch.get(shape, dtype)

    def gelu_tanh(x, out):
        _inner_(x, t)
        np.tanh(t, out=t)
        np.add(t, 1.0, out=t)
        np.multiply(x, 0.5, out=out)
        return np.multiply(out, t, out=out)

    return gelu_tanh


def gelu_tanh_backward_kernel(shape, dtype, scratch):
    """``unary_backward('gelu_tanh', x, None, g)`` into ``out`` (which may be ``x`` or ``g``) with three
    scratch arrays."""
    s, slope, rest = (scratch.get(shape, dtype, k) for k in range(3))

    def gelu_tanh_backward(x, g, out):
        _inner_(x, s)
        np.multiply(s, -2.0, out=s)
        np.exp(s, out=s)
        np.add(s, 1.0, out=s)
        np.divide(1.0, s, out=s)
        np.multiply(x, 2.0, out=slope)
        np.multiply(slope, s, out=slope)
        np.subtract(1.0, s, out=rest)
        np.multiply(slope, rest, out=slope)
        np.multiply(slope, _SQRT_2_OVER_PI, out=slope)
        np.multiply(x, _CUBIC_SLOPE, out=rest)
        np.multiply(rest, x, out=rest)
        np.add(rest, 1.0, out=rest)
        np.multiply(slope, rest, out=slope)
        np.add(slope, s, out=slope)
        return np.multiply(g, slope, out=out)

    return gelu_tanh_backward


# ---------------------------------------------------------------------------------------------- host steps
def _check_class_targets_fast(op, target, n_classes, ignore_index):
    """``_check_class_targets`` with its test on the array itself; the library's check (which raises,
    naming the target) runs only when a target is out of range."""
    a = target._data
    if a.size:
        outside = (a < 0) | (a >= n_classes)
        outside &= a != ignore_index
        if outside.any():
            _check_class_targets.host_step(op, target, n_classes, ignore_index)


def host_step_replay(step, scratch):
    """(a callable doing what host step ``step`` does, faster, with its arguments; what it is, for a
    printed program), or None where there is none (the host step itself runs then)."""
    fn = step.fn
    if fn is _check_class_targets.host_step:
        return _check_class_targets_fast, "the check on the array, the library's only to raise"
    if len(step.args) != 1 or step.kwargs:
        return None  # an optimizer step with a closure runs it: the host step itself
    opt = step.args[0]
    cls = type(opt)
    if getattr(cls.step, "host_step", None) is not fn:
        return None
    kind = _OPTIMIZERS.get((cls.__module__, cls.__qualname__))
    if kind is None:
        return None
    replay = kind(fn, opt, scratch)
    if replay.config is None:
        return None
    return replay, "in-place kernels, hyperparameters and step counts read at each replay; else the step"


class _OptimizerStep:
    """An optimizer's ``step`` replayed by in-place kernels (see the module docstring). ``config`` holds,
    per parameter group, its parameters and the hyperparameters the kernels are specialised on (None
    where the optimizer is in a configuration they do not handle)."""

    FIXED = ()  # group keys that must keep their captured value

    def __init__(self, fn, opt, scratch):
        self.fn = fn
        self.opt = opt
        self.scratch = scratch
        self.config = self._config()

    def _config(self):
        config = []
        for group in self.opt.param_groups:
            params = list(group["params"])
            if group.get("maximize"):
                return None
            # (half parameters, the only ones master weights apply to, are left to the optimizer)
            if any(p._data.dtype not in _FLOATS or not p._data.flags.c_contiguous for p in params):
                return None
            config.append((params, tuple(group.get(k) for k in self.FIXED)))
        return config

    def _ready(self):
        """The groups' (parameters, gradient arrays, hyperparameters) if the kernels can step them now."""
        groups = self.opt.param_groups
        if len(groups) != len(self.config):
            return None
        ready = []
        for group, (params, fixed) in zip(groups, self.config):
            current = group["params"]
            if len(current) != len(params) or tuple(group.get(k) for k in self.FIXED) != fixed:
                return None
            grads = []
            for p, q in zip(current, params):
                g = p.grad
                if p is not q or g is None:
                    return None
                g, w = g._data, p._data
                if g.dtype != w.dtype or g.shape != w.shape or not w.flags.c_contiguous:
                    return None
                grads.append(g)
            ready.append((params, grads, group))
        return ready

    def __call__(self, opt):
        ready = self._ready() if opt is self.opt else None
        extras = None if ready is None else self._prepare(ready)
        if extras is None:
            return self.fn(opt)
        for (params, grads, group), extra in zip(ready, extras):
            self._step_group(params, grads, group, extra)
        return None


class _SGDStep(_OptimizerStep):
    FIXED = ("momentum", "dampening", "weight_decay", "nesterov", "maximize")

    def _prepare(self, ready):
        """Each group's momentum buffers (made by the first step: until then, None and the optimizer's
        step)."""
        state = self.opt.state
        extras = []
        for params, _, group in ready:
            bufs = []
            if group["momentum"]:
                for p in params:
                    buf = state.get(p, {}).get("momentum_buffer")
                    if buf is None or buf._data.dtype != p._data.dtype or not buf._data.flags.c_contiguous:
                        return None
                    bufs.append(buf)
            extras.append(bufs)
        return extras

    def _step_group(self, params, grads, group, bufs):
        """``sgd_step_`` in place (the primitive's operations in its order)."""
        lr = float(group["lr"])
        momentum, dampening = float(group["momentum"]), float(group["dampening"])
        weight_decay, nesterov = float(group["weight_decay"]), bool(group["nesterov"])
        get = self.scratch.get
        for i, (p, g) in enumerate(zip(params, grads)):
            w = p._data
            t = get(w.shape, w.dtype, 0)
            d = g
            if weight_decay:
                d = np.multiply(w, weight_decay, out=t)
                d += g
            if momentum:
                buf = bufs[i]
                b = buf._data
                b *= momentum
                if dampening:
                    u = np.multiply(d, 1 - dampening, out=get(w.shape, w.dtype, 1))
                    b += u
                else:
                    b += d  # d * (1 - 0) is d exactly
                if nesterov:
                    u = np.multiply(b, momentum, out=get(w.shape, w.dtype, 1))
                    d = np.add(d, u, out=u)
                else:
                    d = b
                version_counter(buf).value += 1
            step = np.multiply(d, lr, out=t)
            w -= step
            version_counter(p).value += 1


class _AdamStep(_OptimizerStep):
    FIXED = ("betas", "eps", "weight_decay", "amsgrad", "maximize", "decoupled_weight_decay")

    def _config(self):
        if any(group.get("amsgrad") for group in self.opt.param_groups):
            return None
        return super()._config()

    def _prepare(self, ready):
        """Each group's step-count tensors (the state is made by the first step: until then, and where
        a group's tensors have different counts, None and the optimizer's step)."""
        state = self.opt.state
        extras = []
        for params, _, _ in ready:
            counts = []
            for p in params:
                s = state.get(p)
                if not s or "step" not in s:
                    return None
                m, v = s["exp_avg"]._data, s["exp_avg_sq"]._data
                if m.dtype != p._data.dtype or v.dtype != p._data.dtype:
                    return None
                c = getattr(s["step"], "_data", None)
                if c.__class__ is not np.ndarray or c.dtype.kind != "f" or c.size != 1:
                    return None
                counts.append(s["step"])
            value = float(counts[0]._data)
            if any(float(c._data) != value for c in counts):
                return None
            extras.append(counts)
        return extras

    def _step_group(self, params, grads, group, counts):
        """``adam_step_`` in place (the primitive's operations in its order), after the step counts'
        ``_foreach_add_(steps, 1)``."""
        for c in counts:
            c._data += 1
            version_counter(c).value += 1
        step = int(float(counts[0]._data))
        lr = float(group["lr"])
        beta1, beta2 = (float(b) for b in group["betas"])
        eps, weight_decay = float(group["eps"]), float(group["weight_decay"])
        decoupled = bool(group["decoupled_weight_decay"])
        bias_correction1 = 1 - beta1**step
        bias_correction2_sqrt = math.sqrt(1 - beta2**step)
        step_size = lr / bias_correction1
        state = self.opt.state
        get = self.scratch.get
        for p, g in zip(params, grads):
            w = p._data
            s = state[p]
            m, v = s["exp_avg"]._data, s["exp_avg_sq"]._data
            d = g
            if weight_decay:
                if decoupled:
                    w *= 1 - lr * weight_decay
                else:
                    d = np.multiply(w, weight_decay, out=get(w.shape, w.dtype, 1))
                    d += g
            u = np.subtract(d, m, out=get(w.shape, w.dtype, 0))
            u *= 1 - beta1
            m += u
            v *= beta2
            np.multiply(d, d, out=u)
            u *= 1 - beta2
            v += u
            np.sqrt(v, out=u)
            u /= bias_correction2_sqrt
            u += eps
            np.divide(m, u, out=u)
            u *= step_size
            w -= u
            for t in (p, s["exp_avg"], s["exp_avg_sq"]):
                version_counter(t).value += 1


# (module, class) of the optimizers whose exact class has a replay kernel (matched by name: the
# optimizers live above capture, which may not import them)
_OPTIMIZERS = {
    ("adcuda.optim.sgd", "SGD"): _SGDStep,
    ("adcuda.optim.adam", "Adam"): _AdamStep,
    ("adcuda.optim.adam", "AdamW"): _AdamStep,
}

__all__ = ["Scratch", "gelu_tanh_kernel", "gelu_tanh_backward_kernel", "host_step_replay"]
