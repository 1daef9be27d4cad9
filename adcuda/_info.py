"""``adcuda.info()`` and ``python -m adcuda info``: how adcuda was built and what it sees at run time."""

from __future__ import annotations

import json
import platform
import sys
from typing import TYPE_CHECKING

from . import _native, cuda

if TYPE_CHECKING:
    from .types import Any

_KNOWN_BUILD_KEYS = ("cuda_compiled", "cuda_emulated", "cuda_version", "cuda_architectures", "compiler", "build_type")


class InfoReport(str):
    """The text of ``adcuda.info()``; shows as the report itself at the interactive prompt."""

    def __repr__(self):
        return str(self)


def _at_interactive_prompt():
    """Whether the caller is a Python or IPython/Jupyter prompt, which shows a returned value itself."""
    if hasattr(sys, "ps1") or sys.flags.interactive:
        return True
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


def _version_text(encoded):
    """The CUDA runtime's encoding (1000 * major + 10 * minor) as "13.0"; None for 0 (absent)."""
    if not encoded:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


def _adcuda_version():
    from importlib import metadata

    try:
        return metadata.version("adcuda")
    except metadata.PackageNotFoundError:
        return "unknown (not installed; running from a source checkout)"


def _numpy_version():
    try:
        import numpy
    except ImportError:
        return None
    return numpy.__version__


def _devices(architectures):
    devices = []
    for index in range(cuda.device_count()):
        props = cuda._properties(index)
        runs, how = cuda.kernel_image_for(props.major, props.minor, architectures)
        devices.append(
            {
                "index": index,
                "name": props.name,
                "compute_capability": f"{props.major}.{props.minor}",
                "total_memory": props.total_memory,
                "multi_processor_count": props.multi_processor_count,
                "build_runs_on_device": runs,
                "kernel_image": how,
            }
        )
    return devices


def _running_on(available, devices, reason):
    if available:
        first = next(d for d in devices if d["build_runs_on_device"] is not False)
        return f"cuda:{first['index']}", f"{first['name']} runs this build's kernels ({first['kernel_image']})"
    return "cpu", f"CUDA is not available: {reason}"


def _memory_state(available):
    """The caching allocator's and the pinned pool's counters where this process uses CUDA (None
    elsewhere: reading them must not initialise CUDA)."""
    if not (available and cuda.is_initialized()):
        return None, None
    allocator = {f"cuda:{index}": cuda.memory_stats(index) for index in range(cuda.device_count())}
    return allocator, cuda.pinned_memory_stats()


def _bytes_text(count):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024


def _gemm(cuda_compiled, available):
    """Which GEMM path ``matmul`` takes and why (None in a build without CUDA), and the hand-written
    kernels it falls back to on the current device (None without a usable one)."""
    if not cuda_compiled:
        return None, None
    from .backends.cuda import gemm as cuda_gemm

    try:
        selection = cuda_gemm.gemm_selection()
        path = {"path": selection.path, "reason": selection.reason}
    except (ValueError, RuntimeError) as error:  # a bad ADCUDA_GEMM, or ADCUDA_GEMM=cublaslt without it
        path = {"path": None, "reason": str(error)}
    return path, cuda_gemm.gemm_path() if available else None


def info(as_dict: bool = False) -> Any:
    """Print a report of the build (CUDA compiled? toolkit, architectures) and the run-time devices,
    and return its text.

    In a script ``adcuda.info()`` prints the report; at an interactive prompt (Python, IPython,
    Jupyter) it is not printed but shown as the returned value, so it appears once either way.
    ``print(adcuda.info())`` in a script shows it twice (the call cannot know that its value will be
    printed too): call it bare, or keep the text (``report = adcuda.info()``) to read it.
    ``as_dict=True`` returns the facts as a dict and prints nothing.
    """
    facts = _facts()
    if as_dict:
        return facts
    report = _report(facts)
    if not _at_interactive_prompt():
        print(report, flush=True)
    return report


def _facts():
    build = _native.build_info()
    C = _native._C
    available = cuda.is_available()
    reason = cuda.unavailable_reason()
    devices = _devices(build["cuda_architectures"])
    running_on, running_on_reason = _running_on(available, devices, reason)
    allocator, pinned_pool = _memory_state(available)
    gemm, gemm_kernels = _gemm(build["cuda_compiled"], available)
    return {
        "adcuda_version": _adcuda_version(),
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
        "numpy": _numpy_version(),
        "platform": platform.platform(),
        "native_module_loaded": build["native_module_loaded"],
        "native_module_path": getattr(C, "__file__", None),
        "native_import_error": build["native_import_error"],
        **{key: value for key, value in build.items() if key not in ("native_module_loaded", "native_import_error")},
        "cuda_driver_version": _version_text(C.cuda_driver_version()) if build["cuda_compiled"] else None,
        "cuda_runtime_version": _version_text(C.cuda_runtime_version()) if build["cuda_compiled"] else None,
        "cuda_available": available,
        "device_count": cuda.device_count(),
        "unavailable_reason": reason,
        "devices": devices,
        "running_on": running_on,
        "running_on_reason": running_on_reason,
        "cuda_initialized": cuda.is_initialized(),
        "allocator": allocator,
        "pinned_pool": pinned_pool,
        "gemm": gemm,
        "gemm_kernels": gemm_kernels,
    }


def _report(facts):
    build_keys = [
        key
        for key in _native.build_info()
        if key not in _KNOWN_BUILD_KEYS and key not in ("native_module_loaded", "native_import_error")
    ]
    return InfoReport(_format(facts, build_keys))


def _format(facts, extra_build_keys):
    lines = [
        f"adcuda {facts['adcuda_version']}",
        f"  Python {facts['python']}, NumPy {facts['numpy'] or 'not installed'}, {facts['platform']}",
        "build",
    ]
    if facts["native_module_loaded"]:
        lines.append(f"  native module: loaded ({facts['native_module_path']})")
    else:
        lines.append(f"  native module: NOT loaded ({facts['native_import_error']}); CPU-only")
    if facts.get("cuda_emulated"):
        lines.append(
            f"  CUDA compiled: EMULATED (ADCUDA_CUDA=EMULATE: the kernels run on the CPU emulator, for "
            f"tests; not a GPU build), toolkit headers {facts['cuda_version']}"
        )
    elif facts["cuda_compiled"]:
        lines.append(
            f"  CUDA compiled: yes, toolkit {facts['cuda_version']}, "
            f"architectures {';'.join(facts['cuda_architectures'])}"
        )
    else:
        lines.append("  CUDA compiled: no")
    if facts["native_module_loaded"]:
        lines.append(f"  compiler: {facts['compiler']}, build type {facts['build_type']}")
    for key in extra_build_keys:
        lines.append(f"  {key.replace('_', ' ')}: {facts[key]}")
    lines.append("runtime")
    if facts["cuda_compiled"]:
        lines.append(
            f"  CUDA driver: {facts['cuda_driver_version'] or 'none found'}, "
            f"CUDA runtime: {facts['cuda_runtime_version']}"
        )
    for device in facts["devices"]:
        lines.append(
            f"  cuda:{device['index']} {device['name']}, compute capability {device['compute_capability']}, "
            f"{device['total_memory'] / 2**30:.1f} GiB, {device['multi_processor_count']} SMs; "
            f"this build: {device['kernel_image']}"
        )
    if not facts["devices"]:
        lines.append("  devices: none")
    for name, stats in (facts["allocator"] or {}).items():
        lines.append(
            f"  allocator {name}: {_bytes_text(stats['allocated_bytes.all.current'])} allocated in "
            f"{stats['active.all.current']} blocks (peak {_bytes_text(stats['allocated_bytes.all.peak'])}), "
            f"{_bytes_text(stats['reserved_bytes.all.current'])} reserved in "
            f"{stats['segment.all.current']} segments ({stats['cached_blocks']} blocks cached), "
            f"{stats['cache_hits']} of {stats['allocation.all.allocated']} allocations from the cache, "
            f"{stats['num_ooms']} out of memory"
        )
    if facts["gemm"] is not None:
        lines.append(f"  GEMM: {facts['gemm']['reason']}")
    if facts["gemm_kernels"] is not None:
        lines.append(f"  GEMM kernels: {facts['gemm_kernels']}")
    if facts["pinned_pool"] is not None:
        pool = facts["pinned_pool"]
        lines.append(
            f"  pinned pool: {_bytes_text(pool['allocated_bytes'])} in use in {pool['active_blocks']} "
            f"blocks, {_bytes_text(pool['reserved_bytes'])} reserved, {pool['cache_hits']} of "
            f"{pool['allocations']} allocations from the pool"
        )
    if facts["running_on"] == "cpu":
        lines.append(f"running on: cpu (fp32 fallback) because {facts['running_on_reason']}")
    else:
        lines.append(f"running on: {facts['running_on']} ({facts['running_on_reason']})")
    return "\n".join(lines)


def print_info(file=None):
    print(_report(_facts()), file=file or sys.stdout)


def main_info(argv=None):
    """``python -m adcuda info [--json]``; returns the exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args not in ([], ["--json"]):
        print("usage: adcuda info [--json]", file=sys.stderr)
        return 2
    if args:
        print(json.dumps(info(as_dict=True), indent=2))
    else:
        print_info()
    return 0
