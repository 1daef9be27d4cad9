"""NVTX ranges for Nsight Systems and Nsight Compute: ``emit_nvtx()`` and ``ADCUDA_NVTX=1``.

Ranges go to the NVTX domain ``adcuda`` through the ``nvtx`` package (imported only when asked
for). Forward ops are named like PyTorch's ``emit_nvtx``: ``mul, seq = 42`` (with
``, sizes = [[3, 4], [4]]`` under ``record_shapes=True``); the backward node of that op is
``MulBackward0, seq = 42``. ``record_function`` ranges keep their own names. With
``sequence_numbers=False`` ranges are named after the op alone (``mul``, ``MulBackward0``), which
``nsys stats --report nvtx_sum`` can total per op and Nsight Compute can filter by exact name.

NVTX only does something when a tool (Nsight, or any library named by ``NVTX_INJECTION64_PATH``)
is attached; without one, ``emit_nvtx()`` leaves the ops untouched.
"""

from __future__ import annotations

import os
from types import TracebackType

from ..backends.memo import remember
from . import _state, instrument
from .labels import op_label

DOMAIN = "adcuda"

# Names without a sequence number (ops outside autograd, AccumulateGrad, user ranges) repeat, so
# their NVTX attributes are kept; ones with a sequence number are registered afresh each time.
_CACHED_NAMES_LIMIT = 4096

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("", "0", "false", "no", "off")


def _import_nvtx():
    try:
        import nvtx
        from nvtx._lib import EventAttributes, RegisteredString
    except ImportError as e:
        raise ImportError(
            "adcuda.profiler.emit_nvtx needs the 'nvtx' package for NVTX ranges (pip install nvtx); "
            f"it could not be imported ({e}). profile() works without it."
        ) from e
    return nvtx, EventAttributes, RegisteredString


class NvtxEmitter:
    """Pushes and pops ranges in the ``adcuda`` domain."""

    def __init__(self, record_shapes=False, sequence_numbers=True):
        nvtx, self._EventAttributes, self._RegisteredString = _import_nvtx()
        self.domain = nvtx.get_domain(DOMAIN)
        self.tool_attached = isinstance(self.domain, nvtx.Domain)
        self.record_shapes = record_shapes
        self.sequence_numbers = sequence_numbers
        self._attributes = {}

    def push_op(self, name, seq, shapes):
        """An op's or a backward node's range; ``seq`` is None where it has none."""
        if not self.sequence_numbers:
            seq = None
        self.push(op_label(name, seq, shapes if self.record_shapes else None), unique=seq is not None)

    def push(self, name, unique):
        attributes = None if unique else self._attributes.get(name)
        if attributes is None:
            # The nvtx package's own message cache never forgets, which a sequence number in every
            # name would turn into a leak; a RegisteredString of our own is freed after the push.
            message = self._RegisteredString(self.domain.handle, name)
            attributes = self._EventAttributes(self.domain, message, None, None, None)
            if not unique:
                remember(self._attributes, name, attributes, _CACHED_NAMES_LIMIT)
        self.domain.push_range(attributes)

    def pop(self):
        self.domain.pop_range()


class emit_nvtx:
    """Emit an NVTX range for every op's forward and backward, and for ``record_function`` ranges,
    while the context is active (PyTorch's ``torch.autograd.profiler.emit_nvtx``; adcuda adds
    ``sequence_numbers``)."""

    def __init__(self, enabled: bool = True, record_shapes: bool = False, *, sequence_numbers: bool = True) -> None:
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.sequence_numbers = sequence_numbers
        self._emitter = None
        self._entered = False

    def __enter__(self) -> emit_nvtx:
        if self._entered:
            raise RuntimeError("emit_nvtx: this context manager is already active; make a new one to nest")
        self._entered = True
        if not self.enabled:
            return self
        emitter = NvtxEmitter(self.record_shapes, self.sequence_numbers)
        if emitter.tool_attached:
            instrument.acquire()
            _state.add_emitter(emitter)
            self._emitter = emitter
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        emitter, self._emitter = self._emitter, None
        self._entered = False
        if emitter is not None:
            _state.remove_emitter(emitter)
            instrument.release()
        return False


_environment_session = None


def enable_from_environment(environ=os.environ):
    """``ADCUDA_NVTX=1``: emit NVTX ranges for the whole life of the process."""
    global _environment_session
    value = environ.get("ADCUDA_NVTX", "").strip().lower()
    if value in _FALSE:
        return
    if value not in _TRUE:
        raise ValueError(f"ADCUDA_NVTX must be 1 (emit NVTX ranges) or 0 (don't), got {environ['ADCUDA_NVTX']!r}")
    if _environment_session is None:
        session = emit_nvtx()
        session.__enter__()
        _environment_session = session
