"""Anomaly detection: NaN/Inf in a backward op's outputs is an error that names the op and shows
where its forward was called."""
import os
import threading
import traceback

_state = threading.local()


def is_anomaly_enabled():
    return getattr(_state, "enabled", False)


def set_detect_anomaly(mode):
    _state.enabled = bool(mode)


class detect_anomaly:
    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = is_anomaly_enabled()
        set_detect_anomaly(self.check_nan)
        return self

    def __exit__(self, *exc):
        set_detect_anomaly(self._prev)
        return False


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def forward_trace():
    """Where the op is being recorded: the caller's frames, without adcuda's own."""
    frames = [f for f in traceback.extract_stack()
              if not os.path.abspath(f.filename).startswith(_PACKAGE_DIR)]
    return "".join(traceback.format_list(frames))
