"""``adcuda.save`` / ``adcuda.load``: checkpoints that never execute code when read.

A checkpoint holds tensors and nested dicts, lists and tuples of tensors, NumPy arrays (numbers and
bools only), numbers (NumPy's too), strings, bools and None (model, optimizer and grad-scaler state
dicts). A module is not saved whole (that would need pickle): save its ``state_dict()``. The file is::

    preamble  8-byte magic b"ADCUDA\\x00\\x01" | header length (u64 LE) | header CRC-32 (u32 LE) | 4 zero bytes
    header    UTF-8 JSON: {"format", "version", "tree", "tensors": [{dtype, storage, shape, device,
              requires_grad, parameter, offset, nbytes, crc32}, ...], "data_size"}; a NumPy array's
              entry is {numpy (its dtype's str, e.g. "<f8"), shape, offset, nbytes, crc32}
    data      each tensor's raw little-endian bytes, 64-byte aligned, starting at the first 64-byte
              boundary after the header

The tree is JSON with tagged containers ({"t": "dict", "items": [[key, value], ...]} keeps non-string
keys such as optimizer parameter indices; tuples, lists and tensors are tagged too), so loading is
parsing plus copying bytes: no pickle, no imports chosen by the file. Every length, offset and
checksum is verified, and a damaged, truncated or foreign file raises ``CheckpointError`` naming
the file and what is wrong. Saving to a path writes a temporary file in the same directory, syncs
it and renames it over the target, so a crash never leaves a half-written checkpoint.
"""

from __future__ import annotations

import collections
import json
import math
import os
import struct
import tempfile
import zlib
from typing import TYPE_CHECKING

import numpy as np  # host-side byte layout of the file only; tensors come back through the factories

from .. import dtypes as dt
from ..device import as_device
from ..device import device as Device
from ..errors import AdcudaError, DeviceError
from ..factories import from_numpy
from ..nn.modules.module import Module
from ..nn.parameter import Parameter
from ..tensor import Tensor

if TYPE_CHECKING:
    from ..types import Any, BinaryIO, PathLike

MAGIC = b"ADCUDA\x00\x01"
FORMAT = "adcuda-checkpoint"
VERSION = 1
_PREAMBLE = struct.Struct("<8sQI4x")
_ALIGN = 64
_MAX_HEADER = 1 << 31
_DTYPE_NAMES = frozenset(d.name for d in dt.ALL)
_NUMPY_KINDS = "biufc"  # the NumPy arrays a checkpoint holds: bools and numbers (never objects)


class CheckpointError(AdcudaError, RuntimeError):
    """A checkpoint that cannot be read (damaged, truncated, foreign) or an object that cannot be saved."""


def _align(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _describe(f):
    """How an error names the checkpoint: its path, or the file object's name or type."""
    if isinstance(f, (str, bytes, os.PathLike)):
        return repr(os.fsdecode(f))
    name = getattr(f, "name", None)
    return repr(name) if isinstance(name, str) else f"<{type(f).__name__}>"


# ---------------------------------------------------------------------------------------------
# saving
class _Encoder:
    """Turns the object tree into JSON-ready nodes and collects its tensors (each stored once)."""

    def __init__(self):
        self.tensors = []
        self._index_of = {}

    def encode(self, obj, where):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, np.bool_):
            return bool(obj)
        if isinstance(obj, (int, np.integer)):
            return int(obj)
        if isinstance(obj, (float, np.floating)):
            value = float(obj)
            return value if math.isfinite(value) else {"t": "float", "v": repr(value)}
        if isinstance(obj, Tensor):
            return {"t": "tensor", "i": self._tensor_index(obj)}
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in _NUMPY_KINDS:
                raise CheckpointError(
                    f"save: cannot store a NumPy array of dtype {obj.dtype} at {where}; a "
                    "checkpoint holds arrays of numbers and bools"
                )
            return {"t": "ndarray", "i": self._tensor_index(obj)}
        if isinstance(obj, Module):
            raise CheckpointError(
                f"save: cannot store a whole module ({type(obj).__name__}) at {where}: adcuda "
                "never pickles; save its state_dict() instead (adcuda.save(model.state_dict(), "
                "path)) and load it into a new model with model.load_state_dict(adcuda.load(path))"
            )
        if isinstance(obj, dict):
            kind = "odict" if isinstance(obj, collections.OrderedDict) else "dict"
            return {
                "t": kind,
                "items": [[self._encode_key(k, where), self.encode(v, f"{where}[{k!r}]")] for k, v in obj.items()],
            }
        if isinstance(obj, tuple):  # a namedtuple comes back as a plain tuple
            return {"t": "tuple", "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return {"t": "list", "items": [self.encode(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, dt.dtype):
            return {"t": "dtype", "name": obj.name}
        if isinstance(obj, Device):
            return {"t": "device", "name": str(obj)}
        raise CheckpointError(
            f"save: cannot store an object of type {type(obj).__name__} at {where}; a checkpoint "
            "holds tensors, NumPy arrays, dicts, lists, tuples, numbers, strings, bools, None, "
            "dtypes and devices"
        )

    def _encode_key(self, key, where):
        if key is None or isinstance(key, (bool, str, int, float, np.integer, np.floating)):
            return self.encode(key, where)
        if isinstance(key, tuple):
            return self.encode(key, where)
        raise CheckpointError(f"save: cannot store a dict key of type {type(key).__name__} in {where}")

    def _tensor_index(self, t):
        index = self._index_of.get(id(t))
        if index is None:
            index = self._index_of[id(t)] = len(self.tensors)
            self.tensors.append(t)
        return index


def _host_array(t):
    """(little-endian contiguous NumPy array, storage dtype name) of a tensor on any device."""
    value = t.detach()
    storage = value.dtype
    if storage.numpy is None:  # e.g. bfloat16, which NumPy cannot hold: stored widened to fp32
        value, storage = value.float(), dt.float32
    array = np.asarray(value.cpu().numpy(), order="C")  # (ascontiguousarray would make 0-d arrays 1-d)
    return array.astype(array.dtype.newbyteorder("<"), copy=False), storage.name


def _serialize(obj):
    """(preamble + header + padding, [tensor byte buffers with their padding])."""
    encoder = _Encoder()
    tree = encoder.encode(obj, "obj")
    entries, blobs, offset = [], [], 0
    for t in encoder.tensors:
        if isinstance(t, np.ndarray):
            array = np.ascontiguousarray(t).reshape(t.shape)
            array = array.astype(array.dtype.newbyteorder("<"), copy=False)
            raw = memoryview(array).cast("B") if array.size else b""
            entries.append(
                {
                    "numpy": array.dtype.str,
                    "shape": list(array.shape),
                    "offset": offset,
                    "nbytes": len(raw),
                    "crc32": zlib.crc32(raw),
                }
            )
        else:
            array, storage = _host_array(t)
            raw = memoryview(array).cast("B") if array.size else b""
            entries.append(
                {
                    "dtype": t.dtype.name,
                    "storage": storage,
                    "shape": list(array.shape),
                    "device": str(t.device),
                    "requires_grad": bool(t.requires_grad),
                    "parameter": type(t) is Parameter,
                    "offset": offset,
                    "nbytes": len(raw),
                    "crc32": zlib.crc32(raw),
                }
            )
        padding = _align(offset + len(raw)) - offset - len(raw)
        blobs.append((raw, padding))
        offset += len(raw) + padding
    header = json.dumps(
        {"format": FORMAT, "version": VERSION, "tree": tree, "tensors": entries, "data_size": offset},
        separators=(",", ":"),
        allow_nan=False,
    ).encode("utf-8")
    head = _PREAMBLE.pack(MAGIC, len(header), zlib.crc32(header)) + header
    return head + b"\x00" * (_align(len(head)) - len(head)), blobs


def _write(f, head, blobs):
    f.write(head)
    for raw, padding in blobs:
        f.write(raw)
        if padding:
            f.write(b"\x00" * padding)


def save(
    obj: Any,
    f: str | PathLike[str] | BinaryIO,
    pickle_module: Any = None,
    pickle_protocol: int | None = None,
    _use_new_zipfile_serialization: bool = True,
) -> None:
    """Write ``obj`` to ``f`` (a path or a binary file object). Pickle options are accepted for
    PyTorch compatibility and ignored: adcuda checkpoints are never pickles."""
    head, blobs = _serialize(obj)
    if not isinstance(f, (str, bytes, os.PathLike)):
        if not hasattr(f, "write"):
            raise TypeError(f"save: expected a path or a binary file object, got {type(f).__name__}")
        _write(f, head, blobs)
        return
    path = os.path.abspath(os.fsdecode(f))
    directory, name = os.path.split(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    _replace_through(tmp, path, lambda: os.fdopen(fd, "wb"), lambda out: _write(out, head, blobs))
    _fsync_directory(directory)


def _replace_through(tmp, path, open_tmp, write):
    """``write`` the file ``open_tmp()`` opens (the temporary ``tmp``), sync it and rename it over
    ``path``; the temporary is removed where anything fails."""
    try:
        with open_tmp() as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _fsync_directory(directory):
    """Make the rename itself durable where the platform allows opening a directory."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------
# loading
def _foreign_hint(start):
    if start[:2] == b"PK":
        return (
            "it is a zip archive (a PyTorch torch.save checkpoint or a NumPy .npz?); adcuda.load reads only "
            "files written by adcuda.save"
        )
    if start[:1] == b"\x80":
        return (
            "it looks like a pickle; adcuda.load never unpickles, because unpickling can execute code. Load "
            "it with the program that wrote it and re-save its tensors with adcuda.save"
        )
    if start[:6] == b"\x93NUMPY":
        return "it is a NumPy .npy file; read it with numpy.load and convert with adcuda.from_numpy"
    return "it does not start with the adcuda checkpoint signature"


def _read_exact(f, n, what, fail):
    data = f.read(n)
    if data is None or len(data) != n:
        fail(f"truncated: expected {n} bytes of {what}, found {0 if not data else len(data)}")
    return data


class _Reader:
    def __init__(self, f, label, map_location, whole_file):
        self.f = f
        self.label = label
        self.map_location = map_location
        self.whole_file = whole_file  # a path: nothing may follow the data (a stream may go on)

    def fail(self, problem):
        raise CheckpointError(f"load: {self.label} is not a valid adcuda checkpoint: {problem}")

    def read(self):
        start = self.f.read(_PREAMBLE.size)
        if not start:
            self.fail("the file is empty")
        if len(start) < len(MAGIC) and MAGIC.startswith(start):
            self.fail(f"truncated inside the {_PREAMBLE.size}-byte preamble")
        if start[: len(MAGIC)] != MAGIC:
            self.fail(_foreign_hint(start))
        if len(start) != _PREAMBLE.size:
            self.fail(f"truncated inside the {_PREAMBLE.size}-byte preamble")
        _, header_len, header_crc = _PREAMBLE.unpack(start)
        if header_len > _MAX_HEADER:
            self.fail(f"header length {header_len} is implausible (damaged preamble)")
        header_bytes = _read_exact(self.f, header_len, "header", self.fail)
        if zlib.crc32(header_bytes) != header_crc:
            self.fail("the header's checksum does not match (the file is damaged)")
        header = self._parse_header(header_bytes)
        head_size = _PREAMBLE.size + header_len
        _read_exact(self.f, _align(head_size) - head_size, "header padding", self.fail)
        arrays = self._read_tensors(header["tensors"], header["data_size"])
        tensors = [
            array if "numpy" in entry else self._tensor(entry, array) for entry, array in zip(header["tensors"], arrays)
        ]
        return self._decode(header["tree"], tensors)

    def _parse_header(self, header_bytes):
        try:
            header = json.loads(header_bytes.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as e:
            self.fail(f"the header is not valid JSON ({type(e).__name__}: {e})")
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            self.fail("the header does not describe an adcuda checkpoint")
        if header.get("version") != VERSION:
            self.fail(
                f"format version {header.get('version')!r} is not supported by this adcuda (it reads version {VERSION})"
            )
        if not isinstance(header.get("tensors"), list) or not isinstance(header.get("data_size"), int):
            self.fail("the header lacks its tensor table")
        return header

    def _check_entry(self, i, entry, expected_offset):
        """(dtype, NumPy dtype of the stored bytes, shape) of entry ``i``; dtype is None for a NumPy array."""
        if "numpy" in entry:
            return self._check_array_entry(i, entry, expected_offset)
        try:
            if entry["storage"] not in _DTYPE_NAMES or entry["dtype"] not in _DTYPE_NAMES:
                raise ValueError(f"unknown dtype {entry['dtype']!r} stored as {entry['storage']!r}")
            storage = dt.as_dtype(entry["storage"], "load")
            dtype = dt.as_dtype(entry["dtype"], "load")
            if entry["requires_grad"] and not dtype.is_floating_point:
                raise ValueError(f"a {dtype.name} tensor cannot require grad")
            shape = tuple(entry["shape"])
            if not all(isinstance(s, int) and s >= 0 for s in shape):
                raise ValueError(f"bad shape {shape}")
            numel = math.prod(shape)
            if entry["offset"] != expected_offset or entry["nbytes"] != numel * storage.itemsize:
                raise ValueError(
                    f"offset/size {entry['offset']}/{entry['nbytes']} do not fit shape {shape} of {storage.name}"
                )
            if storage.numpy is None or not isinstance(entry["crc32"], int):
                raise ValueError(f"storage dtype {storage.name} cannot hold data")
            Device(entry["device"])
            return dtype, np.dtype(storage.numpy).newbyteorder("<"), shape
        except (KeyError, TypeError, ValueError, AdcudaError) as e:
            self.fail(f"tensor {i} is described wrongly in the header ({e})")

    def _check_array_entry(self, i, entry, expected_offset):
        try:
            stored = np.dtype(entry["numpy"])  # a dtype string such as "<f8": parsed, never evaluated
            if stored.kind not in _NUMPY_KINDS or stored.byteorder == ">":
                raise ValueError(f"unsupported array dtype {entry['numpy']!r}")
            shape = tuple(entry["shape"])
            if not all(isinstance(s, int) and s >= 0 for s in shape):
                raise ValueError(f"bad shape {shape}")
            if entry["offset"] != expected_offset or entry["nbytes"] != math.prod(shape) * stored.itemsize:
                raise ValueError(
                    f"offset/size {entry['offset']}/{entry['nbytes']} do not fit shape {shape} of {stored}"
                )
            if not isinstance(entry["crc32"], int):
                raise ValueError("no checksum")
            return None, stored, shape
        except (KeyError, TypeError, ValueError) as e:
            self.fail(f"array {i} is described wrongly in the header ({e})")

    def _read_tensors(self, entries, data_size):
        arrays, offset = [], 0
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict):
                self.fail(f"tensor {i} is described wrongly in the header")
            _, stored, shape = self._check_entry(i, entry, offset)
            array = np.empty(shape, stored)
            if entry["nbytes"]:
                view = memoryview(array).cast("B")
                got = self.f.readinto(view) if hasattr(self.f, "readinto") else None
                if got is None:
                    data = self.f.read(entry["nbytes"])
                    got = len(data)
                    view[:got] = data
                if got != entry["nbytes"]:
                    self.fail(f"truncated: tensor {i} needs {entry['nbytes']} bytes, only {got} remain")
                if zlib.crc32(view) != entry["crc32"]:
                    self.fail(
                        f"the data of tensor {i} (shape {shape}) does not match its checksum (the file is damaged)"
                    )
            padding = _align(offset + entry["nbytes"]) - offset - entry["nbytes"]
            _read_exact(self.f, padding, f"padding after tensor {i}", self.fail)
            offset += entry["nbytes"] + padding
            arrays.append(array.astype(array.dtype.newbyteorder("="), copy=False))
        if offset != data_size:
            self.fail(f"the header announces {data_size} bytes of tensor data but describes {offset}")
        if self.whole_file and self.f.read(1):
            self.fail("unexpected bytes after the last tensor")
        return arrays

    def _target_device(self, saved):
        loc = self.map_location
        if loc is None:
            return saved
        if isinstance(loc, dict):
            return loc.get(saved, saved)
        return str(as_device(loc, "load"))

    def _tensor(self, entry, array):
        t = from_numpy(array)
        if callable(self.map_location):
            t = self.map_location(t, entry["device"])
        else:
            target = self._target_device(entry["device"])
            try:
                t = t.to(target)
            except DeviceError as e:
                raise DeviceError(
                    f"load: {self.label} holds a tensor saved on {entry['device']}, which cannot be "
                    f"used here ({e}); pass map_location='cpu' to load it onto the CPU"
                ) from None
        if entry["dtype"] != entry["storage"]:
            t = t.to(dtype=dt.as_dtype(entry["dtype"]))
        if entry.get("parameter"):
            return Parameter(t, requires_grad=bool(entry["requires_grad"]))
        if entry["requires_grad"]:
            t.requires_grad_(True)
        return t

    def _decode(self, node, tensors):
        def decode(n):
            if n is None or isinstance(n, (bool, int, float, str)):
                return n
            if not isinstance(n, dict):
                self.fail(f"unexpected {type(n).__name__} in the object tree")
            kind = n.get("t")
            items = n.get("items", [])
            if not isinstance(items, list):
                self.fail(f"the items of a {kind!r} node in the object tree are not a list")
            if kind in ("tensor", "ndarray"):
                i = n.get("i")
                if (
                    not isinstance(i, int)
                    or not 0 <= i < len(tensors)
                    or isinstance(tensors[i], np.ndarray) != (kind == "ndarray")
                ):
                    self.fail(f"the object tree refers to {kind} {i!r}, which the file does not hold")
                return tensors[i]
            if kind in ("dict", "odict"):
                out = collections.OrderedDict() if kind == "odict" else {}
                for item in items:
                    if not isinstance(item, list) or len(item) != 2:
                        self.fail("a dict entry in the object tree is malformed")
                    out[_hashable(decode(item[0]), self.fail)] = decode(item[1])
                return out
            if kind == "list":
                return [decode(x) for x in items]
            if kind == "tuple":
                return tuple(decode(x) for x in items)
            if kind == "float" and n.get("v") in ("nan", "inf", "-inf"):
                return float(n["v"])
            if kind == "dtype" and n.get("name") in _DTYPE_NAMES:
                return dt.as_dtype(n["name"])
            if kind == "device" and isinstance(n.get("name"), str):
                try:
                    return Device(n["name"])
                except DeviceError:
                    self.fail(f"the object tree holds an invalid device name {n['name']!r}")
            self.fail(f"unknown node {str(n)[:80]} in the object tree")

        try:
            return decode(node)
        except RecursionError:
            self.fail("the object tree is nested too deeply")


def _hashable(key, fail):
    try:
        hash(key)
    except TypeError:
        fail(f"a dict key of type {type(key).__name__} in the object tree is not hashable")
    return key


def load(
    f: str | PathLike[str] | BinaryIO,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool = True,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """Read an object written by ``adcuda.save``. ``map_location``: a device (or its name), a dict
    mapping saved device names to new ones, or a callable ``(cpu_tensor, saved_device_name) ->
    tensor``. Nothing in the file is executed, whatever ``weights_only`` says."""
    if isinstance(f, (str, bytes, os.PathLike)):
        label = _describe(f)
        try:
            with open(f, "rb") as fh:
                return _Reader(fh, label, map_location, whole_file=True).read()
        except FileNotFoundError:
            raise FileNotFoundError(f"load: no such checkpoint file: {label}") from None
    if not hasattr(f, "read"):
        raise TypeError(f"load: expected a path or a binary file object, got {type(f).__name__}")
    return _Reader(f, _describe(f), map_location, whole_file=False).read()
