"""The CUDA backend's ``matmul`` primitive over adcuda's hand-written GEMM kernels (kernels/gemm.cu):
a tiled SIMT kernel for fp32/fp64 and an mma.sync tensor-core kernel for fp16/bf16 (fp32
accumulation). Transposed, sliced and broadcast operands are read through their strides, never
copied.
"""
from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ._common import is_floating

__all__ = ["matmul"]


def _batch_shapes_broadcast(a_batch, b_batch):
    for x, y in zip(reversed(a_batch), reversed(b_batch)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def matmul(a, b):
    """``a (..., M, K) @ b (..., K, N)`` with the batch dims broadcast, in ``a``'s dtype."""
    if a.ndim < 2 or b.ndim < 2:
        raise ShapeError(f"matmul: both operands need at least 2 dims, got shapes {fmt_shape(a.shape)} and "
                         f"{fmt_shape(b.shape)}")
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(f"matmul: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be multiplied "
                         f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})")
    if not _batch_shapes_broadcast(a.shape[:-2], b.shape[:-2]):
        raise ShapeError(f"matmul: the batch dims of shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot "
                         "be broadcast")
    for operand in (a, b):
        if not is_floating(operand):
            raise DTypeError(f"matmul: CUDA matrix products need floating point operands, got {operand.dtype.name}")
    C = _native._C
    if b.dtype != a.dtype:
        b = C.astype(b, a.dtype)  # the CPU backend also returns a's dtype
    return C.matmul(a, b)


def gemm_path(device=None):
    """Which GEMM kernels ``matmul`` runs on ``device`` (the current one by default)."""
    C = _native._C
    return C.gemm_path(C.cuda_current_device() if device is None else device)
