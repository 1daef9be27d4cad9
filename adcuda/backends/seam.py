"""The primitive seam's vocabulary: the names every backend implements (``PRIMITIVES``, each
documented by one row of the table in ``adcuda/backends/__init__.py``) and the types their
signatures are annotated with, the same on both sides (tests/test_backend_seam.py compares them);
and the ``@primitive`` declarations: a primitive's signature and the input checks both backends share,
written once (``declared``), so that a backend supplies only the computation.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import EllipsisType
from typing import Any, Protocol, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..dtypes import INTEGER
from ..dtypes import dtype as DType
from ..errors import DTypeError, ShapeError, fmt_shape
from ._padding import pad_plan
from ._pooling_windows import check_avg_window
from .elementwise_table import UNARY_BY_NAME

__all__ = [
    "PRIMITIVES",
    "BackendArray",
    "DType",
    "Shape",
    "Axes",
    "Scalar",
    "ArrayOrScalar",
    "Arrays",
    "BasicKey",
    "IndexKey",
    "ArrayLike",
    "CPUArray",
    "CUDAArray",
    "Scratch",
    "CPU_REPLAY_KEYWORDS",
    "seam_signature",
    "primitive",
    "declared",
    "DECLARED",
    "Traits",
    "TRAITS",
    "primitives_where",
]

PRIMITIVES = (
    "from_numpy",
    "to_numpy",
    "empty",
    "full",
    "arange",
    "dtype_of",
    "shape_of",
    "astype",
    "contiguous",
    "copy_",
    "view",
    "permute",
    "expand",
    "slice",
    "flip",
    "shares_memory",
    "storage_offset",
    "as_strided",
    "unary",
    "binary",
    "unary_backward",
    "where",
    "clamp",
    "reduce",
    "argreduce",
    "var",
    "logsumexp",
    "sort",
    "cumsum",
    "index",
    "index_put_",
    "gather",
    "scatter_add",
    "cat",
    "tril",
    "triu",
    "matmul",
    "pdist",
    "cdist",
    "cross",
    "softmax",
    "softmax_backward",
    "classifier_loss",
    "classifier_loss_backward",
    "nll_loss",
    "multi_margin_loss",
    "layer_norm",
    "layer_norm_backward",
    "add_layer_norm",
    "add_layer_norm_backward",
    "attention",
    "attention_backward",
    "attention_dropout_mask",
    "rand",
    "randn",
    "randint",
    "bernoulli",
    "sgd_step_",
    "adam_step_",
    "unscale_and_check_",
    "update_scale_",
    "embedding",
    "embedding_backward",
    "dropout",
    "dropout_backward",
    "global_norm",
    "cumprod",
    "scan",
    "running_extreme",
    "searchsorted",
    "bincount",
    "scatter_reduce",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "max_pool2d",
    "adaptive_max_pool2d",
    "max_pool2d_backward",
    # batch norm and recurrent cells (issue 15)
    "batch_norm",
    "batch_norm_backward",
    "lstm_cell",
    "lstm_cell_backward",
    "gru_cell",
    "gru_cell_backward",
    "lstm_layer",
    "lstm_layer_backward",
    # fused RMS norm and group norm (issue 15, CUDA kernels)
    "rms_norm",
    "rms_norm_backward",
    "group_norm",
    "group_norm_backward",
    # average pooling kernels (issue 15)
    "avg_pool2d",
    "avg_pool2d_backward",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool2d_backward",
    # resampling kernels: interpolate and pad (issue 15)
    "interpolate_nearest",
    "interpolate_nearest_backward",
    "interpolate_bilinear",
    "interpolate_bilinear_backward",
    "pad",
    "pad_backward",
    # sparse COO tensors (issue 28): CSR products
    "coo_to_csr",
    "spmm",
    "sddmm",
)


class BackendArray(Protocol):
    """A backend's array: ``numpy.ndarray`` on the CPU, ``adcuda._C.DeviceArray`` on CUDA. The layers
    above the backends (tensor, ops) read only these, which both have; everything else goes through the
    primitives (``dtype_of``, ``shape_of``...), or through ``CPUArray``/``CUDAArray`` where a caller has
    checked the device. Each backend annotates its primitives with its own array type, bound to the
    same names (``BackendArray``, ``ArrayOrScalar``, ``Arrays``, ``IndexKey``: the ``_common`` module of
    each), so the signatures read the same on both (tests/test_backend_seam.py compares their text)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def ndim(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def itemsize(self) -> int: ...

    @property
    def strides(self) -> tuple[int, ...]:
        """In bytes, as NumPy's."""

    @property
    def dtype(self) -> Any:
        """The backend's own dtype object (a ``numpy.dtype``, or the native module's ``ScalarType``,
        which has no type stubs, hence ``Any``): ``dtype_of`` gives adcuda's."""


CPUArray: TypeAlias = NDArray[Any]
"""The CPU backend's array."""


class CUDAArray(BackendArray, Protocol):
    """The CUDA backend's array, ``adcuda._C.DeviceArray`` (kernels/bindings/runtime.cpp), as type checkers
    see it: the native module has no type stubs, so this is its stub, what the Python code uses of it
    beyond what every backend's array has."""

    @property
    def nbytes(self) -> int: ...

    @property
    def element_strides(self) -> tuple[int, ...]:
        """In elements."""

    @property
    def offset(self) -> int:
        """Elements from the storage's start."""

    @property
    def device(self) -> int: ...

    @property
    def storage(self) -> Any:
        """The ``adcuda._C.Storage`` the array views (shared by its views)."""

    @property
    def base(self) -> Any:
        """None where no other array shares the memory and adcuda's allocator made it, else its Storage."""

    @property
    def last_stream(self) -> int | None: ...

    def data_ptr(self) -> int: ...

    def is_contiguous(self) -> bool: ...

    def extent(self) -> tuple[int, int]: ...

    def as_strided(self, shape: Sequence[int], strides: Sequence[int], offset: int) -> CUDAArray: ...


Shape = tuple[int, ...]
"""Sizes of the dims; also a list, or one int, as NumPy takes them."""
Axes = tuple[int, ...]
"""Dims of an array, negative ones counted from the end (a 0-d array has none)."""
Scalar = bool | int | float
"""A Python scalar (NumPy scalars act as Python ones); an int must fit an integer dtype it is taken in."""
ArrayOrScalar = BackendArray | Scalar
Arrays = Sequence[BackendArray]
BasicKey = tuple[int | slice | None | EllipsisType, ...]
"""A view's key: ints (negative counted from the end), slices, None (a new dim of size 1), one Ellipsis."""
IndexKey = tuple[int | bool | slice | None | EllipsisType | BackendArray, ...]
"""NumPy's advanced indexing: a BasicKey's items, integer index arrays and boolean masks."""


class Scratch(Protocol):
    """Reusable temporaries for a CPU primitive: ``scratch(shape, dtype, k)`` is an array of that shape
    and dtype the primitive may overwrite, its ``k``-th of that layout (one needing two takes k = 0
    and 1); it may hold anything and may be handed out again after the primitive returns. Graph
    capture's replay passes one that keeps its arrays across replays; ``None`` makes new ones."""

    def __call__(self, shape: Shape, dtype: np.dtype, k: int = 0) -> np.ndarray: ...


# Keyword-only parameters that only the CPU backend's primitives take, beyond the table in
# adcuda/backends/__init__.py: ``out`` (an array of the result's shape and dtype to write it into; it
# may be an operand), ``scratch`` (a ``Scratch``), and what a forward keeps for its backward to read
# instead of computing it again (attention's ``probs``, layer_norm's ``xhat``, gelu_tanh's ``inner``: the
# primitives' docstrings say what), and where attention writes its results (its ``into``). Only graph
# capture's CPU replay passes them (adcuda/capture/program.py calls the CPU backend alone); eager
# dispatch never does, and the CUDA primitives do not take them (tests/test_backend_seam.py compares
# the signatures without them).
# Filled by the declarations (``@primitive(cpu_replay_keywords=...)``).
CPU_REPLAY_KEYWORDS: dict[str, tuple[str, ...]] = {}


def seam_signature(name: str, primitive) -> inspect.Signature:
    """``primitive``'s (backend primitive ``name``'s) signature as the seam's table writes it, without
    the CPU replay's keywords: what both backends take, and what a traced call records."""
    signature = inspect.signature(primitive)
    extras = CPU_REPLAY_KEYWORDS.get(name, ())
    return signature.replace(parameters=[p for p in signature.parameters.values() if p.name not in extras])


# ---------------------------------------------------------------------------------------------------
# @primitive: a primitive declared once. The declaration is a function named as the primitive, with
# its signature (what both backends' implementations take, without the CPU replay's keywords:
# tests/test_backend_seam.py compares them) and, as its body, the input checks both backends share:
# the same exception classes and messages on both, raised before any computation. An implementation
# calls ``declared.<name>(...)`` with its arguments first, or where its fast path fails for input the
# checks pass (the CPU's hot elementwise calls), and supplies only the computation and the checks of
# its own (the data-dependent ones, and what only its kernels cannot do).

DECLARED: dict[str, Callable[..., None]] = {}
"""The declarations by primitive name."""


@dataclass(frozen=True)
class Traits:
    """What graph capture may assume of a primitive's calls (adcuda/capture/program.py reads these to
    plan a replay's memory and to leave out dead calls), declared with the primitive."""

    fresh: bool = False
    """Its new results are always arrays of their own, allocated by the call (never a view, an operand
    or memory cached across calls): a replay may write over such an array once it is dead."""
    pure: bool = False
    """It computes its results from its operands and nothing else (no writes, no draws, no checks of
    values): a call whose results nothing reads may be left out of a replay."""
    returns_operand: bool = False
    """It never writes an operand, and where it returns an array the trace already has, that is the
    operand itself (a contiguous array made contiguous, a view of the whole), not a write into it."""
    elementwise: bool = False
    """Its kernels read each element of an operand only to write the same element of the result, so
    the ``out`` of a replay may be an operand's own buffer (not so for a matrix product)."""


TRAITS: dict[str, Traits] = {}
"""The declared traits by primitive name (primitives declared without any have none here)."""


def primitives_where(trait: str) -> frozenset[str]:
    """The primitives declared with ``trait`` (a field of ``Traits``) set."""
    return frozenset(name for name, traits in TRAITS.items() if getattr(traits, trait))


class _Declared:
    """``declared.<name>(args...)``: primitive ``name``'s shared input checks (raises, or returns None)."""

    def __getattr__(self, name: str) -> Callable[..., None]:
        try:
            check = DECLARED[name]
        except KeyError:
            raise AttributeError(f"no @primitive declaration of {name!r}") from None
        # kept as an attribute: later reads find it without this Python call (a primitive's every call
        # reads it; declarations are made once, at import, and never replaced)
        setattr(self, name, check)
        return check


declared = _Declared()


def primitive(
    declaration: Callable[..., Any] | None = None,
    /,
    *,
    cpu_replay_keywords: tuple[str, ...] = (),
    **traits: bool,
) -> Any:
    """Declares the primitive ``declaration`` is named after (one of ``PRIMITIVES``): ``@primitive``, or
    ``@primitive(pure=True, ...)`` with its ``Traits`` and the CPU replay's keywords it takes."""

    def declare(declaration: Callable[..., Any]) -> Callable[..., Any]:
        name = declaration.__name__
        if name not in PRIMITIVES:
            raise ValueError(f"@primitive: {name} is not one of the seam's PRIMITIVES")
        if name in DECLARED:
            raise ValueError(f"@primitive: {name} is declared twice")
        DECLARED[name] = declaration
        if traits:
            TRAITS[name] = Traits(**traits)
        if cpu_replay_keywords:
            CPU_REPLAY_KEYWORDS[name] = cpu_replay_keywords
        return declaration

    return declare if declaration is None else declare(declaration)


_FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})
_DTYPE_NAMES: dict[Any, str] = {}


def _dtype_name(dtype: Any) -> str:
    """``dtype.name``, remembered per dtype: NumPy builds the name on every read (1.5 us, more than the
    pooling of a small batch)."""
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = dtype.name
    return name


def _require_floating(op: str, x: BackendArray) -> None:
    if _dtype_name(x.dtype) not in _FLOATING:
        raise DTypeError(f"{op}: expected the input to be a floating point array, got {x.dtype.name}")


# elementwise (kernels/elementwise_*.cu; the unary ops' table: elementwise_table.py)
@primitive(fresh=True, pure=True, elementwise=True, cpu_replay_keywords=("out", "scratch", "inner"))
def unary(op: str, a: BackendArray) -> None:
    if op not in UNARY_BY_NAME:
        raise ValueError(f"unary: unknown op '{op}'")


@primitive(fresh=True, pure=True, elementwise=True, cpu_replay_keywords=("out", "scratch", "inner"))
def unary_backward(op: str, x: BackendArray | None, y: BackendArray | None, g: BackendArray) -> None:
    """The saved array the op's gradient reads (the table's ``reads``) must be given."""
    entry = UNARY_BY_NAME.get(op)
    if entry is None or entry.backward is None:
        raise ValueError(f"unary_backward: unknown op '{op}'")
    if (x if entry.backward.reads == "x" else y) is None:
        raise ValueError(f"unary_backward: {op} needs its {'input x' if entry.backward.reads == 'x' else 'output y'}")


@primitive(fresh=True, pure=True, elementwise=True)
def binary(op: str, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> None:
    """(The ops layer has already promoted the operands' dtypes to ``dtype``, PyTorch's rules.)"""


# the reductions (kernels/reduce.cu)
@primitive(fresh=True, pure=True)
def reduce(op: str, a: BackendArray, axes: Axes | None, keepdim: bool) -> None:
    """(The ops layer normalises ``axes``: in range, no repeats.)"""


SCAN_OPS = ("max", "min", "logaddexp")


@primitive(fresh=True, pure=True)
def scan(op: str, a: BackendArray, axis: int) -> None:
    if op not in SCAN_OPS:
        raise ValueError(f"scan: op must be one of {SCAN_OPS}, got {op!r}")
    if op == "logaddexp":
        _require_floating("scan", a)


@primitive
def running_extreme(op: str, a: BackendArray, axis: int) -> None:
    if op not in ("max", "min"):
        raise ValueError(f"running_extreme: op must be 'max' or 'min', got {op!r}")


@primitive
def searchsorted(boundaries: BackendArray, values: BackendArray, right: bool) -> None:
    """(The ops layer gives both one dtype and checks that their dims but the last agree.)"""
    if boundaries.ndim == 0:
        raise ShapeError("searchsorted: the boundaries must have at least one dim, got a 0-d array")


@primitive
def bincount(slots: BackendArray, size: int) -> None:
    """(The ops layer checks the slots: int64, 1-d, each in [0, size).)"""
    if slots.ndim != 1:
        raise ShapeError(f"bincount: expected 1-d slots, got shape {fmt_shape(slots.shape)}")


@functools.cache
def _integer_range(numpy_type: Any) -> tuple[int, int]:
    """An integer type's (min, max): np.iinfo costs a microsecond per call, on every where of integers."""
    info = np.iinfo(numpy_type)
    return int(info.min), int(info.max)


def _check_scalar(op: str, value: object, dtype: DType) -> None:
    """OverflowError for a Python integer outside an integer ``dtype`` (what NumPy says for binary
    ops; ``np.where`` would wrap it silently)."""
    if value.__class__ is int and dtype.category == INTEGER:
        lowest, highest = _integer_range(dtype.numpy)
        if not lowest <= value <= highest:
            raise OverflowError(f"{op}: Python integer {value} out of bounds for {dtype.name}")


@primitive
def where(cond: BackendArray, a: ArrayOrScalar, b: ArrayOrScalar, dtype: DType) -> None:
    """(NumPy scalars are checked as the Python scalars they are: the CUDA backend passes them so.)"""
    _check_scalar("where", a, dtype)
    _check_scalar("where", b, dtype)


@primitive
def clamp(a: BackendArray, lo: Scalar | None, hi: Scalar | None) -> None:
    for bound in (lo, hi):
        if isinstance(bound, np.ndarray) or (hasattr(bound, "shape") and not isinstance(bound, np.generic)):
            raise DTypeError("clamp: the bounds must be Python scalars or None, got an array")


# the GEMM (kernels/gemm.cu)
@primitive(fresh=True, pure=True)
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: bool = False,
) -> None:
    """(NumPy's rules for a vector ``a`` or 0-d operands are the ops layer's.)"""
    if a.ndim < 2 or b.ndim < 1:
        raise ShapeError(
            f"matmul: a needs at least 2 dims and b at least 1, got shapes {fmt_shape(a.shape)} and "
            f"{fmt_shape(b.shape)}"
        )
    if activation not in (None, "gelu_tanh"):
        raise ValueError(f"matmul: activation must be None or 'gelu_tanh', got {activation!r}")
    if b.ndim == 1 and (bias is not None or activation is not None or save_preactivation):
        raise ShapeError(f"matmul: the epilogue needs a matrix b, got shape {fmt_shape(b.shape)}")
    if bias is not None and tuple(bias.shape) != (b.shape[-1],):
        raise ShapeError(f"matmul: the bias must have shape ({b.shape[-1]},), got {fmt_shape(bias.shape)}")


@primitive(fresh=True, pure=True)
def pdist(x: BackendArray, p: float) -> None:
    _require_floating("pdist", x)
    if x.ndim != 2:
        raise ShapeError(f"pdist: expected a matrix (N, M), got shape {fmt_shape(x.shape)}")
    if not 0 <= p < float("inf"):
        raise ValueError(f"pdist: p must be finite and non-negative, got {p}")


@primitive(fresh=True, pure=True)
def cdist(x1: BackendArray, x2: BackendArray, p: float) -> None:
    """(the ops layer broadcasts the batch dims to one and promotes nothing)"""
    _require_floating("cdist", x1)
    if x1.ndim != 3 or x2.ndim != 3 or x1.shape[0] != x2.shape[0] or x1.shape[2] != x2.shape[2]:
        raise ShapeError(
            f"cdist: expected (B, P, M) and (B, R, M), got {fmt_shape(x1.shape)} and {fmt_shape(x2.shape)}"
        )
    if _dtype_name(x1.dtype) != _dtype_name(x2.dtype):
        raise DTypeError(
            f"cdist: x1 and x2 must have one dtype, got {_dtype_name(x1.dtype)} and {_dtype_name(x2.dtype)}"
        )
    if not 0 <= p < float("inf"):
        raise ValueError(f"cdist: p must be finite and non-negative, got {p}")


@primitive(fresh=True, pure=True)
def cross(a: BackendArray, b: BackendArray, axis: int) -> None:
    """(the ops layer broadcasts a and b to one shape and promotes nothing)"""
    if tuple(a.shape) != tuple(b.shape) or _dtype_name(a.dtype) != _dtype_name(b.dtype):
        raise ShapeError(
            f"cross: a and b must have one shape and dtype, got {fmt_shape(a.shape)} {_dtype_name(a.dtype)} "
            f"and {fmt_shape(b.shape)} {_dtype_name(b.dtype)}"
        )
    if not -a.ndim <= axis < a.ndim or a.shape[axis] != 3:
        raise ShapeError(f"cross: axis {axis} of shape {fmt_shape(a.shape)} must have size 3")


# the norms (kernels/norm.cu): weight and bias (and per-channel statistics) of the normalised shape
def _check_normalized(op, x, n, *params):
    _require_floating(op, x)
    if not 1 <= n <= x.ndim:
        raise ShapeError(f"{op}: cannot normalise the last {n} dims of shape {fmt_shape(x.shape)}")
    shape = tuple(x.shape[x.ndim - n :])
    for p in params:
        if p is not None and tuple(p.shape) != shape:
            raise ShapeError(
                f"{op}: weight/bias of shape {fmt_shape(p.shape)} do not match the normalised shape {fmt_shape(shape)}"
            )


def _check_channels(op, x, *params):
    _require_floating(op, x)
    if x.ndim < 2:
        raise ShapeError(f"{op}: expected an input (N, C, *) of at least 2 dims, got shape {fmt_shape(x.shape)}")
    for p in params:
        if p is not None and tuple(p.shape) != (x.shape[1],):
            raise ShapeError(
                f"{op}: per-channel arrays must have shape ({x.shape[1]},) for an input of shape "
                f"{fmt_shape(x.shape)}, got {fmt_shape(p.shape)}"
            )


def _check_groups(op, x, groups, *params):
    _check_channels(op, x, *params)
    if groups < 1 or x.shape[1] % groups:
        raise ShapeError(f"{op}: the channels of {fmt_shape(x.shape)} must divide into {groups} groups")


@primitive(cpu_replay_keywords=("xhat",))
def layer_norm(x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, n: int, eps: float) -> None:
    _check_normalized("layer_norm", x, n, weight, bias)


@primitive(cpu_replay_keywords=("xhat",))
def layer_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray, n: int
) -> None:
    _check_normalized("layer_norm_backward", x, n, weight)


@primitive
def add_layer_norm(
    x: BackendArray,
    residual: BackendArray,
    weight: BackendArray | None,
    bias: BackendArray | None,
    n: int,
    eps: float,
    y_dtype: DType,
) -> None:
    _check_normalized("add_layer_norm", x, n, weight, bias)
    if tuple(residual.shape) != tuple(x.shape) or residual.dtype != x.dtype:
        raise ShapeError(
            f"add_layer_norm: the residual {fmt_shape(residual.shape)} {residual.dtype.name} does not match "
            f"the input {fmt_shape(x.shape)} {x.dtype.name}"
        )
    if y_dtype.name != x.dtype.name and not (x.dtype.name == "float32" and y_dtype.name in ("float16", "bfloat16")):
        raise DTypeError(
            f"add_layer_norm: the output may be {x.dtype.name}, or float16 / bfloat16 for a float32 input, "
            f"got {y_dtype.name}"
        )


@primitive
def add_layer_norm_backward(
    g: BackendArray,
    grad_sum: BackendArray | None,
    h: BackendArray,
    weight: BackendArray | None,
    mean: BackendArray,
    rstd: BackendArray,
    n: int,
) -> None:
    _check_normalized("add_layer_norm_backward", h, n, weight)
    for what, a in (("gradient", g), ("sum's gradient", grad_sum)):
        if a is not None and tuple(a.shape) != tuple(h.shape):
            raise ShapeError(
                f"add_layer_norm_backward: the {what} {fmt_shape(a.shape)} does not match the sum {fmt_shape(h.shape)}"
            )


@primitive
def rms_norm(x: BackendArray, weight: BackendArray | None, n: int, eps: float) -> None:
    _check_normalized("rms_norm", x, n, weight)


@primitive
def rms_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, rstd: BackendArray, n: int
) -> None:
    _check_normalized("rms_norm_backward", x, n, weight)


@primitive
def batch_norm(x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, eps: float) -> None:
    _check_channels("batch_norm", x, weight, bias)


@primitive
def batch_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray
) -> None:
    _check_channels("batch_norm_backward", x, weight, mean, rstd)


@primitive
def group_norm(
    x: BackendArray, weight: BackendArray | None, bias: BackendArray | None, groups: int, eps: float
) -> None:
    _check_groups("group_norm", x, groups, weight, bias)


@primitive
def group_norm_backward(
    g: BackendArray, x: BackendArray, weight: BackendArray | None, mean: BackendArray, rstd: BackendArray, groups: int
) -> None:
    _check_groups("group_norm_backward", x, groups, weight)
    if tuple(mean.shape) != (x.shape[0], groups) or tuple(rstd.shape) != tuple(mean.shape):
        raise ShapeError(
            f"group_norm_backward: mean and rstd must have shape ({x.shape[0]}, {groups}), got "
            f"{fmt_shape(mean.shape)} and {fmt_shape(rstd.shape)}"
        )


# pooling (kernels/pooling.cu): 4-d inputs (N, C, H, W); max pooling of any numeric dtype, average
# pooling of floating point ones
_NUMERIC = _FLOATING | {"int32", "int64"}


def _check_pooled(op, x):
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 4-d input (N, C, H, W), got {fmt_shape(x.shape)}")
    if _dtype_name(x.dtype) not in _NUMERIC:
        raise DTypeError(f"{op}: expected a numeric array, got {x.dtype.name}")


def _check_averaged(op, x):
    if x.ndim != 4:
        raise ShapeError(f"{op}: expected a 4-d array (N, C, H, W), got {fmt_shape(x.shape)}")
    if _dtype_name(x.dtype) not in _FLOATING:
        raise DTypeError(f"{op}: expected a floating point array, got {x.dtype.name}")


@primitive
def max_pool2d(x: BackendArray, kernel: Shape, stride: Shape, padding: Shape, dilation: Shape, out_size: Shape) -> None:
    _check_pooled("max_pool2d", x)


@primitive
def adaptive_max_pool2d(x: BackendArray, out_size: Shape) -> None:
    _check_pooled("adaptive_max_pool2d", x)
    if (x.shape[2] == 0 or x.shape[3] == 0) and out_size[0] * out_size[1]:
        raise ShapeError(f"adaptive_max_pool2d: cannot pool an empty plane of input {fmt_shape(x.shape)}")


@primitive
def max_pool2d_backward(g: BackendArray, indices: BackendArray, input_shape: Shape) -> None:
    input_shape = tuple(int(s) for s in input_shape)
    if (
        g.ndim != 4
        or tuple(indices.shape) != tuple(g.shape)
        or len(input_shape) != 4
        or tuple(g.shape[:2]) != input_shape[:2]
    ):
        raise ShapeError(
            f"max_pool2d_backward: grad {fmt_shape(g.shape)} and indices {fmt_shape(indices.shape)} "
            f"do not fit input {fmt_shape(input_shape)}"
        )


@primitive
def avg_pool2d(
    x: BackendArray,
    kernel: Shape,
    stride: Shape,
    padding: Shape,
    out_size: Shape,
    count_include_pad: bool,
    divisor_override: int | None,
) -> None:
    _check_averaged("avg_pool2d", x)
    check_avg_window("avg_pool2d", kernel, stride, padding, divisor_override)


@primitive
def avg_pool2d_backward(
    g: BackendArray,
    input_shape: Shape,
    kernel: Shape,
    stride: Shape,
    padding: Shape,
    count_include_pad: bool,
    divisor_override: int | None,
) -> None:
    _check_averaged("avg_pool2d_backward", g)
    check_avg_window("avg_pool2d_backward", kernel, stride, padding, divisor_override)


@primitive
def adaptive_avg_pool2d(x: BackendArray, out_size: Shape) -> None:
    _check_averaged("adaptive_avg_pool2d", x)
    n, c, h, w = x.shape
    if (h == 0 or w == 0) and int(out_size[0]) * int(out_size[1]) and n * c:
        raise ShapeError(f"adaptive_avg_pool2d: cannot pool an empty plane of input {fmt_shape(x.shape)}")


@primitive
def adaptive_avg_pool2d_backward(g: BackendArray, input_shape: Shape) -> None:
    _check_averaged("adaptive_avg_pool2d_backward", g)


# resampling (kernels/resample.cu): 4-d planes (N, C, H, W); the interpolations' gradients and bilinear
# interpolation of floating point arrays
def _check_planes(op, a, what):
    if a.ndim != 4:
        raise ShapeError(f"{op}: expected a 4-d {what} (N, C, H, W), got {fmt_shape(a.shape)}")


def _check_resampled_floating(op, a):
    if _dtype_name(a.dtype) not in _FLOATING:
        raise DTypeError(f"{op}: expected a floating point array, got {a.dtype.name}")


def _check_sizes(op, x, out_size):
    in_size, out_size = tuple(x.shape[2:]), tuple(int(s) for s in out_size)
    if min(in_size) == 0 and min(out_size) > 0 and x.shape[0] * x.shape[1]:
        raise ShapeError(f"{op}: cannot resize empty planes {in_size} to {out_size}")


@primitive
def interpolate_nearest(x: BackendArray, out_size: Shape, scales: tuple[float, float], exact: bool) -> None:
    _check_planes("interpolate_nearest", x, "input")
    _check_sizes("interpolate_nearest", x, out_size)


@primitive
def interpolate_nearest_backward(g: BackendArray, input_shape: Shape, scales: tuple[float, float], exact: bool) -> None:
    _check_planes("interpolate_nearest_backward", g, "gradient")
    _check_resampled_floating("interpolate_nearest_backward", g)


@primitive
def interpolate_bilinear(x: BackendArray, out_size: Shape, scales: tuple[float, float], align_corners: bool) -> None:
    _check_planes("interpolate_bilinear", x, "input")
    _check_resampled_floating("interpolate_bilinear", x)
    _check_sizes("interpolate_bilinear", x, out_size)


@primitive
def interpolate_bilinear_backward(
    g: BackendArray, input_shape: Shape, scales: tuple[float, float], align_corners: bool
) -> None:
    _check_planes("interpolate_bilinear_backward", g, "gradient")
    _check_resampled_floating("interpolate_bilinear_backward", g)


@primitive
def pad_backward(g: BackendArray, input_shape: Shape, pads: Shape, mode: str) -> None:
    _check_resampled_floating("pad_backward", g)
    input_shape = tuple(int(s) for s in input_shape)
    _, out_shape = pad_plan("pad_backward", input_shape, pads, mode)
    if tuple(g.shape) != out_shape:
        raise ShapeError(
            f"pad_backward: gradient of shape {fmt_shape(g.shape)} does not fit input {fmt_shape(input_shape)} "
            f"padded to {fmt_shape(out_shape)}"
        )


# sparse COO tensors' products (kernels/sparse.cu)
@primitive
def coo_to_csr(rows: BackendArray, n_rows: int, rows_sorted: bool) -> None:
    if rows.ndim != 1:
        raise ShapeError(f"coo_to_csr: rows must be 1-D, got shape {fmt_shape(rows.shape)}")


@primitive
def spmm(
    row_ptr: BackendArray, order: BackendArray | None, cols: BackendArray, values: BackendArray, dense: BackendArray
) -> None:
    if dense.ndim != 2 or values.ndim != 1 or tuple(cols.shape) != tuple(values.shape) or row_ptr.ndim != 1:
        raise ShapeError(
            f"spmm: expected 1-D cols and values of one length and a 2-D dense matrix, got cols "
            f"{fmt_shape(cols.shape)}, values {fmt_shape(values.shape)}, dense {fmt_shape(dense.shape)}"
        )
    if values.dtype != dense.dtype:
        raise DTypeError(f"spmm: values ({values.dtype.name}) and dense ({dense.dtype.name}) must have one dtype")


@primitive
def sddmm(rows: BackendArray, cols: BackendArray, a: BackendArray, b: BackendArray) -> None:
    if (
        a.ndim != 2
        or b.ndim != 2
        or a.shape[1] != b.shape[1]
        or tuple(rows.shape) != tuple(cols.shape)
        or rows.ndim != 1
    ):
        raise ShapeError(
            f"sddmm: expected 1-D rows and cols of one length and 2-D a and b with as many columns, got rows "
            f"{fmt_shape(rows.shape)}, cols {fmt_shape(cols.shape)}, a {fmt_shape(a.shape)}, b {fmt_shape(b.shape)}"
        )
    if a.dtype != b.dtype:
        raise DTypeError(f"sddmm: a ({a.dtype.name}) and b ({b.dtype.name}) must have one dtype")


# the fused optimizer steps (kernels/optim.cu)
@primitive(cpu_replay_keywords=("scratch",))
def sgd_step_(
    params: Arrays,
    grads: Arrays,
    bufs: Arrays | None,
    lr: float,
    momentum: float,
    dampening: float,
    nesterov: bool,
    weight_decay: float,
    first_step: bool,
    masters: Arrays | None = None,
) -> None:
    """(The optimizer has checked the lists' lengths and the hyperparameters.)"""


@primitive(cpu_replay_keywords=("scratch",))
def adam_step_(
    params: Arrays,
    grads: Arrays,
    exp_avgs: Arrays,
    exp_avg_sqs: Arrays,
    step: int,
    lr: float,
    beta1: float,
    beta2: float,
    eps: float,
    weight_decay: float,
    decoupled: bool,
    masters: Arrays | None,
    max_exp_avg_sqs: Arrays | None = None,
    grad_multiplier: BackendArray | None = None,
) -> None:
    """(The optimizer has checked the lists' lengths and the hyperparameters.)"""


# attention (kernels/attention.cu)
@primitive(cpu_replay_keywords=("probs", "into"))
def attention(
    q: BackendArray,
    k: BackendArray,
    v: BackendArray,
    mask: BackendArray | None,
    is_causal: bool,
    scale: float,
    dropout_p: float = 0.0,
    seed: int = 0,
    offset: int = 0,
) -> None:
    """(scaled_dot_product_attention checks the shapes and dtypes.)"""


# (pure: its dropout mask is drawn again from the seed and offset it is given, and ``into`` is where its
# results go, not an operand it writes)
@primitive(pure=True, cpu_replay_keywords=("probs", "into"))
def attention_backward(
    g: BackendArray,
    q: BackendArray,
    k: BackendArray,
    v: BackendArray,
    out: BackendArray,
    lse: BackendArray,
    mask: BackendArray | None,
    is_causal: bool,
    scale: float,
    dropout_p: float = 0.0,
    seed: int = 0,
    offset: int = 0,
) -> None:
    """(The forward's checks hold for its saved arrays.)"""


# storage, casts and views (last in this module: ``slice`` would hide the builtin from code below it)
@primitive(fresh=True, pure=True)
def full(shape: Shape, value: Scalar, dtype: DType) -> None:
    """(The factories check the shape and cast the value.)"""


@primitive(pure=True)
def arange(start: float, stop: float, step: float, dtype: DType) -> None:
    """(arange/range check the step and the count.)"""


@primitive(fresh=True, pure=True, returns_operand=True)
def astype(a: BackendArray, dtype: DType) -> None:
    """Returns ``a`` itself where it already has ``dtype``, else a new array."""


@primitive(fresh=True, pure=True, returns_operand=True)
def contiguous(a: BackendArray) -> None:
    """Returns ``a`` itself where it is already contiguous, else a new array."""


@primitive(pure=True, returns_operand=True)
def view(a: BackendArray, shape: Shape) -> None:
    """(None where no view of ``a`` has ``shape``: the ops layer then copies.)"""


@primitive(pure=True, returns_operand=True)
def permute(a: BackendArray, axes: Axes) -> None:
    """(The ops layer checks ``axes`` is a permutation of a's dims.)"""


@primitive(pure=True, returns_operand=True)
def expand(a: BackendArray, shape: Shape) -> None:
    """(The ops layer checks ``shape`` against a's, PyTorch's rules.)"""


@primitive(pure=True, returns_operand=True)
def slice(a: BackendArray, key: BasicKey) -> None:  # noqa: A001 (the primitive's name)
    """(The ops layer checks the key against a's shape.)"""
