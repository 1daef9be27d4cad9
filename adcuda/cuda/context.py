"""``init_cuda_context``: get a process and thread ready to use CUDA, safely in DataLoader workers.

Usable directly as a DataLoader ``worker_init_fn`` (adcuda's or PyTorch's: it takes the worker id as
its positional argument). In each process and thread it, once:
  - refuses with ``BadForkError`` in a process forked after its parent initialised CUDA (a hang or a
    crash otherwise), telling to use the 'spawn' or 'forkserver' start method;
  - seeds adcuda's random generator for a worker: with the seed the DataLoader gave the worker
    (adcuda's DataLoader announces it here through ``note_loader_worker_seed`` before it calls
    ``worker_init_fn``; PyTorch's is ``torch.utils.data.get_worker_info().seed``), else the base seed
    plus ``worker_id``;
  - on a machine where CUDA is usable, makes ``device`` current, creates its context and the thread's
    stream, and readies the allocator and the pinned pool; elsewhere it returns the CPU context, which
    says why CUDA is not used, and does nothing else.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading

from .. import _native
from .. import random as adcuda_random
from ..device import device as device_type
from .devices import _device_index, is_available, unavailable_reason
from .fork import check_not_forked, mark_initialized
from .streams import current_stream

__all__ = ["init_cuda_context", "CudaContext"]

_SEED_MASK = (1 << 64) - 1
_thread_state = threading.local()
# the seed adcuda's DataLoader gave this worker process (None in the main process); the loader announces
# it, so that this module needs nothing from adcuda.utils.data
_announced_worker_seed = None


@dataclasses.dataclass(frozen=True)
class CudaContext:
    """What ``init_cuda_context`` set up. ``device`` is ``cuda:N``, or ``cpu`` with ``reason`` saying
    why CUDA is not used; ``seed`` is what adcuda's generator was seeded with (None: left alone)."""

    device: object
    reason: object
    worker_id: object
    seed: object
    pid: int
    thread_id: int
    stream: object = None

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    def __repr__(self):
        where = str(self.device) if self.is_cuda else f"cpu ({self.reason})"
        worker = "" if self.worker_id is None else f", worker {self.worker_id}"
        seed = "" if self.seed is None else f", seed {self.seed}"
        return f"CudaContext({where}{worker}{seed}, pid {self.pid})"


def note_loader_worker_seed(seed):
    """Called by adcuda's DataLoader in each worker process before its ``worker_init_fn``: the seed
    the worker's generators got, which ``init_cuda_context`` then reports (and seeds with)."""
    global _announced_worker_seed
    _announced_worker_seed = seed


def _loader_worker_seed():
    """The seed a DataLoader gave this worker process: adcuda's, else PyTorch's (if PyTorch is in use)."""
    if _announced_worker_seed is not None:
        return _announced_worker_seed
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            info = torch.utils.data.get_worker_info()
        except AttributeError:
            info = None
        if info is not None:
            return info.seed
    return None


def _worker_seed(worker_id):
    seed = _loader_worker_seed()
    if seed is None and worker_id is not None:
        seed = adcuda_random.initial_seed() + int(worker_id)
    return None if seed is None else seed & _SEED_MASK


def init_cuda_context(worker_id: int | None = None, device: object = None) -> CudaContext:
    """Initialise (or confirm) CUDA for the calling process and thread; see the module docstring.
    Idempotent: later calls for the same device in the same process and thread return the first
    call's context (and seed nothing again)."""
    check_not_forked("init_cuda_context")
    contexts = getattr(_thread_state, "contexts", None)
    if contexts is None:
        contexts = _thread_state.contexts = {}
    key = (os.getpid(), None if device is None else str(device))
    context = contexts.get(key)
    if context is not None:
        return context

    seed = _worker_seed(worker_id)
    if seed is not None:
        adcuda_random.manual_seed(seed)

    common = dict(worker_id=worker_id, seed=seed, pid=os.getpid(), thread_id=threading.get_ident())
    if not is_available():
        context = CudaContext(
            device=device_type("cpu"), reason=f"CUDA is not available: {unavailable_reason()}", **common
        )
    else:
        index = _device_index(device, "init_cuda_context")
        _native._C.initialize_context(index)
        mark_initialized()
        context = CudaContext(device=device_type("cuda", index), reason=None, stream=current_stream(index), **common)
    contexts[key] = context
    return context
