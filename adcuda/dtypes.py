"""dtypes and PyTorch's type-promotion rules.

A dtype is a small immutable object; backends map it to their own storage type. Promotion follows
PyTorch: categories bool < integer < floating; dimensioned tensors outrank 0-d tensors, which outrank
Python scalars, unless the lower-priority operand is of a higher category.
"""

from __future__ import annotations

import builtins
from typing import TypeAlias

import numpy as np

from .errors import DTypeError

# A Python scalar, where PyTorch takes one in place of a tensor (adcuda.types.Number). Defined here, below
# everything that annotates with it, so adcuda.types stays a leaf (written with builtins: this module
# names its dtypes bool, int, float).
Number: TypeAlias = builtins.bool | builtins.int | builtins.float

_builtin_int, _builtin_float = builtins.int, builtins.float

BOOL, INTEGER, FLOATING = 0, 1, 2


class dtype:
    __slots__ = ("name", "category", "rank", "itemsize", "numpy")

    def __init__(
        self, name: str, category: builtins.int, rank: builtins.int, itemsize: builtins.int, numpy_type: type
    ) -> None:
        self.name = name
        self.category = category
        self.rank = rank
        self.itemsize = itemsize
        self.numpy = numpy_type

    @property
    def is_floating_point(self) -> builtins.bool:
        return self.category == FLOATING

    @property
    def is_signed(self) -> builtins.bool:
        return self.category != BOOL

    def __repr__(self):
        return "adcuda." + self.name

    def __reduce__(self):
        return (_by_name, (self.name,))


# dtype under the name adcuda.types gives it, for this module's annotations
DType: TypeAlias = dtype

bool_ = dtype("bool", BOOL, 0, 1, np.bool_)
int32 = dtype("int32", INTEGER, 2, 4, np.int32)
int64 = dtype("int64", INTEGER, 3, 8, np.int64)
float16 = dtype("float16", FLOATING, 1, 2, np.float16)
bfloat16 = dtype("bfloat16", FLOATING, 1, 2, None)  # CUDA only: NumPy has no bfloat16
float32 = dtype("float32", FLOATING, 4, 4, np.float32)
float64 = dtype("float64", FLOATING, 5, 8, np.float64)

half, float, double, long, int = float16, float32, float64, int64, int32  # noqa: A001 (PyTorch aliases)

ALL = (bool_, int32, int64, float16, bfloat16, float32, float64)
_BY_NAME = {d.name: d for d in ALL}
_FROM_NUMPY = {np.dtype(d.numpy): d for d in ALL if d.numpy is not None}
_FROM_NUMPY[np.dtype(np.int16)] = int32
_FROM_NUMPY[np.dtype(np.int8)] = int32
_FROM_NUMPY[np.dtype(np.uint8)] = int64

default_float = float32


def set_default_dtype(d: DType) -> None:
    """The dtype of Python floats made into tensors (and of ``rand``, ``zeros``, ... by default)."""
    global default_float
    d = as_dtype(d, "set_default_dtype")
    if d not in (float16, bfloat16, float32, float64):
        raise DTypeError(f"set_default_dtype: only floating point dtypes are supported as the default, got {d}")
    default_float = d


def get_default_dtype() -> DType:
    return default_float


class finfo:
    """Machine limits of a floating point dtype, as ``torch.finfo``."""

    def __init__(self, type: DType | None = None) -> None:  # noqa: A002 (PyTorch's parameter name)
        d = default_float if type is None else as_dtype(type, "finfo")
        if not d.is_floating_point:
            raise DTypeError(f"finfo: expected a floating point dtype, got {d}")
        self.dtype = d.name
        self.bits = d.itemsize * 8
        if d is bfloat16:  # NumPy has no bfloat16: 8 exponent bits like float32, 7 mantissa bits
            self.eps, self.max, self.tiny, self.resolution = 2.0**-7, (2 - 2.0**-7) * 2.0**127, 2.0**-126, 0.01
        else:
            info = np.finfo(d.numpy)
            self.eps, self.max = _builtin_float(info.eps), _builtin_float(info.max)
            self.tiny, self.resolution = _builtin_float(info.tiny), 10.0**-info.precision
        self.min = -self.max
        self.smallest_normal = self.tiny

    def __repr__(self):
        return (
            f"finfo(resolution={self.resolution}, min={self.min}, max={self.max}, eps={self.eps}, "
            f"smallest_normal={self.smallest_normal}, tiny={self.tiny}, dtype={self.dtype})"
        )


class iinfo:
    """Limits of an integer dtype, as ``torch.iinfo``."""

    def __init__(self, type: DType) -> None:  # noqa: A002 (PyTorch's parameter name)
        d = as_dtype(type, "iinfo")
        if d.category != INTEGER:
            raise DTypeError(f"iinfo: expected an integer dtype, got {d}")
        info = np.iinfo(d.numpy)
        self.dtype, self.bits = d.name, d.itemsize * 8
        self.min, self.max = _builtin_int(info.min), _builtin_int(info.max)

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


def _by_name(name):
    return _BY_NAME[name]


def from_numpy_dtype(np_dtype, op="tensor"):
    try:
        return _FROM_NUMPY[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise DTypeError(
            f"{op}: NumPy dtype {np_dtype} is not supported "
            f"(supported: {', '.join(d.name for d in ALL if d.numpy is not None)})"
        ) from None


def as_dtype(value, op="tensor"):
    """Accept an adcuda dtype, a NumPy dtype, a Python type or a name."""
    if value is None or isinstance(value, dtype):
        return value
    if value is bool:
        return bool_
    if value is _builtin_int:
        return int64
    if value is _builtin_float:
        return float32
    if isinstance(value, str) and value in _BY_NAME:
        return _BY_NAME[value]
    return from_numpy_dtype(value, op)


def promote(a, b):
    """The smallest dtype both ``a`` and ``b`` convert to (PyTorch's promote_types)."""
    if a is b:
        return a
    if a.category != b.category:
        return a if a.category > b.category else b
    if {a, b} == {float16, bfloat16}:
        return float32
    return a if a.rank > b.rank else b


def _dtype_argument(value, op, name):
    if not isinstance(value, dtype):
        raise DTypeError(f"{op}(): argument '{name}' must be adcuda.dtype, not {type(value).__name__}")
    return value


def promote_types(type1: DType, type2: DType) -> DType:
    """PyTorch's ``torch.promote_types``: the smallest dtype both convert to."""
    return promote(_dtype_argument(type1, "promote_types", "type1"), _dtype_argument(type2, "promote_types", "type2"))


def can_cast(from_: DType, to: DType) -> bool:
    """PyTorch's ``torch.can_cast``: whether type promotion may cast ``from_`` to ``to``, which it never
    does to a lower kind (floating to integer or bool, integer to bool); within a kind any width goes."""
    return _dtype_argument(to, "can_cast", "to").category >= _dtype_argument(from_, "can_cast", "from_").category


def scalar_category(value):
    if isinstance(value, (bool, np.bool_)):
        return BOOL
    if isinstance(value, (_builtin_int, np.integer)):
        return INTEGER
    if isinstance(value, (_builtin_float, np.floating)):
        return FLOATING
    raise DTypeError(f"unsupported scalar of type {type(value).__name__}")


_DEFAULT_FOR_CATEGORY = {BOOL: bool_, INTEGER: int64}


def default_for_category(category):
    return default_float if category == FLOATING else _DEFAULT_FOR_CATEGORY[category]
