"""The CPU backend's sparse products (kernels/sparse.cu on CUDA): ``coo_to_csr``, ``spmm`` and
``sddmm``, the primitives under adcuda's sparse COO tensors (adcuda/ops/sparse.py).

A sparse matrix reaches them as coordinates: ``rows`` and ``cols`` (int64, one entry per stored
value). ``coo_to_csr`` orders the entries by row (a stable sort, so duplicates keep their order) and
gives the row pointers; ``spmm`` multiplies the rows so ordered by a dense matrix, summing each row's
products rank by rank (the first entry of every row at once, then the second...; long rows' tails by
``np.add.reduceat`` over their row pointers): no Python loop over rows; ``sddmm``
is the gradient of the product w.r.t. the stored values, one dot product per entry. float16 is
computed in float32 (``_compute``), float64 kept for gradcheck.
"""

from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ..seam import declared
from ._common import BackendArray, _compute

__all__ = ["coo_to_csr", "spmm", "sddmm"]

# The most products (entries x dense columns) one block of rows forms at a time: bounds the temporary
# of the gathered rows (16 MiB of float32) whatever the matrix, without a loop per row.
_BLOCK_PRODUCTS = 1 << 22


def coo_to_csr(rows: BackendArray, n_rows: int, rows_sorted: bool) -> tuple[BackendArray, BackendArray | None]:
    """(row_ptr int64 (n_rows + 1,), order int64 (nnz,) or None): the entries of row i are
    ``order[row_ptr[i]:row_ptr[i + 1]]`` (entries ``row_ptr[i]`` to ``row_ptr[i + 1]`` themselves
    when ``rows_sorted``, and order is None)."""
    declared.coo_to_csr(rows, n_rows, rows_sorted)
    order = None if rows_sorted else np.argsort(rows, kind="stable").astype(np.int64, copy=False)
    counts = np.bincount(rows, minlength=n_rows) if rows.size else np.zeros(n_rows, np.int64)
    if counts.size != n_rows:
        raise ShapeError(f"coo_to_csr: a row index lies outside the {n_rows} rows")
    row_ptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(counts, out=row_ptr[1:])
    return row_ptr, order


def spmm(
    row_ptr: BackendArray, order: BackendArray | None, cols: BackendArray, values: BackendArray, dense: BackendArray
) -> BackendArray:
    """The (n_rows, dense.shape[1]) product of the CSR matrix (``row_ptr``, entries taken in ``order``
    or as they are when None, with column ``cols`` and value ``values``) by ``dense``, in ``values``'
    dtype; duplicates add."""
    declared.spmm(row_ptr, order, cols, values, dense)
    n_rows, width = row_ptr.shape[0] - 1, dense.shape[1]
    if order is not None:
        cols, values = cols[order], values[order]
    vals, mat = _compute(values), _compute(dense)
    out = np.zeros((n_rows, width), np.result_type(vals, mat))
    if cols.size == 0 or width == 0:
        return out.astype(values.dtype, copy=False)
    # The k-th entries of all rows at once, k = 0, 1, ...: each step one gather, product and add over
    # the rows that have a k-th entry (no two of them the same row). A loop over the longest row's
    # length, not over rows; the entries past _RANKS of the few longer rows are summed by segments.
    starts, degree = row_ptr[:-1], np.diff(row_ptr)
    for k in range(min(int(degree.max()), _RANKS)):
        rows = np.flatnonzero(degree > k)
        at = starts[rows] + k
        out[rows] += vals[at, None] * mat[cols[at]]
    long_rows = np.flatnonzero(degree > _RANKS)
    if long_rows.size:
        tails = np.zeros(long_rows.size + 1, np.int64)
        np.cumsum(degree[long_rows] - _RANKS, out=tails[1:])
        # the entries of each long row from rank _RANKS on, row after row
        at = np.repeat(starts[long_rows] + _RANKS - tails[:-1], degree[long_rows] - _RANKS) + np.arange(tails[-1])
        out[long_rows] += _segment_sums(tails, cols[at], vals[at], mat)
    return out.astype(values.dtype, copy=False)


# rows longer than this many entries have the rest summed by segments (np.add.reduceat: slower per
# entry for short rows, but without a step per entry of the longest row)
_RANKS = 32


def _segment_sums(row_ptr, cols, vals, mat):
    """Each row's sum of ``vals[k] * mat[cols[k]]`` over its entries ``row_ptr[i]:row_ptr[i + 1]`` (every
    row non-empty), in row blocks of about _BLOCK_PRODUCTS products."""
    n_rows, width = row_ptr.shape[0] - 1, mat.shape[1]
    out = np.empty((n_rows, width), np.result_type(vals, mat))
    budget = max(1, _BLOCK_PRODUCTS // max(1, width))
    bounds = np.unique(np.searchsorted(row_ptr, np.arange(0, cols.size, budget), side="right") - 1)
    for first, last in zip(bounds, np.append(bounds[1:], n_rows)):
        begin, end = row_ptr[first], row_ptr[last]
        products = vals[begin:end, None] * mat[cols[begin:end]]
        out[first:last] = np.add.reduceat(products, row_ptr[first:last] - begin, axis=0)
    return out


def sddmm(rows: BackendArray, cols: BackendArray, a: BackendArray, b: BackendArray) -> BackendArray:
    """``out[k] = dot(a[rows[k]], b[cols[k]])`` for each entry k, in ``a``'s dtype: the gradient of
    ``spmm`` w.r.t. its values (``a`` the output's gradient, ``b`` the dense operand)."""
    declared.sddmm(rows, cols, a, b)
    x, y = _compute(a), _compute(b)
    out = np.empty(rows.shape[0], np.result_type(x, y))
    width = max(1, a.shape[1])
    step = max(1, _BLOCK_PRODUCTS // width)
    for begin in range(0, rows.shape[0], step):  # blocks of entries, as spmm's, to bound the temporaries
        end = begin + step
        out[begin:end] = np.einsum("kj,kj->k", x[rows[begin:end]], y[cols[begin:end]])
    return out.astype(a.dtype, copy=False)
