"""Sparse COO tensors: ``sparse_coo_tensor``, ``Tensor.to_sparse``, ``SparseTensor`` and its methods
(``to_dense coalesce indices values _nnz sparse_dim dense_dim t mm``...), and the products of a sparse
matrix by a dense one (``adcuda.sparse.mm``, ``adcuda.spmm``, ``mm``/``matmul``/``@``) with gradients
to the dense operand and to the sparse values.

Design. A sparse tensor is a ``SparseTensor``, a subclass of ``Tensor`` holding two ordinary dense
tensors and a size: ``indices`` (int64, ``(sparse_dim, nnz)``) and ``values`` (``(nnz, *dense_dims)``),
plus whether it is coalesced (indices sorted row-major with no duplicates). A subclass, not a layout
field on ``Tensor``, because it keeps the dense hot path untouched: the dispatch point asks
``t.__class__ is Tensor`` before anything else, so a sparse tensor costs dense calls nothing, and a
``SparseTensor`` has no ``_data`` at all, so a dense op handed one fails on its first read of it, on
the error path, where the dispatch point names the op and the layout (``LayoutError``) instead of
computing a wrong result. ``isinstance(s, adcuda.Tensor)`` holds, as in PyTorch.

Autograd needs nothing new: every sparse op is written with dense ops on ``values`` (and the two
product ops below), so gradients reach the values tensor, and through it whatever it was made from.
A sparse tensor that requires grad (``requires_grad=True``, ``requires_grad_()``) is one whose values
tensor is a leaf that does; its ``.grad`` is that gradient as a sparse tensor of the same pattern,
coalesced, as PyTorch's ``torch.sparse.mm`` and ``torch.sparse.sum`` give it.

The products are two ops over the backends' ``sparse`` family (``coo_to_csr spmm sddmm``): ``_spmm``
(the sparse matrix given by its indices and values, times a dense matrix; CSR order from a stable sort
of the rows, skipped when the tensor is coalesced) and ``_sddmm`` (one dot product per stored entry:
the gradient w.r.t. the values), each the other's gradient, so ``create_graph=True`` gives higher
orders. The gradient w.r.t. the dense operand is the transposed product: ``_spmm`` with the indices'
rows swapped.
"""

from __future__ import annotations

import math
import operator
from typing import TYPE_CHECKING

import numpy as np

from .. import dtypes as dt
from ..autograd.graph import needs_grad
from ..device import device as make_device
from ..errors import (
    DeviceError,
    DTypeError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    LayoutError,
    ShapeError,
    fmt_shape,
)
from ..layouts import sparse_coo
from ..tensor import Size, Tensor, primitives, wrap_dim
from .common import wrap
from .conversion import to
from .elementwise import binary, ne
from .factories import tensor as make_tensor
from .factories import zeros
from .index import _nonzero, index_add, index_select, nonzero
from .layout import cat, stack
from .reduce import cumsum
from .registry import op
from .sort import sort

if TYPE_CHECKING:
    from ..types import Any, DType, Number, Sequence

__all__ = [
    "SparseTensor",
    "sparse_coo_tensor",
    "to_sparse",
    "to_dense",
    "sparse_mm",
    "sparse_matmul",
    "sparse_sum",
    "spmm",
]


# ----------------------------------------------------------------------------------------------
# the product ops (the only ones that call the sparse primitives)
@op(
    "_spmm",
    doc="The product of the 2-D sparse matrix (indices, values) with n_rows rows by the dense matrix dense.",
    function=False,
    method=False,
    node="SparseMmBackward0",
    grads={
        "values": lambda grad, indices, dense: _sddmm(indices, grad, dense),
        "dense": lambda grad, indices, values, dense_shape: _spmm(indices.flip(0), values, grad, dense_shape[0], False),
    },
)
def _spmm(indices: Tensor, values: Tensor, dense: Tensor, n_rows: int, rows_sorted: bool) -> Tensor:
    backend = primitives(values)
    rows, cols = backend.slice(indices._data, (0,)), backend.slice(indices._data, (1,))
    row_ptr, order = backend.coo_to_csr(rows, n_rows, rows_sorted)
    return wrap(backend.spmm(row_ptr, order, cols, values._data, dense._data), values._device)


@op(
    "_sddmm",
    doc="For each stored entry k of the sparse pattern indices, dot(a[row_k], b[col_k]).",
    function=False,
    method=False,
    node="SparseSampledDotBackward0",
    grads={
        "a": lambda grad, indices, b, a_shape: _spmm(indices, grad, b, a_shape[0], False),
        "b": lambda grad, indices, a, b_shape: _spmm(indices.flip(0), grad, a, b_shape[0], False),
    },
)
def _sddmm(indices: Tensor, a: Tensor, b: Tensor) -> Tensor:
    backend = primitives(a)
    rows, cols = backend.slice(indices._data, (0,)), backend.slice(indices._data, (1,))
    return wrap(backend.sddmm(rows, cols, a._data, b._data), a._device)


# ----------------------------------------------------------------------------------------------
# the sparse tensor
def _unsupported(name):
    def refuse(self, *args, **kwargs):
        raise LayoutError(f"{name}: not supported for sparse tensors (layout {sparse_coo}); use .to_dense() first")

    refuse.__name__ = name
    return refuse


class SparseTensor(Tensor):
    """A sparse COO tensor (``layout == adcuda.sparse_coo``): see the module docstring. Made by
    ``adcuda.sparse_coo_tensor`` and ``Tensor.to_sparse``."""

    layout = sparse_coo
    is_sparse = True
    # A few of Tensor's members take less here, on purpose: grad_fn and grad are read-only, to_dense has no
    # masked_grad, to_sparse no layout, sum no keepdims/axis (and dtype also by position), div no
    # rounding_mode. Type checkers see those overrides narrow Tensor's signatures: the ignores below say so.
    # set by _from_parts: the COO parts (indices, values), the size and whether it is coalesced
    _sp_indices: Tensor
    _sp_values: Tensor
    _sp_size: tuple[int, ...]
    _sp_coalesced: bool

    @classmethod
    def _from_parts(cls, indices, values, size, coalesced):
        s = object.__new__(cls)
        s._sp_indices = indices
        s._sp_values = values
        s._sp_size = tuple(size)
        s._sp_coalesced = coalesced
        s._device = values._device
        return s

    # ------------------------------------------------------------------ metadata
    @property
    def shape(self) -> Size:
        return Size(self._sp_size)

    def size(self, dim: int | None = None) -> Size | int:
        if dim is None:
            return Size(self._sp_size)
        return self._sp_size[wrap_dim(dim, len(self._sp_size), "size")]

    @property
    def dtype(self) -> DType:
        return self._sp_values.dtype

    @property
    def ndim(self) -> int:
        return len(self._sp_size)

    def dim(self) -> int:
        return len(self._sp_size)

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self._sp_size)

    nelement = numel

    def __len__(self) -> int:
        if not self._sp_size:
            raise TypeError("len() of a 0-d tensor")
        return self._sp_size[0]

    def sparse_dim(self) -> int:
        return self._sp_indices.shape[0]

    def dense_dim(self) -> int:
        return len(self._sp_size) - self.sparse_dim()

    def _nnz(self) -> int:
        return self._sp_indices.shape[1]

    def is_coalesced(self) -> bool:
        return self._sp_coalesced

    def _indices(self) -> Tensor:
        return self._sp_indices

    def _values(self) -> Tensor:
        return self._sp_values

    def indices(self) -> Tensor:
        self._require_coalesced("indices")
        return self._sp_indices

    def values(self) -> Tensor:
        self._require_coalesced("values")
        return self._sp_values

    def _require_coalesced(self, name):
        if not self._sp_coalesced:
            raise LayoutError(f"{name}: Cannot get {name} on an uncoalesced tensor, please call .coalesce() first")

    # ------------------------------------------------------------------ autograd, through the values
    @property
    def requires_grad(self) -> bool:
        return self._sp_values.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._sp_values.requires_grad = value

    def requires_grad_(self, requires_grad: bool = True) -> SparseTensor:
        self._sp_values.requires_grad = requires_grad
        return self

    @property  # type: ignore[misc]  # read-only (see the class's note)
    def grad_fn(self):
        return self._sp_values.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._sp_values.grad_fn is None

    @property  # type: ignore[override]  # read-only (see the class's note)
    def grad(self) -> SparseTensor | None:
        g = self._sp_values.grad
        if g is None:
            return None
        grad = SparseTensor._from_parts(self._sp_indices, g, self._sp_size, self._sp_coalesced)
        if self._sp_coalesced:
            return grad
        # PyTorch's gradient w.r.t. an uncoalesced tensor is the one w.r.t. the dense tensor it stands
        # for, at each of its positions once: what each duplicate's value got (the same for all of
        # them, for any function of that dense tensor), not their sum
        summed = grad.coalesce()
        ones = SparseTensor._from_parts(self._sp_indices, g.new_ones(g.shape[:1]), self._sp_size, False)
        counts = ones.coalesce()._sp_values.reshape((-1,) + (1,) * (g.ndim - 1))
        return SparseTensor._from_parts(summed._sp_indices, summed._sp_values / counts, self._sp_size, True)

    @grad.setter
    def grad(self, value: SparseTensor | None) -> None:
        if value is None:
            self._sp_values.grad = None
            return
        # kept as values on this tensor's entries, as the gradients of the sparse ops are
        if not (
            isinstance(value, SparseTensor)
            and value.shape == self.shape
            and value._nnz() == self._nnz()
            and bool((value._sp_indices == self._sp_indices).all())
        ):
            raise LayoutError("grad: a sparse tensor's grad can be set to None or a sparse tensor with its indices")
        self._sp_values.grad = value._sp_values

    def detach(self) -> SparseTensor:
        return SparseTensor._from_parts(self._sp_indices, self._sp_values.detach(), self._sp_size, self._sp_coalesced)

    def clone(self) -> SparseTensor:
        return SparseTensor._from_parts(
            self._sp_indices.clone(), self._sp_values.clone(), self._sp_size, self._sp_coalesced
        )

    # ------------------------------------------------------------------ conversions
    def to(self, *args: Any, **kwargs: Any) -> SparseTensor:
        values = to(self._sp_values, *args, **kwargs)
        if values is self._sp_values:
            return self
        indices = self._sp_indices if values._device is self._device else to(self._sp_indices, values._device)
        return SparseTensor._from_parts(indices, values, self._sp_size, self._sp_coalesced)

    def cpu(self) -> SparseTensor:
        return self.to("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> SparseTensor:
        target = "cuda" if device is None else (device if not isinstance(device, int) else f"cuda:{device}")
        return self.to(target, non_blocking=non_blocking)

    def double(self) -> SparseTensor:
        return self.to(dt.float64)

    def float(self) -> SparseTensor:
        return self.to(dt.float32)

    def half(self) -> SparseTensor:
        return self.to(dt.float16)

    def to_dense(self, dtype: DType | None = None) -> Tensor:  # type: ignore[override]  # (the class's note)
        return sparse_to_dense(self) if dtype is None else sparse_to_dense(self).to(dtype)

    def to_sparse(self, sparse_dim: int | None = None) -> SparseTensor:  # type: ignore[override]  # (the class's note)
        if sparse_dim is not None and sparse_dim != self.sparse_dim():
            raise LayoutError(
                "to_sparse: conversion from Sparse to Sparse with sparse_dim argument !=self.sparse_dim() "
                "is not supported"
            )
        return self

    def coalesce(self) -> SparseTensor:
        return coalesce(self)

    # ------------------------------------------------------------------ ops
    def t(self) -> SparseTensor:
        if self.sparse_dim() != 2 or self.dense_dim() != 0:
            raise ShapeError(f"t: expects a 2-D sparse tensor (sparse_dim 2), got size {fmt_shape(self.shape)}")
        return self.transpose(0, 1)

    def transpose(self, dim0: int, dim1: int) -> SparseTensor:
        n = self.ndim
        d0, d1 = wrap_dim(dim0, n, "transpose"), wrap_dim(dim1, n, "transpose")
        if d0 == d1:
            return self
        if d0 >= self.sparse_dim() or d1 >= self.sparse_dim():
            raise LayoutError("transpose: a sparse tensor's dense dims cannot be transposed (only its sparse dims)")
        order = list(range(self.sparse_dim()))
        order[d0], order[d1] = d1, d0
        size = list(self._sp_size)
        size[d0], size[d1] = size[d1], size[d0]
        indices = index_select(self._sp_indices, 0, make_tensor(order, device=self._device))
        return SparseTensor._from_parts(indices, self._sp_values, size, self._nnz() <= 1 and self._sp_coalesced)

    def mm(self, mat2: Tensor) -> Tensor:
        return sparse_mm(self, mat2, "mm")

    def matmul(self, other: Tensor) -> Tensor:
        return sparse_matmul(self, other)

    def __matmul__(self, other: Tensor) -> Tensor:
        return sparse_matmul(self, other)

    def __rmatmul__(self, other: Tensor) -> Tensor:
        return sparse_matmul(other, self)

    def sum(self, dim: Any = None, keepdim: bool = False, dtype: DType | None = None) -> Tensor:  # type: ignore[override]  # (the class's note)
        if keepdim:
            raise LayoutError("sum: keepdim=True is not supported for sparse tensors")
        out = sparse_sum(self, dim)
        return out if dtype is None else out.to(dtype)

    def mul(self, other: Any) -> SparseTensor:
        return _scaled(self, other, "mul", lambda v, s: v * s)

    __mul__ = __rmul__ = mul

    def div(self, other: Any) -> SparseTensor:  # type: ignore[override]  # (the class's note)
        return _scaled(self, other, "div", lambda v, s: v / s)

    __truediv__ = div

    def neg(self) -> SparseTensor:
        return SparseTensor._from_parts(self._sp_indices, -self._sp_values, self._sp_size, self._sp_coalesced)

    __neg__ = neg

    # (other: what Tensor's take; sparse_add refuses a number with a DTypeError)
    def add(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor:
        return sparse_add(self, other, alpha)

    def __add__(self, other: Tensor | Number) -> Tensor:
        return sparse_add(self, other, 1)

    __radd__ = __add__

    def sub(self, other: Tensor | Number, *, alpha: Number = 1) -> Tensor:
        return sparse_add(self, other, -alpha)

    def __sub__(self, other: Tensor | Number) -> Tensor:
        return sparse_add(self, other, -1)

    def __repr__(self) -> str:
        indices = repr(self._sp_indices).replace("\n", "\n" + " " * len("tensor(indices="))
        values = repr(self._sp_values.detach()).replace("\n", "\n" + " " * len("       values="))
        extras = [f"size={tuple(self._sp_size)}", f"nnz={self._nnz()}"]
        if self._device.type != "cpu":
            extras.append(f"device='{self._device}'")
        if self.dtype not in (dt.float32, dt.int64, dt.bool_):
            extras.append(f"dtype={self.dtype}")
        extras.append(f"layout={sparse_coo}")
        node = self.grad_fn
        if node is not None:
            extras.append(f"grad_fn=<{node.name}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor(indices={indices},\n       values={values},\n       " + ", ".join(extras) + ")"

    # what reads a dense tensor's array directly: refused by name (the ops are refused by the dispatch
    # point, which names the op)
    numpy = _unsupported("numpy")
    __array__ = _unsupported("__array__")
    item = _unsupported("item")
    tolist = _unsupported("tolist")
    __bool__ = _unsupported("__bool__")
    __float__ = _unsupported("__float__")
    __int__ = _unsupported("__int__")
    __index__ = _unsupported("__index__")
    __iter__ = _unsupported("__iter__")
    is_contiguous = _unsupported("is_contiguous")
    stride = _unsupported("stride")
    data_ptr = _unsupported("data_ptr")
    backward = _unsupported("backward")
    register_hook = _unsupported("register_hook")
    retain_grad = _unsupported("retain_grad")

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)


def _scaled(s, other, name, fn):
    if isinstance(other, SparseTensor) or (isinstance(other, Tensor) and other.ndim != 0):
        raise LayoutError(
            f"{name}: a sparse tensor {name} a tensor of shape {fmt_shape(other.shape)} is not supported "
            "(only by a scalar or a 0-d tensor)"
        )
    if not isinstance(other, (Tensor, int, float, bool, np.number)):
        raise DTypeError(f"{name}: expected a number or a 0-d tensor, got {type(other).__name__}")
    return SparseTensor._from_parts(s._sp_indices, fn(s._sp_values, other), s._sp_size, s._sp_coalesced)


# ----------------------------------------------------------------------------------------------
# construction
def _as_index_tensor(indices, device):
    if isinstance(indices, SparseTensor):
        raise LayoutError("sparse_coo_tensor: indices must be a dense tensor")
    if not isinstance(indices, Tensor):
        indices = make_tensor(indices, device=device)
    elif device is not None:
        indices = to(indices, device)
    if indices.dtype.category != dt.INTEGER and indices.numel():
        raise DTypeError(f"sparse_coo_tensor: indices must be an int64 tensor, got {indices.dtype}")
    return indices.detach().to(dt.int64)


def sparse_coo_tensor(
    indices: Any,
    values: Any,
    size: Sequence[int] | None = None,
    *,
    dtype: DType | None = None,
    device: Any = None,
    pin_memory: bool | None = False,
    requires_grad: bool = False,
    check_invariants: bool | None = None,
    is_coalesced: bool | None = None,
) -> Tensor:
    """A sparse COO tensor with the given ``indices`` (``(sparse_dim, nnz)`` integers) and ``values``
    (``(nnz, *dense_dims)``), of ``size`` (inferred from the largest indices and the values' shape when
    None). Indices are always checked (none negative, none past ``size``), whatever
    ``check_invariants`` says: a tensor that breaks them would give wrong products."""
    target = None if device is None else make_device(device)
    if isinstance(values, SparseTensor):
        raise LayoutError("sparse_coo_tensor: values must be a dense tensor")
    if not isinstance(values, Tensor):
        values = make_tensor(values, dtype=dtype, device=target)
    elif (dtype is not None and values.dtype is not dtype) or (target is not None and values.device != target):
        values = to(values, device=target, dtype=dtype)
    if not isinstance(indices, Tensor) and target is None:
        target = values.device
    idx = _as_index_tensor(indices, target)
    if idx.device != values.device:
        raise DeviceError(
            f"sparse_coo_tensor: indices and values must be on the same device, got {idx.device} and {values.device}"
        )
    if idx.ndim != 2:
        raise ShapeError(f"sparse_coo_tensor: indices must be sparse_dim x nnz, but got: {list(idx.shape)}")
    if values.ndim == 0:
        raise ShapeError("sparse_coo_tensor: values must have at least one dim (nnz, *dense_dims), got a 0-d tensor")
    sparse_dim, nnz = idx.shape
    if values.shape[0] != nnz:
        raise ShapeError(
            f"sparse_coo_tensor: indices and values must have same nnz, but got nnz from indices: {nnz}, "
            f"nnz from values: {values.shape[0]}"
        )
    dense_shape = tuple(values.shape[1:])
    low, high = _index_bounds(idx)
    for d in range(sparse_dim):
        if low[d] < 0:
            raise InvalidArgumentError(f"sparse_coo_tensor: found negative index {low[d]} for dim {d}")
    if size is None:
        size = tuple(high[d] + 1 if nnz else 0 for d in range(sparse_dim)) + dense_shape
    else:
        size = tuple(operator.index(s) for s in size)
        if len(size) != sparse_dim + len(dense_shape):
            raise ShapeError(
                f"sparse_coo_tensor: 'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = "
                f"{len(size)}, sparse_dim = {sparse_dim}, dense_dim = {len(dense_shape)}"
            )
        if tuple(size[sparse_dim:]) != dense_shape:
            raise ShapeError(
                f"sparse_coo_tensor: values has incorrect size, expected {[nnz, *size[sparse_dim:]]}, "
                f"got {[nnz, *dense_shape]}"
            )
        for d in range(sparse_dim):
            if nnz and high[d] >= size[d]:  # a RuntimeError in PyTorch, not an IndexError
                raise InvalidArgumentError(
                    f"sparse_coo_tensor: size is inconsistent with indices: for dim {d}, size is {size[d]} "
                    f"but found index {high[d]}"
                )
    if requires_grad or not values.requires_grad:
        # the tensor's own leaf (PyTorch's sparse tensor is a leaf of its own; the given values stay as they are)
        values = values.detach()
        if requires_grad:
            values.requires_grad_(True)
    coalesced = bool(is_coalesced) if is_coalesced is not None else nnz <= 1
    return SparseTensor._from_parts(idx, values, size, coalesced)


def _index_bounds(idx):
    """Per sparse dim: the smallest and largest index (one host read of both)."""
    if idx.shape[1] == 0:
        return [0] * idx.shape[0], [-1] * idx.shape[0]
    both = stack([idx.amin(1), idx.amax(1)]).cpu().numpy()
    return both[0].tolist(), both[1].tolist()


def _linear_index(indices, sizes):
    """Each entry's row-major position over the sparse dims of ``sizes`` (int64)."""
    if indices.shape[0] == 1:
        return indices[0]
    strides = np.cumprod((1,) + tuple(sizes[:0:-1]))[::-1].copy()
    return (indices * make_tensor(strides, dtype=dt.int64, device=indices.device).unsqueeze(1)).sum(0)


def coalesce(s: SparseTensor) -> SparseTensor:
    """``s`` with its indices sorted row-major and the values of duplicates added (``s`` itself when it
    is coalesced already). Differentiable w.r.t. the values."""
    if s._sp_coalesced:
        return s
    nnz, sparse_dim = s._nnz(), s.sparse_dim()
    if nnz == 0:
        return SparseTensor._from_parts(s._sp_indices, s._sp_values, s._sp_size, True)
    keys, order = sort(_linear_index(s._sp_indices, s._sp_size[:sparse_dim]), stable=True)
    starts = cat([make_tensor([True], device=s.device), ne(keys[1:], keys[:-1])])
    segment = cumsum(starts, 0) - 1
    first = nonzero(starts).squeeze(1)  # one host read: the number of distinct entries
    indices = index_select(s._sp_indices, 1, index_select(order, 0, first))
    dense_shape = tuple(s._sp_values.shape[1:])
    values = index_add(
        zeros((first.shape[0], *dense_shape), dtype=s.dtype, device=s.device),
        0,
        segment,
        index_select(s._sp_values, 0, order),
    )
    return SparseTensor._from_parts(indices, values, s._sp_size, True)


def sparse_to_dense(s: SparseTensor) -> Tensor:
    """The dense tensor of ``s`` (duplicates added); differentiable w.r.t. the values."""
    sparse_dim = s.sparse_dim()
    sparse_size = s._sp_size[:sparse_dim]
    dense_shape = tuple(s._sp_values.shape[1:])
    flat = zeros((math.prod(sparse_size), *dense_shape), dtype=s.dtype, device=s.device)
    if s._nnz():
        flat = index_add(flat, 0, _linear_index(s._sp_indices, sparse_size), s._sp_values)
    return flat.reshape(s._sp_size)


@op(
    "to_sparse",
    doc="input as a sparse COO tensor of its nonzero entries (of its first sparse_dim dims).",
    composite=True,
    function=False,
    aliases=("to_sparse_coo",),
)
def to_sparse(input: Tensor, sparse_dim: int | None = None, *, layout: Any = None) -> Tensor:
    # differentiable through the gather of the values
    if isinstance(input, SparseTensor):
        return input.to_sparse(sparse_dim)
    if layout is not None and layout is not sparse_coo:
        raise LayoutError(f"to_sparse: only layout {sparse_coo} is supported, got {layout}")
    n = input.ndim
    sparse_dim = n if sparse_dim is None else operator.index(sparse_dim)
    if not 0 < sparse_dim <= n:
        raise IndexOutOfRangeError(
            f"to_sparse: sparse_dim must be in [1, {n}] for a tensor of shape {fmt_shape(input.shape)}, "
            f"got {sparse_dim}"
        )
    occupied = binary("ne", input, 0, name="to_sparse")  # (over the primitives: records nothing)
    if sparse_dim < n:
        occupied = occupied.any(tuple(range(sparse_dim, n)))
    # each sparse dim's coordinates of the occupied entries, in row-major order: the rows of indices
    coordinates = _nonzero(occupied, True)
    bk, device = primitives(input), input._device
    count = coordinates[0]._data.shape[0]
    indices = wrap(bk.cat([bk.view(c._data, (1, count)) for c in coordinates], 0), device)
    if needs_grad(input):
        values = input[coordinates]
    else:  # the gather over the primitives
        values = wrap(bk.index(input._data, tuple(c._data for c in coordinates)), device)
    return SparseTensor._from_parts(indices, values, tuple(input.shape), True)


@op("to_dense", doc="input as a dense (strided) tensor: input itself when it is dense.", composite=True, function=False)
def to_dense(input: Tensor, dtype: DType | None = None, *, masked_grad: bool | None = None) -> Tensor:
    # (SparseTensor.to_dense overrides the method)
    if not isinstance(input, Tensor):
        raise DTypeError(f"to_dense: input must be a Tensor, got {type(input).__name__}")
    return input if dtype is None else input.to(dtype)


# ----------------------------------------------------------------------------------------------
# products and reductions
def _check_product(name, s, d):
    if not isinstance(d, Tensor):
        raise DTypeError(f"{name}: expected a Tensor as the dense operand, got {type(d).__name__}")
    if isinstance(d, SparseTensor):
        raise LayoutError(f"{name}: the product of two sparse tensors is not supported; make one dense")
    if s.sparse_dim() != 2 or s.dense_dim() != 0:
        raise ShapeError(
            f"{name}: the sparse operand must be a 2-D matrix (sparse_dim 2, dense_dim 0), got size "
            f"{fmt_shape(s.shape)} with sparse_dim {s.sparse_dim()}"
        )
    if d.ndim != 2:
        raise ShapeError(f"{name}: the dense operand must be 2-D, got {fmt_shape(d.shape)}")
    if s.device != d.device:
        raise DeviceError(
            f"{name}: expected all tensors to be on the same device, but found at least two devices, "
            f"{s.device} and {d.device}"
        )
    if s.dtype is not d.dtype:
        raise DTypeError(f"{name}: expected both operands to have the same dtype, but got {s.dtype} and {d.dtype}")
    if not s.dtype.is_floating_point:
        raise DTypeError(f"{name}: only floating point dtypes are supported, got {s.dtype}")
    if s.shape[1] != d.shape[0]:
        raise ShapeError(
            f"{name}: shapes {fmt_shape(s.shape)} and {fmt_shape(d.shape)} cannot be multiplied "
            f"({s.shape[0]}x{s.shape[1]} and {d.shape[0]}x{d.shape[1]})"
        )


def sparse_mm(input: Tensor, mat2: Tensor, name: str = "sparse.mm") -> Tensor:
    """``input @ mat2`` with one of them a 2-D sparse matrix and the other a dense one -> dense."""
    if isinstance(input, SparseTensor):
        _check_product(name, input, mat2)
        return _spmm(input._sp_indices, input._sp_values, mat2, input.shape[0], input._sp_coalesced)
    if isinstance(mat2, SparseTensor):
        # dense @ sparse = (sparse^T @ dense^T)^T
        if isinstance(input, Tensor) and input.ndim == 2 and mat2.ndim == 2 and input.shape[1] != mat2.shape[0]:
            raise ShapeError(
                f"{name}: shapes {fmt_shape(input.shape)} and {fmt_shape(mat2.shape)} cannot be multiplied "
                f"({input.shape[0]}x{input.shape[1]} and {mat2.shape[0]}x{mat2.shape[1]})"
            )
        if not isinstance(input, Tensor) or input.ndim != 2 or mat2.sparse_dim() != 2:
            _check_product(name, mat2, input)  # raises what is wrong
        transposed = mat2.t()
        _check_product(name, transposed, input.t())
        return _spmm(transposed._sp_indices, transposed._sp_values, input.t(), transposed.shape[0], False).t()
    raise LayoutError(f"{name}: expected a sparse operand, got two dense tensors (use adcuda.mm)")


def sparse_matmul(input: Tensor, other: Tensor, name: str = "matmul") -> Tensor:
    """``matmul`` with a sparse operand: a 2-D sparse matrix by a dense matrix or vector (either side)."""
    if isinstance(other, Tensor) and not isinstance(other, SparseTensor) and other.ndim == 1:
        return sparse_mm(input, other.unsqueeze(1), name).squeeze(1)
    if isinstance(input, Tensor) and not isinstance(input, SparseTensor) and input.ndim == 1:
        return sparse_mm(input.unsqueeze(0), other, name).squeeze(0)
    return sparse_mm(input, other, name)


def spmm(input: Tensor, mat2: Tensor) -> Tensor:
    """The product of a 2-D sparse matrix by a dense matrix (``torch.spmm``)."""
    if not isinstance(input, SparseTensor):
        raise LayoutError(f"spmm: expected a sparse matrix as input, got a {getattr(input, 'layout', type(input))}")
    return sparse_mm(input, mat2, "spmm")


def sparse_sum(input: SparseTensor, dim: Any = None) -> Tensor:
    """The sum of all elements (a dense 0-d tensor), or over ``dim``: dense when every sparse dim is
    summed, else sparse (coalesced)."""
    if not isinstance(input, SparseTensor):
        raise LayoutError("sparse.sum: expected a sparse tensor")
    if dim is None:
        return input._sp_values.sum()
    given = (dim,) if isinstance(dim, int) else tuple(dim)
    n, sparse_dim = input.ndim, input.sparse_dim()
    dims = sorted({wrap_dim(d, n, "sparse.sum") for d in given})
    values = input._sp_values
    dense_dims = tuple(d - sparse_dim + 1 for d in dims if d >= sparse_dim)
    if dense_dims:
        values = values.sum(dense_dims)
    kept = [d for d in range(sparse_dim) if d not in dims]
    if not kept:
        return values.sum(0)
    size = [input._sp_size[d] for d in range(n) if d not in dims]
    indices = index_select(input._sp_indices, 0, make_tensor(kept, device=input.device))
    return coalesce(SparseTensor._from_parts(indices, values, size, False))


def sparse_add(input: SparseTensor, other: Any, alpha: Number) -> Tensor:
    """``input + alpha * other``: sparse for a sparse ``other`` of the same size (coalesced when both
    are), dense for a dense one."""
    if not isinstance(other, Tensor):
        raise DTypeError(f"add: a sparse tensor plus a {type(other).__name__} is not supported (only tensors)")
    if other.shape != input.shape:
        raise ShapeError(f"add: sizes {fmt_shape(input.shape)} and {fmt_shape(other.shape)} do not match")
    if not isinstance(other, SparseTensor):
        return input.to_dense() + other * alpha if alpha != 1 else input.to_dense() + other
    if other.sparse_dim() != input.sparse_dim():
        raise LayoutError("add: sparse tensors with different sparse_dim cannot be added")
    if other.device != input.device:
        raise DeviceError(
            f"add: expected all tensors to be on the same device, but found at least two devices, "
            f"{input.device} and {other.device}"
        )
    values = cat([input._sp_values, other._sp_values * alpha if alpha != 1 else other._sp_values])
    out = SparseTensor._from_parts(cat([input._sp_indices, other._sp_indices], 1), values, input._sp_size, False)
    return coalesce(out) if input._sp_coalesced and other._sp_coalesced else out
