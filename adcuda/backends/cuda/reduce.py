"""The CUDA backend's reductions (kernels/reduce.cu): ``reduce argreduce var logsumexp``, with the CPU
backend's signatures, result dtypes and errors.
"""
from ... import _native
from ...errors import DTypeError
from . import _common as _k

__all__ = ["reduce", "argreduce", "var", "logsumexp"]


def _C():
    return _native._C


def reduce(op, a, axes, keepdim):
    if op == "mean" and not _k.is_floating(a):
        a = _C().astype(a, _k.scalar_type("float64"))  # NumPy's mean of integers is float64, as on the CPU
    return _C().reduce(op, a, list(axes), bool(keepdim))


def argreduce(op, a, axis, keepdim):
    return _C().argreduce(op, a, axis, bool(keepdim))


def _floating(op, a):
    if not _k.is_floating(a):
        raise DTypeError(f"{op}: expected a floating point array, got {a.dtype.name}")


def var(a, axes, correction, keepdim):
    _floating("var", a)
    return _C().var(a, list(axes), float(correction), bool(keepdim))


def logsumexp(a, axes, keepdim):
    _floating("logsumexp", a)
    return _C().logsumexp(a, list(axes), bool(keepdim))
