"""What runs around each observed op, backward node and ``record_function`` range while a session
is active: the NVTX range of ``emit_nvtx()`` and the timed event of ``profile()``.

Only the outermost op is observed: an op called inside another op's (or a backward rule's) range
runs as is, so nothing is counted twice. Ranges are closed in ``finally`` blocks, so they stay
balanced when an op raises.
"""

import weakref
from time import perf_counter_ns

from ..autograd.graph import AccumulateGrad
from . import _state
from .events import FunctionEvent
from .labels import input_shapes, new_bytes, next_sequence_nr, records_graph, user_stack

_thread = _state.thread


def observe_op(fn, name, args, kwargs):
    """Run ``fn`` (an op reached from user code) inside its range."""
    emitter = _state.nvtx_emitter
    seq = next_sequence_nr() if records_graph(args) or (kwargs and records_graph(kwargs.values())) else None
    shapes = input_shapes(args) if _state.wants_shapes else None
    if emitter is not None:
        emitter.push_op(name, seq, shapes)
    _thread.op_seq = seq
    try:
        return _run(fn, args, kwargs, name, "op", seq, shapes, args)
    finally:
        _thread.op_seq = None
        if emitter is not None:
            emitter.pop()


# The sequence number of the op range each node was recorded in. A backward range carries it, so
# every node of a composite op (linear: permute, mm, add) names the forward range it came from,
# and a leaf's AccumulateGrad node, created inside an op and numbered first, shifts nothing.
_forward_seq = weakref.WeakKeyDictionary()


def link_node(node):
    """Remember which op range a new node was recorded in (the dispatch point's ``on_node`` hook)."""
    seq = _thread.op_seq
    if seq is not None:
        _forward_seq[node] = seq


def observe_backward(node, fn, *args):
    """The autograd engine's hook: run a node's backward rule (or a leaf's gradient accumulation)
    inside a range named after the node, with its forward op's sequence number."""
    if _thread.depth:
        return fn(*args)
    emitter = _state.nvtx_emitter
    seq = None if isinstance(node, AccumulateGrad) else _forward_seq.get(node, node.seq)
    if emitter is not None:
        emitter.push_op(node.name, seq, None)
    try:
        return _run(fn, args, {}, node.name, "backward", seq, None, args)
    finally:
        if emitter is not None:
            emitter.pop()


def _run(fn, args, kwargs, name, kind, seq, shapes, inputs):
    thread = _thread
    profilers = _state.profilers
    if not profilers:
        thread.depth = 1
        try:
            return fn(*args, **kwargs)
        finally:
            thread.depth = 0
    stack = user_stack() if _state.wants_stack else None
    launches = thread.launches
    result = None
    thread.depth = 1
    start = perf_counter_ns()
    try:
        result = fn(*args, **kwargs)
        return result
    finally:
        end = perf_counter_ns()
        thread.depth = 0
        memory = new_bytes(result, inputs) if _state.wants_memory else 0
        launches = thread.launches - launches
        if thread.open_ranges:
            thread.open_ranges[-1].add_child(end - start, memory, launches)
        _publish(
            profilers,
            FunctionEvent(
                name,
                kind,
                -1 if seq is None else seq,
                thread.native_id,
                start,
                end,
                end - start,
                shapes,
                memory,
                memory,
                launches,
                launches,
                stack,
            ),
        )


class OpenRange:
    """A ``record_function`` range between its enter and exit."""

    __slots__ = (
        "name",
        "emitter",
        "profilers",
        "stack",
        "launches",
        "start",
        "child_ns",
        "child_memory",
        "child_launches",
    )

    def __init__(self, name, emitter, profilers):
        self.name = name
        self.emitter = emitter
        self.profilers = profilers
        self.child_ns = self.child_memory = self.child_launches = 0

    def add_child(self, ns, memory, launches):
        self.child_ns += ns
        self.child_memory += memory
        self.child_launches += launches


def begin_range(name):
    """Open a user range; ``None`` when nothing observes (or inside an op, which owns its time)."""
    emitter = _state.nvtx_emitter
    profilers = _state.profilers
    if (emitter is None and not profilers) or _thread.depth:
        return None
    if emitter is not None:
        emitter.push(name, unique=False)
    r = OpenRange(name, emitter, profilers)
    if profilers:
        thread = _thread
        r.stack = user_stack() if _state.wants_stack else None
        r.launches = thread.launches
        thread.open_ranges.append(r)
        r.start = perf_counter_ns()
    return r


def end_range(r):
    end = perf_counter_ns()
    try:
        if r.profilers:
            thread = _thread
            ranges = thread.open_ranges
            if r in ranges:
                ranges.remove(r)
            duration = end - r.start
            launches = thread.launches - r.launches
            if ranges:
                ranges[-1].add_child(duration, r.child_memory, launches)
            _publish(
                r.profilers,
                FunctionEvent(
                    r.name,
                    "user",
                    -1,
                    thread.native_id,
                    r.start,
                    end,
                    duration - r.child_ns,
                    None,
                    r.child_memory,
                    0,
                    launches,
                    launches - r.child_launches,
                    r.stack,
                ),
            )
    finally:
        if r.emitter is not None:
            r.emitter.pop()


def _publish(profilers, event):
    for p in profilers:
        p._record(event)
