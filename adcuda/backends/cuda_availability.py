"""Whether this process may use CUDA, and if not, why: the device query (asked once per process) and
fork safety. It lives under the backends, beside ``adcuda._native``, so that the CUDA backend can
refuse with a clear error without reaching up into ``adcuda.cuda``, which builds its public API on
it (``is_available``, ``unavailable_reason``, ``is_initialized``, ``BadForkError``...).

Where no device is usable (no GPU, no driver, a build without CUDA, or a GPU this build has no code
for), ``unavailable_reason()`` says why and ``require_cuda(op)`` raises ``DeviceError`` naming the
op and that reason instead of crashing.

Fork safety: a child forked after its parent initialised CUDA inherits a CUDA state it cannot use;
calling CUDA there fails or hangs. This module notes when this process initialises CUDA
(``mark_initialized``, or the native runtime finding a device), and an ``os.register_at_fork``
handler marks children forked after that, so that every entry point can refuse with
``BadForkError`` instead. The native runtime keeps the same state with ``pthread_atfork`` for the
paths that do not pass through Python.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re

from .. import _native
from ..errors import BadForkError, DeviceError

__all__ = [
    "is_available",
    "device_count",
    "unavailable_reason",
    "require_cuda",
    "device_properties",
    "kernel_image_for",
    "query",
    "in_bad_fork",
    "is_initialized",
    "mark_initialized",
    "check_not_forked",
    "bad_fork_message",
    "simulate_initialized",
]


# ---------------------------------------------------------------------------------------------
# fork safety

# The pid of this process once it has initialised CUDA (None before, and in a fresh child).
_initialized_pid = None
_forked_after_init = False
# Whether require_cuda has passed in this process: every tensor op on a CUDA device asks, so the
# answer is kept (a forked child asks again).
_usable = False


def _native_flag(name):
    C = _native._C
    flag = getattr(C, name, None) if C is not None else None
    return bool(flag()) if flag is not None else False


def _note_fork_in_child():
    global _initialized_pid, _forked_after_init, _usable
    if _initialized_pid is not None or _native_flag("cuda_was_used"):
        _forked_after_init = True
    _initialized_pid = None
    _usable = False


os.register_at_fork(after_in_child=_note_fork_in_child)


def mark_initialized():
    """This process has initialised CUDA: a child forked from now on must not use it."""
    global _initialized_pid
    _initialized_pid = os.getpid()


def in_bad_fork():
    """Whether this process was forked after its parent (or an ancestor) initialised CUDA."""
    return _forked_after_init or _native_flag("in_bad_fork")


def is_initialized() -> bool:
    """Whether this process has initialised CUDA (PyTorch's ``torch.cuda.is_initialized``). Finding a
    device counts: it initialises the driver, after which forked children cannot use CUDA either."""
    if in_bad_fork():
        return False
    return _initialized_pid == os.getpid() or _native_flag("cuda_was_used")


def bad_fork_message(op):
    return (
        f"{op}: CUDA cannot be used in a process forked after its parent initialised CUDA (the child "
        "inherits a CUDA state it cannot use). Start worker processes with the 'spawn' or 'forkserver' "
        "start method: multiprocessing.get_context('spawn'), or DataLoader(..., "
        "multiprocessing_context='spawn'); adcuda's DataLoader picks 'spawn' by itself when CUDA is "
        "initialised before it starts its workers."
    )


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


# ---------------------------------------------------------------------------------------------
# the device query

# Hints for the CUDA errors people meet most when setting up a machine.
_ERROR_HINTS = {
    "cudaErrorInsufficientDriver": "no NVIDIA driver is installed, or it is older than this build's CUDA runtime needs",
    "cudaErrorNoDevice": "no NVIDIA GPU is visible to this process (check CUDA_VISIBLE_DEVICES)",
}


@dataclasses.dataclass(frozen=True)
class _CudaDeviceProperties:
    name: str
    major: int
    minor: int
    total_memory: int
    multi_processor_count: int
    warp_size: int
    max_threads_per_block: int
    shared_memory_per_block: int
    l2_cache_size: int
    pci_domain_id: int
    pci_bus_id: int
    pci_device_id: int

    def __repr__(self):
        return (
            f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // 2**20}MB, "
            f"multi_processor_count={self.multi_processor_count})"
        )


def kernel_image_for(major, minor, architectures):
    """How code built for ``architectures`` (CMake's list, e.g. ``["80-real", "90-virtual"]``) runs on a
    device of compute capability ``major.minor``.

    Returns ``(runs, how)``: ``runs`` is True, False, or None where the list cannot be read ahead of
    time (``"native"``, ``"all"``); ``how`` says which image the driver picks, or why there is none.
    Machine code for sm_XY runs on X.Y and later minors of the same major (``a`` variants only on X.Y
    itself); PTX for compute_XY is JIT-compiled by the driver for any device of capability >= X.Y.
    """
    capability = major * 10 + minor
    machine_code, ptx, unreadable = [], [], []
    for entry in architectures:
        match = re.fullmatch(r"(\d+)([af]?)(?:-(real|virtual))?", entry)
        if not match:
            unreadable.append(entry)
            continue
        arch, variant, kind = int(match[1]), match[2], match[3]
        name = f"{arch}{variant}"
        exact_only = variant == "a"
        runs_here = arch == capability or (not exact_only and arch <= capability)
        if kind != "virtual" and arch // 10 == major and runs_here:
            machine_code.append((arch, f"sm_{name} machine code"))
        if kind != "real" and (arch == capability or (not variant and arch <= capability)):
            ptx.append((arch, f"compute_{name} PTX, JIT-compiled by the driver on first use"))
    if machine_code:
        return True, max(machine_code)[1]
    if ptx:
        return True, max(ptx)[1]
    if unreadable:
        return None, f"unknown: the build's architectures {';'.join(architectures)} are resolved by the compiler"
    built = ", ".join(architectures) or "none"
    return False, (
        f"no code for sm_{capability}: this build has {built}; "
        f"rebuild with ADCUDA_CUDA_ARCHS={capability} pip install ."
    )


def _explain(reason):
    for error_name, hint in _ERROR_HINTS.items():
        if error_name in reason:
            return f"{reason} ({hint})"
    return reason


@functools.cache
def query():
    """``(device_count, reason)``, asked once per process. ``reason`` is None when at least one device
    can run this build's kernels.

    The native runtime asks the driver's management library (NVML), as PyTorch's NVML-based check
    does, so that asking does not initialise CUDA: a process may fork after ``is_available()`` and its
    children can still use the GPU. Where NVML cannot answer, the CUDA runtime is asked, which
    initialises it.
    """
    C = _native._C
    if C is None:
        return 0, (
            f"the native module adcuda._C could not be imported ({_native.IMPORT_ERROR}); "
            "install adcuda with pip to build it"
        )
    count, reason = C.cuda_device_count()
    if count == 0:
        return 0, _explain(reason)
    architectures = C.build_info()["cuda_architectures"]
    known = getattr(C, "cuda_visible_devices_without_initialising", lambda: None)()
    if known is None:
        known = [(props.name, props.major, props.minor) for props in map(device_properties, range(count))]
    verdicts = []
    for index, (name, major, minor) in enumerate(known):
        runs, how = kernel_image_for(major, minor, architectures)
        if runs is not False:
            return count, None
        verdicts.append(f"cuda:{index} {name} (compute capability {major}.{minor}): {how}")
    return count, "this build cannot run on any visible device: " + "; ".join(verdicts)


@functools.cache
def device_properties(index):
    return _CudaDeviceProperties(**_native._C.cuda_device_properties(index))


def is_available() -> bool:
    """Whether a CUDA device that can run this build's kernels is visible."""
    return query()[1] is None


def device_count() -> int:
    """The number of CUDA devices the runtime sees (0 without a driver, GPU or CUDA build)."""
    return query()[0]


def unavailable_reason() -> str | None:
    """Why CUDA cannot be used (the CUDA error from the driver, a build without CUDA, ...); None if it can."""
    return query()[1]


def require_cuda(op_name):
    """Raise DeviceError naming ``op_name`` and the reason unless CUDA is usable (BadForkError in a
    process forked after CUDA was initialised)."""
    global _usable
    if _usable:
        return
    check_not_forked(op_name)
    reason = unavailable_reason()
    if reason is not None:
        raise DeviceError(f"{op_name}: device 'cuda' requested but CUDA is not available: {reason}")
    _usable = True
