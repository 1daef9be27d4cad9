"""The CPU backend's random primitives (kernels/random.cu on CUDA): ``rand randn randint bernoulli``
and ``dropout`` with its backward. Philox keyed by the seed, its counter advanced to the offset, so
a draw depends only on (seed, offset) and never on what ran before in this process.
"""
import numpy as np

from ...errors import DTypeError, ShapeError
from ._common import _compute, _np_dtype

__all__ = ["rand", "randn", "randint", "bernoulli", "dropout", "dropout_backward"]


def _rng(seed, offset):
    bitgen = np.random.Philox(key=seed)
    if offset:
        bitgen.advance(offset)
    return np.random.Generator(bitgen)


def rand(shape, dtype, seed, offset):
    out_dt = _np_dtype(dtype)
    r = _rng(seed, offset).random(shape, dtype=np.float64).astype(out_dt)
    # rounding to float16/float32 can reach 1.0 (float16 from about 1 - 2**-12 up): keep [0, 1)
    return np.minimum(r, np.nextafter(out_dt.type(1), out_dt.type(0)), out=r)


def randn(shape, dtype, seed, offset):
    return _rng(seed, offset).standard_normal(shape, dtype=np.float64).astype(_np_dtype(dtype))


def randint(low, high, shape, dtype, seed, offset):
    return _rng(seed, offset).integers(low, high, shape, dtype=np.int64).astype(_np_dtype(dtype))


def bernoulli(shape, p, dtype, seed, offset):
    return (_rng(seed, offset).random(shape) < p).astype(_np_dtype(dtype))


def _masked_scale(a, mask, scale):
    """``a * (scale where mask else 0)`` in fp32 (fp64 for fp64): NaN and inf stay NaN where dropped,
    as PyTorch's ``x * mask * scale`` leaves them."""
    x = _compute(a)
    factor = np.where(mask, x.dtype.type(scale), x.dtype.type(0))
    with np.errstate(invalid="ignore"):
        return np.asarray(x * factor).astype(a.dtype, copy=False)


def _dropout_scale(p):
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


def dropout(x, p, seed, offset):
    """-> (out, bool mask): the mask is ``bernoulli(x.shape, 1 - p, bool, seed, offset)`` (what is
    kept), ``out = x * mask / (1 - p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if x.dtype.kind != "f":
        raise DTypeError(f"dropout: expected a floating point array, got {x.dtype}")
    keep = np.asarray(_rng(seed, offset).random(np.shape(x)) < 1.0 - p)
    return _masked_scale(x, keep, _dropout_scale(p)), keep


def dropout_backward(g, mask, scale):
    if np.shape(g) != np.shape(mask):
        raise ShapeError(f"dropout_backward: gradient {np.shape(g)} and mask {np.shape(mask)} differ")
    return _masked_scale(g, mask, scale)
