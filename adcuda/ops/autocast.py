"""Autocast at the dispatch point: while some thread has an enabled ``autocast`` region, a hook sees
every op call and casts the floating-point tensor arguments of the ops that declare a policy
(``autocast=`` in the registry), as in PyTorch's autocast op lists:

- ``"lower"`` (matmul mm bmm linear scaled_dot_product_attention): float32 inputs are cast to the
  region's dtype (float16 by default), so the GEMMs run in half with fp32 accumulation;
- ``"float32"`` (softmax, log_softmax, the losses, softplus, layer_norm): half inputs are cast up,
  so the outputs are float32;
- ``"promote"`` (dot): mixed half/float32 inputs are all cast to float32;
- ``"float32_result"`` (cross_entropy): the op reads half inputs as they are and computes in float32
  itself, giving a float32 result as PyTorch's float32 policy does, without a float32 copy of its
  input (the fused classifier reads bf16 logits and writes their gradient in bf16).

float64 and non-floating tensors are never cast, nor tensors on another device type than the
region's. Casts are differentiable (the gradient flows back in the original dtype). Casts of leaf
tensors that require grad (the weights) made while gradients are recorded are cached for the
region, so a weight used many times is cast once; a cached cast is made again after the weight is
written in place, and the cache is dropped when the outermost region exits.

Working copies (beyond PyTorch): a float32 weight that a region cast to float16/bfloat16 is
remembered (``wanted_working_dtype``); an optimizer that steps it (Adam, AdamW) then writes its
half-precision working copy in the same kernel pass and publishes it (``publish_working_copy``),
and the next region's cast of that weight reads the copy instead of casting (``working_copy_cast``):
no per-step cast of the weights. A copy is used only while the weight still has the version it had
when the copy was written (any other write to the weight makes the region cast it again), only
where the cast would be cached, and not while another dispatch hook (graph capture, the profiler)
watches the ops.

The state is thread-local; the hook is attached only while some thread is in an enabled region,
so without autocast an op call pays nothing for it. ``adcuda.amp.autocast`` is the public context
manager over ``enter_region``/``exit_region``.
"""

import threading
import weakref

from .. import dtypes as dt
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import version_counter
from ..tensor import Tensor
from . import dispatch
from .conversion import working_copy_cast

LOWER, FLOAT32, PROMOTE, FLOAT32_RESULT = "lower", "float32", "promote", "float32_result"
_HALF = (dt.float16, dt.bfloat16)


class _State(threading.local):
    active = False  # this thread is in an enabled region for some device type
    dtypes = None  # {device type: autocast dtype} of the enabled regions
    cache_enabled = True
    depth = 0  # nesting of regions (enabled or not); the cache lives while it is > 0
    cache = None  # id(leaf) -> (leaf, version, cast)


_state = _State()
_threads_in_regions = 0  # threads whose state is active; the hook is attached while it is > 0
_threads_lock = threading.Lock()
_float16_regions_entered = False  # process-wide: tells GradScaler whether float16 compute ever ran


class _AutocastHook:
    """The dispatch hook: casts an op's arguments by its policy in threads with an enabled region."""

    @staticmethod
    def around_op(name, op, call, args, kwargs):
        policy = op.autocast
        if policy is None or policy is FLOAT32_RESULT or not _state.active:
            return call(*args, **kwargs)
        if policy is PROMOTE:
            args = _promote(args)
        else:
            args = tuple(_cast(a, policy) for a in args)
            kwargs = {k: _cast(v, policy) for k, v in kwargs.items()} if kwargs else kwargs
        return call(*args, **kwargs)


_HOOK = _AutocastHook()


def _target_dtype(t, policy):
    """The dtype ``t`` becomes under ``policy``, or None to leave it alone."""
    if t.__class__ is not Tensor or not t.dtype.is_floating_point or t.dtype is dt.float64:
        return None
    region_dtype = _state.dtypes.get(t._device.type)
    if region_dtype is None:
        return None
    target = region_dtype if policy is LOWER else dt.float32
    return None if t.dtype is target else target


def _cast(t, policy):
    target = _target_dtype(t, policy)
    if target is None:
        return t
    # only casts that carry the graph are cached: one made under no_grad would cut a later use off
    if not (_state.cache_enabled and policy is LOWER and t.is_leaf and t.requires_grad and grad_state.enabled):
        return t.to(dtype=target)
    version = version_counter(t).value
    hit = _state.cache.get(id(t))
    if hit is not None and hit[0] is t and hit[1] == version and hit[2].dtype is target:
        return hit[2]
    cast = _from_working_copy(t, version, target) if t.dtype is dt.float32 else None
    if cast is None:
        cast = t.to(dtype=target)
    _state.cache[id(t)] = (t, version, cast)
    return cast


# id(weight) -> (weakref to it, dtype its regions cast it to): the weights an optimizer keeps copies of
_wanted: dict = {}
# id(weight) -> (weakref to it, its version when the copy was written, the copy)
_published: dict = {}


def _from_working_copy(t, version, target):
    """``t`` cast to ``target`` read from its published working copy, or None (then remembered as
    wanted, so that the optimizer's next step writes one)."""
    if dispatch._hooks != (_HOOK,):  # graph capture or the profiler watches: plain casts
        return None
    entry = _published.get(id(t))
    if entry is not None and entry[0]() is t and entry[1] == version and entry[2].dtype is target:
        return working_copy_cast(t, entry[2])
    wanted = _wanted.get(id(t))
    if wanted is None or wanted[0]() is not t or wanted[1] is not target:
        _wanted[id(t)] = (weakref.ref(t, _forget(id(t))), target)
    return None


def _forget(key):
    def forget(_ref):
        _wanted.pop(key, None)
        _published.pop(key, None)

    return forget


def wanted_working_dtype(weight):
    """The half dtype autocast regions cast the float32 ``weight`` to (None if none did): an
    optimizer stepping it writes a working copy in that dtype."""
    wanted = _wanted.get(id(weight))
    return wanted[1] if wanted is not None and wanted[0]() is weight else None


def publish_working_copy(weight, copy):
    """``copy`` now holds ``weight`` rounded to ``copy``'s dtype, at ``weight``'s current version."""
    wanted = _wanted.get(id(weight))
    ref = wanted[0] if wanted is not None and wanted[0]() is weight else weakref.ref(weight, _forget(id(weight)))
    _published[id(weight)] = (ref, version_counter(weight).value, copy)


def _promote(args):
    floats = [t for t in args if t.__class__ is Tensor and t.dtype.is_floating_point]
    if len({t.dtype for t in floats}) < 2 or not any(_state.dtypes.get(t._device.type) for t in floats):
        return args
    return tuple(_cast(t, FLOAT32) for t in args)


def is_enabled(device_type="cuda"):
    return _state.active and device_type in _state.dtypes


def region_dtype(device_type="cuda"):
    """The dtype of the enabled region for ``device_type``, or its default when none is enabled."""
    return (_state.dtypes or {}).get(device_type, dt.float16)


def enter_region(device_type, dtype, enabled, cache_enabled):
    """Enter a region (enabled or not) on this thread; returns what ``exit_region`` restores."""
    global _float16_regions_entered
    state = _state
    saved = (state.dtypes, state.cache_enabled)
    dtypes = dict(state.dtypes or {})
    if enabled:
        dtypes[device_type] = dtype
        _float16_regions_entered = _float16_regions_entered or dtype is dt.float16
    else:
        dtypes.pop(device_type, None)
    state.dtypes = dtypes
    _set_active(state, bool(dtypes))
    state.cache_enabled = cache_enabled
    if state.depth == 0:
        state.cache = {}
    state.depth += 1
    return saved


def exit_region(saved):
    state = _state
    state.dtypes, state.cache_enabled = saved
    _set_active(state, bool(state.dtypes))
    state.depth -= 1
    if state.depth == 0:
        state.cache = None


def _set_active(state, active):
    global _threads_in_regions
    if active != state.active:
        with _threads_lock:
            _threads_in_regions += 1 if active else -1
            if active and _threads_in_regions == 1:
                dispatch.add_hook(_HOOK, innermost=True)
            elif not active and _threads_in_regions == 0:
                dispatch.remove_hook(_HOOK)
        state.active = active


def float16_regions_entered():
    return _float16_regions_entered
