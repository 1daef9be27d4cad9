"""Fork safety: whether this process may use CUDA after a fork.

The state and the checks live in ``adcuda.backends.cuda_availability`` (the CUDA backend refuses in
a bad fork too, and may not import this layer); this module is their name in ``adcuda.cuda``.
"""

from ..backends.cuda_availability import (
    bad_fork_message,
    check_not_forked,
    in_bad_fork,
    is_initialized,
    mark_initialized,
    simulate_initialized,
)

__all__ = [
    "in_bad_fork",
    "is_initialized",
    "mark_initialized",
    "check_not_forked",
    "simulate_initialized",
    "bad_fork_message",
]
