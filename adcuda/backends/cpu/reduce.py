"""The CPU backend's reductions (kernels/reduce.cu on CUDA): ``reduce argreduce var logsumexp`` and
``REDUCE_OPS``, the op names ``reduce`` takes.
"""
import numpy as np

from ._common import _compute

__all__ = ["REDUCE_OPS", "reduce", "argreduce", "var", "logsumexp"]


REDUCE_OPS = {"sum": np.sum, "prod": np.prod, "amax": np.amax, "amin": np.amin, "mean": np.mean,
              "all": np.all, "any": np.any}


def reduce(op, a, axes, keepdim):
    x = _compute(a)
    if op in ("sum", "prod") and x.dtype.kind in "biu":
        r = REDUCE_OPS[op](x, axis=axes, keepdims=keepdim, dtype=np.int64)
    elif op == "mean" and x.size == 0:
        with np.errstate(all="ignore"):  # NaN, as in PyTorch (np.mean would also warn)
            r = np.sum(x, axis=axes, keepdims=keepdim) / 0.0
    else:
        r = REDUCE_OPS[op](x, axis=axes, keepdims=keepdim)
    r = np.asarray(r)
    if op in ("all", "any"):
        return r
    if a.dtype.kind == "b" and op in ("amax", "amin"):
        return r
    return r.astype(a.dtype if a.dtype.kind in "f" or op in ("amax", "amin") else r.dtype, copy=False)


def argreduce(op, a, axis, keepdim):
    fn = np.argmax if op == "argmax" else np.argmin
    x = _compute(a)
    if axis is None:
        r = np.asarray(fn(x))
        return r.reshape((1,) * a.ndim) if keepdim else r
    return np.asarray(fn(x, axis=axis, keepdims=keepdim), dtype=np.int64)



def var(a, axes, correction, keepdim):
    x = _compute(a)
    n = 1
    for ax in axes:
        n *= x.shape[ax]
    mean = np.mean(x, axis=axes, keepdims=True)
    with np.errstate(all="ignore"):
        r = np.sum((x - mean) ** 2, axis=axes, keepdims=keepdim) / max(n - correction, 0)
    return np.asarray(r).astype(a.dtype, copy=False)


def logsumexp(a, axes, keepdim):
    x = _compute(a)
    m = np.amax(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    with np.errstate(divide="ignore"):
        r = np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m
    if not keepdim:
        r = np.squeeze(r, axis=axes)
    return np.asarray(r).astype(a.dtype, copy=False)
