"""``adcuda.save`` / ``adcuda.load`` with PyTorch's formats and meaning.

``save`` writes PyTorch's zip checkpoint (``torch_format.py``), so ``torch.load`` reads it; ``load``
reads that format (files written by ``torch.save`` or ``adcuda.save``), adcuda's own earlier format
(``native.py``: JSON and raw bytes, never a pickle) and ``.safetensors`` files, telling them apart by
their first bytes. ``load(weights_only=True)``, the default as in PyTorch >= 2.6, unpickles with a
restricted machine that builds only tensors, containers, primitive values and allowlisted globals
(``safe_globals.py``); ``weights_only=False`` unpickles anything and is for trusted files only.

Saving to a path is atomic: the bytes go to a temporary file in the same folder, named
``.adcuda-tmp-<pid>-<random>-<name>``, which is synced and renamed over the target. A process killed
mid-save leaves that file behind; the next save into the folder removes the temporary files of
processes that no longer run (and, to survive a reused pid, of any whose file is older than the
target it was meant to replace and untouched for an hour). A live saver's file is never touched.
"""

from __future__ import annotations

import io
import os
import pickle
from typing import TYPE_CHECKING

from . import native, safetensors, torch_format
from .atomic import TEMP_PREFIX, _is_path, atomic_write, remove_stale_temporaries
from .native import CheckpointError
from .safe_globals import add_safe_globals, clear_safe_globals, get_safe_globals, safe_globals, user_allowed
from .unpickler import WeightsOnlyError, adcuda_global

if TYPE_CHECKING:
    from ..types import Any, BinaryIO, PathLike

__all__ = [
    "TEMP_PREFIX",
    "CheckpointError",
    "WeightsOnlyError",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "get_unsafe_globals_in_checkpoint",
    "load",
    "load_safetensors",
    "remove_stale_temporaries",
    "safe_globals",
    "save",
    "save_safetensors",
]

DEFAULT_PROTOCOL = 2


def save(
    obj: Any,
    f: str | PathLike[str] | BinaryIO,
    pickle_module: Any = None,
    pickle_protocol: int = DEFAULT_PROTOCOL,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
) -> None:
    """Write ``obj`` (tensors, state dicts, whole modules and optimizers: anything picklable) to ``f``
    (a path or a binary file object) in PyTorch's zip format, which ``torch.load`` reads. Tensors
    become PyTorch tensors there; adcuda's own classes (a whole module) need adcuda importable.
    ``_use_new_zipfile_serialization=False`` still writes the zip format (every PyTorch since 1.6
    reads it); ``pickle_module`` may only be Python's ``pickle``."""
    if pickle_module is not None and pickle_module is not pickle:
        raise CheckpointError(
            f"save: pickle_module={getattr(pickle_module, '__name__', pickle_module)!r} is not supported; adcuda "
            "writes PyTorch's format with Python's pickle"
        )
    if not isinstance(pickle_protocol, int) or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL:
        raise CheckpointError(f"save: pickle_protocol must be 2..{pickle.HIGHEST_PROTOCOL}, got {pickle_protocol!r}")
    archive = torch_format.archive_name_for(f)
    if _is_path(f):
        atomic_write(f, lambda out: torch_format.write(obj, out, archive, pickle_protocol))
        return
    if not hasattr(f, "write"):
        raise TypeError(f"save: expected a path or a binary file object, got {type(f).__name__}")
    if hasattr(f, "seek") and hasattr(f, "tell") and getattr(f, "seekable", lambda: True)():
        torch_format.write(obj, f, archive, pickle_protocol)
    else:  # zipfile seeks back to finish each record: build the archive in memory for a stream
        buffer = io.BytesIO()
        torch_format.write(obj, buffer, archive, pickle_protocol)
        f.write(buffer.getvalue())


def _kind(start: bytes) -> str:
    if start[: len(native.MAGIC)] == native.MAGIC or (start and native.MAGIC.startswith(start)):
        return "native"
    if start[:4] == b"PK\x03\x04":
        return "zip"
    if safetensors.looks_like_safetensors(start):
        return "safetensors"
    return "unknown"


def _unknown(label, start):
    if not start:
        return CheckpointError(f"load: {label} is empty")
    if start[:1] == b"\x80":
        return CheckpointError(
            f"load: {label} is a bare pickle (PyTorch's legacy format from before 1.6, or pickle.dump); adcuda "
            "reads PyTorch's zip format: re-save it with torch.save (default settings)"
        )
    if start[:2] == b"PK":
        return CheckpointError(f"load: {label} is a zip archive that is not a PyTorch checkpoint (damaged?)")
    if start[:6] == b"\x93NUMPY":
        return CheckpointError(
            f"load: {label} is a NumPy .npy file; read it with numpy.load and convert with adcuda.from_numpy"
        )
    return CheckpointError(
        f"load: {label} is not a checkpoint adcuda reads (PyTorch's zip format, adcuda's format, or safetensors)"
    )


def load(
    f: str | PathLike[str] | BinaryIO,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """Read a checkpoint written by ``adcuda.save`` or ``torch.save`` (or a ``.safetensors`` file, as a
    dict of tensors, or adcuda's earlier format). ``map_location``: a device or its name, a dict from
    saved device names to new ones, or a callable ``(cpu_tensor, saved_device_name) -> tensor``.
    ``weights_only`` (default True): admit only tensors, containers, primitive values and the globals
    ``add_safe_globals``/``safe_globals`` allow; False unpickles anything, so it can run code: use it
    for files you trust only. ``mmap=True`` (a path only) maps the tensors' bytes copy-on-write
    instead of reading them."""
    weights_only = True if weights_only is None else bool(weights_only)
    label = native._describe(f)
    if _is_path(f):
        try:
            fh = open(f, "rb")
        except FileNotFoundError:
            raise FileNotFoundError(f"load: no such checkpoint file: {label}") from None
        with fh:
            start = fh.read(16)
            fh.seek(0)
            return _read(fh, start, label, os.fsdecode(f), map_location, weights_only, bool(mmap), pickle_module)
    if mmap:
        raise CheckpointError("load: mmap=True needs a file path, not a file object")
    if not hasattr(f, "read"):
        raise TypeError(f"load: expected a path or a binary file object, got {type(f).__name__}")
    seekable = hasattr(f, "seek") and getattr(f, "seekable", lambda: True)()
    if seekable:
        position = f.tell()
        start = f.read(16)
        f.seek(position)
        source = f
    else:
        data = f.read()
        start, source = data[:16], io.BytesIO(data)
    return _read(source, start, label, None, map_location, weights_only, False, pickle_module)


def _read(source, start, label, path, map_location, weights_only, mmap, pickle_module):
    """``load`` from ``source`` positioned at the start of a checkpoint whose first bytes are ``start``;
    ``path``: the file's (None for a file object: native checkpoints are then read as a stream)."""
    kind = _kind(start)
    if kind == "native":
        return native._Reader(source, label, map_location, whole_file=path is not None).read()
    if kind == "zip":
        return torch_format.read(
            source,
            label,
            path=path,
            map_location=map_location,
            weights_only=weights_only,
            mmap=mmap,
            pickle_module=pickle_module,
        )
    if kind == "safetensors":
        return safetensors.read(source.read(), label, _safetensors_device(map_location))
    raise _unknown(label, start)


def _safetensors_device(map_location):
    if map_location is None or callable(map_location):
        return "cpu"
    if isinstance(map_location, dict):
        return map_location.get("cpu", "cpu")
    return map_location


def get_unsafe_globals_in_checkpoint(f: str | PathLike[str] | BinaryIO) -> list[str]:
    """The globals a PyTorch-format checkpoint names that ``load(weights_only=True)`` would refuse
    (neither on the default allowlist nor allowed by ``add_safe_globals``), without loading it: what to
    review before allowing them."""
    label = native._describe(f)
    source = open(f, "rb") if _is_path(f) else f
    try:
        names = torch_format.globals_in(source, label)
    finally:
        if source is not f:
            source.close()
    rebuilder = torch_format.Rebuilder(lambda pid: None, lambda *args: None)
    allowed = {**rebuilder.defaults(), **torch_format.NUMPY_DEFAULTS}
    user, user_named = get_safe_globals(), user_allowed()
    unsafe = []
    for name in names:
        if name in allowed or name in user_named:
            continue
        module, _, attr = name.rpartition(".")
        mapped = adcuda_global(module, attr)
        if mapped is None or not any(mapped is u for u in user):
            unsafe.append(name)
    return unsafe


def save_safetensors(
    tensors: dict[str, Any], filename: str | PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """Write a state dict (``{name: tensor}``) as ``.safetensors``: the ``safetensors`` package's
    ``save_file``, without needing the package."""
    safetensors.save_file(tensors, filename, metadata)


def load_safetensors(filename: str | PathLike[str], device: Any = "cpu") -> dict[str, Any]:
    """Read a ``.safetensors`` file into ``{name: tensor}`` on ``device`` (the package's ``load_file``)."""
    return safetensors.load_file(filename, device)
