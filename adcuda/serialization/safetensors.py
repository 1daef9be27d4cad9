"""``.safetensors`` files: a flat ``{name: tensor}`` dict, no code, readable by every framework.

Written and read by adcuda's own code (the format is an 8-byte little-endian header length, a JSON
header ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}`` and
the tensors' bytes), so the ``safetensors`` package is not needed; files it writes load here and the
reverse. Every offset is checked against the header and the data: tensors must tile the data exactly
(the format's own rule), so a damaged header cannot make a tensor read another's bytes. The format has
no checksum of its own: adcuda's files carry each tensor's CRC-32 in the header's metadata
(``"adcuda.crc32"``), verified on reading; files from elsewhere have none and are read unverified.
"""

from __future__ import annotations

import json
import math
import os
import struct
import warnings
import zlib
from typing import TYPE_CHECKING

import numpy as np  # host-side byte layout of the file only

from .. import dtypes as dt
from ..device import as_device
from ..factories import from_numpy
from ..tensor import Tensor
from .atomic import atomic_write
from .native import CheckpointError

if TYPE_CHECKING:
    from ..types import Any, PathLike

_MAX_HEADER = 100_000_000  # the safetensors package's own limit
CRC_KEY = "adcuda.crc32"
# safetensors dtype -> (NumPy type of the stored bytes, adcuda dtype); BF16 is stored as raw 16-bit words
_READ = {
    "F64": ("<f8", dt.float64),
    "F32": ("<f4", dt.float32),
    "F16": ("<f2", dt.float16),
    "BF16": ("<u2", dt.bfloat16),
    "I64": ("<i8", dt.int64),
    "I32": ("<i4", dt.int32),
    "I16": ("<i2", dt.int32),
    "I8": ("|i1", dt.int32),
    "U8": ("|u1", dt.int64),
    "BOOL": ("|b1", dt.bool_),
}
_WRITE = {
    dt.float64: "F64",
    dt.float32: "F32",
    dt.float16: "F16",
    dt.bfloat16: "BF16",
    dt.int64: "I64",
    dt.int32: "I32",
    dt.bool_: "BOOL",
}


def looks_like_safetensors(start: bytes) -> bool:
    """A header length that fits, then the JSON header's opening brace."""
    return len(start) >= 9 and struct.unpack("<Q", start[:8])[0] <= _MAX_HEADER and start[8:9] == b"{"


def save_file(
    tensors: dict[str, Tensor], filename: str | PathLike[str], metadata: dict[str, str] | None = None
) -> None:
    """Write a ``{name: tensor}`` dict as ``.safetensors`` (atomically, like ``adcuda.save``)."""
    atomic_write(filename, lambda fh: _write(tensors, fh, metadata))


def _write(tensors, fh, metadata):
    if not isinstance(tensors, dict) or not all(isinstance(k, str) for k in tensors):
        raise CheckpointError("save_file: expected a dict of str -> tensor")
    header: dict[str, Any] = {}
    if metadata is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise CheckpointError("save_file: metadata must map str to str")
    header["__metadata__"] = dict(metadata or {})
    blobs, offset, crcs = [], 0, {}
    for name, t in sorted(tensors.items()):
        if not isinstance(t, Tensor):
            raise CheckpointError(f"save_file: {name!r} is a {type(t).__name__}, not a tensor")
        if t.dtype not in _WRITE:
            raise CheckpointError(f"save_file: {name!r} has dtype {t.dtype}, which safetensors cannot hold")
        value = t.detach()
        if value.dtype is dt.bfloat16:
            array = (np.ascontiguousarray(value.float().cpu().numpy()).view("<u4") >> 16).astype("<u2")
        else:
            array = np.ascontiguousarray(value.cpu().numpy())
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
        raw = array.tobytes()
        header[name] = {
            "dtype": _WRITE[value.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        crcs[name] = zlib.crc32(raw)
        offset += len(raw)
    header["__metadata__"][CRC_KEY] = json.dumps(crcs, separators=(",", ":"))
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the package aligns the data to 8 bytes with spaces
    fh.write(struct.pack("<Q", len(text)) + text)
    for raw in blobs:
        fh.write(raw)


def load_file(filename: str | PathLike[str], device: Any = "cpu") -> dict[str, Tensor]:
    """Read a ``.safetensors`` file into a ``{name: tensor}`` dict on ``device``."""
    label = repr(os.fsdecode(filename))
    with open(filename, "rb") as fh:
        return read(fh.read(), label, device)


def _checksums(metadata, fail):
    """name -> CRC-32 from adcuda's metadata entry, or None for a file written elsewhere."""
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        fail("__metadata__ is not a JSON object")
    if CRC_KEY not in metadata:
        return None
    try:
        crcs = json.loads(metadata[CRC_KEY])
    except (TypeError, ValueError, RecursionError):
        fail("the checksum table in the metadata is damaged")
    if not isinstance(crcs, dict):
        fail("the checksum table in the metadata is damaged")
    return crcs


def read(data: bytes, label: str, device: Any = "cpu") -> dict[str, Tensor]:
    def fail(problem):
        raise CheckpointError(f"load: {label} is not a valid safetensors file: {problem}")

    if len(data) < 8:
        fail("truncated inside the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or 8 + n > len(data):
        fail(f"header length {n} does not fit the file of {len(data)} bytes")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        fail(f"the header is not valid JSON ({type(e).__name__})")
    if not isinstance(header, dict):
        fail("the header is not a JSON object")
    crcs = _checksums(header.pop("__metadata__", None), fail)
    body = memoryview(data)[8 + n :]
    target = as_device(device, "load_file")
    spans, out = [], {}
    for name, entry in header.items():
        try:
            stored, dtype = _READ[entry["dtype"]]
            shape = tuple(entry["shape"])
            begin, end = entry["data_offsets"]
            if not all(type(s) is int and s >= 0 for s in (*shape, begin, end)):
                raise ValueError("negative or non-integer sizes")
        except (KeyError, TypeError, ValueError) as e:
            fail(f"the entry of {name!r} is malformed ({type(e).__name__}: {e})")
        itemsize = np.dtype(stored).itemsize
        if end - begin != math.prod(shape) * itemsize or end > len(body):
            fail(f"{name!r}: offsets [{begin}, {end}) do not fit shape {shape} of {entry['dtype']}")
        spans.append((begin, end))
        if crcs is not None and crcs.get(name) != zlib.crc32(body[begin:end]):
            fail(f"the data of {name!r} does not match its checksum (the file is damaged)")
        array = np.frombuffer(body[begin:end], stored).reshape(shape).copy()
        if dtype is dt.bfloat16:
            t = from_numpy((array.astype("<u4") << 16).view("<f4"))
            if target.type == "cpu":
                warnings.warn(
                    f"load: {label}: {name!r} is bfloat16, which adcuda's CPU backend lacks; loaded as float32 "
                    "(exactly; load onto a CUDA device to keep bfloat16)",
                    stacklevel=3,
                )
                out[name] = t
            else:
                out[name] = t.to(target).to(dt.bfloat16)
            continue
        if array.dtype.str not in ("|b1", "<i4", "<i8", "<f2", "<f4", "<f8"):
            array = array.astype(dtype.numpy)
        out[name] = from_numpy(array.astype(array.dtype.newbyteorder("="), copy=False)).to(target)
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            fail("the tensors do not tile the data (a gap or an overlap)")
        position = end
    if position != len(body):
        fail(f"{len(body) - position} bytes after the last tensor")
    return out
