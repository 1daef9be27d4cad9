"""``key_averages().table()``: the profile as a fixed-width text table, laid out like PyTorch's."""

SORT_KEYS = (
    "cpu_time_total",
    "self_cpu_time_total",
    "cpu_time",
    "count",
    "cpu_memory_usage",
    "self_cpu_memory_usage",
    "launches",
    "self_launches",
)


def format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


def format_memory(nbytes):
    for unit, size in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if abs(nbytes) >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes} B"


def format_table(
    averages, sort_by=None, row_limit=100, max_name_width=55, header=None, show_memory=False, show_shapes=False
):
    """``averages``: FunctionEventAvg rows (a single event is an average of one)."""
    rows = list(averages)
    if sort_by is not None:
        if sort_by not in SORT_KEYS:
            raise ValueError(f"table: sort_by must be one of {', '.join(SORT_KEYS)}; got {sort_by!r}")
        rows.sort(key=lambda r: getattr(r, sort_by), reverse=True)
    self_total = sum(r.self_cpu_time_total for r in rows)
    if row_limit is not None and row_limit >= 0:
        rows = rows[:row_limit]

    def percent(us):
        return f"{100.0 * us / self_total:.2f}%" if self_total > 0 else "--"

    columns = [
        ("Name", lambda r: _clip(r.key, max_name_width)),
        ("Self CPU %", lambda r: percent(r.self_cpu_time_total)),
        ("Self CPU", lambda r: format_time(r.self_cpu_time_total)),
        ("CPU total %", lambda r: percent(r.cpu_time_total)),
        ("CPU total", lambda r: format_time(r.cpu_time_total)),
        ("CPU time avg", lambda r: format_time(r.cpu_time)),
    ]
    if show_memory:
        columns += [
            ("CPU Mem", lambda r: format_memory(r.cpu_memory_usage)),
            ("Self CPU Mem", lambda r: format_memory(r.self_cpu_memory_usage)),
        ]
    columns += [("Launches", lambda r: str(r.launches)), ("# of Calls", lambda r: str(r.count))]
    if show_shapes:
        columns.append(("Input Shapes", lambda r: r.input_shapes or "[]"))

    cells = [[fmt(r) for _, fmt in columns] for r in rows]
    widths = [max([len(title)] + [len(line[i]) for line in cells]) + 2 for i, (title, _) in enumerate(columns)]

    def line(values):
        first = values[0].ljust(widths[0])
        return first + "".join(v.rjust(w) for v, w in zip(values[1:], widths[1:]))

    rule = "-" * sum(widths)
    out = []
    if header:
        out += [rule, header]
    out += [rule, line([title for title, _ in columns]), rule]
    out += [line(c) for c in cells]
    out += [rule, f"Self CPU time total: {format_time(self_total)}"]
    return "\n".join(out)


def _clip(name, width):
    return name if len(name) <= width else name[: width - 3] + "..."
