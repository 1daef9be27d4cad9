"""``profile()``: adcuda's own per-op profiler, for when no Nsight is at hand.

For each op reached from user code it records calls and time, for each backward node its
backward time, and for both the kernel launches (backend primitive calls) made inside and, with
``profile_memory=True``, the bytes of the new arrays they returned. Times are host wall-clock
times (``time.perf_counter_ns``); on the GPU they measure what the host spends, launches included.
"""

from __future__ import annotations

import enum
from time import perf_counter_ns
from types import TracebackType
from typing import TYPE_CHECKING

from . import _state, instrument
from .events import EventList

if TYPE_CHECKING:
    from ..types import Iterable, PathLike


class ProfilerActivity(enum.Enum):
    """PyTorch's activity names, accepted so that ``torch.profiler.profile(activities=...)`` code
    runs; adcuda records host times for both."""

    CPU = "cpu"
    CUDA = "cuda"


class profile:
    """Record every op, backward node and ``record_function`` range while the context is active.

    ``prof.key_averages().table(sort_by="cpu_time_total", row_limit=20)`` prints the per-op
    table; ``prof.export_chrome_trace(path)`` writes a trace for Perfetto / chrome://tracing;
    ``prof.events()`` gives the events themselves.
    """

    def __init__(
        self,
        enabled: bool = True,
        *,
        activities: Iterable[ProfilerActivity] | None = None,
        record_shapes: bool = False,
        profile_memory: bool = False,
        with_stack: bool = False,
    ) -> None:
        if activities is not None and not all(isinstance(a, ProfilerActivity) for a in activities):
            raise TypeError("profile: activities must be adcuda.profiler.ProfilerActivity values")
        self.enabled = enabled
        self.record_shapes = record_shapes
        self.profile_memory = profile_memory
        self.with_stack = with_stack
        self._events = []
        self._start_ns = None
        self._recording = False

    def __enter__(self) -> profile:
        if self._start_ns is not None:
            raise RuntimeError("profile: this profile has already recorded; make a new one")
        self._start_ns = perf_counter_ns()
        if self.enabled:
            instrument.acquire(count_launches=True)
            _state.add_profiler(self)
            self._recording = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if self._recording:
            self._recording = False
            _state.remove_profiler(self)
            instrument.release(count_launches=True)
        return False

    def _record(self, event):
        if self._recording and event.start_ns >= self._start_ns:
            self._events.append(event)

    def events(self) -> EventList:
        """Every recorded range, in order of start."""
        if self._start_ns is None:
            raise RuntimeError("profile: no events yet; use it as a context manager first")
        return EventList(
            sorted(self._events, key=lambda e: e.start_ns),
            origin_ns=self._start_ns,
            profile_memory=self.profile_memory,
            record_shapes=self.record_shapes,
        )

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str | PathLike[str]) -> None:
        self.events().export_chrome_trace(path)

    @property
    def self_cpu_time_total(self) -> float:
        return self.events().self_cpu_time_total
