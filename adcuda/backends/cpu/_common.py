"""What the CPU backend's family modules share: NumPy dtypes and the fp32 compute rule (float16 is
widened to float32 for the arithmetic and narrowed on the way out; float64 is kept for gradcheck).
"""

import numpy as np

from ...errors import DTypeError

_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)


def _np_dtype(dtype):
    if dtype.numpy is None:
        raise DTypeError(f"{dtype.name} is not supported on the CPU backend (it is a CUDA-only dtype)")
    return np.dtype(dtype.numpy)


def _compute(a):
    """Widen float16 to float32 so the arithmetic happens in fp32."""
    if isinstance(a, np.ndarray) and a.dtype == _F16:
        return a.astype(_F32)
    return a


def _finish(result, dtype):
    out_dt = _np_dtype(dtype)
    if result.dtype != out_dt:
        return result.astype(out_dt)
    return result


def _fresh(shape, dtype, k=0):
    """The scratch provider of an eager call (``scratch=None``): a new array each time."""
    return np.empty(shape, dtype)
