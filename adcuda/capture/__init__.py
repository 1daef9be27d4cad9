"""Graph capture and replay: ``adcuda.compile`` records a function's backend primitive calls once per
input signature and replays them (recorder.py records, program.py plans memory and generates the
replay, compiled.py is the user's callable)."""

from .compiled import CACHE_SIZE_LIMIT, CaptureError, CompiledFunction, compile  # noqa: A004

__all__ = ["compile", "CompiledFunction", "CaptureError", "CACHE_SIZE_LIMIT"]
