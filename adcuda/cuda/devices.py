"""Query and control CUDA devices, with PyTorch's names.

Where no device is usable (no GPU, no driver, a build without CUDA, or a GPU this build has no code
for), ``is_available()`` is False, ``unavailable_reason()`` says why, and every call that needs a
device raises ``adcuda.errors.DeviceError`` with that reason instead of crashing.
"""
import dataclasses
import functools
import re

from .. import _native
from ..device import device as device_type
from ..errors import DeviceError
from .fork import check_not_forked

__all__ = [
    "is_available", "device_count", "unavailable_reason", "get_device_name", "get_device_properties",
    "get_device_capability", "current_device", "set_device", "synchronize", "device", "mem_get_info",
]

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
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // 2**20}MB, "
                f"multi_processor_count={self.multi_processor_count})")


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
    return False, (f"no code for sm_{capability}: this build has {built}; "
                   f"rebuild with ADCUDA_CUDA_ARCHS={capability} pip install .")


def _explain(reason):
    for error_name, hint in _ERROR_HINTS.items():
        if error_name in reason:
            return f"{reason} ({hint})"
    return reason


@functools.cache
def _query():
    """``(device_count, reason)``: asked once per process, since it initialises the CUDA runtime.

    ``reason`` is None when at least one device can run this build's kernels.
    """
    C = _native._C
    if C is None:
        return 0, (f"the native module adcuda._C could not be imported ({_native.IMPORT_ERROR}); "
                   "install adcuda with pip to build it")
    count, reason = C.cuda_device_count()
    if count == 0:
        return 0, _explain(reason)
    architectures = C.build_info()["cuda_architectures"]
    verdicts = []
    for index in range(count):
        props = _properties(index)
        runs, how = kernel_image_for(props.major, props.minor, architectures)
        if runs is not False:
            return count, None
        verdicts.append(f"cuda:{index} {props.name} (compute capability {props.major}.{props.minor}): {how}")
    return count, "this build cannot run on any visible device: " + "; ".join(verdicts)


@functools.cache
def _properties(index):
    return _CudaDeviceProperties(**_native._C.cuda_device_properties(index))


def is_available():
    """Whether a CUDA device that can run this build's kernels is visible."""
    return _query()[1] is None


def device_count():
    """The number of CUDA devices the runtime sees (0 without a driver, GPU or CUDA build)."""
    return _query()[0]


def unavailable_reason():
    """Why CUDA cannot be used (the CUDA error from the driver, a build without CUDA, ...); None if it can."""
    return _query()[1]


def _require_cuda(op_name):
    """Raise DeviceError naming ``op_name`` and the reason unless CUDA is usable (BadForkError in a
    process forked after CUDA was initialised)."""
    check_not_forked(op_name)
    reason = unavailable_reason()
    if reason is not None:
        raise DeviceError(f"{op_name}: device 'cuda' requested but CUDA is not available: {reason}")


def _device_index(device, op_name):
    """A valid device index from ``None`` (the current device), an int, ``"cuda"``/``"cuda:N"`` or an
    ``adcuda.device``."""
    _require_cuda(op_name)
    if device is None:
        return current_device()
    if isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        try:
            parsed = device_type(device)
        except DeviceError as exc:
            raise DeviceError(f"{op_name}: {exc}") from None
        if parsed.type != "cuda":
            raise DeviceError(f"{op_name}: expected a CUDA device, got '{parsed}'")
        if parsed.index is None:
            return current_device()
        index = parsed.index
    count = device_count()
    if not 0 <= index < count:
        raise DeviceError(f"{op_name}: invalid CUDA device index {index}; "
                          f"{count} device{'s' if count != 1 else ''} visible (cuda:0..cuda:{count - 1})")
    return index


def get_device_properties(device=None):
    """Name, compute capability, memory and SM count of a device (PyTorch's ``_CudaDeviceProperties``)."""
    return _properties(_device_index(device, "get_device_properties"))


def get_device_name(device=None):
    return _properties(_device_index(device, "get_device_name")).name


def get_device_capability(device=None):
    props = _properties(_device_index(device, "get_device_capability"))
    return props.major, props.minor


def current_device():
    """The calling thread's current CUDA device index."""
    _require_cuda("current_device")
    return _native._C.cuda_current_device()


def set_device(device):
    """Make ``device`` the calling thread's current CUDA device."""
    index = _device_index(device, "set_device")  # raises the clear error first where CUDA is unusable
    _native._C.cuda_set_device(index)


def synchronize(device=None):
    """Wait until all work queued on ``device`` (default: the current one) has finished."""
    index = _device_index(device, "synchronize")
    C = _native._C
    previous = C.cuda_current_device()
    if index == previous:
        C.cuda_synchronize()
        return
    C.cuda_set_device(index)
    try:
        C.cuda_synchronize()
    finally:
        C.cuda_set_device(previous)


class device:
    """``with adcuda.cuda.device(1):`` makes a device current for the block (PyTorch's
    ``torch.cuda.device``); ``None`` or a negative index leaves the current device as it is."""

    def __init__(self, device):
        self._index = None if device is None or (isinstance(device, int) and device < 0) else device
        self._previous = None

    def __enter__(self):
        if self._index is None:
            return self
        index = _device_index(self._index, "device")
        self._previous = current_device()
        if index != self._previous:
            _native._C.cuda_set_device(index)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            _native._C.cuda_set_device(self._previous)
            self._previous = None


def mem_get_info(device=None):
    """``(free, total)`` bytes of device memory, as the driver reports them (all processes together)."""
    index = _device_index(device, "mem_get_info")  # first: a host-only _C has no memory_info to look up
    return tuple(_native._C.memory_info(index))
