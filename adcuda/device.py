"""``adcuda.device``: where a tensor lives. Which backend computes there is
``adcuda.backends.backend_for(device)``'s answer (a layer above this one)."""

from __future__ import annotations

from .errors import DeviceError


class device:
    __slots__ = ("type", "index")

    def __init__(self, type: str | device, index: int | None = None) -> None:  # noqa: A002 (PyTorch's parameter name)
        if isinstance(type, device):
            self.type, self.index = type.type, type.index
            return
        if not isinstance(type, str):
            raise DeviceError(f"device: expected a string like 'cpu' or 'cuda:0', got {type!r}")
        name = type
        if ":" in name:
            name, _, idx = name.partition(":")
            if index is not None or not idx.isdigit():
                raise DeviceError(f"device: invalid device string {type!r}")
            index = int(idx)
        if name not in ("cpu", "cuda"):
            raise DeviceError(f"device: unknown device type {name!r} (expected 'cpu' or 'cuda')")
        if name == "cpu" and index not in (None, 0):
            raise DeviceError(f"device: cpu has no index {index}")
        self.type = name
        self.index = index if name == "cuda" else None

    def __repr__(self):
        return f"device(type='{self.type}'" + (f", index={self.index})" if self.index is not None else ")")

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.index or 0) == (other.index or 0)

    def __hash__(self):
        return hash((self.type, self.index or 0))

    def __reduce__(self):
        return (device, (str(self),))


CPU = device("cpu")


def as_device(value, op="tensor"):
    """Normalise a user's device argument; ``None`` means the CPU."""
    if value is None:
        return CPU
    if isinstance(value, device):
        dev = value
    elif isinstance(value, int) and not isinstance(value, bool):
        dev = device("cuda", value)
    else:
        dev = device(value)
    if dev.type == "cpu":
        return CPU
    return dev
