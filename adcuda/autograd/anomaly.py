"""Anomaly detection: NaN/Inf in a backward op's outputs is an error that names the op and shows
where its forward was called."""
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


def forward_trace():
    """Where the op is being recorded, without adcuda's own frames."""
    frames = [f for f in traceback.extract_stack()[:-3] if "/adcuda/" not in f.filename.replace("\\", "/")
              or "/tests/" in f.filename]
    return "".join(traceback.format_list(frames))
