"""The CPU backend's random primitives (kernels/random.cu on CUDA): ``rand randn randint bernoulli``
and ``dropout`` with its backward. Philox keyed by the seed, its counter advanced to the offset, so
a draw depends only on (seed, offset) and never on what ran before in this process.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np

from ... import dtypes as dt
from ..._native import _C
from ...errors import DTypeError, ShapeError
from ..seam import DType, Shape
from ._common import BackendArray, _compute, _np_dtype

__all__ = ["rand", "randn", "randint", "bernoulli", "dropout", "dropout_backward"]

_U64 = (1 << 64) - 1


_local = threading.local()  # one Philox, Generator and re-keying function per thread, re-keyed for every draw


def _state_setter(gen):
    """``rekey(seed, offset)`` through the public state setter: it copies the kept arrays and checks the
    dict, about 2 us."""
    state = {
        "bit_generator": "Philox",
        "state": {"counter": np.zeros(4, np.uint64), "key": np.zeros(2, np.uint64)},
        "buffer": np.zeros(4, np.uint64),
        "buffer_pos": 4,  # the buffer empty: the first value comes from the counter
        "has_uint32": 0,
        "uinteger": 0,
    }
    counter, key = state["state"]["counter"], state["state"]["key"]

    def rekey(seed, offset):
        counter[0] = offset
        key[0] = seed
        gen.bit_generator.state = state

    return rekey


def _struct_writer(gen):
    """``rekey(seed, offset)`` writing the same fields into the bit generator's C state (NumPy's
    ``philox_state``: pointers to the counter and the key, then ``int buffer_pos``, ``uint64_t
    buffer[4]``, ``int has_uint32``, at the ``ctypes.state_address`` it publishes): about 0.5 us. Used
    only where a probe shows it sets exactly what the setter sets (``_rekeying``); else None."""
    address = gen.bit_generator.ctypes.state_address
    counter = (ctypes.c_uint64 * 4).from_address(ctypes.c_void_p.from_address(address).value)
    key = (ctypes.c_uint64 * 2).from_address(ctypes.c_void_p.from_address(address + 8).value)
    buffer_pos = ctypes.c_int.from_address(address + 16)
    has_uint32 = ctypes.c_int.from_address(address + 56)

    def rekey(seed, offset):
        counter[0] = offset
        counter[1] = counter[2] = counter[3] = 0
        key[0] = seed
        key[1] = 0
        buffer_pos.value = 4
        has_uint32.value = 0

    return rekey


def _rekeying(gen):
    """The fastest re-keying of ``gen`` that gives the state setter's draws: the struct writer, after a
    probe (a generator left mid-buffer, with a carried counter and a spare 32-bit value, re-keyed both
    ways, must draw the same numbers), else the setter."""
    slow = _state_setter(gen)
    try:
        fast = _struct_writer(gen)
        probe = np.random.Generator(np.random.Philox(key=0))
        probe_slow, probe_fast = _state_setter(probe), _struct_writer(probe)
        draws = []
        for rekey in (probe_slow, probe_fast):
            rekey(3, _U64)  # the next block carries into the counter's second word
            probe.random(7)
            probe.integers(0, 10, 3, dtype=np.uint32)  # 32-bit draws keep half a value
            rekey(0x9E3779B97F4A7C15, 12345)
            draws.append(np.concatenate([probe.random(5), probe.standard_normal(6)]).tobytes())
        return fast if draws[0] == draws[1] else slow
    except (AttributeError, TypeError, ValueError):  # a NumPy without the ctypes interface
        return slow


def _rng(seed, offset):
    """Seeds and offsets are taken modulo 2**64, as the CUDA backend's Philox4x32 takes them.

    The counter starts at ``offset`` (what ``Philox(key=seed).advance(offset)`` gives): re-keying a kept
    bit generator (``_rekeying``) costs 0.5-2 us, where a new ``Philox`` draws OS entropy for a seed it
    then discards and costs ten times that, on every draw of every op."""
    kept = getattr(_local, "kept", None)
    if kept is None:
        gen = np.random.Generator(np.random.Philox(key=0))
        kept = _local.kept = (gen, _rekeying(gen))
    gen, rekey = kept
    rekey(int(seed) & _U64, int(offset) & _U64)
    return gen


def _floating(op, dtype):
    if not dtype.is_floating_point:
        raise DTypeError(f"{op}: expected a floating point dtype, got {dtype}")
    return _np_dtype(dtype)


# the largest value below 1 of each floating dtype: rounding a float64 draw to float16/float32 can
# reach 1.0 (float16 from about 1 - 2**-12 up), which rand clamps to this to keep [0, 1)
_BELOW_ONE = {d: np.nextafter(d.type(1), d.type(0)) for d in map(np.dtype, (np.float16, np.float32))}
_FLOAT32 = np.dtype(np.float32)


def _native_draws():
    """The host module's draws (kernels/host/random.cpp: NumPy's own distribution functions, found in
    its ``_generator`` module, over a Philox stream keyed as ``_rng`` keys NumPy's), bound and then
    probed: used only where they give exactly the Generator's numbers, else None (a NumPy without
    those exports, a pure-source checkout without ``_C``). A small draw through them costs a fifth of
    the Generator's call and its re-keying."""
    native = _C if hasattr(_C, "host_random_bind") else None
    if native is None:
        return None
    try:
        from numpy.random import _generator

        exports = ctypes.CDLL(_generator.__file__)
        native.host_random_bind(
            *(
                ctypes.cast(getattr(exports, name), ctypes.c_void_p).value
                for name in (
                    "random_standard_uniform_fill",
                    "random_standard_normal_fill",
                    "random_bounded_uint64_fill",
                    "random_standard_normal",
                )
            )
        )
        for seed, offset, shape in ((3, _U64, (9,)), (0x9E3779B97F4A7C15, 12345, (2, 3)), (_U64, 7, (0,))):
            for fast, slow in (
                (native.host_random_uniform(seed, offset, shape, False), _rng(seed, offset).random(shape)),
                (native.host_random_normal(seed, offset, shape, False), _rng(seed, offset).standard_normal(shape)),
                (
                    native.host_random_uniform(seed, offset, shape, True),
                    _rounded_below_one(_rng(seed, offset).random(shape)),
                ),
            ):
                if fast.dtype != slow.dtype or fast.tobytes() != slow.tobytes():
                    return None
            # a 32-bit range draws halves of words, a wider one whole words; a range of one draws nothing
            for low, high in ((0, 10), (-5, 2**40), (7, 8)):
                fast = native.host_random_integers(low, high, seed, offset, shape)
                if fast.tobytes() != _rng(seed, offset).integers(low, high, shape, dtype=np.int64).tobytes():
                    return None
    except (AttributeError, OSError, TypeError, ValueError):
        return None
    return native


def _float_draw(op, shape, dtype, seed, offset):
    """``(values, NumPy dtype or None)``: rand's or randn's (``op``) draw of ``shape``, in ``dtype``
    itself where the host module draws in it (float32, float64: None then), else float64 values and
    the dtype to convert them to."""
    host, method = _DRAWS[op]
    if host is not None and shape.__class__ is tuple:
        single = _HOST_FLOATS.get(dtype)
        if single is not None:
            return host(seed, offset, shape, single), None
        return host(seed, offset, shape, False), _floating(op, dtype)
    return getattr(_rng(seed, offset), method)(shape, dtype=np.float64), _floating(op, dtype)


def rand(shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    r, out_dt = _float_draw("rand", shape, dtype, seed, offset)
    # (float64 draws are below 1 already; the host's float32 ones are rounded and kept below 1)
    return r if out_dt is None or out_dt.itemsize == 8 else _rounded_below_one(r, out_dt)


def _rounded_below_one(r, out_dt=_FLOAT32):
    """float64 draws ``r`` of [0, 1) rounded to ``out_dt``, those that reach 1.0 kept below it."""
    r = r.astype(out_dt)
    return np.minimum(r, _BELOW_ONE[out_dt], out=r)


def randn(shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    r, out_dt = _float_draw("randn", shape, dtype, seed, offset)
    return r if out_dt is None else r.astype(out_dt, copy=False)


def randint(low: int, high: int, shape: Shape, dtype: DType, seed: int, offset: int) -> BackendArray:
    if (
        _NATIVE is not None
        and shape.__class__ is tuple
        and low.__class__ is int
        and _INT64_MIN <= low < high <= _INT64_MAX
    ):
        r = _NATIVE.host_random_integers(low, high, seed, offset, shape)
    else:  # (NumPy's errors for bounds out of order or out of int64's range)
        r = _rng(seed, offset).integers(low, high, shape, dtype=np.int64)
    return r if dtype is dt.int64 else r.astype(_np_dtype(dtype), copy=False)


def _below(p, shape, seed, offset):
    """Whether each uniform [0, 1) draw of ``shape`` is below ``p``: a bool array."""
    if _NATIVE is not None and shape.__class__ is tuple:
        return _NATIVE.host_random_below(p, seed, offset, shape)
    return np.asarray(_rng(seed, offset).random(shape) < p)


def bernoulli(shape: Shape, p: float, dtype: DType, seed: int, offset: int) -> BackendArray:
    mask = _below(p, shape, seed, offset)
    return mask if dtype is dt.bool_ else mask.astype(_np_dtype(dtype))


def _masked_scale(a, mask, scale):
    """``a * (scale where mask else 0)`` in fp32 (fp64 for fp64): NaN and inf stay NaN where dropped,
    as PyTorch's ``x * mask * scale`` leaves them."""
    x = _compute(a)
    # x * mask, then * scale: the same values as x * (scale or 0), without np.where, which branches on
    # each element of a random mask (5x slower)
    with np.errstate(invalid="ignore"):
        out = np.asarray(np.multiply(x, mask, dtype=x.dtype))
        np.multiply(out, x.dtype.type(scale), out=out)
    return out.astype(a.dtype, copy=False)


def _dropout_scale(p):
    return 1.0 / (1.0 - p) if p < 1.0 else 0.0


def dropout(x: BackendArray, p: float, seed: int, offset: int) -> tuple[BackendArray, BackendArray]:
    """-> (out, bool mask): the mask is ``bernoulli(x.shape, 1 - p, bool, seed, offset)`` (what is
    kept), ``out = x * mask / (1 - p)``."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: dropout probability has to be between 0 and 1, but got {p}")
    if x.dtype.kind != "f":
        raise DTypeError(f"dropout: expected a floating point array, got {x.dtype}")
    keep = _below(1.0 - p, tuple(np.shape(x)), seed, offset)
    return _masked_scale(x, keep, _dropout_scale(p)), keep


def dropout_backward(g: BackendArray, mask: BackendArray, scale: float) -> BackendArray:
    if g.dtype.kind != "f":
        raise DTypeError(f"dropout_backward: expected a floating point gradient, got {g.dtype}")
    if np.shape(g) != np.shape(mask):
        raise ShapeError(f"dropout_backward: gradient {np.shape(g)} and mask {np.shape(mask)} differ")
    return _masked_scale(g, mask, scale)


_NATIVE = _native_draws()
# the dtypes the host module draws in directly, and whether each is float32 (none without the module)
_HOST_FLOATS = {} if _NATIVE is None else {dt.float32: True, dt.float64: False}
# rand's and randn's draws: the host module's function (None without it) and the Generator's method
_DRAWS = {
    "rand": (getattr(_NATIVE, "host_random_uniform", None), "random"),
    "randn": (getattr(_NATIVE, "host_random_normal", None), "standard_normal"),
}
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Not a primitive: the host module's in-place fill (host_random_fill_: rand's or randn's values times a
# scale plus a shift, or bernoulli's 0 and 1, in a float32/float64 array's own dtype), which the ops
# use for in-place draws where nothing observes the primitives; None without the host module.
HOST_FILL = None if _NATIVE is None else _NATIVE.host_random_fill_
# the same fill with the (seed, offset) a generator object's next draw reserves (its ``_seed``, ``_offset``
# and ``_lock``), read and advanced in the one call: False where its lock is held (nothing done)
HOST_FILL_FROM = getattr(_NATIVE, "host_random_fill_from", None)
HOST_UNIFORM, HOST_NORMAL, HOST_BELOW = 0, 1, 2  # its kinds
