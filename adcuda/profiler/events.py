"""What ``profile()`` records: one ``FunctionEvent`` per observed range, and their per-name
averages (``key_averages()``), with PyTorch's field names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .chrome_trace import write_chrome_trace
from .table import format_table

if TYPE_CHECKING:
    from ..types import Any, Iterable, PathLike


class FunctionEvent:
    """One range: an op's forward (``kind == "op"``), a backward node (``"backward"``) or a
    ``record_function`` range (``"user"``). Times in nanoseconds from ``time.perf_counter_ns``;
    the ``*_time_total`` properties are microseconds, as in PyTorch."""

    __slots__ = (
        "name",
        "kind",
        "sequence_nr",
        "thread",
        "start_ns",
        "end_ns",
        "self_ns",
        "input_shapes",
        "cpu_memory_usage",
        "self_cpu_memory_usage",
        "launches",
        "self_launches",
        "stack",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        sequence_nr: int,
        thread: int,
        start_ns: int,
        end_ns: int,
        self_ns: int,
        input_shapes: list[Any] | None,
        cpu_memory_usage: int,
        self_cpu_memory_usage: int,
        launches: int,
        self_launches: int,
        stack: list[str] | None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.sequence_nr = sequence_nr  # links an op's forward to its backward node; -1 if none
        self.thread = thread  # the OS thread id (what Nsight Systems shows)
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.self_ns = self_ns  # minus the time of ranges nested inside this one
        self.input_shapes = input_shapes  # with record_shapes=True
        self.cpu_memory_usage = cpu_memory_usage  # bytes of new result arrays, nested included
        self.self_cpu_memory_usage = self_cpu_memory_usage
        self.launches = launches  # backend primitive calls ("kernel launches"), nested included
        self.self_launches = self_launches
        self.stack = stack  # with with_stack=True: the user's call site, innermost first

    @property
    def cpu_time_total(self) -> float:
        return (self.end_ns - self.start_ns) / 1e3

    @property
    def self_cpu_time_total(self) -> float:
        return self.self_ns / 1e3

    @property
    def key(self) -> str:
        return self.name

    def __repr__(self):
        seq = f", seq={self.sequence_nr}" if self.sequence_nr >= 0 else ""
        return (
            f"<FunctionEvent {self.name} ({self.kind}{seq}) cpu_time_total={self.cpu_time_total:.3f}us "
            f"self={self.self_cpu_time_total:.3f}us launches={self.launches}>"
        )


class FunctionEventAvg:
    """The events of one name (and, grouped by input shape, one shape), summed."""

    def __init__(self, key: str, kind: str, input_shapes: list[Any] | None = None) -> None:
        self.key = key
        self.kind = kind
        self.input_shapes = input_shapes
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0
        self.cpu_memory_usage = 0
        self.self_cpu_memory_usage = 0
        self.launches = 0
        self.self_launches = 0

    def add(self, event: FunctionEvent | FunctionEventAvg) -> FunctionEventAvg:
        self.count += 1
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        self.cpu_memory_usage += event.cpu_memory_usage
        self.self_cpu_memory_usage += event.self_cpu_memory_usage
        self.launches += event.launches
        self.self_launches += event.self_launches

    @property
    def cpu_time(self) -> float:
        """Average CPU time per call, in microseconds."""
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (
            f"<FunctionEventAvg {self.key} count={self.count} cpu_time_total={self.cpu_time_total:.3f}us "
            f"self_cpu_time_total={self.self_cpu_time_total:.3f}us launches={self.launches}>"
        )


def _as_average(event):
    if isinstance(event, FunctionEventAvg):
        return event
    avg = FunctionEventAvg(event.name, event.kind, str(event.input_shapes) if event.input_shapes else None)
    avg.add(event)
    return avg


class EventList(list):
    """A list of events (or of averages) that prints as a table and exports a Chrome trace."""

    def __init__(
        self,
        events: Iterable[FunctionEvent | FunctionEventAvg] = (),
        *,
        origin_ns: int = 0,
        profile_memory: bool = False,
        record_shapes: bool = False,
        grouped_by_input_shape: bool = False,
    ) -> None:
        super().__init__(events)
        self.origin_ns = origin_ns  # the profile's start: trace timestamps count from here
        self.profile_memory = profile_memory
        self.record_shapes = record_shapes
        self.grouped_by_input_shape = grouped_by_input_shape

    def key_averages(self, group_by_input_shape: bool = False) -> EventList:
        """One ``FunctionEventAvg`` per range name (and input shapes), in order of first appearance."""
        if group_by_input_shape and not self.record_shapes:
            raise ValueError("key_averages(group_by_input_shape=True) needs profile(record_shapes=True)")
        groups = {}
        for event in self:
            shapes = str(event.input_shapes) if group_by_input_shape else None
            key = (event.name, shapes)
            avg = groups.get(key)
            if avg is None:
                avg = groups[key] = FunctionEventAvg(event.name, event.kind, shapes)
            avg.add(event)
        return EventList(
            groups.values(),
            origin_ns=self.origin_ns,
            profile_memory=self.profile_memory,
            record_shapes=self.record_shapes,
            grouped_by_input_shape=group_by_input_shape,
        )

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds spent inside recorded ranges (each counted once, by its self time)."""
        return sum(e.self_cpu_time_total for e in self)

    def table(
        self,
        sort_by: str | None = None,
        row_limit: int = 100,
        max_name_column_width: int = 55,
        header: str | None = None,
    ) -> str:
        return format_table(
            [_as_average(e) for e in self],
            sort_by=sort_by,
            row_limit=row_limit,
            max_name_width=max_name_column_width,
            header=header,
            show_memory=self.profile_memory,
            show_shapes=self.grouped_by_input_shape,
        )

    def export_chrome_trace(self, path: str | PathLike[str]) -> None:
        if not all(isinstance(e, FunctionEvent) for e in self):
            raise TypeError(
                "export_chrome_trace: needs the events themselves (profile.events()), not their key_averages()"
            )
        write_chrome_trace(self, path, self.origin_ns)

    def __str__(self):
        return self.table()
