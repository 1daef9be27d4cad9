"""``autocast``: run the matmul-class ops in half precision and the numerically touchy ones in float32.

Inside ``with autocast("cpu")`` (or ``"cuda"``), the ops that call ``autocast_inputs`` see their
floating-point inputs cast by the op's policy, as in PyTorch's autocast op lists:

- lower precision (``matmul mm bmm linear scaled_dot_product_attention``): float32 inputs are cast to
  the region's dtype (float16 by default), so the GEMMs run in half with fp32 accumulation;
- float32 (``softmax log_softmax cross_entropy nll_loss mse_loss l1_loss
  binary_cross_entropy_with_logits softplus layer_norm``): half inputs are cast up, so the outputs
  are float32;
- promote (``dot``): mixed half/float32 inputs are all cast to float32.

float64 and non-floating tensors are never cast, nor tensors on another device type than the
region's. Casts are differentiable (the gradient flows back in the original dtype). Casts of leaf
tensors that require grad (the weights) made while gradients are recorded are cached for the
region, so a weight used many times is cast once; a cached cast is made again after the weight is
written in place, and the cache is dropped when the outermost region exits.

The state is thread-local, as in PyTorch. When no thread has an enabled region, ``autocast_inputs``
reads one module global and returns its arguments (about 0.1 us): the ops' hot path stays as fast
as without autocast.

Beyond PyTorch: the default dtype is float16 on both device types (PyTorch's CPU default is
bfloat16, which NumPy, and so the CPU fallback, cannot store); ``dtype=bfloat16`` is for CUDA.
"""
import functools
import threading
import warnings

from .. import dtypes as dt
from ..autograd.grad_mode import is_grad_enabled
from ..errors import DeviceError, DTypeError
from ..tensor import Tensor

_LOWER, _FLOAT32, _PROMOTE = "lower", "float32", "promote"
_POLICY = {
    "matmul": _LOWER, "mm": _LOWER, "bmm": _LOWER, "linear": _LOWER, "scaled_dot_product_attention": _LOWER,
    "softmax": _FLOAT32, "log_softmax": _FLOAT32, "cross_entropy": _FLOAT32, "nll_loss": _FLOAT32,
    "mse_loss": _FLOAT32, "l1_loss": _FLOAT32, "binary_cross_entropy_with_logits": _FLOAT32,
    "softplus": _FLOAT32, "layer_norm": _FLOAT32,
    "dot": _PROMOTE,
}
_HALF = (dt.float16, dt.bfloat16)


class _State(threading.local):
    active = False      # this thread is in an enabled region for some device type
    dtypes = None       # {device type: autocast dtype} of the enabled regions
    cache_enabled = True
    depth = 0           # nesting of regions (enabled or not); the cache lives while it is > 0
    cache = None        # id(leaf) -> (leaf, version, cast)


_state = _State()
_threads_in_regions = 0  # threads whose state is active: while 0, the hot path reads nothing else
_threads_lock = threading.Lock()
_float16_regions_entered = False  # process-wide: tells GradScaler whether float16 compute ever ran


def autocast_inputs(op, *tensors):
    """``tensors`` as ``op`` should see them under the active autocast region (``None`` entries and
    non-tensors pass through); the same tuple when no region is active."""
    if not _threads_in_regions or not _state.active:
        return tensors
    policy = _POLICY[op]
    if policy is _PROMOTE:
        return _promote(tensors)
    return tuple(_cast(t, policy) for t in tensors)


def _target_dtype(t, policy):
    """The dtype ``t`` becomes under ``policy``, or None to leave it alone."""
    if t.__class__ is not Tensor or not t.dtype.is_floating_point or t.dtype is dt.float64:
        return None
    region_dtype = _state.dtypes.get(t._device.type)
    if region_dtype is None:
        return None
    target = region_dtype if policy is _LOWER else dt.float32
    return None if t.dtype is target else target


def _cast(t, policy):
    target = _target_dtype(t, policy)
    if target is None:
        return t
    # only casts that carry the graph are cached: one made under no_grad would cut a later use off
    if not (_state.cache_enabled and policy is _LOWER and t.is_leaf and t.requires_grad and is_grad_enabled()):
        return t.to(dtype=target)
    hit = _state.cache.get(id(t))
    if hit is not None and hit[0] is t and hit[1] == t._version.value and hit[2].dtype is target:
        return hit[2]
    cast = t.to(dtype=target)
    _state.cache[id(t)] = (t, t._version.value, cast)
    return cast


def _promote(tensors):
    floats = [t for t in tensors if t.__class__ is Tensor and t.dtype.is_floating_point]
    if len({t.dtype for t in floats}) < 2 or not any(_state.dtypes.get(t._device.type) for t in floats):
        return tensors
    return tuple(_cast(t, _FLOAT32) for t in tensors)


def is_autocast_enabled(device_type="cuda"):
    return _state.active and device_type in _state.dtypes


def get_autocast_dtype(device_type="cuda"):
    """The dtype of the enabled region for ``device_type``, or its default when none is enabled."""
    return (_state.dtypes or {}).get(device_type, dt.float16)


class autocast:
    """``autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a context manager
    (and decorator) under which the ops listed above run in mixed precision on ``device_type``."""

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type not in ("cpu", "cuda"):
            raise DeviceError(f"autocast: unsupported device_type {device_type!r} (expected 'cpu' or 'cuda')")
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: expected `enabled` to be of type bool, got {type(enabled).__name__}")
        dtype = dt.float16 if dtype is None else dt.as_dtype(dtype, "autocast")
        if dtype not in _HALF:
            raise DTypeError(f"autocast: dtype must be adcuda.float16 or adcuda.bfloat16, got {dtype}")
        if device_type == "cpu" and dtype is dt.bfloat16:
            raise DTypeError("autocast: bfloat16 is not supported on the CPU backend (NumPy has no bfloat16); "
                             "use dtype=adcuda.float16, or device_type='cuda' on a GPU")
        if device_type == "cuda" and enabled:
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("autocast: device_type 'cuda' was given but CUDA is not available, so only CUDA "
                              "tensors (there are none) would be affected; use autocast('cpu') for the CPU "
                              "fallback", stacklevel=2)
        self.device_type = device_type
        self.fast_dtype = dtype
        self._enabled = enabled
        self._cache_enabled = True if cache_enabled is None else bool(cache_enabled)
        self._saved = []

    def __enter__(self):
        global _float16_regions_entered
        state = _state
        self._saved.append((state.dtypes, state.cache_enabled))
        dtypes = dict(state.dtypes or {})
        if self._enabled:
            dtypes[self.device_type] = self.fast_dtype
            _float16_regions_entered = _float16_regions_entered or self.fast_dtype is dt.float16
        else:
            dtypes.pop(self.device_type, None)
        state.dtypes = dtypes
        _set_active(state, bool(dtypes))
        state.cache_enabled = self._cache_enabled
        if state.depth == 0:
            state.cache = {}
        state.depth += 1
        return self

    def __exit__(self, *exc):
        state = _state
        state.dtypes, state.cache_enabled = self._saved.pop()
        _set_active(state, bool(state.dtypes))
        state.depth -= 1
        if state.depth == 0:
            state.cache = None
        return False

    def __call__(self, func):
        args = (self.device_type, self.fast_dtype, self._enabled, self._cache_enabled)

        @functools.wraps(func)
        def wrapper(*a, **kw):
            with autocast(*args):
                return func(*a, **kw)
        return wrapper


def _set_active(state, active):
    global _threads_in_regions
    if active != state.active:
        with _threads_lock:
            _threads_in_regions += 1 if active else -1
        state.active = active


def float16_regions_entered():
    return _float16_regions_entered
