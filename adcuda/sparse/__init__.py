"""``adcuda.sparse``: PyTorch's ``torch.sparse`` functions over sparse COO tensors (made by
``adcuda.sparse_coo_tensor`` and ``Tensor.to_sparse``; the tensors and their ops are in
adcuda/ops/sparse.py, the products' kernels in the backends' ``sparse`` family)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import dtypes as dt
from ..ops.sparse import sparse_coo_tensor, sparse_mm, sparse_sum

if TYPE_CHECKING:
    from ..tensor import Tensor
    from ..types import Any, DType

__all__ = ["mm", "addmm", "sum", "FloatTensor", "DoubleTensor"]


def mm(mat1: Tensor, mat2: Tensor) -> Tensor:
    """The product of a 2-D sparse matrix and a dense matrix (either order) -> a dense matrix. The
    gradient w.r.t. a sparse operand that requires grad is sparse, on its entries."""
    return sparse_mm(mat1, mat2, "sparse.mm")


def addmm(mat: Tensor, mat1: Tensor, mat2: Tensor, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * mat + alpha * (mat1 @ mat2)`` with ``mat1`` a 2-D sparse matrix and ``mat2`` dense."""
    product = sparse_mm(mat1, mat2, "sparse.addmm")
    return (mat if beta == 1 else mat * beta) + (product if alpha == 1 else product * alpha)


def sum(input: Tensor, dim: Any = None, dtype: DType | None = None) -> Tensor:  # noqa: A001 (PyTorch's name)
    """The sum of a sparse tensor's elements (a dense 0-d tensor), or over ``dim`` (an int or a
    tuple): dense when every sparse dim is summed, else a coalesced sparse tensor."""
    out = sparse_sum(input, dim)
    return out if dtype is None else out.to(dtype)


def FloatTensor(indices: Any, values: Any, size: Any = None) -> Tensor:  # noqa: N802 (PyTorch's legacy name)
    """PyTorch's legacy constructor ``torch.sparse.FloatTensor(indices, values, size)``: a float32
    sparse COO tensor (``sparse_coo_tensor`` with ``dtype=float32``)."""
    return sparse_coo_tensor(indices, values, size, dtype=dt.float32)


def DoubleTensor(indices: Any, values: Any, size: Any = None) -> Tensor:  # noqa: N802 (PyTorch's legacy name)
    """``torch.sparse.DoubleTensor(indices, values, size)``: a float64 sparse COO tensor."""
    return sparse_coo_tensor(indices, values, size, dtype=dt.float64)
