"""Host arrays in adcuda's pinned-memory pool (kernels/runtime/pinned_pool.h): the part of the pool the
CUDA backend's host<->device copies need. It lives under the backends so that they need nothing from
``adcuda.cuda``, a layer above; ``adcuda.cuda.pinned`` builds the public API on it (the availability
and fork checks, the statistics). A pool block returns to the pool when the last array over it goes,
and is reused only after every copy queued on it has completed.

``adcuda._C`` is looked up when a helper runs, so importing this module never needs CUDA. The native
pool itself refuses (``BadForkError``) in a process forked after CUDA was initialised.
"""

import numpy as np

from .. import _native


def pinned_host_array(shape, dtype):
    """An uninitialised C-contiguous NumPy array of ``shape`` and NumPy ``dtype`` over a pool block
    (an ordinary array when it has no elements)."""
    dtype = np.dtype(dtype)
    count = 1
    for size in shape:
        count *= int(size)
    if count == 0:
        return np.empty(shape, dtype)
    memory = _native._C.PinnedMemory(count * dtype.itemsize)
    return np.frombuffer(memory, dtype=dtype, count=count).reshape(shape)


def in_pinned_pool(array):
    """Whether ``array``'s memory lies in a block of the pool."""
    return array.size > 0 and _native._C.is_pool_pinned(array.__array_interface__["data"][0])
