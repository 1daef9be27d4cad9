"""The CUDA backend's sparse products (kernels/sparse.cu), with the CPU backend's signatures, results
and errors: ``coo_to_csr`` (a stable radix sort of the rows and a row-pointer kernel), ``spmm`` (CSR x
dense, one warp per row, lanes over the dense columns) and ``sddmm`` (one dot product per entry, the
value gradient of ``spmm``). Half types accumulate in fp32.
"""

from __future__ import annotations

from ... import _native
from ..seam import declared
from ._common import BackendArray, cast, dense, scalar_type

__all__ = ["coo_to_csr", "spmm", "sddmm"]


def _index_vector(a):
    return dense(cast(a, scalar_type("int64")))


def coo_to_csr(rows: BackendArray, n_rows: int, rows_sorted: bool) -> tuple[BackendArray, BackendArray | None]:
    """(row_ptr int64 (n_rows + 1,), order int64 (nnz,) or None when ``rows_sorted``): see the CPU backend."""
    declared.coo_to_csr(rows, n_rows, rows_sorted)
    row_ptr, order = _native._C.coo_to_csr(_index_vector(rows), int(n_rows), bool(rows_sorted))
    return row_ptr, order


def spmm(
    row_ptr: BackendArray, order: BackendArray | None, cols: BackendArray, values: BackendArray, dense: BackendArray
) -> BackendArray:
    """The product of the CSR matrix by the 2-D ``dense`` (any strides): see the CPU backend."""
    declared.spmm(row_ptr, order, cols, values, dense)
    return _native._C.spmm(
        _index_vector(row_ptr),
        None if order is None else _index_vector(order),
        _index_vector(cols),
        _dense_values(values),
        dense,
    )


def _dense_values(values):
    return values if values.is_contiguous() else _native._C.contiguous(values)


def sddmm(rows: BackendArray, cols: BackendArray, a: BackendArray, b: BackendArray) -> BackendArray:
    """``out[k] = dot(a[rows[k]], b[cols[k]])`` (a and b 2-D, any strides): see the CPU backend."""
    declared.sddmm(rows, cols, a, b)
    return _native._C.sddmm(_index_vector(rows), _index_vector(cols), a, b)
