"""The CUDA backend's layout primitives (kernels/layout.cu): ``cat tril triu``, with the CPU backend's
(NumPy's) semantics; ``cat``'s axis may be negative (counted from the end).
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError, ShapeError
from . import _common as _k
from ._common import Arrays, BackendArray

__all__ = ["cat", "tril", "triu"]


def _C():
    return _native._C


def cat(arrays: Arrays, axis: int) -> BackendArray:
    arrays = list(arrays)
    if arrays:
        first = arrays[0]
        if any(a.dtype != first.dtype for a in arrays):
            # the kernel moves bytes: arrays of another dtype would be reinterpreted, not converted
            raise DTypeError("cat: expected arrays of one dtype, got " + ", ".join(a.dtype.name for a in arrays))
        if first.ndim == 0:
            raise ShapeError("cat: zero-dimensional arrays cannot be concatenated")
        axis = _k.axis_index("cat", axis, first.shape)
    return _C().cat(arrays, int(axis))


def tril(a: BackendArray, k: int) -> BackendArray:
    return _C().tril(a, int(k))


def triu(a: BackendArray, k: int) -> BackendArray:
    return _C().triu(a, int(k))
