"""The CUDA backend's ``matmul`` primitive and the choice of GEMM path behind it.

Two paths compute the products (kernels/gemm.h): cuBLASLt, loaded at run time from the
``nvidia-cublas`` wheel (``pip install adcuda[cublas]``) or a CUDA toolkit, and adcuda's hand-written
kernels (a tensor-core kernel for fp16/bf16, a SIMT kernel for fp32/fp64), which need nothing else
and take the calls cuBLASLt cannot express. ``ADCUDA_GEMM`` chooses:

- ``auto`` (default): cuBLASLt when it loads, else the hand-written kernels;
- ``handwritten``: never cuBLASLt;
- ``cublaslt``: cuBLASLt, and an error at the first product if it cannot be loaded.

The choice is made once per process, at the first product (or ``gemm_selection()``), and
``adcuda.info()`` reports it with its reason. Transposed, sliced and broadcast operands are read
through their strides, never copied.

"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload

import numpy as np

from ... import _native
from ... import dtypes as dt
from ...errors import DeviceError, DTypeError, ShapeError, fmt_shape
from ..seam import declared
from ._common import BackendArray, is_floating
from .elementwise import binary, unary
from .index import index
from .reduce import reduce
from .storage import astype, dtype_of, from_numpy, view
from .storage import slice as slice_array

__all__ = ["matmul", "pdist", "cdist", "cross"]

GEMM_ENV = "ADCUDA_GEMM"
GEMM_MODES = ("auto", "handwritten", "cublaslt")
CUBLASLT_SONAME = "libcublasLt.so.13"


@dataclass(frozen=True)
class GemmSelection:
    """Which GEMM path ``matmul`` takes in this process, and why."""

    path: str  # "cublaslt" or "handwritten"
    reason: str  # e.g. "cuBLASLt 13.1.0 from /.../libcublasLt.so.13"


def gemm_mode(environ=None):
    """``ADCUDA_GEMM`` as one of GEMM_MODES (``auto`` when unset); a ValueError names a bad value."""
    value = (environ if environ is not None else os.environ).get(GEMM_ENV, "auto").strip().lower() or "auto"
    if value not in GEMM_MODES:
        raise ValueError(f"{GEMM_ENV} must be one of {', '.join(GEMM_MODES)}, got {value!r}")
    return value


def cublaslt_candidates(environ=None):
    """Where libcublasLt.so.13 may be, in the order tried: the nvidia-cublas wheel's nvidia/cu13/lib,
    $CUDA_HOME / $CUDA_PATH, /usr/local/cuda, then the soname alone (the dynamic loader's own search:
    LD_LIBRARY_PATH, the ldconfig cache)."""
    environ = environ if environ is not None else os.environ
    candidates = []
    try:
        import nvidia  # the namespace package NVIDIA's wheels install into

        wheel_dirs = list(nvidia.__path__)
    except ImportError:
        wheel_dirs = []
    for directory in wheel_dirs:
        candidates.append(Path(directory) / "cu13" / "lib" / CUBLASLT_SONAME)
    for home in (environ.get("CUDA_HOME"), environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates += [Path(home) / "lib64" / CUBLASLT_SONAME, Path(home) / "lib" / CUBLASLT_SONAME]
    existing = []
    for candidate in candidates:
        if candidate.is_file() and str(candidate) not in existing:
            existing.append(str(candidate))
    return existing + [CUBLASLT_SONAME]


def select_gemm_path(mode, emulated, load, candidates):
    """The GEMM path for ``mode`` (see GEMM_MODES). ``load(candidates)`` tries to load cuBLASLt and
    returns ``{loaded, path, version, error}``; ``emulated`` says the kernels run on the CPU emulator,
    where no real library can read the (host) memory."""
    if mode == "handwritten":
        return GemmSelection("handwritten", f"hand-written ({GEMM_ENV}=handwritten)")
    if emulated:
        why = "the emulated build (ADCUDA_CUDA=EMULATE) cannot call cuBLAS"
        if mode == "cublaslt":
            raise DeviceError(f"matmul: {GEMM_ENV}=cublaslt, but {why}")
        return GemmSelection("handwritten", f"hand-written ({why})")
    status = load(list(candidates))
    if status["loaded"]:
        return GemmSelection("cublaslt", f"cuBLASLt {status['version']} from {status['path']}")
    if mode == "cublaslt":
        raise DeviceError(
            f"matmul: {GEMM_ENV}=cublaslt, but cuBLASLt could not be loaded: {status['error']} "
            "(pip install 'adcuda[cublas]', or a CUDA toolkit's lib64 on LD_LIBRARY_PATH)"
        )
    return GemmSelection("handwritten", f"hand-written (cuBLASLt not found: {status['error']})")


_selection = None
_selection_lock = threading.Lock()


def gemm_selection():
    """This process's GemmSelection, made at the first call (reads ADCUDA_GEMM, may load cuBLASLt)."""
    global _selection
    if _selection is None:
        with _selection_lock:
            if _selection is None:
                C = _native._C
                emulated = bool(_native.build_info().get("cuda_emulated"))
                _selection = select_gemm_path(gemm_mode(), emulated, C.cublaslt_load, cublaslt_candidates())
    return _selection


def reset_gemm_selection():
    """Forget the choice, so that the next product chooses again (after ADCUDA_GEMM changed). A
    cuBLASLt already loaded stays loaded."""
    global _selection
    with _selection_lock:
        _selection = None


def _batch_shapes_broadcast(a_batch, b_batch):
    for x, y in zip(reversed(a_batch), reversed(b_batch)):
        if x != y and x != 1 and y != 1:
            return False
    return True


# (for type checkers: the result is a pair only with save_preactivation=True)
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: Literal[False] = False,
) -> BackendArray: ...
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    *,
    save_preactivation: Literal[True],
) -> tuple[BackendArray, BackendArray]: ...
@overload
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: bool = False,
) -> BackendArray | tuple[BackendArray, BackendArray]: ...
def matmul(
    a: BackendArray,
    b: BackendArray,
    bias: BackendArray | None = None,
    activation: str | None = None,
    save_preactivation: bool = False,
) -> BackendArray | tuple[BackendArray, BackendArray]:
    """``activation(a (..., M, K) @ b (..., K, N) + bias)`` with the batch dims broadcast, in ``a``'s
    dtype. The epilogue options fuse into the product on both GEMM paths: ``bias`` (N,) is added to
    every row, ``activation`` is None or ``"gelu_tanh"`` (GELU's tanh form, cuBLASLt's GELU), and
    ``save_preactivation=True`` returns ``(out, a @ b + bias)``, what the activation's backward needs.
    A vector ``b`` (K,) gives ``a @ b`` of shape (..., M), without an epilogue: the product with ``b``
    read as a column (K, 1), whose last dim of 1 the result then drops (views, nothing copied)."""
    declared.matmul(a, b, bias, activation, save_preactivation)
    if b.ndim == 1:
        column = view(b, (b.shape[0], 1))
        assert column is not None  # a 1-D array is always viewable as a column
        product = view(matmul(a, column), a.shape[:-1])
        assert product is not None  # a new (..., M, 1) product: contiguous, so viewable
        return product
    if a.shape[-1] != b.shape[-2]:
        raise ShapeError(
            f"matmul: shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be multiplied "
            f"({a.shape[-2]}x{a.shape[-1]} and {b.shape[-2]}x{b.shape[-1]})"
        )
    if not _batch_shapes_broadcast(a.shape[:-2], b.shape[:-2]):
        raise ShapeError(
            f"matmul: the batch dims of shapes {fmt_shape(a.shape)} and {fmt_shape(b.shape)} cannot be broadcast"
        )
    for operand in (a, b):
        if not is_floating(operand):
            raise DTypeError(f"matmul: CUDA matrix products need floating point operands, got {operand.dtype.name}")
    C = _native._C
    if b.dtype != a.dtype:
        b = C.astype(b, a.dtype)  # the CPU backend also returns a's dtype
    if bias is not None and bias.dtype != a.dtype:
        bias = C.astype(bias, a.dtype)
    return C.matmul(
        a,
        b,
        bias=bias,
        activation=activation or "none",
        save_preactivation=save_preactivation,
        allow_cublaslt=gemm_selection().path == "cublaslt",
    )


def gemm_path(device=None):
    """Which hand-written GEMM kernels ``matmul`` runs on ``device`` (the current one by default)."""
    C = _native._C
    return C.gemm_path(C.cuda_current_device() if device is None else device)


def pdist(x: BackendArray, p: float) -> BackendArray:
    """The p-norms of the differences of the rows i < j of ``x`` (N, M), composed of existing kernels: the
    pairs' rows gathered, their difference and its p-norm over the columns as the CPU backend's
    reference computes it (in float32 for the half types)."""
    declared.pdist(x, p)
    dtype = dtype_of(x)
    work = dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype
    first, second = (from_numpy(rows, dt.int64) for rows in np.triu_indices(x.shape[0], 1))
    data = x if work is dtype else astype(x, work)
    diff = binary("sub", index(data, (first,)), index(data, (second,)), work)
    return _norms_of_rows(diff, p, work, dtype)


def cdist(x1: BackendArray, x2: BackendArray, p: float) -> BackendArray:
    """The distances of each row of x1 (B, P, M) to each row of x2 (B, R, M), composed of existing
    kernels: the broadcast difference (B, P, R, M), its p-norm over M as pdist's (fp32 for the half types)."""
    declared.cdist(x1, x2, p)
    dtype = dtype_of(x1)
    work = dt.float32 if dtype in (dt.float16, dt.bfloat16) else dtype
    a, b = (x if work is dtype else astype(x, work) for x in (x1, x2))
    whole = slice(None)
    rows, columns = slice_array(a, (whole, whole, None, whole)), slice_array(b, (whole, None, whole, whole))
    return _norms_of_rows(binary("sub", rows, columns, work), p, work, dtype)


def _norms_of_rows(diff, p, work, dtype):
    """The p-norms over the last dim of ``diff`` (in ``work``), as PyTorch's distance kernels, in ``dtype``."""
    axis = (len(diff.shape) - 1,)
    if p == 0:
        # PyTorch's count: min(ceil(|d|), 1) per element, so that a NaN difference gives NaN
        out = reduce("sum", binary("minimum", unary("ceil", unary("abs", diff)), 1.0, work), axis, False)
    elif p == 1:
        out = reduce("sum", unary("abs", diff), axis, False)
    elif p == 2:
        out = unary("sqrt", reduce("sum", binary("mul", diff, diff, work), axis, False))
    else:
        out = binary(
            "pow", reduce("sum", binary("pow", unary("abs", diff), float(p), work), axis, False), 1.0 / p, work
        )
    return out if work is dtype else astype(out, dtype)


# the cross product's two rotations of the three components, c = a[1, 2, 0] * b[2, 0, 1] - a[2, 0, 1] * b[1, 2, 0],
# as one gather of each operand: a's first three and b's, then a's last three and b's
_CROSS_TURNS = (np.array([1, 2, 0, 2, 0, 1]), np.array([2, 0, 1, 1, 2, 0]))


def cross(a: BackendArray, b: BackendArray, axis: int) -> BackendArray:
    """The cross products along ``axis``, composed of existing kernels: one gather of each operand, one
    product of the six, their halves subtracted (the CPU backend's products and differences)."""
    declared.cross(a, b, axis)
    axis %= len(a.shape)
    dtype = dtype_of(a)
    first, second = (from_numpy(turns, dt.int64) for turns in _CROSS_TURNS)
    lead = (slice(None),) * axis
    products = binary("mul", index(a, lead + (first,)), index(b, lead + (second,)), dtype)
    first_half, second_half = (slice_array(products, lead + (half,)) for half in (slice(0, 3), slice(3, 6)))
    return binary("sub", first_half, second_half, dtype)
