"""``DevicePrefetcher``: batches that are already on the GPU when the training step asks for them.

While the caller trains on one batch, the next one's host->device copy is queued on a side stream
(asynchronous from pinned memory: use ``DataLoader(..., pin_memory=True)``). The caller's stream needs
no explicit wait: the runtime orders the first kernel that reads a copied tensor after the copy (an
event wait, see kernels/runtime/device_array.h).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ... import cuda
from ...device import as_device
from ...tensor import Tensor

if TYPE_CHECKING:
    from ...types import Any, Device, Iterable

__all__ = ["DevicePrefetcher"]


def _to_device(data, device, non_blocking):
    if isinstance(data, Tensor):
        return data.to(device, non_blocking=non_blocking)
    if isinstance(data, dict):
        return type(data)({k: _to_device(v, device, non_blocking) for k, v in data.items()})
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(_to_device(v, device, non_blocking) for v in data))
    if isinstance(data, (list, tuple)):
        return type(data)(_to_device(v, device, non_blocking) for v in data)
    return data


class DevicePrefetcher:
    """Iterate over ``loader`` (any iterable of batches: tensors, or tuples, lists, dicts and named
    tuples of them) with every tensor moved to ``device``, one batch ahead on a side stream. On the
    CPU it just moves the batches."""

    def __init__(self, loader: Iterable[Any], device: Device | str = "cuda", non_blocking: bool = True) -> None:
        self.loader = loader
        self.device = as_device(device, "DevicePrefetcher")
        self.non_blocking = non_blocking
        if self.device.type == "cuda":
            cuda._require_cuda("DevicePrefetcher")

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        batches = iter(self.loader)
        if self.device.type != "cuda":
            for batch in batches:
                yield _to_device(batch, self.device, self.non_blocking)
            return
        side = cuda.Stream(self.device)
        end = object()

        def copy_next():
            batch = next(batches, end)
            if batch is end:
                return end
            with cuda.stream(side):
                return _to_device(batch, self.device, self.non_blocking)

        upcoming = copy_next()
        while upcoming is not end:
            current, upcoming = upcoming, copy_next()
            yield current
