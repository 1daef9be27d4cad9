"""``adcuda.linalg``: the part of PyTorch's ``torch.linalg`` that adcuda's ops cover, with its names,
signatures and defaults: vector and matrix norms, products, the cross product and diagonals.

Each function is composed of public ops (they differentiate through them and run on both
backends). Factorisations and solvers (``inv solve det qr svd cholesky eigh``...) need kernels that
adcuda does not have; ``matrix_norm`` with ord ``2``/``-2``/``'nuc'`` needs singular values and raises.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .errors import DTypeError, ShapeError, fmt_shape
from .ops.gemm import cross as _cross
from .ops.gemm import matmul
from .ops.index import diagonal as _diagonal
from .ops.reduce import amax, amin
from .ops.reduce import norm as _norm
from .ops.reduce import sum as _sum

if TYPE_CHECKING:
    from .types import DType, Sequence, Tensor

__all__ = ["vector_norm", "matrix_norm", "norm", "vecdot", "cross", "diagonal", "matmul"]


def _as_float(name, x, dtype):
    if dtype is not None:
        x = x.to(dtype=dtype)
    if not x.dtype.is_floating_point:
        raise DTypeError(f"linalg.{name}: expected a floating point tensor, got {x.dtype}")
    return x


def vector_norm(
    x: Tensor,
    ord: float = 2,  # noqa: A002 (PyTorch's name)
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: DType | None = None,
) -> Tensor:
    """The ord-norm of x's elements over dim (every element, flattened, when dim is None)."""
    x = _as_float("vector_norm", x, dtype)
    if isinstance(ord, str):
        raise ValueError(f"linalg.vector_norm: ord must be a number, got {ord!r}")
    if dim is None and x.ndim > 0:
        flat = _norm(x.reshape(-1), ord, 0, False)
        return flat.reshape((1,) * x.ndim) if keepdim else flat
    return _norm(x, ord, dim, keepdim)


def matrix_norm(
    A: Tensor,  # noqa: N803 (PyTorch's name)
    ord: float | str = "fro",  # noqa: A002
    dim: tuple[int, int] = (-2, -1),
    keepdim: bool = False,
    *,
    dtype: DType | None = None,
) -> Tensor:
    """The ord-norm of the matrices in the planes of dim: 'fro', or 1, -1, inf, -inf (column and row
    sums of absolute values)."""
    A = _as_float("matrix_norm", A, dtype)
    if A.ndim < 2:
        raise ShapeError(f"linalg.matrix_norm: expected at least a 2-d input, got shape {fmt_shape(A.shape)}")
    rows, cols = (d % A.ndim for d in dim)
    if rows == cols:
        raise ShapeError(f"linalg.matrix_norm: dims must differ, got {tuple(dim)}")
    if ord == "fro":
        return _norm(A, 2, (rows, cols), keepdim)
    if ord in (2, -2, "nuc"):
        raise ValueError(
            f"linalg.matrix_norm: ord={ord!r} needs the singular values, which adcuda cannot compute "
            "(no SVD); use 'fro', 1, -1, inf or -inf"
        )
    if ord not in (1, -1, math.inf, -math.inf):
        raise ValueError(f"linalg.matrix_norm: ord must be 'fro', 1, -1, inf or -inf, got {ord!r}")
    # 1-norms: the largest (smallest) column sum of |A|; inf-norms: of the row sums
    summed, other = (rows, cols) if ord in (1, -1) else (cols, rows)
    sums = _sum(A.abs(), summed, keepdim=True)
    out = (amax if ord > 0 else amin)(sums, other, keepdim=True)
    return out if keepdim else out.squeeze((rows, cols))


def norm(
    A: Tensor,  # noqa: N803
    ord: float | str | None = None,  # noqa: A002
    dim: int | Sequence[int] | None = None,
    keepdim: bool = False,
    *,
    dtype: DType | None = None,
) -> Tensor:
    """A vector norm (dim an int, or A 1-d) or a matrix norm (dim two ints, or A 2-d), as PyTorch's."""
    if isinstance(dim, int):
        dim = (dim,)
    if (dim is not None and len(dim) == 2) or (dim is None and A.ndim == 2 and ord is not None):
        return matrix_norm(
            A, "fro" if ord is None else ord, (-2, -1) if dim is None else tuple(dim), keepdim, dtype=dtype
        )
    if isinstance(ord, str):
        raise ValueError(f"linalg.norm: ord {ord!r} is for matrices (give A 2-d or two dims)")
    if dim is None and ord is not None and A.ndim > 2:
        raise ShapeError(f"linalg.norm: ord={ord} with dim=None needs a 1-d or 2-d input, got {fmt_shape(A.shape)}")
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
    """The dot product of x and y (broadcast) along dim."""
    return _sum(x * y, dim)


def cross(input: Tensor, other: Tensor, *, dim: int = -1) -> Tensor:
    """The cross product of 3-vectors along dim (the last by default, unlike ``adcuda.cross``)."""
    return _cross(input, other, dim)


def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:  # noqa: N803
    """The diagonals of the matrices in the last two dims (``adcuda.diagonal`` with matrix defaults)."""
    return _diagonal(A, offset, dim1, dim2)
