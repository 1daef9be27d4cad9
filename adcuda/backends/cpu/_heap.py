"""Keep freed array memory in the process heap (glibc only), so that NumPy's temporaries reuse pages
already mapped instead of faulting fresh ones in.

glibc serves every allocation above ``M_MMAP_THRESHOLD`` (128 KiB at start) with its own ``mmap``
and unmaps it on free, and returns the top of the heap to the system once more than
``M_TRIM_THRESHOLD`` of it is free. An eager step allocates and frees dozens of arrays of a few
hundred KiB (a GPT block's activations), so with the defaults nearly every one of them page-faults
all its pages in again: measured on a small GPT step, a quarter of the step's CPU time went to
page faults. Raising both thresholds keeps those pages in the heap, where the next step's arrays
reuse them; arrays above 64 MiB still get their own mapping and go back to the system when freed.

This is a process-wide setting, made once when the CPU backend is imported;
``ADCUDA_CPU_HEAP_TUNING=0`` leaves glibc's defaults alone. On other C libraries (musl, macOS,
Windows) nothing is done.
"""

import ctypes
import os

# mallopt's parameter numbers (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 256 << 20


def keep_freed_arrays_in_heap() -> bool:
    """Raise glibc's mmap and trim thresholds (see the module's docstring); whether it was done."""
    if os.environ.get("ADCUDA_CPU_HEAP_TUNING", "1") == "0":
        return False
    try:
        libc = ctypes.CDLL(None)  # the C library this process already runs on
        libc.gnu_get_libc_version  # noqa: B018 (present in glibc only: other C libraries' mallopt differ)
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
