"""``adcuda.testing.assert_close``: PyTorch's comparison for tests, with its default tolerances per dtype."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import dtypes as dt
from .factories import tensor
from .tensor import Tensor

if TYPE_CHECKING:
    from .types import Any

__all__ = ["assert_close"]

# PyTorch's defaults (rtol, atol); integer and bool tensors must be equal
_TOLERANCES = {
    dt.float16: (1e-3, 1e-5),
    dt.bfloat16: (1.6e-2, 1e-5),
    dt.float32: (1.3e-6, 1e-5),
    dt.float64: (1e-7, 1e-7),
}


def _as_tensor_like(value):
    return value if isinstance(value, Tensor) else tensor(value)


def assert_close(
    actual: Any,
    expected: Any,
    *,
    allow_subclasses: bool = True,
    rtol: float | None = None,
    atol: float | None = None,
    equal_nan: bool = False,
    check_device: bool = True,
    check_dtype: bool = True,
    check_layout: bool = True,
    check_stride: bool = False,
    msg: str | None = None,
) -> None:
    """Raise AssertionError unless actual and expected (tensors, numbers, or sequences and mappings of
    them) have the same structure, shapes, dtypes and devices and every element is within
    ``atol + rtol * |expected|`` (NaN equal to NaN only with ``equal_nan``)."""
    if (rtol is None) != (atol is None):
        raise ValueError("assert_close: give both rtol and atol, or neither")
    _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, "")


def _compare(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, msg, where):
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            _fail(
                msg,
                f"The mappings{where} have different keys: {sorted(map(str, actual))} and {sorted(map(str, expected))}",
            )
        for key in expected:
            _compare(
                actual[key], expected[key], rtol, atol, equal_nan, check_device, check_dtype, msg, f"{where}[{key!r}]"
            )
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            _fail(msg, f"The sequences{where} have different lengths or types")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_device, check_dtype, msg, f"{where}[{i}]")
        return
    a, e = _as_tensor_like(actual), _as_tensor_like(expected)
    if tuple(a.shape) != tuple(e.shape):
        _fail(msg, f"The values{where} are not close: shapes {tuple(a.shape)} and {tuple(e.shape)} differ")
    if check_device and a.device != e.device:
        _fail(msg, f"The values{where} are on different devices: {a.device} and {e.device}")
    if check_dtype and a.dtype is not e.dtype and isinstance(actual, Tensor) and isinstance(expected, Tensor):
        _fail(msg, f"The values{where} have different dtypes: {a.dtype} and {e.dtype}")
    if rtol is None:
        rtol, atol = max(_TOLERANCES.get(a.dtype, (0.0, 0.0)), _TOLERANCES.get(e.dtype, (0.0, 0.0)))
    got = a.detach().cpu().numpy().astype(np.float64)
    want = e.detach().cpu().numpy().astype(np.float64)
    close = np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if close.all():
        return
    difference = np.abs(got - want)
    difference[close] = 0
    worst = np.unravel_index(np.nanargmax(np.where(np.isnan(difference), np.inf, difference)), got.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.where(close, 0, difference / np.abs(want))
    _fail(
        msg,
        f"Tensor-likes{where} are not close!\n\n"
        f"Mismatched elements: {int((~close).sum())} / {close.size} ({100 * (~close).mean():.1f}%)\n"
        f"Greatest absolute difference: {difference[worst]} at index {tuple(int(i) for i in worst)} "
        f"(up to {atol} allowed)\n"
        f"Greatest relative difference: {np.nanmax(relative)} (up to {rtol} allowed)",
    )


def _fail(msg, default):
    raise AssertionError(msg if msg is not None else default)
