"""Streams and events, with PyTorch's names (``torch.cuda.Stream``, ``Event``, ``current_stream``,
``stream``).

adcuda gives every thread its own non-blocking stream per device, created on first use: threads that
train side by side never wait for each other's kernels. ``current_stream()`` is that stream unless a
``with adcuda.cuda.stream(s):`` block selects another one for the thread. Work on different streams
is ordered only by events: the runtime makes a stream wait for an event whenever it uses memory that
another stream used last, and ``Stream.wait_stream`` / ``Event.wait`` order streams explicitly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import _interop, _native
from ..device import device as _device_type
from .devices import _device_index

if TYPE_CHECKING:
    from ..types import Any, Device, Tensor

__all__ = [
    "Stream",
    "ExternalStream",
    "Event",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "StreamContext",
    "record_stream",
]


def _C():
    return _native._C


class Stream:
    """A CUDA stream. ``Stream()`` takes a non-blocking stream from adcuda's pool (it goes back when the
    object is deleted; streams are never destroyed, see kernels/runtime/stream.h). ``priority`` is
    accepted for PyTorch compatibility and not used."""

    def __init__(self, device: Device | str | int | None = None, priority: int = 0) -> None:
        index = _device_index(device, "Stream")
        self._pooled = _C().PooledStream(index)
        self.cuda_stream = self._pooled.handle
        self.device = _device_type("cuda", index)

    @classmethod
    def _wrap(cls, handle, index):
        stream = cls.__new__(cls)
        stream._pooled = None
        stream.cuda_stream = handle
        stream.device = _device_type("cuda", index)
        return stream

    @property
    def device_index(self) -> int:
        return self.device.index

    def query(self) -> bool:
        """Whether all work queued on the stream has finished."""
        return _C().stream_query(self.cuda_stream)

    def synchronize(self) -> None:
        """Wait until all work queued on the stream has finished (the GIL is released meanwhile)."""
        _C().stream_synchronize(self.cuda_stream)

    def wait_event(self, event: Event) -> None:
        """Work queued on this stream from now on waits for ``event``."""
        event.wait(self)

    def wait_stream(self, stream: Stream) -> None:
        """Work queued on this stream from now on waits for everything queued on ``stream`` so far."""
        _C().stream_wait_stream(self.cuda_stream, stream.cuda_stream, stream.device_index)

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) on this stream; returns it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other):
        return isinstance(other, Stream) and self.cuda_stream == other.cuda_stream

    def __hash__(self):
        return hash(self.cuda_stream)

    def __repr__(self):
        return f"<adcuda.cuda.Stream device={self.device} cuda_stream={self.cuda_stream:#x}>"


class ExternalStream(Stream):
    """A stream created by someone else (CuPy, PyTorch, a C library), by its handle. adcuda never
    destroys it; the creator must keep it alive while adcuda uses it."""

    def __init__(self, stream_ptr: int, device: Device | str | int | None = None) -> None:
        index = _device_index(device, "ExternalStream")
        self._pooled = None
        self.cuda_stream = int(stream_ptr)
        self.device = _device_type("cuda", index)


def current_stream(device: Device | str | int | None = None) -> Stream:
    """The stream the calling thread's work on ``device`` goes to."""
    index = _device_index(device, "current_stream")
    return Stream._wrap(_C().current_stream(index), index)


def default_stream(device: Device | str | int | None = None) -> Stream:
    """The calling thread's own stream on ``device`` (adcuda has no stream shared by all threads: each
    thread's own stream plays the part of PyTorch's default stream)."""
    index = _device_index(device, "default_stream")
    return Stream._wrap(_C().thread_stream(index), index)


def set_stream(stream: Stream | None) -> None:
    """Make ``stream`` the calling thread's current stream on its device."""
    if stream is None:
        return
    _C().exchange_current_stream(stream.device_index, stream.cuda_stream)


class StreamContext:
    """``with adcuda.cuda.stream(s):``: the calling thread's work on ``s``'s device goes to ``s`` inside
    the block; the previous selection comes back at the end. ``stream(None)`` does nothing."""

    def __init__(self, stream: Stream | None) -> None:
        self.stream = stream
        self._previous = None

    def __enter__(self) -> Stream | None:
        if self.stream is not None:
            self._previous = _C().exchange_current_stream(self.stream.device_index, self.stream.cuda_stream)
        return self.stream

    def __exit__(self, *exc: object) -> None:
        if self.stream is not None:
            _C().exchange_current_stream(self.stream.device_index, self._previous)


def stream(stream: Stream | None) -> StreamContext:
    return StreamContext(stream)


class Event:
    """A CUDA event (PyTorch's ``torch.cuda.Event``), created on the device of the first stream it is
    recorded on. ``enable_timing=True`` for ``elapsed_time``; ``blocking=True`` makes ``synchronize``
    sleep instead of spinning. Interprocess events are not supported."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> None:
        if interprocess:
            raise ValueError("Event: interprocess events are not supported by adcuda")
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self._event = None

    def _native_event(self, device_index):
        if self._event is None:
            self._event = _C().Event(device_index, self.enable_timing, self.blocking)
        elif self._event.device != device_index:
            raise ValueError(
                f"Event: recorded on cuda:{self._event.device} before, cannot use it with cuda:{device_index}"
            )
        return self._event

    def record(self, stream: Stream | None = None) -> None:
        """Capture the work queued on ``stream`` (default: the current stream) so far."""
        stream = current_stream() if stream is None else stream
        self._native_event(stream.device_index).record(stream.cuda_stream)

    def wait(self, stream: Stream | None = None) -> None:
        """Work queued on ``stream`` (default: the current stream) from now on waits for this event; a
        never-recorded event is complete, as in PyTorch."""
        if self._event is None:
            return
        stream = current_stream() if stream is None else stream
        self._event.wait(stream.cuda_stream)

    def query(self) -> bool:
        """Whether the captured work has finished (True if never recorded)."""
        return True if self._event is None else self._event.query()

    def synchronize(self) -> None:
        """Wait for the captured work (the GIL is released meanwhile)."""
        if self._event is not None:
            self._event.synchronize()

    def elapsed_time(self, end_event: Event) -> float:
        """Milliseconds between this event and ``end_event``; both recorded, with ``enable_timing=True``."""
        if self._event is None or end_event._event is None:
            raise ValueError("Event.elapsed_time: both events must be recorded first")
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Event.elapsed_time: both events need enable_timing=True")
        return self._event.elapsed_time(end_event._event)

    @property
    def cuda_event(self) -> int:
        return 0 if self._event is None else self._event.handle

    def __repr__(self):
        return f"<adcuda.cuda.Event {self.cuda_event:#x}>"


def _stream_handle(stream):
    """The handle of an adcuda, PyTorch (``cuda_stream``) or CuPy (``ptr``) stream, or of a plain int."""
    for attribute in ("cuda_stream", "ptr"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    if isinstance(stream, int) and not isinstance(stream, bool):
        return stream
    raise TypeError(
        f"record_stream: expected a stream (adcuda, PyTorch or CuPy) or a stream handle, got {type(stream).__name__}"
    )


def record_stream(tensor: Tensor, stream: Any) -> None:
    """Mark ``tensor``'s memory as used by ``stream`` (PyTorch's ``Tensor.record_stream``): an adcuda
    stream or another library's (a PyTorch or CuPy stream object, or a raw handle; 1 is the legacy
    default stream, 2 the per-thread one). The stream waits for the work adcuda queued on the memory so
    far, adcuda's later work on it waits for the stream's work queued before, and the caching allocator
    reuses the memory only after the stream's queued work, even if the tensor is freed first. DLPack
    exports do this for the consumer's stream; call it for a library that took the tensor through
    ``__cuda_array_interface__`` and works on a stream of its own."""
    if tensor.device.type != "cuda":
        raise ValueError(f"record_stream: the tensor is on {tensor.device}; only CUDA tensors have streams")
    _device_index(tensor.device, "record_stream")
    device_index = getattr(getattr(stream, "device", None), "index", None)
    _interop.record_external_use(tensor, _stream_handle(stream), device_index)
