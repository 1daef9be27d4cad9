"""``export_chrome_trace(path)``: the events as Chrome trace JSON, which Perfetto
(ui.perfetto.dev) and chrome://tracing open.

Each range is a complete event (``"ph": "X"``) on the thread that ran it: forward ops on the
user's thread, backward nodes on the thread that ran the autograd engine. The autograd sequence
number, input shapes, bytes allocated and kernel launches go into ``args``.
"""

import json
import os

from . import _state

CATEGORIES = {"op": "cpu_op", "backward": "autograd", "user": "user_annotation"}


def trace_events(events, origin_ns):
    pid = os.getpid()
    names = _state.thread_names
    threads = []
    out = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "adcuda"}}]
    for e in events:
        if e.thread not in threads:
            threads.append(e.thread)
        args = {"Kernel launches": e.launches}
        if e.sequence_nr >= 0:
            args["Sequence number"] = e.sequence_nr
        if e.input_shapes is not None:
            args["Input Dims"] = e.input_shapes
        if e.cpu_memory_usage:
            args["Memory (bytes)"] = e.cpu_memory_usage
        if e.stack:
            args["Call stack"] = ";".join(e.stack)
        out.append(
            {
                "name": e.name,
                "cat": CATEGORIES[e.kind],
                "ph": "X",
                "pid": pid,
                "tid": e.thread,
                "ts": round((e.start_ns - origin_ns) / 1e3, 3),
                "dur": round((e.end_ns - e.start_ns) / 1e3, 3),
                "args": args,
            }
        )
    for tid in threads:
        out.append(
            {
                "name": "thread_name",
                "ph": "M",
                "pid": pid,
                "tid": tid,
                "args": {"name": names.get(tid, f"thread {tid}")},
            }
        )
    return out


def write_chrome_trace(events, path, origin_ns):
    with open(path, "w") as f:
        json.dump({"traceEvents": trace_events(events, origin_ns), "displayTimeUnit": "ms"}, f)
