"""Random ops: ``rand randn randint randperm rand_like randn_like`` and dropout.

Forwards call the backend's random family (counter-based Philox: ``kernels/random.cu``) with a
``(seed, offset)`` taken from the generator (``adcuda/random.py``), so a draw depends only on the
seed and the sequence of draws, never on the device or its launch configuration."""

from __future__ import annotations

import importlib
import math
import warnings
from typing import TYPE_CHECKING

import numpy as np  # the direct lanes' host arrays (their flags and dtypes)

from .. import dtypes as dt
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import needs_grad, requires_grad
from ..backends import cpu as _cpu
from ..backends.cpu import random as _cpu_random
from ..backends.float_errors import QUIET as _QUIET
from ..backends.float_errors import current as _errstate
from ..backends.float_errors import quiet as _quiet
from ..backends.float_errors import restore as _restore
from ..device import CPU
from ..errors import DTypeError, ShapeError
from ..random import default_generator
from ..tensor import Tensor, primitives, primitives_on, version_counter
from .common import broadcast_shapes, cast, check_float, check_tensor, dense, has_shape, wrap
from .conversion import to_device_and_dtype
from .elementwise import binary, unary
from .factories import host_dtype, new_tensor, plain_shape, shape_arg, wrapped
from .mutation import apply_inplace, check_inplace_allowed, commit_inplace, write_untracked
from .registry import op

if TYPE_CHECKING:
    from ..types import Any, Device, DType, Generator, Sequence


def _draw(name, prim, shape, dtype, device, requires_grad, generator, *args):
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return getattr(bk, prim)(*args, shape, d, seed, offset)

    return new_tensor(name, draw, shape, dtype, device, requires_grad)


# the CPU backend's draws by name, and the fewest elements new_tensor checks the size of (under it, no
# size can be refused)
_CPU_DRAWS = {"rand": _cpu_random.rand, "randn": _cpu_random.randn, "randint": _cpu_random.randint}
_HOST_DRAW_MAX = 1 << 40


# The direct lanes (registry.py's ``direct=``) of the draws: their CPU case in one frame, the host
# module's draw wrapped (or its fill written into the tensor); None, before anything is drawn, for any
# other call, which takes the forward.
def _host_draw(prim, shape, dtype, device, requires_grad, generator, *args):
    """A CPU tensor of ``prim``'s draw of ``shape`` (a tuple of ints, or None: not one), or None."""
    if shape is None or host_dtype(dtype, device, requires_grad) is None:
        return None
    n = 1
    for s in shape:
        n *= s
    if n >= _HOST_DRAW_MAX:
        return None
    seed, offset = (generator or default_generator).next_offset(n)
    return wrapped(_CPU_DRAWS[prim](*args, shape, dtype or dt.default_float, seed, offset))


def _host_floats(kind, shape, dtype, device, requires_grad, generator):
    """rand's (``kind`` HOST_UNIFORM) or randn's (HOST_NORMAL) draw of ``shape`` (a tuple of ints, or
    None: not one) as a float32/float64 CPU tensor: the host fill (the values host_random_uniform and
    host_random_normal give, the generator's offset reserved in the same call), or None."""
    d = host_dtype(dtype, device, requires_grad)
    if shape is None or d is not _F32 and d is not _F64 or _HOST_FILL_FROM is None:
        return None
    n = 1
    for s in shape:
        n *= s
    if n >= _HOST_DRAW_MAX or _random_module._draw_observer is not None:
        return None
    out = np.empty(shape, d)
    return wrapped(out) if _HOST_FILL_FROM(out, kind, 1.0, 0.0, generator or default_generator) else None


def _floating_direct(kind):
    def direct(size, generator=None, dtype=None, device=None, requires_grad=False):
        return _host_floats(kind, plain_shape(size), dtype, device, requires_grad, generator)

    return direct


def _floating_like_direct(kind):
    def direct(input, dtype=None, device=None, requires_grad=False, generator=None):
        if input._data.__class__ is not np.ndarray:
            return None
        return _host_floats(kind, input._data.shape, dtype or input.dtype, device, requires_grad, generator)

    return direct


def _randint_direct(low=0, high=None, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    if size.__class__ is not tuple and size.__class__ is not list or high.__class__ is not int:
        return None  # (randint(high, size) and every other form: the forward's)
    if low.__class__ is not int or not low < high:
        return None
    return _host_draw("randint", plain_shape((size,)), dtype or dt.int64, device, requires_grad, generator, low, high)


def _randint_like_direct(input, low=0, high=None, generator=None, dtype=None, device=None, requires_grad=False):
    if high is None:
        low, high = 0, low
    if low.__class__ is not int or high.__class__ is not int or not low < high:
        return None
    if input._data.__class__ is not np.ndarray:
        return None
    d = dtype or input.dtype
    return _host_draw("randint", input._data.shape, d, device, requires_grad, generator, low, high)


def _target(self, floating=True):
    """The host array of ``self`` where an in-place draw may write it directly: a CPU tensor (float32 or
    float64 where ``floating``), contiguous, writeable, with no history nor grad to ask for (so nothing
    to check nor record: the forward's ``check_inplace_allowed`` and ``_overwrite``), while nothing
    observes primitive calls; else None."""
    data = self._data
    if (
        data.__class__ is not np.ndarray
        or floating
        and data.dtype is not _F32
        and data.dtype is not _F64
        or self._requires_grad
        or self._grad_fn is not None
        or self._base is not None
        or _tensor_module._primitive_observer is not None
    ):
        return None
    flags = data.flags
    return data if flags.c_contiguous and flags.writeable else None


def _written(self):
    """``self`` after a direct lane wrote its memory: its version bumped, as ``write_untracked`` does."""
    version_counter(self).value += 1
    return self


def _filled_in_place(self, kind, scale, shift, generator):
    """``self`` overwritten by the host module's fill, as ``_drawn_in_place`` writes it, where
    ``_target`` finds it may be and nothing observes draws (graph capture); else None. (``_target``'s
    tests and ``_host_filled``'s call, inlined: each frame was a tenth of a small draw's cost.)"""
    data = self._data
    if (
        _HOST_FILL_FROM is None
        or data.__class__ is not np.ndarray
        or self._requires_grad
        or self._grad_fn is not None
        or self._base is not None
        or _tensor_module._primitive_observer is not None
        or _random_module._draw_observer is not None
    ):
        return None
    # (the fill refuses another dtype than float32/float64, or an array not C-contiguous and writeable,
    # with an error before it draws: the entry's lane then takes the forward)
    if not _HOST_FILL_FROM(data, kind, scale, shift, generator or default_generator):
        return None  # (another thread holds the generator's lock: the forward waits for it)
    vc = self._vc
    (vc if vc is not None else version_counter(self)).value += 1
    return self


def _host_filled(out, kind, scale, shift, generator):
    """``out`` (a float32/float64 host array) filled by the host module with kind's draws of its size
    times ``scale`` plus ``shift``: rand's or randn's draw, as the forwards take it (the generator's next
    offset), and the primitives' arithmetic on it, rounded as theirs (a scale of 1, a shift of 0
    skipped)."""
    gen = generator or default_generator
    # (the generator's offset taken in the fill's own call, where no one observes draws: graph capture)
    if (
        _HOST_FILL_FROM is None
        or _random_module._draw_observer is not None
        or not _HOST_FILL_FROM(out, kind, scale, shift, gen)
    ):
        seed, offset = gen.next_offset(out.size)
        _HOST_FILL(out, kind, scale, shift, seed, offset)
    return out


# The other in-place draws' direct lanes: the host module's draw (negated, shifted or scaled as the
# forward's first steps are: exact or rounded alike) and the rest of the forward's arithmetic with the
# same NumPy loops the primitives run, written into self's memory.
def _exponential_direct(self, lambd=1.0, generator=None):
    data = _target(self) if _HOST_FILL is not None and lambd.__class__ in _NUMBERS and lambd > 0 else None
    if data is None:
        return None
    _host_filled(data, _cpu_random.HOST_UNIFORM, -1.0, 0.0, generator)  # -u: u * -1.0, exact
    np.log1p(data, out=data)
    np.divide(data, data.dtype.type(-lambd), out=data)
    return _written(self)


def _geometric_direct(self, p, generator=None):
    if _HOST_TRIALS is None or p.__class__ not in _NUMBERS or not 0 < p < 1:
        return None
    data = self._data
    if (
        data.__class__ is not np.ndarray
        or data.dtype is not _F32
        and data.dtype is not _F64
        or self._requires_grad
        or self._grad_fn is not None
        or self._base is not None
        or _tensor_module._primitive_observer is not None
        or _random_module._draw_observer is not None
    ):
        return None  # (``_target``'s tests inlined, as ``_filled_in_place`` has them)
    flags = data.flags
    if not (flags.c_contiguous and flags.writeable):
        return None
    # -u in float64 on the CPU, whatever self's dtype (the generator's offset taken in the fill's call, as
    # _host_filled takes it)
    u = np.empty(data.size, _F64)
    gen = generator or default_generator
    if not _HOST_FILL_FROM(u, _cpu_random.HOST_UNIFORM, -1.0, 0.0, gen):
        seed, offset = gen.next_offset(u.size)
        _HOST_FILL(u, _cpu_random.HOST_UNIFORM, -1.0, 0.0, seed, offset)
    np.log1p(u, out=u)
    _HOST_TRIALS(data, u, math.log1p(-p))  # (the exact rest: division, ceil, max and the cast)
    vc = self._vc
    (vc if vc is not None else version_counter(self)).value += 1
    return self


def _located_target(self, location, scale):
    """``_target(self)`` for a draw of a location and a positive scale given as Python numbers (the
    host fill at hand); else None."""
    numbers = location.__class__ in _NUMBERS and scale.__class__ in _NUMBERS
    return _target(self) if _HOST_FILL is not None and numbers and scale > 0 else None


def _cauchy_direct(self, median=0.0, sigma=1.0, generator=None):
    data = _located_target(self, median, sigma)
    if data is None:
        return None
    d = data.dtype
    u = _host_filled(np.empty(data.shape, d), _cpu_random.HOST_UNIFORM, 1.0, -0.5, generator)  # u - 0.5
    np.multiply(u, _PI[d], out=u)
    ratio = np.sin(u)
    np.cos(u, out=u)
    np.divide(ratio, u, out=data if sigma == 1 and median == 0 else ratio)
    if sigma != 1:
        np.multiply(ratio, ratio.dtype.type(sigma), out=ratio if median != 0 else data)
    if median != 0:
        np.add(ratio, ratio.dtype.type(median), out=data)
    return _written(self)


def _log_normal_direct(self, mean=1.0, std=2.0, generator=None):
    data = _located_target(self, mean, std)
    if data is None:
        return None
    _host_filled(data, _cpu_random.HOST_NORMAL, std, mean, generator)
    token = None if _errstate() is _QUIET else _quiet(_QUIET)  # (exp overflows to inf, silently)
    try:
        np.exp(data, out=data)
    finally:
        if token is not None:
            _restore(token)
    return _written(self)


def _random_direct(self, from_=0, to=None, generator=None, kwargs=None):
    if kwargs or from_.__class__ is not int or to.__class__ is not int or not from_ < to:
        return None  # (the one-argument and unbounded forms: the forward's)
    data = self._data
    if (
        _INTEGERS_FROM is not None
        and data.__class__ is np.ndarray
        and not (self._requires_grad or self._grad_fn is not None or self._base is not None)
        and _tensor_module._primitive_observer is None
        and _random_module._draw_observer is None
        and _INT64_MIN <= from_
        and to <= _INT64_MAX
    ):
        # the host module's draw straight into self's memory, the generator's offset taken in the same
        # call (``_target``'s tests inlined, as ``_filled_in_place`` has them; the draw refuses, before
        # it takes the offset, a dtype it does not write or an array not contiguous and writeable)
        if _INTEGERS_FROM(data, from_, to, generator or default_generator):
            vc = self._vc
            (vc if vc is not None else version_counter(self)).value += 1
            return self
        return None  # (another thread holds the generator's lock: the forward waits for it)
    data = _target(self, floating=False)
    if data is None:
        return None
    seed, offset = (generator or default_generator).next_offset(data.size)
    data[...] = _cpu_random.randint(from_, to, data.shape, dt.int64, seed, offset)
    return _written(self)


_HOST_FILL, _HOST_FILL_FROM = _cpu_random.HOST_FILL, _cpu_random.HOST_FILL_FROM
# the host module's other helpers of the lanes (None without it, or in a build that predates them: then
# the forwards)
_HOST_TRIALS = getattr(_cpu_random._NATIVE, "host_trials", None)
_UNIT_INTERVAL = getattr(_cpu_random._NATIVE, "host_unit_interval", None)
_BELOW_EACH = getattr(_cpu_random._NATIVE, "host_random_below_each", None)
_INTEGERS_FROM = getattr(_cpu_random._NATIVE, "host_random_integers_from_", None)
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# the modules whose hooks the lanes read per call (``adcuda.tensor`` and ``adcuda.random`` are the
# package's functions once it is imported): the primitive observer, the draw observer
_tensor_module = importlib.import_module("..tensor", __package__)
_random_module = importlib.import_module("..random", __package__)
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_NUMBERS = (float, int)
_PI = {_F32: np.float32(math.pi), _F64: np.float64(math.pi)}  # (a NumPy scalar made per call cost 0.2 us)


def _normal_direct(self, mean=0.0, std=1.0, generator=None):
    if mean.__class__ not in _NUMBERS or std.__class__ not in _NUMBERS or std < 0:
        return None
    return _filled_in_place(self, _cpu_random.HOST_NORMAL, std, mean, generator)


def _uniform_direct(self, from_=0.0, to=1.0, generator=None, kwargs=None):
    if kwargs or from_.__class__ not in _NUMBERS or to.__class__ not in _NUMBERS or from_ > to:
        return None
    return _filled_in_place(self, _cpu_random.HOST_UNIFORM, to - from_, from_, generator)


def _bernoulli_in_place_direct(self, p=0.5, generator=None):
    if p.__class__ not in _NUMBERS or not 0 <= p <= 1:
        return None
    return _filled_in_place(self, _cpu_random.HOST_BELOW, p, 0.0, generator)


def _sample(prim, shape, dtype, device, generator, *args):
    """A draw of ``shape`` in ``dtype`` from ``rand``'s, ``randn``'s or ``randint``'s primitive (``args``:
    its bounds) without their public entries (argument parsing, dispatch: most of a small in-place
    draw's cost): the composites' samples, the same numbers. ``device`` is a tensor's (a device
    object)."""
    return wrap(_sample_data(prim, shape, dtype, device, generator, *args), device)


def _sample_data(prim, shape, dtype, device, generator, *args):
    """``_sample``'s backend array: on the CPU the primitive is called directly, with no current device
    to set nor size to check (new_tensor's work, half of a small draw's cost)."""
    if device is not CPU:
        return _draw(prim, prim, shape, dtype, device, False, generator, *args)._data
    n = 1
    for s in shape:
        n *= s
    seed, offset = (generator or default_generator).next_offset(n)
    return getattr(primitives_on(CPU), prim)(*args, shape, dtype, seed, offset)


def _draw_floating(name, prim, shape, dtype, device, requires_grad, generator):
    """rand's and randn's body (and their ``_like`` forms'): samples of ``shape`` from primitive
    ``prim``, in a floating point dtype."""
    if dtype is not None and not dt.as_dtype(dtype).is_floating_point:
        raise DTypeError(f"{name}: expected a floating point dtype, got {dtype}")
    return _draw(name, prim, shape, dtype, device, requires_grad, generator)


@op("rand", doc="Uniform samples from [0, 1).", method=False, direct=_floating_direct(_cpu_random.HOST_UNIFORM))
def rand(
    *size: int | Sequence[int],
    generator: Generator | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _draw_floating("rand", "rand", shape_arg("rand", size), dtype, device, requires_grad, generator)


@op("randn", doc="Standard normal samples.", method=False, direct=_floating_direct(_cpu_random.HOST_NORMAL))
def randn(
    *size: int | Sequence[int],
    generator: Generator | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    return _draw_floating("randn", "randn", shape_arg("randn", size), dtype, device, requires_grad, generator)


@op("randint", doc="Uniform integers from [low, high) (int64 by default).", method=False, direct=_randint_direct)
def randint(
    low: int = 0,
    high: int | None = None,
    size: Sequence[int] | None = None,
    generator: Generator | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    if size is None and isinstance(high, (tuple, list)):  # randint(high, size)
        low, high, size = 0, low, high
    elif high is None:
        low, high = 0, low
    if size is None:
        raise DTypeError("randint: missing required argument 'size'")
    shape = shape_arg("randint", (size,))
    return _randint("randint", low, high, shape, dtype or dt.int64, device, requires_grad, generator)


def _randint(name, low, high, shape, dtype, device, requires_grad, generator):
    if high <= low:
        raise ShapeError(f"{name}: expected low < high, got low={low}, high={high}")
    return _draw(name, "randint", shape, dtype, device, requires_grad, generator, low, high)


@op(
    "rand_like",
    doc="rand of input's shape, dtype and device.",
    method=False,
    direct=_floating_like_direct(_cpu_random.HOST_UNIFORM),
)
def rand_like(
    input: Tensor,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    shape = tuple(input._data.shape)
    return _draw_floating(
        "rand_like", "rand", shape, dtype or input.dtype, device or input._device, requires_grad, generator
    )


@op(
    "randn_like",
    doc="randn of input's shape, dtype and device.",
    method=False,
    direct=_floating_like_direct(_cpu_random.HOST_NORMAL),
)
def randn_like(
    input: Tensor,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    shape = tuple(input._data.shape)
    return _draw_floating(
        "randn_like", "randn", shape, dtype or input.dtype, device or input._device, requires_grad, generator
    )


def _randperm_direct(n, generator=None, dtype=None, device=None):
    if n.__class__ is not int or not 0 <= n < _HOST_DRAW_MAX or dtype is not None and dtype is not dt.int64:
        return None
    if host_dtype(dt.int64, device, False) is None:
        return None
    keys = np.empty(n, _F64)  # the forward's keys (rand's float64 draw) and their stable order
    if _HOST_FILL_FROM is None or _random_module._draw_observer is not None:
        seed, offset = (generator or default_generator).next_offset(n)
        keys = _cpu_random.rand((n,), dt.float64, seed, offset)
    elif not _HOST_FILL_FROM(keys, _cpu_random.HOST_UNIFORM, 1.0, 0.0, generator or default_generator):
        return None
    return wrapped(_cpu.sort(keys, 0, False, True)[1])


@op("randperm", doc="A random permutation of 0..n-1.", method=False, direct=_randperm_direct)
def randperm(
    n: int, generator: Generator | None = None, dtype: DType | None = None, device: Device | str | None = None
) -> Tensor:
    # the order of n uniform keys from the generator's stream, drawn and sorted on the CPU, so the
    # permutation depends only on (seed, offset), whatever the device
    keys = _sample("rand", shape_arg("randperm", (n,)), dt.float64, CPU, generator)._data
    order = wrap(primitives_on(CPU).sort(keys, 0, False, True)[1], CPU)
    return to_device_and_dtype(order, device, dtype or dt.int64, name="randperm")


@op(
    "bernoulli_mask",
    doc="1 with probability p, else 0, in dtype (the draw dropout's mask makes).",
    function=False,
    method=False,
)
def bernoulli_mask(
    shape: Sequence[int], p: float, dtype: DType, device: Device | str | None, generator: Generator | None = None
) -> Tensor:
    shape = tuple(shape)
    gen = generator or default_generator
    n = 1
    for s in shape:
        n *= s

    def draw(bk, d):
        seed, offset = gen.next_offset(n)
        return bk.bernoulli(shape, p, d, seed, offset)

    return new_tensor("bernoulli", draw, shape, dtype, device, False)


# ------------------------------------------------------------------------------------------------
# dropout
def _dropout_grad(grad, p, mask):
    return grad * (mask.to(dtype=grad.dtype) * (1.0 / (1.0 - p)))


def _dropout_fused_grad(grad, p, mask):
    return wrap(primitives(grad).dropout_backward(dense(grad), mask._data, 1.0 / (1.0 - p)), grad._device)


def _all_dropped(input):
    """Dropout with p=1: zeros of input's dtype (PyTorch's, for integer tensors too), still input's
    function for autograd."""
    return input * (0.0 if input.dtype.is_floating_point else 0)


@op(
    "dropout_mask_apply",
    doc="input with each element zeroed with probability p, the rest scaled by 1/(1-p); the mask is kept for backward.",
    function=False,
    method=False,
    node="NativeDropoutBackward0",
    extra_outputs=("mask",),
    grads={"input": _dropout_grad},
    fused={"input": _dropout_fused_grad},
)
def dropout_mask_apply(input: Tensor, p: float) -> tuple[Tensor, Tensor]:
    # one primitive draws the mask (the generator's next bernoulli draw, as a two-step form would take
    # it) and applies it; the backward multiplies by the saved mask, never drawing again
    seed, offset = default_generator.next_offset(input.numel())
    out_data, mask_data = primitives(input).dropout(dense(input), p, seed, offset)
    return wrap(out_data, input._device), wrap(mask_data, input._device)


@op(
    "dropout",
    doc="Zero elements with probability p while training, scaling the rest by 1/(1-p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    check_tensor("dropout", "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input  # as PyTorch, of any dtype: nothing is drawn or scaled
    if inplace:
        return apply_inplace(input, lambda x: dropout(x, p, True, False), "dropout_")
    if p == 1.0:
        return _all_dropped(input)
    check_float("dropout", "input", input)
    return dropout_mask_apply(input, p)


# ------------------------------------------------------------------------------------------------
# channel dropout: one draw per (sample, channel), the whole feature map kept or zeroed
def _channel_layout(name, input, batched_ndim, warn, drops=True):
    """Whether ``input`` counts as unbatched (its channels on dim 0, not 1), by PyTorch's rules: dropout1d
    takes (C, L) or (N, C, L) only; dropout2d and dropout3d take any input with a channel dim, warning
    (as PyTorch does) outside their 3-4 / 4-5 dims; dropout2d reads a 3-D input as (N, C, L). Fewer than
    two dims are refused only where something is dropped (``drops``: training, p > 0, elements), as
    PyTorch's kernel returns its input before that check."""
    ndim = input.ndim
    expected = (batched_ndim - 1, batched_ndim)
    if name == "dropout1d":
        if ndim not in expected:
            raise ShapeError(f"{name}: expected 2D or 3D input, but got input of shape {tuple(input.shape)}")
        return ndim == 2
    if warn and ndim not in expected:
        spatial = batched_ndim - 2
        warnings.warn(
            f"{name}: Received a {ndim}-D input to {name}, which is deprecated and will result in an error in a "
            f"future release. To retain the behavior and silence this warning, please use dropout instead. Note "
            f"that {name} exists to provide channel-wise dropout on inputs with {spatial} spatial dimensions, a "
            f"channel dimension, and an optional batch dimension (i.e. {spatial + 1}D or {spatial + 2}D inputs).",
            UserWarning,
            stacklevel=5,  # the caller of F.dropout2d/3d, past the op entry and this helper
        )
    if name == "dropout2d":
        if warn and ndim == 3:
            warnings.warn(
                "dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior "
                "is desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior "
                "will change in a future release to interpret the input as one without a batch dimension, i.e. "
                "shape (C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using "
                "dropout1d instead.",
                UserWarning,
                stacklevel=5,  # the caller of F.dropout2d/3d, past the op entry and this helper
            )
        unbatched = False
    else:
        unbatched = ndim != batched_ndim  # dropout3d: anything but 5-D gets a batch dim of one
    if drops and ndim - (0 if not unbatched else -1) < 2:
        raise ShapeError(
            f"{name}: Feature dropout requires at least 2 dimensions in the input, got shape {tuple(input.shape)}"
        )
    return unbatched


def _channel_dropout(name, input, p, training, inplace, batched_ndim, warn=True):
    check_tensor(name, "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")
    drops = training and p != 0.0 and input.numel() != 0
    unbatched = _channel_layout(name, input, batched_ndim, warn, drops)
    if not drops:
        return input
    if inplace:
        return apply_inplace(
            input, lambda x: _channel_dropout(name, x, p, True, False, batched_ndim, warn=False), name + "_"
        )
    channels = (input.shape[0],) if unbatched else (input.shape[0], input.shape[1])
    mask_shape = channels + (1,) * (input.ndim - len(channels))
    if p == 1.0:
        return _all_dropped(input)
    check_float(name, "input", input)
    mask = bernoulli_mask(mask_shape, 1.0 - p, input.dtype, input.device)
    return input * (mask * (1.0 / (1.0 - p)))


@op(
    "dropout1d",
    doc="Zero whole channels of input (N, C, L) or (C, L) with probability p while training, "
    "scaling the rest by 1/(1-p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    return _channel_dropout("dropout1d", input, p, training, inplace, 3)


@op(
    "dropout2d",
    doc="Zero whole channels of input (N, C, H, W) or (C, H, W) with probability p while "
    "training, scaling the rest by 1/(1-p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    return _channel_dropout("dropout2d", input, p, training, inplace, 4)


# ------------------------------------------------------------------------------------------------
# in-place draws: uniform_, normal_; multinomial
def _fill_with(self, draw, name, host=None, generator=None):
    """``self`` overwritten in place with ``draw(backend, dtype)``'s backend array, drawn in float32
    (float64 for a float64 tensor) and converted; a tensor recording history gets the draw as a new
    constant value. The draws and their arithmetic are backend arrays: no tensor is made for a value
    that only passes through. ``host``: the ``(kind, scale, shift)`` of the host module's fill that
    writes the same values into self's memory (``_drawn_in_place``), drawn from ``generator``."""
    check_inplace_allowed(self, name)
    dtype = self.dtype
    if not dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating point tensor, got {dtype} (shape {tuple(self.shape)})")
    bk = primitives(self)
    if host is not None and bk is _cpu and (dtype is dt.float32 or dtype is dt.float64):
        if _drawn_in_place(self, host, generator):
            return self
    return _overwrite(self, draw(bk, dt.float64 if dtype is dt.float64 else dt.float32), name)


def _drawn_in_place(self, host, generator):
    """Whether float32/float64 CPU tensor ``self`` was overwritten by the host module's fill (``host``:
    its kind, scale and shift) straight into its memory, the primitives' numbers without the draw's
    array, its arithmetic's and the copy: where self is contiguous and writeable and records no
    history, and nothing observes primitive calls (the caller's ``bk is _cpu``: the profiler and graph
    capture see the primitives' path)."""
    fill = _cpu_random.HOST_FILL
    # (a view, or a tensor with history, takes the primitives' path: commit_inplace's work)
    if fill is None or self._requires_grad or self._grad_fn is not None or self._base is not None:
        return False
    data = self._data
    flags = data.flags
    if not (flags.c_contiguous and flags.writeable):
        return False
    kind, scale, shift = host
    seed, offset = (generator or default_generator).next_offset(data.size)
    fill(data, kind, scale, shift, seed, offset)
    version_counter(self).value += 1
    return True


def _overwrite(self, data, name):
    """``self`` holding backend array ``data`` (a new constant of its shape, converted to its dtype): a
    tensor recording history gets it as a new constant value."""
    if requires_grad(self) and grad_state.enabled:  # (needs_grad, the tensor asked first: the cheaper test)
        return commit_inplace(self, cast(wrap(data, self._device), self.dtype), name)
    return write_untracked(self, data, name)  # (the write converts as a cast does)


def _affine_data(bk, data, scale, shift, dtype):
    """``data * scale + shift`` in ``dtype`` (``data``'s), over the primitives (1 and 0 skipped: exact)."""
    if scale != 1:
        data = bk.binary("mul", data, float(scale), dtype)
    if shift != 0:
        data = bk.binary("add", data, float(shift), dtype)
    return data


def _affine(value, scale, shift):
    """``value * scale + shift`` over the primitives, for a fresh draw: two ops dispatched for a
    constant with no history were a third of every ``nn.init`` call."""
    data = _affine_data(primitives(value), value._data, scale, shift, value.dtype)
    return value if data is value._data else wrap(data, value._device)


@op(
    "uniform_",
    doc="Every element replaced by a draw from U(from, to), in place.",
    composite=True,
    function=False,
    direct=_uniform_direct,
)
def uniform_(
    self: Tensor, from_: float = 0.0, to: float = 1.0, *, generator: Generator | None = None, **kwargs: Any
) -> Tensor:
    from_ = kwargs.pop("from", from_)  # PyTorch's keyword is ``from``, a Python keyword
    if kwargs:
        raise DTypeError(f"uniform_: unexpected keyword arguments {sorted(kwargs)}")
    if from_ > to:
        raise ValueError(f"uniform_: expects from <= to, got from={from_}, to={to}")
    return _fill_with(
        self,
        lambda bk, d: _affine_data(
            bk, _sample_data("rand", self._data.shape, d, self._device, generator), to - from_, from_, d
        ),
        "uniform_",
        (_cpu_random.HOST_UNIFORM, to - from_, from_),
        generator,
    )


@op(
    "normal_",
    doc="Every element replaced by a draw from N(mean, std**2), in place.",
    composite=True,
    function=False,
    direct=_normal_direct,
)
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, got std={std}")
    return _fill_with(
        self,
        lambda bk, d: _affine_data(
            bk, _sample_data("randn", self._data.shape, d, self._device, generator), std, mean, d
        ),
        "normal_",
        (_cpu_random.HOST_NORMAL, std, mean),
        generator,
    )


def _check_distribution(input, num_samples, replacement):
    """The rows (m, n) of probabilities of ``input``, as a backend array, checked as PyTorch checks them:
    over the primitives (reductions read back once each), as the op records nothing."""
    name = "multinomial"
    if not isinstance(num_samples, int) or num_samples <= 0:
        raise ValueError(f"{name}: num_samples must be a positive int, got {num_samples!r}")
    if not input.dtype.is_floating_point:
        raise DTypeError(f"{name}: expected a floating point tensor of probabilities, got {input.dtype}")
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise ShapeError(
            f"{name}: prob_dist must be 1 or 2 dim with at least one category, got shape {tuple(input.shape)}"
        )
    n = input.shape[-1]
    if not replacement and num_samples > n:
        raise ValueError(
            f"{name}: cannot sample n_sample > prob_dist.size(-1) samples without replacement "
            f"(num_samples={num_samples}, shape {tuple(input.shape)})"
        )
    bk, device = primitives(input), input._device
    rows = bk.view(bk.contiguous(input._data), (input.numel() // n, n))

    def read(data):
        return wrap(data, device).item()

    if rows.shape[0] == 0:
        return rows
    # NaN as the least: refused with inf and negative values
    if not (read(bk.reduce("amin", rows, None, False)) >= 0 and read(bk.reduce("amax", rows, None, False)) < math.inf):
        raise ValueError(
            f"{name}: probability tensor (shape {tuple(input.shape)}) contains either inf, nan or an element < 0"
        )
    positive = bk.reduce("sum", bk.binary("gt", rows, 0.0, input.dtype), (1,), False)
    fewest = read(bk.reduce("amin", positive, None, False))
    if fewest == 0:
        raise ValueError(
            f"{name}: invalid multinomial distribution (sum of probabilities <= 0) in a row of "
            f"shape {tuple(input.shape)}"
        )
    if not replacement and fewest < num_samples:
        raise ValueError(
            f"{name}: invalid multinomial distribution (with replacement=False, not enough "
            f"non-zero categories to draw {num_samples} samples from a row of shape {tuple(input.shape)})"
        )
    return rows


@op(
    "multinomial",
    doc="Indices drawn from each row's categorical distribution (with or without replacement).",
    composite=True,
)
def multinomial(
    input: Tensor, num_samples: int, replacement: bool = False, *, generator: Generator | None = None
) -> Tensor:
    rows = _check_distribution(input, num_samples, replacement)
    bk, device = primitives(input), input._device
    m, n = rows.shape
    work = dt.float64 if device.type == "cpu" else dt.float32
    weights = bk.astype(rows, work)
    if replacement:
        # inverse CDF: a draw u in [0, 1) picks the first category whose normalised running sum exceeds it;
        # the running sum divided by its own last entry reads exactly 1.0 from the last positive category on,
        # so no rounding ever picks a zero-probability category
        cdf = bk.cumsum(weights, 1)
        cdf = bk.binary("div", cdf, bk.slice(cdf, (slice(None), slice(n - 1, n))), work)
        u = _sample("rand", (m, num_samples), work, device, generator)._data
        below = bk.binary("le", bk.view(cdf, (m, 1, n)), bk.view(u, (m, num_samples, 1)), work)
        picks = bk.reduce("sum", below, (2,), False)
    else:
        # the exponential race (Gumbel top-k): the k smallest E_i / p_i, E_i ~ Exp(1), are a draw without
        # replacement in order; zero-probability categories get +inf and are never reached (checked above)
        u = _sample("rand", (m, n), work, device, generator)._data
        race = bk.binary("div", bk.unary("neg", bk.unary("log", bk.binary("sub", 1.0, u, work))), weights, work)
        picks = bk.contiguous(bk.slice(bk.sort(race, 1, False, True)[1], (slice(None), slice(0, num_samples))))
    picks = cast(wrap(picks, device), dt.int64)
    return wrap(bk.view(picks._data, (num_samples,)), device) if input.ndim == 1 else picks


# ------------------------------------------------------------------------------------------------
# More of PyTorch's random names (issue 15), drawn with the primitives above
def _normal_direct_tensors(mean=0.0, std=1.0, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """normal(mean, std) of two CPU float32/float64 tensors of one shape and dtype, neither taking part in
    autograd: randn's draw (the host fill), ``mean + noise * std`` with the forward's NumPy loops (under
    the quiet state: inf * 0 is NaN, silently); else None."""
    if size is not None or dtype is not None or device is not None or requires_grad:
        return None
    if mean.__class__ is not Tensor or std.__class__ is not Tensor or _HOST_FILL_FROM is None:
        return None
    m, s = mean._data, std._data
    if (
        m.__class__ is not np.ndarray
        or s.__class__ is not np.ndarray
        or m.dtype is not s.dtype
        or m.dtype is not _F32
        and m.dtype is not _F64
        or m.shape != s.shape
        or mean._requires_grad
        or std._requires_grad
        or mean._grad_fn is not None
        or std._grad_fn is not None
        or _tensor_module._primitive_observer is not None
        or _random_module._draw_observer is not None
        or np.less(s, 0).any()  # (the forward's error: nothing drawn)
    ):
        return None
    noise = np.empty(m.shape, m.dtype)
    if not _HOST_FILL_FROM(noise, _cpu_random.HOST_NORMAL, 1.0, 0.0, generator or default_generator):
        return None
    token = None if _errstate() is _QUIET else _quiet(_QUIET)
    try:
        np.multiply(noise, s, out=noise)
        np.add(m, noise, out=noise)
    finally:
        if token is not None:
            _restore(token)
    return wrapped(noise)


@op(
    "normal",
    doc="Samples of N(mean, std**2): mean and std tensors (broadcast) or numbers with a size.",
    composite=True,
    method=False,
    direct=_normal_direct_tensors,
)
def normal(
    mean: Tensor | float = 0.0,
    std: Tensor | float = 1.0,
    size: Sequence[int] | None = None,
    *,
    generator: Generator | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    tensors = [t for t in (mean, std) if has_shape(t)]
    if not tensors:
        if size is None:
            raise DTypeError("normal: with a number mean and std, give size")
        if std < 0:
            raise ValueError(f"normal: expects std >= 0.0, got std={std}")
        noise = _draw_floating("normal", "randn", shape_arg("normal", (size,)), dtype, device, False, generator)
        return _affine(noise, std, mean).requires_grad_(requires_grad)
    if size is not None:
        raise DTypeError("normal: size is for a number mean and std; a tensor mean or std gives the shape")
    like = tensors[0]
    shape = tuple(like._data.shape)
    if len(tensors) == 2:
        shape = broadcast_shapes("normal", shape, tuple(tensors[1]._data.shape))
    if not like.dtype.is_floating_point:
        raise DTypeError(f"normal: expected a floating point dtype, got {like.dtype}")
    noise = _sample("randn", shape, like.dtype, like._device, generator)
    if has_shape(std) and _any(binary("lt", std, 0.0, name="normal")):
        raise ValueError("normal: expects all elements of std >= 0.0")
    if needs_grad(mean, std):
        return mean + noise * std
    return binary("add", mean, binary("mul", noise, std, name="normal"), name="normal")


def _any(mask):
    """Whether any element of bool tensor ``mask`` is set, over the primitives."""
    return bool(wrap(primitives(mask).reduce("any", mask._data, None, False), mask._device).item())


def _bernoulli_direct(input, p=None, generator=None):
    data = input._data
    if (
        _BELOW_EACH is None
        or p is not None
        or data.__class__ is not np.ndarray
        or data.dtype is not _F32
        and data.dtype is not _F64
        or not data.flags.c_contiguous
        or _tensor_module._primitive_observer is not None
        or not _UNIT_INTERVAL(data)  # (else the forward's error, before anything is drawn)
    ):
        return None
    seed, offset = (generator or default_generator).next_offset(data.size)
    return wrapped(_BELOW_EACH(data, seed, offset))


@op(
    "bernoulli",
    doc="1 with probability input (or p), else 0, in input's dtype.",
    composite=True,
    direct=_bernoulli_direct,
)
def bernoulli(input: Tensor, p: float | None = None, *, generator: Generator | None = None) -> Tensor:
    check_float("bernoulli", "input", input)
    probabilities = input if p is None else p  # (the forward helpers record nothing)
    _check_probability("bernoulli", probabilities)
    d = _draw_dtype(input.dtype)
    draw = _sample_data("rand", input._data.shape, d, input._device, generator)
    bk = primitives(input)
    if probabilities is input and d is input.dtype:  # (a draw of input's shape and dtype: nothing to promote)
        return wrap(bk.astype(bk.binary("lt", draw, input._data, d), d), input._device)
    if probabilities.__class__ is int:
        probabilities = float(probabilities)
    return cast(binary("lt", wrap(draw, input._device), probabilities, name="bernoulli"), input.dtype)


def _draw_dtype(dtype):
    return dt.float64 if dtype is dt.float64 else dt.float32


def _check_probability(name, p):
    if hasattr(p, "shape"):
        # the least and greatest probability (NaN if any is: refused, as PyTorch refuses it), two
        # reductions over the primitives where comparisons and their any() were four ops
        # (read back as host values: Tensor.item's entry cost more than each reduction)
        bk, data = primitives(p), p._data
        lo = bk.to_numpy(bk.reduce("amin", data, None, False)).item() if p.numel() else 0
        hi = bk.to_numpy(bk.reduce("amax", data, None, False)).item() if p.numel() else 0
        bad = not (0 <= lo and hi <= 1)
    else:
        bad = not 0 <= p <= 1
    if bad:
        raise ValueError(f"{name}: expected probabilities in [0, 1]")


@op(
    "bernoulli_",
    doc="Every element replaced by 1 with probability p (a number or tensor), else 0, in place.",
    composite=True,
    function=False,
    direct=_bernoulli_in_place_direct,
)
def bernoulli_(self: Tensor, p: Tensor | float = 0.5, *, generator: Generator | None = None) -> Tensor:
    _check_probability("bernoulli_", p)
    shape = self._data.shape
    if hasattr(p, "shape"):  # a tensor of probabilities: broadcast, compared through the op
        return _fill_with(
            self,
            lambda bk, d: (_sample("rand", shape, d, self._device, generator) < p).to(dtype=d)._data,
            "bernoulli_",
        )
    # (a bool array: the write converts it as a cast to float would)
    return _fill_with(
        self,
        lambda bk, d: bk.binary("lt", _sample_data("rand", shape, d, self._device, generator), float(p), d),
        "bernoulli_",
        (_cpu_random.HOST_BELOW, p, 0.0),
        generator,
    )


@op(
    "exponential_",
    doc="Every element replaced by a draw from Exp(lambd), in place.",
    composite=True,
    function=False,
    direct=_exponential_direct,
)
def exponential_(self: Tensor, lambd: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    if lambd <= 0:
        raise ValueError(f"exponential_: expects lambda > 0.0, got lambd={lambd}")

    # -log(1 - u) / lambd with u in [0, 1): finite for every draw
    def draw(bk, d):
        u = _sample_data("rand", self._data.shape, d, self._device, generator)
        return bk.binary("div", bk.unary("log1p", bk.binary("mul", u, -1.0, d)), float(-lambd), d)

    return _fill_with(self, draw, "exponential_")


@op(
    "randint_like",
    doc="randint of input's shape, dtype and device: randint_like(input, [low,] high).",
    method=False,
    direct=_randint_like_direct,
)
def randint_like(
    input: Tensor,
    low: int = 0,
    high: int | None = None,
    *,
    generator: Generator | None = None,
    dtype: DType | None = None,
    device: Device | str | None = None,
    requires_grad: bool = False,
) -> Tensor:
    if high is None:
        low, high = 0, low
    shape = tuple(input._data.shape)
    return _randint(
        "randint_like", low, high, shape, dtype or input.dtype, device or input._device, requires_grad, generator
    )


@op(
    "gumbel_softmax",
    doc="softmax((logits + Gumbel noise) / tau) along dim; hard=True gives one-hot values with the soft gradient.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    check_float("gumbel_softmax", "logits", logits)
    u = _sample("rand", tuple(logits._data.shape), _draw_dtype(logits.dtype), logits._device, None)
    # -log(Exp(1)) = -log(-log1p(-u)): a constant, over the primitives
    gumbels = unary("neg", unary("log", unary("neg", unary("log1p", unary("neg", u)))))
    soft = ((logits + cast(gumbels, logits.dtype)) / tau).softmax(dim)
    if not hard:
        return soft
    index = soft.argmax(dim, keepdim=True)
    one_hot = (soft.detach() * 0).scatter(dim, index, 1.0)
    return one_hot - soft.detach() + soft


@op(
    "dropout3d",
    doc="Zero whole channels of input (N, C, D, H, W) or (C, D, H, W) with probability p while "
    "training, scaling the rest by 1/(1-p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    return _channel_dropout("dropout3d", input, p, training, inplace, 5)


_SELU_ALPHA_PRIME = 1.7580993408473766  # -scale * alpha of SELU: the value a dropped unit takes


def _alpha_dropout(name, input, p, training, inplace, per_channel):
    """PyTorch's alpha dropout: dropped units set to SELU's negative saturation, then an affine map
    that keeps the mean and variance of self-normalising activations."""
    check_tensor(name, "input", input)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name}: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0 or input.numel() == 0:
        return input
    if inplace:
        return apply_inplace(input, lambda x: _alpha_dropout(name, x, p, True, False, per_channel), name + "_")
    if p == 1.0:
        return _all_dropped(input)
    check_float(name, "input", input)
    if per_channel and input.ndim < 2:
        raise ShapeError(f"{name}: expected an input with a channel dim (N, C, ...), got {tuple(input.shape)}")
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2) if per_channel else tuple(input.shape)
    keep = bernoulli_mask(shape, 1.0 - p, input.dtype, input.device)
    a = 1.0 / ((_SELU_ALPHA_PRIME**2 * p + 1) * (1 - p)) ** 0.5
    shift = (keep - 1) * (_SELU_ALPHA_PRIME * a) + _SELU_ALPHA_PRIME * a * p
    return input * (keep * a) + shift


@op(
    "alpha_dropout",
    doc="Dropout for SELU networks: dropped units take SELU's saturation value, mean and variance kept.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    return _alpha_dropout("alpha_dropout", input, p, training, inplace, False)


@op(
    "feature_alpha_dropout",
    doc="alpha_dropout of whole channels of input (N, C, ...).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    return _alpha_dropout("feature_alpha_dropout", input, p, training, inplace, True)


def _rrelu_direct(input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None):
    """rrelu's training case where nothing records: the slopes drawn by the host fill (U(lower, upper):
    rand's values times ``upper - lower`` plus ``lower``, rounded as the forward's ``_affine_data``),
    then the forward's ``where(x >= 0, x, x * slopes)`` with the same NumPy loops."""
    x = input._data
    if (
        training is not True
        or _HOST_FILL is None
        or lower.__class__ not in _NUMBERS
        or upper.__class__ not in _NUMBERS
        or not 0 <= lower <= upper
        or x.__class__ is not np.ndarray
        or x.dtype is not _F32
        and x.dtype is not _F64
        or input._requires_grad
        or input._grad_fn is not None
        or _tensor_module._primitive_observer is not None
    ):
        return None
    out = _host_filled(np.empty(x.shape, x.dtype), _cpu_random.HOST_UNIFORM, upper - lower, lower, generator)
    np.multiply(x, out, out=out)
    np.copyto(out, x, where=x >= 0)
    return wrapped(out)


@op(
    "rrelu",
    doc="leaky_relu with a random slope from U(lower, upper) per element while training, their mean otherwise.",
    composite=True,
    function=False,
    method=False,
    inplace=True,
    functional="inplace",
    direct=_rrelu_direct,
)
def rrelu(
    input: Tensor,
    lower: float = 1.0 / 8,
    upper: float = 1.0 / 3,
    training: bool = False,
    *,
    generator: Generator | None = None,
) -> Tensor:
    check_float("rrelu", "input", input)
    if not 0 <= lower <= upper:
        raise ValueError(f"rrelu: expected 0 <= lower <= upper, got lower={lower}, upper={upper}")
    if not training:
        return _leaky(input, float((lower + upper) / 2))
    d = input.dtype
    draw_dtype = d if d is dt.float64 else dt.float32
    bk = primitives(input)
    slopes = _sample_data("rand", input._data.shape, draw_dtype, input._device, generator)
    slopes = _affine_data(bk, slopes, upper - lower, lower, draw_dtype)  # a constant: over the primitives
    return _leaky(input, slopes if draw_dtype is d else bk.astype(slopes, d))


def _leaky(input, slopes):
    """input where it is >= 0, else input * slopes (a number, or a backend array of input's shape and
    dtype): over the primitives where no gradient is asked for, else through the ops, which record it."""
    if needs_grad(input):
        if slopes.__class__ is not float:
            slopes = wrap(slopes, input._device)
        return input.where(input >= 0, input * slopes)
    bk, d, x = primitives(input), input.dtype, input._data
    return wrap(bk.where(bk.binary("ge", x, 0.0, d), x, bk.binary("mul", x, slopes, d), d), input._device)


# the other in-place draws of PyTorch (issue 15): integers, log-normal, geometric and Cauchy values
_MANTISSA_BITS = {dt.float16: 11, dt.float32: 24, dt.float64: 53}


@op(
    "random_",
    doc="Every element replaced by an integer drawn uniformly from [from, to - 1], in place.",
    composite=True,
    function=False,
    direct=_random_direct,
)
def random_(
    self: Tensor, from_: int = 0, to: int | None = None, *, generator: Generator | None = None, **kwargs: Any
) -> Tensor:
    from_ = kwargs.pop("from", from_)  # PyTorch's keyword is ``from``, a Python keyword
    if kwargs:
        raise DTypeError(f"random_: unexpected keyword arguments {sorted(kwargs)}")
    check_inplace_allowed(self, "random_")
    if to is None and from_ != 0:  # random_(to): PyTorch's one-argument form
        from_, to = 0, from_
    if to is None:
        # no bound: [0, 2**mantissa] for floating dtypes (every integer there is exact), as in PyTorch
        if self.dtype in _MANTISSA_BITS:
            to = 2 ** _MANTISSA_BITS[self.dtype] + 1
        elif self.dtype is dt.int32:
            to = 2**31
        else:
            raise ValueError(f"random_: give `to` for a {self.dtype} tensor (adcuda draws below 2**63 - 1 only)")
    if from_ >= to:
        raise ValueError(f"random_: expects 'from' to be less than 'to', but got from={from_} >= to={to}")
    draw = _sample_data("randint", self._data.shape, dt.int64, self._device, generator, from_, to)
    return _overwrite(self, draw, "random_")


@op(
    "log_normal_",
    doc="Every element replaced by exp of a draw from N(mean, std**2), in place.",
    composite=True,
    function=False,
    direct=_log_normal_direct,
)
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator: Generator | None = None) -> Tensor:
    if std <= 0:
        raise ValueError(f"log_normal_: expects std > 0.0, got std={std}")
    shape = self._data.shape
    return _fill_with(
        self,
        lambda bk, d: bk.unary(
            "exp", _affine_data(bk, _sample_data("randn", shape, d, self._device, generator), std, mean, d)
        ),
        "log_normal_",
    )


@op(
    "geometric_",
    doc="Every element replaced by the number of Bernoulli(p) trials to the first success, in place.",
    composite=True,
    function=False,
    direct=_geometric_direct,
)
def geometric_(self: Tensor, p: float, *, generator: Generator | None = None) -> Tensor:
    if not 0 < p < 1:
        raise ValueError(f"geometric_: expects p to be in (0, 1), got p={p}")
    check_inplace_allowed(self, "geometric_")
    # inverse CDF: ceil(log(1 - u) / log(1 - p)), at least 1 (u = 0 would give 0 trials)
    device = self._device
    d = dt.float64 if device is CPU else dt.float32
    bk = primitives(self)
    u = _sample_data("rand", self._data.shape, d, device, generator)
    trials = bk.unary("ceil", bk.binary("div", bk.unary("log1p", bk.binary("mul", u, -1.0, d)), math.log1p(-p), d))
    return _overwrite(self, bk.binary("maximum", trials, 1.0, d), "geometric_")


@op(
    "cauchy_",
    doc="Every element replaced by a draw from the Cauchy distribution (median, sigma), in place.",
    composite=True,
    function=False,
    direct=_cauchy_direct,
)
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator: Generator | None = None) -> Tensor:
    if sigma <= 0:
        raise ValueError(f"cauchy_: expects sigma > 0.0, got sigma={sigma}")
    shape = self._data.shape

    def draw(bk, d):
        u = _sample_data("rand", shape, d, self._device, generator)
        angle = bk.binary("mul", bk.binary("sub", u, 0.5, d), math.pi, d)
        return _affine_data(bk, bk.binary("div", bk.unary("sin", angle), bk.unary("cos", angle), d), sigma, median, d)

    return _fill_with(self, draw, "cauchy_")
