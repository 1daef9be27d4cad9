"""``adcuda.cuda``: CUDA devices, streams, events, memory and contexts, with PyTorch's names.

Where no device is usable (no GPU, no driver, a build without CUDA, or a GPU this build has no code
for), ``is_available()`` is False, ``unavailable_reason()`` says why, and every call that needs a
device raises ``adcuda.errors.DeviceError`` with that reason instead of crashing. The runtime beneath
(kernels/runtime/) gives each thread its own stream, caches device memory, and moves data between
host and device through a pinned-memory pool.

Modules: ``devices`` (query and control), ``streams`` (Stream, Event, current_stream, stream),
``memory`` (the caching allocator), ``pinned`` (the pinned pool), ``context`` (init_cuda_context),
``fork`` (fork safety), ``errors``, ``random`` (manual_seed, manual_seed_all), ``graphs`` (CUDA
graphs: CUDAGraph, graph, graph_pool_handle, make_graphed_callables). ``amp`` (the
``torch.cuda.amp`` aliases) sits above this package and is imported by ``adcuda``.
"""

from . import devices, memory
from .context import CudaContext, init_cuda_context
from .devices import (
    _device_index,
    _properties,
    _query,
    _require_cuda,
    current_device,
    device,
    device_count,
    get_device_capability,
    get_device_name,
    get_device_properties,
    is_available,
    kernel_image_for,
    mem_get_info,
    set_device,
    synchronize,
    unavailable_reason,
)
from .errors import BadForkError, DeviceIndexError, GraphCaptureError, OutOfMemoryError
from .fork import is_initialized
from .graphs import CUDAGraph, graph, graph_pool_handle, make_graphed_callables
from .memory import (
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    reset_max_memory_allocated,
    reset_peak_memory_stats,
)
from .pinned import empty_pinned_cache, pinned_memory_stats, reset_peak_pinned_memory_stats
from .random import initial_seed, manual_seed, manual_seed_all, seed
from .streams import (
    Event,
    ExternalStream,
    Stream,
    StreamContext,
    current_stream,
    default_stream,
    record_stream,
    set_stream,
    stream,
)

__all__ = [
    "is_initialized",
    "init_cuda_context",
    "CudaContext",
    "Stream",
    "ExternalStream",
    "Event",
    "StreamContext",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "pinned_memory_stats",
    "reset_peak_pinned_memory_stats",
    "empty_pinned_cache",
    "BadForkError",
    "DeviceIndexError",
    "record_stream",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "initial_seed",
    "CUDAGraph",
    "graph",
    "graph_pool_handle",
    "make_graphed_callables",
    "GraphCaptureError",
]
__all__ += devices.__all__
__all__ += memory.__all__
