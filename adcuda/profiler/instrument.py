"""Attaching the profiler at the dispatch point while a session (``emit_nvtx()`` or ``profile()``) is
active, and detaching it when the last one ends, so that nothing is paid per op while none is.

Nothing is patched: the ops stay the functions the registry made. One hook (``adcuda.ops.dispatch``)
sees every op call (the outermost one is observed: see ``observe.observe_op``), every backward rule
and leaf accumulation, and every new autograd node (to link it to the op it was recorded in). While
a ``profile()`` records, a second hook hands the ops and autograd a stand-in for each backend
module that counts the primitive calls made through it (kernel launches). Optimizer steps,
GradScaler and DataLoader batch fetches get ranges too (``library_ranges``).
"""

import functools
import threading

from ..backends import PRIMITIVES
from ..ops import dispatch
from . import _state, library_ranges
from .observe import link_node, observe_backward, observe_op

_lock = threading.Lock()
_sessions = 0  # active sessions (each needs the observed ops)
_counting_sessions = 0  # active profile() sessions (each needs launch counts)
_library_swaps = []  # (owner, attribute, original, replacement) of library_ranges


class _ObserveOps:
    """The dispatch hook of every session: ranges around ops and backward rules."""

    @staticmethod
    def around_op(name, op, call, args, kwargs):
        if _state.thread.depth:
            return call(*args, **kwargs)
        return observe_op(call, name, args, kwargs)

    around_backward = staticmethod(observe_backward)
    on_node = staticmethod(link_node)


class _CountLaunches:
    """The dispatch hook of profile(): every primitive call through the ops is a launch."""

    @staticmethod
    def wrap_backend(backend):
        return CountingBackend(backend)


class CountingBackend:
    """A backend module whose primitives count their calls on the calling thread."""

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name in PRIMITIVES and callable(attr):
            attr = _counting(attr)
            setattr(self, name, attr)  # made once per primitive
        return attr


def _counting(fn):
    thread = _state.thread

    @functools.wraps(fn)
    def counted(*args, **kwargs):
        thread.launches += 1
        return fn(*args, **kwargs)

    return counted


_OBSERVE_OPS = _ObserveOps()
_COUNT_LAUNCHES = _CountLaunches()


def acquire(count_launches=False):
    global _sessions, _counting_sessions
    with _lock:
        if _sessions == 0:
            dispatch.add_hook(_OBSERVE_OPS)
            try:
                library_ranges.install(_swap)
            except BaseException:
                _restore_library()
                dispatch.remove_hook(_OBSERVE_OPS)
                raise
        _sessions += 1
        if count_launches:
            if _counting_sessions == 0:
                dispatch.add_hook(_COUNT_LAUNCHES)
            _counting_sessions += 1


def release(count_launches=False):
    global _sessions, _counting_sessions
    with _lock:
        if count_launches:
            _counting_sessions -= 1
            if _counting_sessions == 0:
                dispatch.remove_hook(_COUNT_LAUNCHES)
        _sessions -= 1
        if _sessions == 0:
            dispatch.remove_hook(_OBSERVE_OPS)
            _restore_library()


def is_installed():
    return _sessions > 0


def _swap(owner, attribute, replacement):
    _library_swaps.append((owner, attribute, vars(owner)[attribute], replacement))
    setattr(owner, attribute, replacement)


def _restore_library():
    """Undo the library ranges in reverse order, leaving alone an attribute someone else has rebound."""
    while _library_swaps:
        owner, attribute, original, replacement = _library_swaps.pop()
        if vars(owner).get(attribute) is replacement:
            setattr(owner, attribute, original)
