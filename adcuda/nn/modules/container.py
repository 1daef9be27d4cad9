"""Containers: ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``, ``ParameterDict``."""

from __future__ import annotations

import collections
import collections.abc
import operator
from typing import TYPE_CHECKING

from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module

if TYPE_CHECKING:
    from ...types import Any, Iterable, Mapping


def _index(idx, length, what):
    idx = operator.index(idx)
    if not -length <= idx < length:
        raise IndexError(f"index {idx} is out of range for a {what} of length {length}")
    return idx + length if idx < 0 else idx


class Sequential(Module):
    """Runs its modules one after the other; built from modules or from one ``OrderedDict``."""

    def __init__(self, *args: Module | collections.OrderedDict[str, Module]) -> None:
        super().__init__()
        if len(args) == 1 and isinstance(args[0], collections.OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for i, module in enumerate(args):
                self.add_module(str(i), module)

    def forward(self, input: Any) -> Any:
        for module in self._modules.values():
            input = module(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(collections.OrderedDict(list(self._modules.items())[idx]))
        return list(self._modules.values())[_index(idx, len(self), "Sequential")]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(idx, len(self), "Sequential")]
        setattr(self, key, module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [keys[_index(idx, len(self), "Sequential")]]:
            del self._modules[key]
        # renumber so that the keys stay "0", "1", ... as PyTorch does
        modules = list(self._modules.values())
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        n = len(modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        modules.insert(index + n if index < 0 else index, module)
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)
        return self

    def pop(self, idx):
        module = self[idx]
        del self[idx]
        return module


class ModuleList(Module):
    """A list of modules whose parameters are registered (a plain list would hide them)."""

    def __init__(self, modules: Iterable[Module] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _renumber(self, modules):
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return type(self)(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        self.add_module(str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        modules = list(self._modules.values())
        if isinstance(idx, slice):
            del modules[idx]
        else:
            del modules[_index(idx, len(self), "ModuleList")]
        self._renumber(modules)

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return type(self)(list(self) + list(other))

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError(
                f"ModuleList.extend should be called with an iterable of modules, but got {type(modules).__name__}"
            )
        for module in modules:
            self.append(module)
        return self

    def insert(self, index, module):
        modules = list(self._modules.values())
        modules.insert(index, module)
        self._renumber(modules)

    def pop(self, idx):
        module = self[idx]
        del self[idx]
        return module


class ModuleDict(Module):
    """A dict of modules whose parameters are registered; keeps insertion order."""

    def __init__(self, modules: Mapping[str, Module] | Iterable[tuple[str, Module]] | None = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        return self._modules.pop(key)

    def update(self, modules):
        items = modules.items() if isinstance(modules, (collections.abc.Mapping, ModuleDict)) else modules
        for entry in items:
            key, module = entry
            self[key] = module


# ------------------------------------------------------------------------------------------------
# parameter containers (issue 15)
def _as_parameter(value):
    """PyTorch's rule: a plain tensor put in a parameter container becomes a Parameter."""
    if isinstance(value, Tensor) and not isinstance(value, Parameter):
        return Parameter(value)
    return value


class ParameterList(Module):
    """A list of parameters whose entries are registered (named "0", "1", ...)."""

    def __init__(self, values: Iterable[Any] | None = None) -> None:
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def _key(self, idx):
        return str(_index(idx, self._size, "ParameterList"))

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ParameterList([self[i] for i in range(self._size)[idx]])
        return getattr(self, self._key(idx))

    def __setitem__(self, idx, value):
        setattr(self, self._key(idx), _as_parameter(value))

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(self._size))

    def __iadd__(self, values):
        return self.extend(values)

    def append(self, value: Any) -> ParameterList:
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values: Iterable[Any]) -> ParameterList:
        for value in values:
            self.append(value)
        return self

    def extra_repr(self):
        return "\n".join(
            f"({i}): Parameter containing: [{type(p).__name__} of size {'x'.join(map(str, p.shape))}]"
            if hasattr(p, "shape")
            else f"({i}): Object of type: {type(p).__name__}"
            for i, p in enumerate(self)
        )


class ParameterDict(Module):
    """A dict of parameters whose entries are registered; keeps insertion order."""

    def __init__(self, parameters: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None) -> None:
        super().__init__()
        self._keys: dict[str, None] = {}
        if parameters is not None:
            self.update(parameters)

    def __getitem__(self, key):
        return getattr(self, key)

    def __setitem__(self, key, value):
        self._keys[key] = None
        setattr(self, key, _as_parameter(value))

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, key)

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def keys(self):
        return self._keys.keys()

    def values(self):
        return [self[k] for k in self._keys]

    def items(self):
        return [(k, self[k]) for k in self._keys]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def pop(self, key):
        value = self[key]
        del self[key]
        return value

    def clear(self):
        for key in list(self._keys):
            del self[key]

    def update(self, parameters):
        items = parameters.items() if isinstance(parameters, (collections.abc.Mapping, ParameterDict)) else parameters
        for key, value in items:
            self[key] = value

    def extra_repr(self):
        return "\n".join(
            f"({k}): Parameter containing: [{type(p).__name__} of size {'x'.join(map(str, p.shape))}]"
            for k, p in self.items()
        )
