"""What the profiler's pieces share: the sessions now observing ops, and per-thread bookkeeping.

Nothing here is read on the per-op hot path while nothing observes: the profiler's hooks are only
attached at the dispatch point while a session is active (see ``instrument``).
"""

import threading


class ThreadState(threading.local):
    # Class attributes are each thread's starting values.
    depth = 0  # > 0 inside an observed op or backward rule: nested ops run unobserved
    launches = 0  # backend primitive calls made on this thread while counting
    op_seq = None  # the sequence number of the op being observed on this thread, if it has one

    def __init__(self):
        self.native_id = threading.get_native_id()
        thread_names[self.native_id] = threading.current_thread().name
        self.open_ranges = []  # profiler ranges open on this thread (record_function), innermost last
        self.library_ranges = set()  # library methods (optimizer step, ...) running in their range


# OS thread id -> name, of every thread that has observed something (a trace names its tracks
# after them, even once the thread has ended)
thread_names = {}

thread = ThreadState()

lock = threading.RLock()

# The NVTX emitter of the innermost active emit_nvtx(), or None. Ops read it once per call.
nvtx_emitter = None
_emitters = []

# The active profile() sessions, outermost first, and what any of them asks for per op.
profilers = ()
wants_shapes = False
wants_memory = False
wants_stack = False


def add_emitter(emitter):
    global nvtx_emitter
    with lock:
        _emitters.append(emitter)
        nvtx_emitter = emitter
        _refresh()


def remove_emitter(emitter):
    global nvtx_emitter
    with lock:
        _emitters.remove(emitter)
        nvtx_emitter = _emitters[-1] if _emitters else None
        _refresh()


def add_profiler(prof):
    global profilers
    with lock:
        profilers = profilers + (prof,)
        _refresh()


def remove_profiler(prof):
    global profilers
    with lock:
        profilers = tuple(p for p in profilers if p is not prof)
        _refresh()


def _refresh():
    global wants_shapes, wants_memory, wants_stack
    wants_shapes = any(p.record_shapes for p in profilers) or (nvtx_emitter is not None and nvtx_emitter.record_shapes)
    wants_memory = any(p.profile_memory for p in profilers)
    wants_stack = any(p.with_stack for p in profilers)
