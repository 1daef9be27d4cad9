"""The CUDA backend's reductions (kernels/reduce.cu): ``reduce argreduce var logsumexp``, with the CPU
backend's signatures, argument conventions (``axes`` None for every dim, negative axes counted from
the end), result dtypes and errors.
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError
from ..seam import Axes
from . import _common as _k
from ._common import BackendArray

__all__ = ["reduce", "argreduce", "var", "logsumexp"]


def _C():
    return _native._C


def reduce(op: str, a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    if op == "mean" and not _k.is_floating(a):
        a = _C().astype(a, _k.scalar_type("float64"))  # NumPy's mean of integers is float64, as on the CPU
    return _C().reduce(op, a, _k.axes_list(op, axes, a.shape), bool(keepdim))


def argreduce(op: str, a: BackendArray, axis: int | None, keepdim: bool) -> BackendArray:
    if axis is not None:
        axis = _k.axis_index(op, axis, a.shape)
        if a.ndim == 0:  # axis 0 (or -1) names a 0-d array's one element, as NumPy's argmax takes it
            axis = None
    return _C().argreduce(op, a, axis, bool(keepdim))


def _floating(op, a):
    if not _k.is_floating(a):
        raise DTypeError(f"{op}: expected a floating point array, got {a.dtype.name}")


def var(a: BackendArray, axes: Axes | None, correction: float, keepdim: bool) -> BackendArray:
    _floating("var", a)
    return _C().var(a, _k.axes_list("var", axes, a.shape), float(correction), bool(keepdim))


def logsumexp(a: BackendArray, axes: Axes | None, keepdim: bool) -> BackendArray:
    _floating("logsumexp", a)
    return _C().logsumexp(a, _k.axes_list("logsumexp", axes, a.shape), bool(keepdim))
