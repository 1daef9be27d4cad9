"""PyTorch's checkpoint format, written and read by adcuda's own code (no torch import).

A ``torch.save`` file is a zip archive (every record stored, not compressed, and 64-byte aligned so it
can be memory-mapped) under one folder ``<name>/``::

    <name>/data.pkl                 the object, pickled (protocol 2); each tensor is
                                    torch._utils._rebuild_tensor_v2(storage, offset, size, stride,
                                    requires_grad, OrderedDict()), its storage a persistent id
                                    ("storage", torch.FloatStorage, "<key>", "cpu", numel)
    <name>/.format_version          "1"
    <name>/.storage_alignment       "64"
    <name>/byteorder                "little"
    <name>/data/<key>               each storage's raw bytes
    <name>/version                  "3"
    <name>/.data/serialization_id   an id of this save

Tensors that view one storage (a tensor and its transpose or slice) are written once and come back
sharing it. The zip's CRC-32 of every record is verified on reading (except with ``mmap=True``, which
maps the stored bytes without reading them).
"""

from __future__ import annotations

import collections
import io
import math
import os
import pickle
import pickletools
import struct
import uuid
import warnings
import zipfile
import zlib
from typing import TYPE_CHECKING

import numpy as np  # host-side byte layout of the file only; tensors come back through the factories

from .. import dtypes as dt
from ..device import as_device
from ..device import device as Device
from ..errors import AdcudaError, DeviceError
from ..factories import from_numpy
from ..nn.parameter import Parameter
from ..tensor import Size, Tensor
from . import safe_globals as sg
from .native import CheckpointError
from .unpickler import (
    NUMPY_DEFAULTS,
    STORAGE_OF_DTYPE,
    FullUnpickler,
    Rebuilder,
    RestrictedUnpickler,
    StorageType,
    decode_ascii,
)

if TYPE_CHECKING:
    from ..types import Any, BinaryIO

ALIGNMENT = 64
_MAX_NUMEL = 1 << 48
_PICKLE_PROTOCOL = 2  # torch.save's default; what PyTorch's weights-only unpickler expects


# ------------------------------------------------------------------------------------------ saving
class _Global:
    """A name a pickle refers to (``torch._utils._rebuild_tensor_v2``) without importing its module."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __call__(self, *args):  # pickle's save_reduce asks that a reduce's function be callable
        raise CheckpointError(f"{self.module}.{self.name} is a name written into a checkpoint, not a function")


class _StorageRef:
    """One storage record: its key, the bytes to write, its storage type and device."""

    def __init__(self, key, array, type_name, location):
        self.key, self.array, self.type_name, self.location = key, array, type_name, location


def _root_array(a):
    """The NumPy array that owns ``a``'s memory (the last array in its ``.base`` chain; an
    ``as_strided`` view's chain passes through a non-array holder whose ``base`` is the array)."""
    while True:
        base = a.base
        if not isinstance(base, np.ndarray):
            base = getattr(base, "base", None)
        if not isinstance(base, np.ndarray):
            return a
        a = base


class _Storages:
    """Assigns storages to tensors: one per NumPy buffer on the CPU (views share it), else a copy."""

    def __init__(self):
        self.refs: list[_StorageRef] = []
        self._by_root: dict[int, tuple[_StorageRef, np.ndarray]] = {}

    def _new(self, array, type_name, location):
        ref = _StorageRef(str(len(self.refs)), array, type_name, location)
        self.refs.append(ref)
        return ref

    def place(self, t: Tensor):
        """(storage ref, offset, size, stride) of tensor ``t``."""
        t = t.detach()
        type_name = STORAGE_OF_DTYPE.get(t.dtype)
        if type_name is None:
            raise CheckpointError(f"save: adcuda cannot write a {t.dtype} tensor in PyTorch's format")
        size = tuple(t.shape)
        if t.device.type == "cpu" and t.dtype.numpy is not None:
            shared = self._view_of_root(t._data, type_name)
            if shared is not None:
                return shared
        if t.dtype is dt.bfloat16:  # widened exactly to float32, then its upper 16 bits are bfloat16's
            bits = np.ascontiguousarray(t.float().cpu().numpy()).view("<u4")
            array = (bits >> 16).astype("<u2")
        else:
            array = np.ascontiguousarray(t.cpu().numpy(force=True))
        stride = _contiguous_strides(size)
        # PyTorch names a CUDA storage's location with its index ("cuda:0"), which map_location dicts
        # match; adcuda's device "cuda" is cuda:0 (device equality says so)
        location = "cpu" if t.device.type == "cpu" else f"{t.device.type}:{t.device.index or 0}"
        return self._new(array.reshape(-1), type_name, location), 0, size, stride

    def _view_of_root(self, data, type_name):
        root = _root_array(data)
        itemsize = data.itemsize
        if root.dtype != data.dtype or not root.flags.c_contiguous or data.dtype.byteorder == ">":
            return None
        start = root.__array_interface__["data"][0]
        offset_bytes = data.__array_interface__["data"][0] - start
        if offset_bytes % itemsize or any(s % itemsize or s < 0 for s in data.strides):
            return None  # negative (flipped) or unaligned strides: PyTorch's strides cannot say them
        stride = tuple(s // itemsize for s in data.strides) if data.size else _contiguous_strides(data.shape)
        entry = self._by_root.get(id(root))
        if entry is None or entry[1] is not root:
            entry = (self._new(root.reshape(-1), type_name, "cpu"), root)
            self._by_root[id(root)] = entry
        return entry[0], offset_bytes // itemsize, tuple(data.shape), stride


def _contiguous_strides(size):
    strides, step = [], 1
    for n in reversed(size):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


class _TorchPickler(pickle._Pickler):  # the Python pickler: its dispatch table takes our GLOBAL writer
    dispatch = dict(pickle._Pickler.dispatch)

    def __init__(self, file, storages: _Storages, protocol: int):
        super().__init__(file, protocol=protocol)
        self.storages = storages
        self._globals: dict[tuple[str, str], _Global] = {}

    def named(self, module, name):
        key = (module, name)
        if key not in self._globals:  # one object per name, so the memo writes each GLOBAL once
            self._globals[key] = _Global(module, name)
        return self._globals[key]

    def persistent_id(self, obj):
        if type(obj) is _StorageRef:
            numel = obj.array.size
            return ("storage", self.named("torch", obj.type_name), obj.key, obj.location, numel)
        return None

    def save_torch_global(self, obj):
        self.write(pickle.GLOBAL + f"{obj.module}\n{obj.name}\n".encode())
        self.memoize(obj)

    dispatch[_Global] = save_torch_global

    def save_tensor(self, obj):
        ref, offset, size, stride = self.storages.place(obj)
        args = (ref, offset, size, stride, bool(obj.requires_grad), collections.OrderedDict())
        self.save_reduce(self.named("torch._utils", "_rebuild_tensor_v2"), args, obj=obj)

    dispatch[Tensor] = save_tensor

    def save_parameter(self, obj):
        data = obj.detach()
        args = (data, bool(obj.requires_grad), collections.OrderedDict())
        self.save_reduce(self.named("torch._utils", "_rebuild_parameter"), args, obj=obj)

    dispatch[Parameter] = save_parameter

    def save_dtype(self, obj):
        self.save_torch_global(self.named("torch", obj.name))

    dispatch[dt.dtype] = save_dtype

    def save_device(self, obj):
        self.save_reduce(self.named("torch", "device"), (str(obj),), obj=obj)

    dispatch[Device] = save_device

    def save_size(self, obj):
        self.save_reduce(self.named("torch", "Size"), (tuple(obj),), obj=obj)

    dispatch[Size] = save_size


def _padding_extra(offset, name):
    """A zip extra field that makes the record starting at ``offset`` begin its data 64-byte aligned."""
    start = offset + 30 + len(name.encode("utf-8")) + 4
    return b"FB" + struct.pack("<H", -start % ALIGNMENT) + b"Z" * (-start % ALIGNMENT)


def _write_record(zf, fp, name, data):
    view = memoryview(data).cast("B") if not isinstance(data, bytes) else memoryview(data)
    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_STORED
    info.file_size = view.nbytes
    info.extra = _padding_extra(fp.tell(), name)
    with zf.open(info, "w", force_zip64=view.nbytes > 0xFFFF0000) as out:
        out.write(view)


def write(obj: Any, fp: BinaryIO, archive_name: str, protocol: int = _PICKLE_PROTOCOL) -> None:
    """Write ``obj`` to the binary file ``fp`` in PyTorch's zip format."""
    storages = _Storages()
    buffer = io.BytesIO()
    try:
        _TorchPickler(buffer, storages, protocol).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise CheckpointError(f"save: cannot pickle the object: {e}") from e
    with zipfile.ZipFile(fp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        prefix = f"{archive_name}/"
        _write_record(zf, fp, prefix + "data.pkl", buffer.getvalue())
        _write_record(zf, fp, prefix + ".format_version", b"1")
        _write_record(zf, fp, prefix + ".storage_alignment", str(ALIGNMENT).encode())
        _write_record(zf, fp, prefix + "byteorder", b"little")
        for ref in storages.refs:
            array = ref.array.astype(ref.array.dtype.newbyteorder("<"), copy=False)
            _write_record(zf, fp, f"{prefix}data/{ref.key}", array if array.size else b"")
        _write_record(zf, fp, prefix + "version", b"3\n")
        _write_record(zf, fp, prefix + ".data/serialization_id", uuid.uuid4().hex.encode())


def archive_name_for(f) -> str:
    """PyTorch names the archive's folder after the file (``model.pt`` -> ``model/``)."""
    if isinstance(f, (str, bytes, os.PathLike)):
        stem = os.path.splitext(os.path.basename(os.fsdecode(f)))[0]
        if stem and stem.isprintable() and "/" not in stem:
            return stem
    return "archive"


# ------------------------------------------------------------------------------------------ loading
class _Archive:
    """A PyTorch zip checkpoint opened for reading: its records, checked as they are read."""

    def __init__(self, source, label, path=None):
        self.label = label
        self.path = path
        self.source = source
        try:
            self.zip = zipfile.ZipFile(source)
            names = self.zip.namelist()
        except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, struct.error, KeyError) as e:
            self.fail(f"the zip archive is damaged ({type(e).__name__}: {e})")
        pickles = [n for n in names if n.endswith("data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            self.fail(f"expected one <name>/data.pkl record, found {len(pickles)}")
        self.prefix = pickles[0][: -len("data.pkl")]
        self.names = set(names)

    def fail(self, problem):
        raise CheckpointError(f"load: {self.label} is not a valid PyTorch checkpoint: {problem}")

    def read(self, name):
        full = self.prefix + name
        if full not in self.names:
            self.fail(f"the record {full!r} is missing")
        if self.zip.getinfo(full).compress_type != zipfile.ZIP_STORED:
            # torch.save stores every record; a compressed one could inflate without bound
            self.fail(f"the record {full!r} is compressed, which torch.save never writes")
        try:
            return self.zip.read(full)
        except (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, struct.error, NotImplementedError) as e:
            self.fail(f"the record {full!r} cannot be read ({type(e).__name__}: {e})")
        except RuntimeError as e:  # zipfile's "encrypted, password required": not a torch.save file
            self.fail(f"the record {full!r} cannot be read ({e})")

    def has(self, name):
        return self.prefix + name in self.names

    def _data_start(self, name, nbytes):
        """Where record ``name``'s ``nbytes`` stored bytes begin in the file, its local header checked."""
        info = self.zip.getinfo(self.prefix + name)
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:
            self.fail(f"the record {name!r} is compressed or encrypted, which torch.save never writes")
        if info.file_size != nbytes:
            self.fail(f"the record {name!r} holds {info.file_size} bytes, but its storage needs {nbytes}")
        self.source.seek(info.header_offset)
        header = self.source.read(30)
        if len(header) != 30 or header[:4] != b"PK\x03\x04":
            self.fail(f"the local header of {name!r} is damaged")
        name_len, extra_len = struct.unpack("<HH", header[26:30])
        if self.source.read(name_len) != info.orig_filename.encode("utf-8"):
            self.fail(f"the local header of {name!r} names another record")
        return info.header_offset + 30 + name_len + extra_len, info.CRC

    def read_array(self, name, dtype, count):
        """Record ``name`` read straight into a new NumPy array of ``count`` ``dtype`` elements, its
        CRC-32 checked (one copy, where ``zipfile``'s read and a conversion would make two)."""
        array = np.empty(count, dtype)
        start, crc = self._data_start(name, array.nbytes)
        view = memoryview(array).cast("B") if count else memoryview(b"")
        self.source.seek(start)
        readinto = getattr(self.source, "readinto", None)
        if readinto is not None:
            got = readinto(view) if count else 0
        else:
            data = self.source.read(array.nbytes)
            got = len(data)
            view[:got] = data
        if got != array.nbytes:
            self.fail(f"the record {name!r} is truncated: {got} of {array.nbytes} bytes")
        if zlib.crc32(view) != crc:
            self.fail(f"the record {name!r} does not match its CRC-32 (the file is damaged)")
        return array

    def mapped(self, name, dtype, count):
        """The stored bytes of record ``name`` as a copy-on-write NumPy memmap (``mmap=True``)."""
        nbytes = count * np.dtype(dtype).itemsize
        start, _ = self._data_start(name, nbytes)
        if start + nbytes > os.path.getsize(self.path):
            self.fail(f"the record {name!r} runs past the end of the file")
        if count == 0:
            return np.empty(0, dtype)
        return np.memmap(self.path, dtype=dtype, mode="c", offset=start, shape=(count,))


class _Loader:
    """Turns one archive's storages and ``_rebuild_tensor_v2`` calls into adcuda tensors."""

    def __init__(self, archive: _Archive, map_location, mmap: bool):
        self.archive = archive
        self.map_location = map_location
        self.mmap = mmap
        self.storages: dict[str, tuple[np.ndarray, StorageType, str]] = {}
        self.swap = False
        if archive.has("byteorder"):
            order = archive.read("byteorder")
            if order not in (b"little", b"big"):
                archive.fail(f"unknown byte order {order[:16]!r}")
            self.swap = order == b"big"
        self.warned_bfloat16 = False

    def storage(self, pid):
        if len(pid) != 5:
            self.archive.fail(f"a storage persistent id has {len(pid)} fields, not 5")
        _, storage_type, key, location, numel = (decode_ascii(x) for x in pid)
        if not isinstance(storage_type, StorageType):
            self.archive.fail(f"a storage of type {storage_type!r}, which adcuda does not read")
        if not isinstance(key, str) or not key.isalnum() or not isinstance(location, str):
            self.archive.fail(f"a storage key {key!r} that does not name a record in the archive")
        if type(numel) is not int or not 0 <= numel <= _MAX_NUMEL:
            self.archive.fail(f"storage {key} claims an implausible size {numel!r}")
        cached = self.storages.get(key)
        if cached is not None:
            if cached[1] is not storage_type:
                self.archive.fail(f"storage {key} is read as two different types")
            return cached
        stored = np.dtype(storage_type.numpy_dtype)
        name = f"data/{key}"
        if not self.archive.has(name):
            self.archive.fail(f"the storage {key!r} points at the record {self.archive.prefix}{name}, which is missing")
        if self.mmap and self.archive.path is not None:
            array = self.archive.mapped(name, stored, numel)
        else:
            array = self.archive.read_array(name, stored, numel)
        if self.swap:
            array = array.byteswap()
        entry = (array, storage_type, location)
        self.storages[key] = entry
        return entry

    def tensor(self, storage, offset, size, stride, requires_grad):
        if not (isinstance(storage, tuple) and len(storage) == 3 and isinstance(storage[1], StorageType)):
            self.archive.fail(f"_rebuild_tensor_v2 of a {type(storage).__name__}, not a storage")
        array, storage_type, location = storage
        size, stride = tuple(size), tuple(stride)
        if (
            type(offset) is not int
            or not all(type(n) is int and n >= 0 for n in size + stride)
            or len(size) != len(stride)
            or offset < 0
        ):
            self.archive.fail(f"a tensor with size {size!r}, stride {stride!r}, offset {offset!r}")
        numel = math.prod(size)
        last = offset + sum((n - 1) * s for n, s in zip(size, stride)) if numel else offset - 1
        if numel > _MAX_NUMEL or last >= array.size:
            self.archive.fail(
                f"a tensor of size {size} with stride {stride} at offset {offset} reaches past its storage of "
                f"{array.size} elements"
            )
        itemsize = array.itemsize
        view = np.lib.stride_tricks.as_strided(
            array[offset:] if numel else array[:0],
            size,
            tuple(s * itemsize for s in stride),
            writeable=array.flags.writeable,
        )
        return self._finish(view, storage_type, location, bool(requires_grad))

    def _finish(self, view, storage_type, location, requires_grad):
        target = self._device(location)
        if storage_type.dtype is dt.bfloat16:
            widened = (view.astype("<u4") << 16).view("<f4")
            t = from_numpy(np.ascontiguousarray(widened))
            if target.type == "cpu":
                if not self.warned_bfloat16:
                    warnings.warn(
                        f"load: {self.archive.label} holds bfloat16 tensors; adcuda's CPU backend has no "
                        "bfloat16, so they are loaded as float32 (exactly; load with map_location='cuda' to "
                        "keep bfloat16)",
                        stacklevel=4,
                    )
                    self.warned_bfloat16 = True
            else:
                t = t.to(target).to(dt.bfloat16)
        else:
            if view.dtype not in (np.bool_, np.int32, np.int64, np.float16, np.float32, np.float64):
                view = view.astype(storage_type.dtype.numpy)
            t = self._place(from_numpy(view), target, location)
        if requires_grad:
            if not t.dtype.is_floating_point:
                self.archive.fail(f"a {t.dtype} tensor that requires grad")
            t.requires_grad_(True)
        return t

    def _device(self, location):
        loc = self.map_location
        if loc is None or callable(loc):
            name = location
        elif isinstance(loc, dict):
            name = loc.get(location, location)
        else:
            name = loc
        try:
            return as_device(name, "load")
        except AdcudaError as e:
            self.archive.fail(f"a tensor saved on {location!r}: {e}")

    def _place(self, t, target, location):
        if callable(self.map_location):
            placed = self.map_location(t, location)
            return placed if isinstance(placed, Tensor) else t
        if target.type == "cpu":
            return t
        try:
            return t.to(target)
        except DeviceError as e:
            raise DeviceError(
                f"load: {self.archive.label} holds a tensor saved on {location}, which cannot be used here "
                f"({e}); pass map_location='cpu' to load it onto the CPU"
            ) from None


def globals_in(source, label) -> list[str]:
    """The ``module.name`` of every global the archive's pickle names, in order of first use; read
    opcode by opcode (``pickletools``), nothing built or called."""
    archive = _Archive(source, label)
    data = archive.read("data.pkl")
    found, strings = {}, []
    try:
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name == "GLOBAL":
                module, name = sg.python3_name(*arg.split(" ", 1))
                found.setdefault(f"{module}.{name}")
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                module, name = sg.python3_name(strings[-2], strings[-1])
                found.setdefault(f"{module}.{name}")
            elif isinstance(arg, str) and "UNICODE" in opcode.name:
                strings.append(arg)
    except (ValueError, EOFError, struct.error, UnicodeDecodeError) as e:
        archive.fail(f"the pickle cannot be read ({type(e).__name__}: {e})")
    return list(found)


def read(source, label, *, path, map_location, weights_only: bool, mmap: bool, pickle_module=None) -> Any:
    archive = _Archive(source, label, path)
    loader = _Loader(archive, map_location, mmap)
    rebuilder = Rebuilder(loader.storage, loader.tensor)
    data = archive.read("data.pkl")
    if weights_only:
        allowed = rebuilder.defaults()
        allowed.update(NUMPY_DEFAULTS)
        allowed.update(sg.user_allowed())
        return RestrictedUnpickler(data, allowed, loader.storage).load()
    unpickler = FullUnpickler(io.BytesIO(data), rebuilder)
    if pickle_module is not None and pickle_module is not pickle:
        warnings.warn("load: pickle_module is ignored; adcuda unpickles with Python's pickle", stacklevel=3)
    try:
        return unpickler.load()
    except (EOFError, pickle.UnpicklingError, struct.error) as e:
        if isinstance(e, AdcudaError):
            raise
        archive.fail(f"the pickle cannot be read ({type(e).__name__}: {e})")
