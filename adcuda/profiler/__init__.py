"""``adcuda.profiler``: where the time goes.

- ``emit_nvtx(record_shapes=False)`` (or ``ADCUDA_NVTX=1``): NVTX ranges, domain ``adcuda``, for
  every op's forward (``mul, seq = 42``) and backward (``MulBackward0, seq = 42``), for the
  optimizer step and the DataLoader's batch fetch, so Nsight Systems and Nsight Compute show them.
- ``profile(record_shapes=False, profile_memory=False, with_stack=False)``: adcuda's own per-op
  profiler: ``prof.key_averages().table(...)``, ``prof.export_chrome_trace(path)``.
- ``record_function(name)``: a named range around any code, seen by both.

While neither is active, nothing observes the ops: the profiler's hooks are attached at the dispatch
point (``adcuda.ops.dispatch``) only while a session is active.
"""

from .events import EventList, FunctionEvent, FunctionEventAvg
from .nvtx_ranges import emit_nvtx
from .profile import ProfilerActivity, profile
from .record_function import record_function

__all__ = [
    "EventList",
    "FunctionEvent",
    "FunctionEventAvg",
    "ProfilerActivity",
    "emit_nvtx",
    "profile",
    "record_function",
]
