"""What the CUDA backend's family modules share: dtype checks and the layout fixes the kernels need,
over ``adcuda._C.DeviceArray``."""
from ... import _native
from ...errors import DTypeError

_FLOATING = frozenset({"float16", "bfloat16", "float32", "float64"})


def is_floating(a):
    return a.dtype.name in _FLOATING


def dense(a):
    """``a`` itself when contiguous, else a contiguous copy."""
    return a if a.is_contiguous() else _native._C.contiguous(a)


def cast(a, scalar_type):
    """``a`` in ``scalar_type`` (an ``adcuda._C.ScalarType``): itself when it already is."""
    return a if a.dtype == scalar_type else _native._C.astype(a, scalar_type)


def scalar_type(name):
    return getattr(_native._C.ScalarType, name)


def require_floating(op, name, a):
    if not is_floating(a):
        raise DTypeError(f"{op}: expected {name} to be a floating point array, got {a.dtype.name}")


def statistics_type(a):
    """The dtype of saved statistics (mean, rstd, logsumexp rows): float64 for float64, else float32."""
    return scalar_type("float64" if a.dtype.name == "float64" else "float32")


def rows_dense(a):
    """``a`` itself when its last dim is contiguous (the kernels take any other strides), else a
    contiguous copy."""
    if a.ndim == 0 or a.shape[-1] <= 1 or a.element_strides[-1] == 1:
        return a
    return _native._C.contiguous(a)


def broadcast_shape(*shapes):
    """NumPy's broadcast of ``shapes``, or None where they do not broadcast."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for d in range(ndim):
        size = 1
        for s in shapes:
            k = d - (ndim - len(s))
            if k < 0 or s[k] == 1:
                continue
            if size not in (1, s[k]):
                return None
            size = s[k]
        out.append(size)
    return tuple(out)
