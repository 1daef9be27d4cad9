"""``autocast``: run the matmul-class ops in half precision and the numerically touchy ones in float32.

Inside ``with autocast("cpu")`` (or ``"cuda"``), each op whose registry declaration names an
autocast policy sees its floating-point inputs cast by that policy (see ``adcuda/ops/autocast.py``
for the policies and the cast cache; the ops and their policies are in ``adcuda/ops/``).

Beyond PyTorch: the default dtype is float16 on both device types (PyTorch's CPU default is
bfloat16, which NumPy, and so the CPU fallback, cannot store); ``dtype=bfloat16`` is for CUDA.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING

from .. import cuda
from .. import dtypes as dt
from ..errors import DeviceError, DTypeError
from ..ops import autocast as _regions
from ..ops.autocast import float16_regions_entered  # noqa: F401 (GradScaler asks it)

if TYPE_CHECKING:
    from ..types import Any, Callable, DType

_HALF = (dt.float16, dt.bfloat16)


def is_autocast_enabled(device_type: str = "cuda") -> bool:
    return _regions.is_enabled(device_type)


def get_autocast_dtype(device_type: str = "cuda") -> DType:
    """The dtype of the enabled region for ``device_type``, or its default when none is enabled."""
    return _regions.region_dtype(device_type)


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context manager
    (and decorator) under which the ops with an autocast policy run in mixed precision on
    ``device_type``."""

    def __init__(
        self, device_type: str, dtype: DType | None = None, enabled: bool = True, cache_enabled: bool | None = None
    ) -> None:
        if device_type not in ("cpu", "cuda"):
            raise DeviceError(f"autocast: unsupported device_type {device_type!r} (expected 'cpu' or 'cuda')")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: expected `enabled` to be of type bool, got {type(enabled).__name__}")
        dtype = dt.float16 if dtype is None else dt.as_dtype(dtype, "autocast")
        if dtype not in _HALF:
            raise DTypeError(f"autocast: dtype must be adcuda.float16 or adcuda.bfloat16, got {dtype}")
        if device_type == "cpu" and dtype is dt.bfloat16:
            raise DTypeError(
                "autocast: bfloat16 is not supported on the CPU backend (NumPy has no bfloat16); "
                "use dtype=adcuda.float16, or device_type='cuda' on a GPU"
            )
        if device_type == "cuda" and enabled and not cuda.is_available():
            warnings.warn(
                "autocast: device_type 'cuda' was given but CUDA is not available, so only CUDA "
                "tensors (there are none) would be affected; use autocast('cpu') for the CPU "
                "fallback",
                stacklevel=2,
            )
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = enabled
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._saved = []

    def __enter__(self) -> autocast:
        self._saved.append(_regions.enter_region(self.device_type, self.fast_dtype, self._enabled, self._cache_enabled))
        return self

    def __exit__(self, *exc: object) -> bool:
        _regions.exit_region(self._saved.pop())
        return False

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        args = (self.device_type, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(func)
        def wrapper(*a, **kw):
            with autocast(*args):
                return func(*a, **kw)

        return wrapper
