"""Two unpicklers for PyTorch's ``data.pkl``: a restricted one (``weights_only=True``) and a full one.

The restricted one is a small pickle machine of its own (not ``pickle.Unpickler`` with a filter): it
knows the opcodes ``torch.save`` and Python's protocols 2-5 use for data, looks up every global in an
allowlist by name (never importing anything the file names), builds objects only of allowed classes,
appends and sets items only on lists, dicts and sets, and refuses the rest with PyTorch's
``UnpicklingError`` text naming what to allow. Lengths are checked against the bytes that are there, so
a huge length in a tiny file is an error, not an allocation. The full one (``weights_only=False``)
is ``pickle.Unpickler`` with PyTorch's names mapped onto adcuda's: it runs whatever the file says,
which is why it is for trusted files only.
"""

from __future__ import annotations

import codecs
import collections
import importlib
import importlib.util
import pickle
import struct
from typing import TYPE_CHECKING

import numpy as np  # NumPy numbers and arrays that checkpoints hold (best scores, histories)

from .. import dtypes as dt
from ..device import device as Device
from ..errors import AdcudaError
from ..nn.parameter import Parameter
from ..tensor import Size, Tensor
from . import safe_globals as sg

if TYPE_CHECKING:
    from ..types import Any, Callable


class WeightsOnlyError(AdcudaError, pickle.UnpicklingError):
    """A pickle that ``load(weights_only=True)`` refuses (a global it does not allow, an opcode or an
    object it does not build), or a damaged pickle."""


UNSAFE_MESSAGE = (
    "Re-running `adcuda.load` with `weights_only` set to `False` will likely succeed, but it can result in "
    "arbitrary code execution. Do it only if you got the file from a trusted source."
)


def weights_only_failure(message, unsafe_global=False):
    if unsafe_global:
        return WeightsOnlyError(
            "Weights only load failed. This file can still be loaded, to do so you have two options, do those "
            f"steps only if you trust the source of the checkpoint. \n\t(1) {UNSAFE_MESSAGE}\n\t(2) "
            "Alternatively, to load with `weights_only=True` please check the recommended steps in the "
            f"following error message.\n\tWeightsUnpickler error: {message}"
        )
    return WeightsOnlyError(f"Weights only load failed. {UNSAFE_MESSAGE}\n\nWeightsUnpickler error: {message}")


# ------------------------------------------------------------------------------------------ storages
class StorageType:
    """``torch.FloatStorage`` and its kin as a pickle names them: which bytes a storage record holds."""

    def __init__(self, name, numpy_dtype, dtype):
        self.name = name
        self.numpy_dtype = numpy_dtype  # the record's element type, little-endian
        self.dtype = dtype  # the adcuda dtype its tensors get (None: adcuda has no such dtype)
        self.__qualname__ = self.__name__ = name
        self.__module__ = "torch"

    def __repr__(self):
        return f"torch.{self.name}"


# name -> (NumPy element type of the record, adcuda dtype of the tensors); bfloat16 records are raw
# 16-bit patterns (NumPy has none); int8, int16 and uint8 become int32/int64 as from_numpy makes them
STORAGE_TYPES = {
    st.name: st
    for st in (
        StorageType("DoubleStorage", "<f8", dt.float64),
        StorageType("FloatStorage", "<f4", dt.float32),
        StorageType("HalfStorage", "<f2", dt.float16),
        StorageType("BFloat16Storage", "<u2", dt.bfloat16),
        StorageType("LongStorage", "<i8", dt.int64),
        StorageType("IntStorage", "<i4", dt.int32),
        StorageType("ShortStorage", "<i2", dt.int32),
        StorageType("CharStorage", "|i1", dt.int32),
        StorageType("ByteStorage", "|u1", dt.int64),
        StorageType("BoolStorage", "|b1", dt.bool_),
    )
}
STORAGE_OF_DTYPE = {
    dt.float64: "DoubleStorage",
    dt.float32: "FloatStorage",
    dt.float16: "HalfStorage",
    dt.bfloat16: "BFloat16Storage",
    dt.int64: "LongStorage",
    dt.int32: "IntStorage",
    dt.bool_: "BoolStorage",
}


# ------------------------------------------------------------------------------------------ rebuilding
class Rebuilder:
    """The functions PyTorch's pickles call to make tensors, bound to one archive's storages."""

    def __init__(self, storage_loader: Callable[[tuple], Any], tensor_maker: Callable[..., Tensor]):
        self.persistent_load = storage_loader
        self.make_tensor = tensor_maker

    def rebuild_tensor_v2(self, storage, storage_offset, size, stride, requires_grad, backward_hooks, metadata=None):
        return self.make_tensor(storage, storage_offset, size, stride, requires_grad)

    def rebuild_parameter(self, data, requires_grad, backward_hooks):
        if not isinstance(data, Tensor):
            raise weights_only_failure(f"_rebuild_parameter of a {type(data).__name__}, not a tensor")
        return Parameter(data, bool(requires_grad))

    def rebuild_parameter_with_state(self, data, requires_grad, backward_hooks, state):
        param = self.rebuild_parameter(data, requires_grad, backward_hooks)
        for key, value in (state or {}).items():
            setattr(param, key, value)
        return param

    def rebuild_from_type_v2(self, func, new_type, args, state):
        if func not in self.functions().values() or new_type not in (Tensor, Parameter):
            raise weights_only_failure(f"_rebuild_from_type_v2 of {new_type!r} through {func!r}")
        result = func(*args)
        if new_type is Parameter and type(result) is not Parameter:
            result = Parameter(result, result.requires_grad)
        for key, value in (state or {}).items():
            setattr(result, key, value)
        return result

    def functions(self):
        return {
            "torch._utils._rebuild_tensor_v2": self.rebuild_tensor_v2,
            "torch._utils._rebuild_parameter": self.rebuild_parameter,
            "torch._utils._rebuild_parameter_with_state": self.rebuild_parameter_with_state,
        }

    def defaults(self):
        """PyTorch's default allowlist, mapped onto adcuda: name -> object."""
        allowed = dict(sg.PYTHON_DEFAULTS)
        allowed.update(self.functions())
        allowed["torch._tensor._rebuild_from_type_v2"] = self.rebuild_from_type_v2
        allowed.update({f"torch.{name}": st for name, st in STORAGE_TYPES.items()})
        allowed.update({f"torch.{d.name}": d for d in dt.ALL})
        allowed.update(
            {
                "torch.device": Device,
                "torch.Size": Size,
                "torch.Tensor": Tensor,
                "torch.nn.parameter.Parameter": Parameter,
            }
        )
        return allowed


# ------------------------------------------------------------------------------------------ numpy
# NumPy scalars and arrays of numbers and bools (a checkpoint's best score, a metric history) load under
# weights_only=True, as adcuda's earlier format allowed; object arrays (which would unpickle anything
# stored in them) are refused. PyTorch refuses NumPy by default; this is a deliberate difference.
_NUMPY_KINDS = "biufc"


def _checked_dtype(d, what):
    if not isinstance(d, np.dtype) or d.kind not in _NUMPY_KINDS or d.fields is not None or d.subdtype is not None:
        raise weights_only_failure(f"{what} of a NumPy dtype other than numbers and bools: {d!r}")
    return d


def _numpy_dtype(spec, align=False, copy=True):
    if type(spec) is not str:
        raise weights_only_failure(f"numpy.dtype of {type(spec).__name__}, not a type code")
    return _checked_dtype(np.dtype(spec, bool(align), bool(copy)), "numpy.dtype")


def _numpy_scalar(dtype, data=b""):
    _checked_dtype(dtype, "a NumPy scalar")
    if type(data) is not bytes or len(data) != dtype.itemsize:
        raise weights_only_failure("a NumPy scalar whose bytes do not fit its dtype")
    return np.frombuffer(data, dtype)[0]


def _numpy_reconstruct(subtype, shape, code):
    if subtype is not np.ndarray:
        raise weights_only_failure(f"a NumPy array of type {subtype!r}")
    return np.ndarray((0,), np.uint8)


def _build_numpy(inst, state):
    """BUILD of an array or dtype made by the functions above: checked before NumPy sees it."""
    if type(state) is not tuple:
        raise weights_only_failure("a NumPy object with a state that is not a tuple")
    if type(inst) is np.ndarray:
        if len(state) != 5 or type(state[4]) is not bytes:
            raise weights_only_failure("a NumPy array whose state is not (version, shape, dtype, order, bytes)")
        _checked_dtype(state[2], "a NumPy array")
    elif any(x is not None for x in state[2:5]):  # a dtype: no subarray, names or fields
        raise weights_only_failure("a NumPy dtype with fields or a subarray")
    try:
        inst.__setstate__(state)
    except (TypeError, ValueError) as e:
        raise weights_only_failure(f"a NumPy object whose state does not fit it ({e})") from None


NUMPY_DEFAULTS = {
    "numpy.dtype": _numpy_dtype,
    "numpy.ndarray": np.ndarray,
    **{f"numpy.{core}.multiarray.scalar": _numpy_scalar for core in ("core", "_core")},
    **{f"numpy.{core}.multiarray._reconstruct": _numpy_reconstruct for core in ("core", "_core")},
}


def adcuda_global(module: str, name: str) -> Any:
    """adcuda's object for PyTorch's ``module.name`` (``torch.nn.modules.linear.Linear`` ->
    ``adcuda.nn.modules.linear.Linear``), or None where adcuda has none."""
    if module != "torch" and not module.startswith("torch."):
        return None
    candidate = "adcuda" + module[len("torch") :]
    try:
        found = importlib.util.find_spec(candidate) is not None
    except (ImportError, ValueError):
        found = False
    target = importlib.import_module(candidate) if found else None
    for part in name.split("."):
        target = getattr(target, part, None)
    return target


# ------------------------------------------------------------------------------------------ restricted
_FORMATS = {
    pickle.BININT: ("<i", 4),
    pickle.BININT1: ("<B", 1),
    pickle.BININT2: ("<H", 2),
    pickle.BINFLOAT: (">d", 8),
}
_LENGTH_PREFIXED = {  # opcode -> (length format, what it makes)
    pickle.BINUNICODE: ("<I", "str"),
    pickle.SHORT_BINUNICODE: ("<B", "str"),
    pickle.BINUNICODE8: ("<Q", "str"),
    pickle.BINBYTES: ("<I", "bytes"),
    pickle.SHORT_BINBYTES: ("<B", "bytes"),
    pickle.BINBYTES8: ("<Q", "bytes"),
    pickle.BYTEARRAY8: ("<Q", "bytearray"),
    pickle.SHORT_BINSTRING: ("<B", "bytes"),
    pickle.BINSTRING: ("<i", "bytes"),
    pickle.LONG1: ("<B", "long"),
    pickle.LONG4: ("<i", "long"),
}
_BUILDS_INTO = (dict, collections.OrderedDict, collections.Counter)


class RestrictedUnpickler:
    """Unpickle ``data`` admitting only the names in ``allowed``; ``persistent_load`` resolves storages."""

    def __init__(self, data: bytes, allowed: dict[str, Any], persistent_load: Callable[[Any], Any]):
        self.data = memoryview(data)
        self.pos = 0
        self.allowed = allowed
        self.allowed_objects = {id(v) for v in allowed.values()}
        self.persistent_load = persistent_load

    def read(self, n):
        end = self.pos + n
        if n < 0 or end > len(self.data):
            raise weights_only_failure(
                f"the pickle is truncated: {n} bytes wanted at offset {self.pos}, {len(self.data) - self.pos} remain"
            )
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def readline(self):
        end = bytes(self.data[self.pos : self.pos + 4096]).find(b"\n")
        if end < 0:
            raise weights_only_failure(f"the pickle is truncated inside a GLOBAL name at offset {self.pos}")
        line = bytes(self.read(end + 1))[:-1]
        return line.decode("utf-8")

    def find_global(self, module, name):
        module, name = sg.python3_name(module, name)
        full = f"{module}.{name}"
        if full in self.allowed:
            return self.allowed[full]
        # PyTorch's path to a class that adcuda defines elsewhere (torch.nn.modules.batchnorm.BatchNorm2d
        # is adcuda.nn.modules.normalization's): allowed if the user allowed adcuda's object. Only adcuda's
        # own modules are imported to find it.
        mapped = adcuda_global(module, name)
        if mapped is not None and self.is_allowed(mapped):
            return mapped
        shown = full[len("builtins.") :] if full.startswith("builtins.") else full
        raise weights_only_failure(
            f"Unsupported global: GLOBAL {shown} was not an allowed global by default. Please use "
            f"`adcuda.serialization.add_safe_globals([{shown}])` or the "
            f"`adcuda.serialization.safe_globals([{shown}])` context manager to allowlist this global if "
            "you trust this class/function.",
            unsafe_global=True,
        )

    def is_allowed(self, obj):
        return id(obj) in self.allowed_objects

    def load(self):
        try:
            return self._run()
        except (AdcudaError, pickle.UnpicklingError):
            raise
        except (IndexError, KeyError, TypeError, ValueError, AttributeError, struct.error, RecursionError) as e:
            raise weights_only_failure(f"malformed pickle ({type(e).__name__}: {e})") from None

    def _run(self):  # noqa: C901 (one branch per opcode is the clearest form of a pickle machine)
        stack: list[Any] = []
        marks: list[list[Any]] = []
        memo: dict[int, Any] = {}

        def pop_mark():
            nonlocal stack
            items = stack
            stack = marks.pop()
            return items

        while True:
            op = bytes(self.read(1))
            if op in _FORMATS:
                fmt, size = _FORMATS[op]
                stack.append(struct.unpack(fmt, self.read(size))[0])
            elif op in _LENGTH_PREFIXED:
                fmt, kind = _LENGTH_PREFIXED[op]
                (n,) = struct.unpack(fmt, self.read(struct.calcsize(fmt)))
                raw = bytes(self.read(n))
                if kind == "str":
                    stack.append(str(raw, "utf-8", "surrogatepass"))
                elif kind == "long":
                    stack.append(int.from_bytes(raw, "little", signed=True))
                else:
                    stack.append(bytearray(raw) if kind == "bytearray" else raw)
            elif op == pickle.PROTO:
                if self.read(1)[0] > pickle.HIGHEST_PROTOCOL:
                    raise weights_only_failure("unsupported pickle protocol")
            elif op == pickle.FRAME:
                self.read(8)
            elif op == pickle.STOP:
                if len(stack) != 1 or marks:
                    raise weights_only_failure("the pickle ends with a malformed stack")
                return stack.pop()
            elif op == pickle.GLOBAL:
                module = self.readline()
                stack.append(self.find_global(module, self.readline()))
            elif op == pickle.STACK_GLOBAL:
                name, module = stack.pop(), stack.pop()
                if type(module) is not str or type(name) is not str:
                    raise weights_only_failure("STACK_GLOBAL with a module or name that is not a string")
                stack.append(self.find_global(module, name))
            elif op == pickle.REDUCE:
                args = stack.pop()
                func = stack[-1]
                if not self.is_allowed(func) or type(args) is not tuple:
                    raise weights_only_failure(f"Trying to call reduce for unrecognized function {func!r}")
                stack[-1] = func(*args)
            elif op in (pickle.NEWOBJ, pickle.NEWOBJ_EX):
                kwargs = stack.pop() if op == pickle.NEWOBJ_EX else {}
                args = stack.pop()
                cls = stack.pop()
                if not isinstance(cls, type) or not self.is_allowed(cls) or type(args) is not tuple:
                    raise weights_only_failure(
                        "Can only create new object for nn.Parameter or classes allowlisted via "
                        f"`add_safe_globals` but got {cls!r}"
                    )
                if type(kwargs) is not dict:
                    raise weights_only_failure("NEWOBJ_EX with keyword arguments that are not a dict")
                stack.append(Parameter(*args, **kwargs) if cls is Parameter else cls.__new__(cls, *args, **kwargs))
            elif op == pickle.BUILD:
                state = stack.pop()
                self._build(stack[-1], state)
            elif op == pickle.BINPERSID:
                pid = stack.pop()
                if type(pid) is not tuple or not pid or pid[0] != "storage":
                    raise weights_only_failure(f"Only persistent_load of storage is allowed, but got {pid!r}")
                stack.append(self.persistent_load(pid))
            elif op == pickle.MARK:
                marks.append(stack)
                stack = []
            elif op == pickle.POP_MARK:
                pop_mark()
            elif op == pickle.POP:
                stack.pop()
            elif op == pickle.DUP:
                stack.append(stack[-1])
            elif op == pickle.TUPLE:
                items = pop_mark()
                stack.append(tuple(items))
            elif op == pickle.TUPLE1:
                stack[-1] = (stack[-1],)
            elif op == pickle.TUPLE2:
                stack[-2:] = [(stack[-2], stack[-1])]
            elif op == pickle.TUPLE3:
                stack[-3:] = [(stack[-3], stack[-2], stack[-1])]
            elif op == pickle.LIST:
                items = pop_mark()
                stack.append(list(items))
            elif op == pickle.DICT:
                items = pop_mark()
                stack.append(self._set_items({}, items))
            elif op == pickle.NONE:
                stack.append(None)
            elif op == pickle.NEWTRUE:
                stack.append(True)
            elif op == pickle.NEWFALSE:
                stack.append(False)
            elif op == pickle.EMPTY_TUPLE:
                stack.append(())
            elif op == pickle.EMPTY_LIST:
                stack.append([])
            elif op == pickle.EMPTY_DICT:
                stack.append({})
            elif op == pickle.EMPTY_SET:
                stack.append(set())
            elif op == pickle.FROZENSET:
                items = pop_mark()
                stack.append(frozenset(items))
            elif op == pickle.ADDITEMS:
                items = pop_mark()
                if type(stack[-1]) is not set:
                    raise weights_only_failure(f"Can only add items to sets, but got {type(stack[-1])}")
                stack[-1].update(items)
            elif op == pickle.APPEND:
                item = stack.pop()
                if type(stack[-1]) is not list:
                    raise weights_only_failure(f"Can only append to lists, but got {type(stack[-1])}")
                stack[-1].append(item)
            elif op == pickle.APPENDS:
                items = pop_mark()
                if type(stack[-1]) is not list:
                    raise weights_only_failure(f"Can only extend lists, but got {type(stack[-1])}")
                stack[-1].extend(items)
            elif op == pickle.SETITEM:
                value, key = stack.pop(), stack.pop()
                self._set_items(stack[-1], [key, value])
            elif op == pickle.SETITEMS:
                items = pop_mark()
                self._set_items(stack[-1], items)
            elif op in (pickle.BINGET, pickle.LONG_BINGET):
                index = self.read(1)[0] if op == pickle.BINGET else struct.unpack("<I", self.read(4))[0]
                if index not in memo:
                    raise weights_only_failure(f"memo entry {index} is read before it is written")
                stack.append(memo[index])
            elif op in (pickle.BINPUT, pickle.LONG_BINPUT):
                index = self.read(1)[0] if op == pickle.BINPUT else struct.unpack("<I", self.read(4))[0]
                memo[index] = stack[-1]
            elif op == pickle.MEMOIZE:
                memo[len(memo)] = stack[-1]
            else:
                raise weights_only_failure(f"Unsupported operand {op[0] if op else None}")

    def _set_items(self, target, items):
        if type(target) not in _BUILDS_INTO or len(items) % 2:
            raise weights_only_failure(
                f"Can only SETITEMS for dict, collections.OrderedDict, collections.Counter, but got {type(target)}"
            )
        for i in range(0, len(items), 2):
            target[items[i]] = items[i + 1]
        return target

    def _build(self, inst, state):
        if type(inst) is collections.OrderedDict:  # a state dict's _metadata (versions of its modules)
            if type(state) is not dict or not all(type(k) is str for k in state):
                raise weights_only_failure("BUILD of an OrderedDict with a state that is not a dict of names")
            inst.__dict__.update(state)
            return
        if isinstance(inst, np.dtype) or type(inst) is np.ndarray:
            _build_numpy(inst, state)
            return
        if type(inst) is Parameter:
            if state:
                for key, value in dict(state).items():
                    setattr(inst, key, value)
            return
        if not self.is_allowed(type(inst)):
            raise weights_only_failure(
                "Can only build Tensor, Parameter, OrderedDict or types allowlisted via `add_safe_globals`, "
                f"but got {type(inst)}"
            )
        setstate = getattr(inst, "__setstate__", None)
        if setstate is not None:
            setstate(state)
            return
        slotstate = None
        if isinstance(state, tuple) and len(state) == 2:
            state, slotstate = state
        if state:
            inst.__dict__.update(state)
        for key, value in (slotstate or {}).items():
            setattr(inst, key, value)


# ------------------------------------------------------------------------------------------ full
class FullUnpickler(pickle.Unpickler):
    """``weights_only=False``: Python's unpickler, PyTorch's names resolved to adcuda's objects."""

    def __init__(self, file, rebuilder: Rebuilder, **kwargs):
        super().__init__(file, **kwargs)
        self.rebuilder = rebuilder
        self.defaults = rebuilder.defaults()

    def find_class(self, module, name):
        py_module, py_name = sg.python3_name(module, name)
        full = f"{py_module}.{py_name}"
        if full in self.defaults:
            return self.defaults[full]
        mapped = adcuda_global(module, name)
        if mapped is not None:
            return mapped
        if module == "torch" or module.startswith("torch."):
            raise pickle.UnpicklingError(
                f"load: the file needs {module}.{name}, which adcuda does not have (adcuda maps PyTorch's "
                "names onto its own where it has them)"
            )
        return super().find_class(module, name)

    def persistent_load(self, pid):
        if type(pid) is not tuple or not pid or pid[0] != "storage":
            raise pickle.UnpicklingError(f"load: unsupported persistent id {pid!r}")
        return self.rebuilder.persistent_load(pid)


def decode_ascii(value):
    """Python 2 era pickles hold byte strings where PyTorch now writes str."""
    return codecs.decode(value, "ascii") if isinstance(value, (bytes, bytearray)) else value
