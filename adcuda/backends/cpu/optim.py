"""The CPU backend's optimizer and loss-scaling primitives (kernels/optim.cu on CUDA): ``sgd_step_
adam_step_ global_norm unscale_and_check_ update_scale_``.
"""

from __future__ import annotations

import math

import numpy as np

from ... import _native
from ...errors import DTypeError
from ..seam import Scratch
from ._common import _F32, Arrays, BackendArray, _compute, _fresh

__all__ = ["sgd_step_", "adam_step_", "global_norm", "unscale_and_check_", "update_scale_"]

# The one-pass steps of kernels/host/optim.cpp, bit for bit the NumPy code below (which stays the path for
# every other case and the reference tests/test_cpu_fast_paths.py compares them with): float32 tensors
# and state, no masters. A dozen NumPy passes over each tensor become one.
_NATIVE = _native._C if hasattr(_native._C, "cpu_sgd_step_") and hasattr(_native._C, "cpu_adam_step_") else None


def _native_float32(*lists):
    """Whether the native steps take every array of the lists (None: absent): C-contiguous float32 ndarrays."""
    return all(
        a.__class__ is np.ndarray and a.dtype == _F32 and a.flags.c_contiguous
        for arrays in lists
        if arrays
        for a in arrays
    )


def _state(op, arrays):
    """Arrays a step writes in place: floating point and contiguous, as the CUDA kernels walk them."""
    arrays = list(arrays or ())
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"{op}: optimizer tensors must be floating point, got {a.dtype}")
        if not a.flags.c_contiguous:
            raise ValueError(
                f"{op}: a parameter or state array of shape {a.shape} is not contiguous; "
                "the optimizer primitives update contiguous arrays in place"
            )
    return arrays


def _grads(op, grads):
    grads = list(grads)
    for g in grads:
        if g.dtype.kind != "f":
            raise DTypeError(f"{op}: gradients must be floating point, got {g.dtype}")
    return grads


def _matching(op, params, *lists):
    """Every list given (None or empty: absent) holds one array per parameter, of its parameter's size."""
    for arrays in lists:
        if not arrays:
            continue
        if len(arrays) != len(params):
            raise ValueError(f"{op}: every list needs one array per parameter ({len(params)}), got {len(arrays)}")
        for p, a in zip(params, arrays):
            if a.size != p.size:
                raise ValueError(f"{op}: arrays of {p.size} and {a.size} elements for one parameter")


# Optimizers: one call updates every tensor of a parameter group in place (the CUDA backend does
# it in one multi-tensor kernel); the math follows PyTorch's single-tensor SGD and Adam in fp32
# (fp64 for fp64 tensors), whatever the storage dtype.
def _fused_add(y, x, alpha, out, take):
    """``y + alpha * x`` rounded once into ``out``, as PyTorch's ``y.add(x, alpha=alpha)`` computes it
    on the CPU (a fused multiply-add): for float32 through float64 (a temporary from ``take``), where
    the product is exact; float64 rounds the product too (NumPy has no fused multiply-add)."""
    wide = take(out.shape, np.float64, 3)
    if out.dtype != _F32:
        return np.add(y, np.multiply(x, alpha, out=wide), out=out)  # (out may be y: the product apart)
    np.multiply(x, np.float64(np.float32(alpha)), out=wide)
    wide += y
    np.copyto(out, wide, casting="same_kind")
    return out


def sgd_step_(
    params: Arrays,
    grads: Arrays,
    bufs: Arrays | None,
    lr: float,
    momentum: float,
    dampening: float,
    nesterov: bool,
    weight_decay: float,
    first_step: bool,
    masters: Arrays | None = None,
    *,
    scratch: Scratch | None = None,
) -> None:
    """SGD with momentum: ``bufs`` (one per param, or None when ``momentum == 0``) are the momentum
    buffers; on ``first_step`` they are set to the gradient instead of being decayed. ``masters``
    (fp32 copies of low-precision params, or None) are stepped instead of ``params``, which then
    receive the result. The parameters and buffers are updated in place (a float32 copy of a half
    one), the temporaries taken from ``scratch`` (CPU only, seam.CPU_REPLAY_KEYWORDS)."""
    op = "sgd_step_"
    params, grads, bufs = _state(op, params), _grads(op, grads), _state(op, bufs)
    masters = None if masters is None else _state(op, masters)
    if momentum and len(bufs) != len(params):
        raise ValueError(f"{op}: momentum needs one buffer per parameter")
    _matching(op, params, grads, bufs, masters)
    if _NATIVE is not None and masters is None and _native_float32(params, grads, bufs if momentum else None):
        buffers = bufs if momentum else None
        _NATIVE.cpu_sgd_step_(params, grads, buffers, lr, momentum, dampening, nesterov, weight_decay, first_step)
        return
    take = scratch or _fresh
    for i, (p, g) in enumerate(zip(params, grads)):
        target = p if masters is None else masters[i]
        w = _compute(target)
        d = _compute(g)
        work = np.result_type(w, d)
        # PyTorch's d.add(w, alpha=weight_decay), b.mul_(momentum).add_(d, alpha=1 - dampening),
        # w.add_(d, alpha=-lr): each add a fused multiply-add, rounded once, as PyTorch's CPU kernel
        if weight_decay:
            d = _fused_add(d, w, weight_decay, take(w.shape, work, 0), take)
        if momentum:
            buf = bufs[i]
            if first_step:
                b = d
                np.copyto(buf, b, casting="unsafe")
            else:
                b = _compute(buf)
                b *= momentum
                if dampening:
                    b = _fused_add(b, d, 1 - dampening, b, take)
                else:
                    b += d
                if b is not buf:
                    np.copyto(buf, b, casting="unsafe")
            d = _fused_add(d, b, momentum, take(w.shape, work, 1), take) if nesterov else b
        w = _fused_add(w, d, -lr, w, take)
        if w is not target:
            np.copyto(target, w, casting="unsafe")
        if masters is not None:
            np.copyto(p, w, casting="unsafe")


def adam_step_(
    params: Arrays,
    grads: Arrays,
    exp_avgs: Arrays,
    exp_avg_sqs: Arrays,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    masters: Arrays | None,
    max_exp_avg_sqs: Arrays | None = None,
    grad_multiplier: BackendArray | None = None,
    *,
    scratch: Scratch | None = None,
) -> None:
    """Adam (``decoupled=False``: L2 added to the gradient) or AdamW (``decoupled=True``: the weights
    decay by ``lr * weight_decay``) at ``step`` (1-based, shared by the tensors of the call).
    ``masters`` (fp32 copies of low-precision params, or None) are stepped instead of ``params``,
    which then receive the result (an fp32 master with fp32 gradients may have a half parameter: its
    working copy); ``max_exp_avg_sqs`` (or None) makes it AMSGrad. ``grad_multiplier`` (a one-element
    float32 array, or None) scales every gradient first, rounded to the gradient's dtype, as a
    separate ``_foreach_mul_`` would (clip_grad_norm_'s coefficient). State in the compute dtype is
    updated in place, the temporaries taken from ``scratch`` (CPU only, seam.CPU_REPLAY_KEYWORDS)."""
    op = "adam_step_"
    if step < 1:
        raise ValueError(f"{op}: the step count is 1-based, got {step}")
    params, grads = _state(op, params), _grads(op, grads)
    if grad_multiplier is not None:
        grads = _multiplied(op, grads, grad_multiplier)
    exp_avgs, exp_avg_sqs = _state(op, exp_avgs), _state(op, exp_avg_sqs)
    masters = None if masters is None else _state(op, masters)
    max_exp_avg_sqs = None if max_exp_avg_sqs is None else _state(op, max_exp_avg_sqs)
    if len(exp_avgs) != len(params) or len(exp_avg_sqs) != len(params):
        raise ValueError(f"{op}: every parameter needs its exp_avg and exp_avg_sq")
    _matching(op, params, grads, exp_avgs, exp_avg_sqs, masters, max_exp_avg_sqs)
    bias_correction1 = 1 - beta1**step
    bias_correction2_sqrt = math.sqrt(1 - beta2**step)
    step_size = lr / bias_correction1
    if (
        _NATIVE is not None
        and masters is None
        and _native_float32(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)
    ):
        _NATIVE.cpu_adam_step_(
            params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr, beta1, beta2, eps, weight_decay, decoupled,
            bias_correction2_sqrt, step_size,
        )  # fmt: skip
        return
    take = scratch or _fresh
    arithmetic = (lr, beta1, beta2, eps, weight_decay, decoupled, bias_correction2_sqrt, step_size)
    if masters is None and len(params) > 1 and _one_float_dtype(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs):
        _adam_gathered_((params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs), arithmetic, take)
        return
    for i, g in enumerate(grads):
        target = params[i] if masters is None else masters[i]
        w = _compute(target)
        d = _compute(g)
        m, v = _compute(exp_avgs[i]), _compute(exp_avg_sqs[i])
        max_state = None if max_exp_avg_sqs is None else max_exp_avg_sqs[i]
        max_v = None if max_state is None else _compute(max_state)
        if w is target and m is exp_avgs[i] and v is exp_avg_sqs[i] and max_v is max_state:
            # the state is in the compute dtype: update it in place
            _adam_in_place_(w, d, m, v, max_v, arithmetic, take)
            if masters is not None:
                np.copyto(params[i], w, casting="unsafe")
            continue
        if weight_decay:
            if decoupled:
                w = w * (1 - lr * weight_decay)
            else:
                d = d + weight_decay * w
        m = m + (d - m) * (1 - beta1)
        v = v * beta2 + (d * d) * (1 - beta2)
        np.copyto(exp_avgs[i], m, casting="unsafe")
        np.copyto(exp_avg_sqs[i], v, casting="unsafe")
        if max_v is not None and max_state is not None:  # (AMSGrad: both are, or neither)
            v = np.maximum(max_v, v)
            np.copyto(max_state, v, casting="unsafe")
        denom = np.sqrt(v) / bias_correction2_sqrt + eps
        w = w - step_size * (m / denom)
        np.copyto(target, w, casting="unsafe")
        if masters is not None:
            np.copyto(params[i], w, casting="unsafe")


def _multiplied(op, grads, multiplier):
    """The gradients times the one-element ``multiplier``, each rounded to its own dtype (computed in
    float32, float64 for float64 gradients); new arrays: the caller's gradients stay as they are."""
    multiplier = np.asarray(multiplier)
    if multiplier.size != 1 or multiplier.dtype != _F32:
        raise ValueError(f"{op}: the gradient multiplier must be one float32 element, got {multiplier.dtype}")
    factor = multiplier.reshape(())
    out = []
    for g in grads:
        wide = np.float64 if g.dtype == np.float64 else _F32
        out.append(np.multiply(g.astype(wide, copy=False), factor.astype(wide)).astype(g.dtype, copy=False))
    return out


def _adam_in_place_(w, d, m, v, max_v, arithmetic, take):
    """One Adam update of the arrays ``w``, ``m``, ``v`` (and ``max_v``, or None) in place, from the gradient
    ``d``: PyTorch's arithmetic in its order, with one temporary (two for L2 weight decay)."""
    lr, beta1, beta2, eps, weight_decay, decoupled, bias_correction2_sqrt, step_size = arithmetic
    if weight_decay:
        if decoupled:
            w *= 1 - lr * weight_decay
        else:
            decayed = take(w.shape, np.result_type(d, w), 1)
            d = np.add(d, np.multiply(w, weight_decay, out=decayed), out=decayed)
    t = np.subtract(d, m, out=take(w.shape, np.result_type(d, m), 0))
    t *= 1 - beta1
    m += t
    v *= beta2
    np.multiply(d, d, out=t)
    t *= 1 - beta2
    v += t
    if max_v is not None:
        v = np.maximum(max_v, v, out=max_v)
    np.sqrt(v, out=t)
    t /= bias_correction2_sqrt
    t += eps
    np.divide(m, t, out=t)
    t *= step_size
    w -= t


def _one_float_dtype(*lists):
    """Whether every array of the lists (None: absent) is an ndarray (not a NumPy scalar) of one dtype,
    float32 or float64."""
    dtypes = {a.dtype if a.__class__ is np.ndarray else None for arrays in lists if arrays for a in arrays}
    return len(dtypes) == 1 and dtypes.pop() in _FLAT_DTYPES


_FLAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


# Tensors of at most this many elements are updated gathered: for them the dozen NumPy calls cost
# more than copying them in and out (a GPT's biases and norm weights); bigger ones are updated in
# place, where gathering would only add copies (an LSTM's weights: 182 us a step in place, 229 us
# gathered)
_GATHERED_ELEMENTS = 4096


def _adam_gathered_(arrays, arithmetic, take):
    """``_adam_in_place_`` over the small tensors of the call gathered into one flat array each, and
    over each bigger one in place (``arrays``: the lists params, grads, exp_avgs, exp_avg_sqs and
    max_exp_avg_sqs (or None), in one float dtype); the gathered results are written back. The values
    are the same, bit for bit."""
    small = []
    for i, p in enumerate(arrays[0]):
        if p.size <= _GATHERED_ELEMENTS:
            small.append(i)
        else:
            _adam_in_place_(*(None if a is None else a[i] for a in arrays), arithmetic, take)
    if len(small) == 1:
        _adam_in_place_(*(None if a is None else a[small[0]] for a in arrays), arithmetic, take)
    elif small:
        _adam_flat_([None if a is None else [a[i] for i in small] for a in arrays], arithmetic, take)


def _adam_flat_(arrays, arithmetic, take):
    """``_adam_in_place_`` over tensors gathered into one flat array each (``arrays`` as in
    _adam_gathered_), the results written back."""
    params = arrays[0]
    count = sum(p.size for p in params)
    # (scratch 0 and 1 are _adam_in_place_'s temporaries)
    w, d, m, v, max_v = (
        None if tensors is None else np.concatenate(tensors, axis=None, out=take((count,), params[0].dtype, k))
        for k, tensors in enumerate(arrays, start=2)
    )
    _adam_in_place_(w, d, m, v, max_v, arithmetic, take)
    for tensors, flat in zip(arrays[:1] + arrays[2:], (w, m, v, max_v)):
        if tensors is None:
            continue
        start = 0
        for a in tensors:
            end = start + a.size
            np.copyto(a, flat[start:end].reshape(a.shape))
            start = end


def global_norm(arrays: Arrays, norm_type: float) -> BackendArray:
    """The ``norm_type``-norm (> 0, inf included) of all elements of ``arrays`` taken together, as
    ``clip_grad_norm_`` needs it: a 0-d float32 array (float64 if any array is float64), accumulated
    in that type; a NaN anywhere gives NaN, an inf (and no NaN) inf, as PyTorch's vector_norm."""
    norm_type = float(norm_type)
    if not norm_type > 0:
        raise ValueError(f"global_norm: norm_type must be positive or inf, got {norm_type}")
    arrays = list(arrays)
    for a in arrays:
        if a.dtype.kind != "f":
            raise DTypeError(f"global_norm: expected floating point arrays, got {a.dtype}")
    acc = np.dtype(np.float64) if any(a.dtype == np.float64 for a in arrays) else _F32
    total = acc.type(0)
    with np.errstate(over="ignore", invalid="ignore"):
        for a in arrays:
            x = np.abs(np.asarray(a, dtype=acc).reshape(-1))
            if x.size == 0:
                continue
            if norm_type == math.inf:
                total = np.maximum(total, np.max(x))
            elif norm_type == 2.0:
                total = total + np.sum(x * x)
            elif norm_type == 1.0:
                total = total + np.sum(x)
            else:
                total = total + np.sum(x ** acc.type(norm_type))
        if norm_type == 2.0:
            total = np.sqrt(total)
        elif norm_type not in (1.0, math.inf):
            total = total ** acc.type(1.0 / norm_type)
    return np.array(total, dtype=acc)


# ---------------------------------------------------------------------------------------------
# mixed precision: dynamic loss scaling. The scale, growth tracker and found-inf flag stay backend
# arrays, so a device backend never has to copy them to the host until the caller reads one.
def unscale_and_check_(outs: Arrays, grads: Arrays, inv_scale: BackendArray | float) -> BackendArray:
    """``outs[i] = grads[i] * inv_scale`` (``outs[i]`` may be ``grads[i]``, or a wider array) over
    many tensors at once, computed in fp32; returns a 0-d float32 array, 1.0 if any gradient holds
    an inf or a NaN, else 0.0 (PyTorch's ``_amp_foreach_non_finite_check_and_unscale_``)."""
    found_inf = False
    op = "unscale_and_check_"
    outs, grads = _state(op, outs), _grads(op, grads)
    _matching(op, grads, outs)
    for out, g in zip(outs, grads):
        x = _compute(g)
        found_inf = found_inf or not np.isfinite(x).all()
        np.copyto(out, x * inv_scale, casting="unsafe")
    return np.array(1.0 if found_inf else 0.0, dtype=_F32)


def update_scale_(
    scale: BackendArray,
    growth_tracker: BackendArray,
    found_inf: BackendArray,
    growth_factor: float,
    backoff_factor: float,
    growth_interval: int,
    min_scale: float,
    max_scale: float,
) -> None:
    """PyTorch's ``_amp_update_scale_`` on a 0-d float32 ``scale`` and int32 ``growth_tracker``, in
    place, with the scale kept in ``[min_scale, max_scale]``: back off after an inf/NaN, grow after
    ``growth_interval`` clean steps in a row (products in fp64, stored in fp32, as PyTorch does)."""
    current = scale.item()  # .item(): a one-element array of any rank, as the CUDA backend takes it
    if found_inf.item():
        scale[...] = max(current * backoff_factor, min_scale)
        growth_tracker[...] = 0
        return
    successful = int(growth_tracker.item()) + 1
    if successful == growth_interval:
        scale[...] = min(current * growth_factor, max_scale)  # max_scale is finite: never grows to inf
        growth_tracker[...] = 0
    else:
        growth_tracker[...] = successful
