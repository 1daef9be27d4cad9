"""Anomaly detection: NaN/Inf in a backward op's outputs is an error that names the op and shows
where its forward was called."""

from __future__ import annotations

import os
import threading
import traceback

_state = threading.local()
_lock = threading.Lock()
_enabled_threads = 0
# True while some thread has anomaly mode on: recording a node reads this one global and looks at
# its own thread's mode only then.
enabled_somewhere = False


def is_anomaly_enabled() -> bool:
    return getattr(_state, "enabled", False)


def set_detect_anomaly(mode: bool) -> None:
    global _enabled_threads, enabled_somewhere
    mode = bool(mode)
    if mode != is_anomaly_enabled():
        with _lock:
            _enabled_threads += 1 if mode else -1
            enabled_somewhere = _enabled_threads > 0
    _state.enabled = mode


class detect_anomaly:
    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan

    def __enter__(self) -> detect_anomaly:
        self._prev = is_anomaly_enabled()
        set_detect_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc: object) -> None:
        set_detect_anomaly(self._prev)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def forward_trace():
    """Where the op is being recorded: the caller's frames, without adcuda's own."""
    frames = [f for f in traceback.extract_stack() if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames))
