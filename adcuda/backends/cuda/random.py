"""The CUDA backend's random primitives (kernels/random.cu): ``rand randn randint bernoulli`` from
Philox4x32-10 keyed by ``(seed, offset)``, as the CPU backend's signatures have them, and ``dropout``
(its mask drawn as ``bernoulli`` draws it and applied in the same pass) with ``dropout_backward``.

Element i of a draw depends only on (seed, offset, i): the same call gives the same numbers on any
GPU and launch configuration, and the first n values of a larger draw equal a draw of n. The streams
differ from the CPU backend's (NumPy's Philox4x64 with its own conversions); both are reproducible under
``adcuda.manual_seed``.
"""

from __future__ import annotations

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import DType, Shape
from . import _common as _k
from ._common import BackendArray

__all__ = ["rand", "randn", "randint", "bernoulli", "dropout", "dropout_backward"]

_U64 = (1 << 64) - 1


def _C():
    return _native._C


def _floating(op, dtype):
    if not dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point dtype, got {dtype}")
    return _k.scalar_type(dtype.name)


def rand(shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    return _C().rand(_k.shape_tuple(shape), _floating("rand", dtype), int(seed) & _U64, int(offset) & _U64)


def randn(shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    return _C().randn(_k.shape_tuple(shape), _floating("randn", dtype), int(seed) & _U64, int(offset) & _U64)


def randint(low: int, high: int, shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    return _C().randint(
        int(low), int(high), _k.shape_tuple(shape), _k.scalar_type(dtype.name), int(seed) & _U64, int(offset) & _U64
    )


def bernoulli(shape: Shape, p: float, dtype: DType, seed: int, offset: int) -> BackendArray:
    return _C().bernoulli(
        _k.shape_tuple(shape), float(p), _k.scalar_type(dtype.name), int(seed) & _U64, int(offset) & _U64
    )


def dropout(x: BackendArray, p: float, seed: int, offset: int) -> tuple[BackendArray, BackendArray]:
    """-> (out, bool mask): mask = ``bernoulli(x.shape, 1 - p, bool, seed, offset)``, out = x * mask / (1 - p)."""
    if not _k.is_floating(x):
        raise DTypeError(f"dropout: expected a floating point array, got {x.dtype.name}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    out, mask = _C().dropout(_k.dense(x), float(p), int(seed) & _U64, int(offset) & _U64)
    return out, mask


def dropout_backward(g: BackendArray, mask: BackendArray, scale: float) -> BackendArray:
    """``g * mask * scale`` from dropout's saved mask."""
    if not _k.is_floating(g):
        raise DTypeError(f"dropout_backward: expected a floating point gradient, got {g.dtype.name}")
    if tuple(g.shape) != tuple(mask.shape):
        raise ShapeError(f"dropout_backward: gradient {fmt_shape(g.shape)} and mask {fmt_shape(mask.shape)} differ")
    return _C().dropout_backward(_k.dense(g), _k.dense(_k.cast(mask, _k.scalar_type("bool"))), float(scale))
