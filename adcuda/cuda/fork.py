"""Fork safety: whether this process may use CUDA.

A child forked after its parent initialised CUDA inherits a CUDA state it cannot use; calling CUDA
there fails or hangs. This module notes when this process initialises CUDA (``mark_initialized``, or
the native runtime finding a device), and an ``os.register_at_fork`` handler marks children forked
after that, so that every entry point can refuse with ``BadForkError`` instead. The native runtime
keeps the same state with ``pthread_atfork`` for the paths that do not pass through Python.
"""
import contextlib
import os

from .. import _native
from .errors import BadForkError

__all__ = ["in_bad_fork", "is_initialized", "mark_initialized", "check_not_forked", "simulate_initialized"]

# The pid of this process once it has initialised CUDA (None before, and in a fresh child).
_initialized_pid = None
_forked_after_init = False


def _native_flag(name):
    C = _native._C
    flag = getattr(C, name, None) if C is not None else None
    return bool(flag()) if flag is not None else False


def _note_fork_in_child():
    global _initialized_pid, _forked_after_init
    if _initialized_pid is not None or _native_flag("cuda_was_used"):
        _forked_after_init = True
    _initialized_pid = None


os.register_at_fork(after_in_child=_note_fork_in_child)


def mark_initialized():
    """This process has initialised CUDA: a child forked from now on must not use it."""
    global _initialized_pid
    _initialized_pid = os.getpid()


def in_bad_fork():
    """Whether this process was forked after its parent (or an ancestor) initialised CUDA."""
    return _forked_after_init or _native_flag("in_bad_fork")


def is_initialized():
    """Whether this process has initialised CUDA (PyTorch's ``torch.cuda.is_initialized``). Finding a
    device counts: it initialises the driver, after which forked children cannot use CUDA either."""
    if in_bad_fork():
        return False
    return _initialized_pid == os.getpid() or _native_flag("cuda_was_used")


def bad_fork_message(op):
    return (f"{op}: CUDA cannot be used in a process forked after its parent initialised CUDA (the child "
            "inherits a CUDA state it cannot use). Start worker processes with the 'spawn' or 'forkserver' "
            "start method: multiprocessing.get_context('spawn'), or DataLoader(..., "
            "multiprocessing_context='spawn'); adcuda's DataLoader picks 'spawn' by itself when CUDA is "
            "initialised before it starts its workers.")


def check_not_forked(op):
    """Raise ``BadForkError`` naming ``op`` in a process forked after CUDA was initialised."""
    if in_bad_fork():
        raise BadForkError(bad_fork_message(op))


@contextlib.contextmanager
def simulate_initialized():
    """Test support: behave as if this process had initialised CUDA (so that a fork inside the block
    makes a bad-fork child) on a machine without a GPU."""
    global _initialized_pid
    previous = _initialized_pid
    _initialized_pid = os.getpid()
    try:
        yield
    finally:
        _initialized_pid = previous
