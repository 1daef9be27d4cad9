"""``nn.Module``: the base class of layers and models.

Assigning a ``Parameter``, a ``Module`` or (after ``register_buffer``) a tensor to an attribute
registers it, so ``parameters()``, ``state_dict()``, ``to()`` and friends find it. Conversions
(``to``, ``cuda``, ``half``, ...) swap each parameter's data in place, so the ``Parameter`` objects
an optimizer already holds stay the ones the model uses.
"""

import collections
import collections.abc
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from ... import dtypes as dt
from ...autograd.grad_mode import no_grad
from ...device import as_device
from ...errors import AdcudaError
from ...hooks import RemovableHandle
from ...ops import dispatch
from ...ops.dispatch import host_step
from ...ops.optim import pre_hook_arguments, zero_grads
from ...tensor import Tensor
from ..parameter import Parameter

ModuleT = TypeVar("ModuleT", bound="Module")


class StateDictError(AdcudaError, RuntimeError):
    """A state dict that does not fit the module it is loaded into."""


class _IncompatibleKeys(collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _addindent(text, spaces):
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


def _parse_to(args, kwargs):
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)`` -> (device, dtype)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"Module.to: unexpected keyword arguments {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, dt.dtype) or a in (float, int, bool):
            dtype = a
        elif isinstance(a, bool):
            continue
        else:
            device = a
    if device is not None:
        device = as_device(device, "Module.to")
    if dtype is not None:
        dtype = dt.as_dtype(dtype, "Module.to")
        if not dtype.is_floating_point:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")
    return device, dtype


def constructor_arguments(arguments: dict[str, Any], *leave_out: str) -> dict[str, Any]:
    """A constructor's ``locals()`` (taken before it sets any local) as keyword arguments for another
    constructor taking the same names: all but ``self`` and the ``leave_out`` names."""
    dropped = ("self", "__class__", *leave_out)
    return {name: value for name, value in arguments.items() if name not in dropped}


class Module:
    training: bool
    _version = 1

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}")
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", {})
        set_(self, "_buffers", {})
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_modules", {})
        set_(self, "_forward_pre_hooks", {})
        set_(self, "_forward_hooks", {})

    # PyTorch's hook tables a pickled torch module carries; adcuda keeps forward hooks only
    _TORCH_HOOK_TABLES = (
        "_backward_pre_hooks",
        "_backward_hooks",
        "_is_full_backward_hook",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks_with_kwargs",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
    )

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Unpickling (``adcuda.load`` of a whole module): adcuda's own state as it was, or a module
        ``torch.save`` pickled, whose hook tables adcuda does not keep (a hook in them is refused)."""
        state = dict(state)
        for key in self._TORCH_HOOK_TABLES:
            table = state.pop(key, None)
            if table:  # None, False or empty: nothing is lost
                raise TypeError(
                    f"{type(self).__name__}: the pickled module carries PyTorch {key[1:]} ({len(table)}), which "
                    "adcuda cannot restore; remove the hooks before saving"
                )
        self.__dict__.update(state)
        for key, empty in (
            ("training", True),
            ("_parameters", {}),
            ("_buffers", {}),
            ("_non_persistent_buffers_set", set()),
            ("_modules", {}),
            ("_forward_pre_hooks", {}),
            ("_forward_hooks", {}),
        ):
            self.__dict__.setdefault(key, empty)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    # ------------------------------------------------------------------ calling
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if dispatch.module_call_observer is not None:
            dispatch.module_call_observer(self)
        if not (self._forward_pre_hooks or self._forward_hooks):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    def _call_with_hooks(self, args, kwargs):
        flags = self.__dict__.get("_hook_flags", {})
        for key, hook in list(self._forward_pre_hooks.items()):
            if "with_kwargs" in flags.get(key, ()):
                args, kwargs = pre_hook_arguments(
                    hook(self, args, kwargs), args, kwargs, type(self).__name__, "forward"
                )
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        try:
            output = self.forward(*args, **kwargs)
        except Exception:
            # PyTorch's always_call: those forward hooks run even when forward raises (output None)
            for key, hook in list(self._forward_hooks.items()):
                if "always_call" in flags.get(key, ()):
                    try:
                        if "with_kwargs" in flags[key]:
                            hook(self, args, kwargs, None)
                        else:
                            hook(self, args, None)
                    except Exception as error:  # the forward's error is the one to raise
                        warnings.warn(
                            f"forward hook with always_call=True raised while handling an error: {error}", stacklevel=3
                        )
            raise
        for key, hook in list(self._forward_hooks.items()):
            if "with_kwargs" in flags.get(key, ()):
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def _add_hook(self, hooks, hook, prepend):
        handle = RemovableHandle(hooks, hook)
        if prepend:
            others = [(key, hooks.pop(key)) for key in list(hooks) if key != handle.id]
            hooks.update(others)
        return handle

    def register_forward_pre_hook(
        self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False
    ) -> RemovableHandle:
        """``hook(module, args)`` runs before ``forward``; a non-None result replaces ``args``. With
        ``with_kwargs``, ``hook(module, args, kwargs)`` may return new ``(args, kwargs)``."""
        return self._flag_hook(self._add_hook(self._forward_pre_hooks, hook, prepend), with_kwargs=with_kwargs)

    def register_forward_hook(
        self, hook: Callable[..., Any], *, prepend: bool = False, with_kwargs: bool = False, always_call: bool = False
    ) -> RemovableHandle:
        """``hook(module, args, output)`` (``hook(module, args, kwargs, output)`` with ``with_kwargs``)
        runs after ``forward``; a non-None result replaces the output. ``always_call`` runs it (with
        output None) when forward raises too."""
        handle = self._add_hook(self._forward_hooks, hook, prepend)
        return self._flag_hook(handle, with_kwargs=with_kwargs, always_call=always_call)

    def _flag_hook(self, handle, **flags):
        """Remember a hook's keyword options by its handle's id (kept only for hooks that have some)."""
        chosen = frozenset(name for name, on in flags.items() if on)
        if chosen:
            self.__dict__.setdefault("_hook_flags", {})[handle.id] = chosen
        return handle

    # ------------------------------------------------------------------ registration
    def _require_init(self, what):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")

    def _forget(self, name):
        for store in (self.__dict__, self._parameters, self._buffers, self._modules):
            store.pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def _check_name(self, name, what):
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if name == "":
            raise KeyError(f'{what} name can\'t be empty string ""')
        if "." in name:
            raise KeyError(f'{what} name can\'t contain ".", got: {name}')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        self._require_init("parameters")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(adcuda.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        self._require_init("buffer")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' (adcuda Tensor or None required)"
            )
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: "Module | None") -> None:
        self._require_init("module")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            self._require_init("parameters")
            self._forget(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(adcuda.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._require_init("module")
            self._forget(name)
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", ()):
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(adcuda.nn.Module or None expected)"
                )
            self._modules[name] = None
        elif name in self.__dict__.get("_buffers", ()):
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' (adcuda Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(object.__dir__(self)) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ------------------------------------------------------------------ traversal
    def named_modules(
        self, memo: "set[Module] | None" = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, "Module"]]:
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self, remove_duplicate: bool = True) -> Iterator["Module"]:
        for _, module in self.named_modules(remove_duplicate=remove_duplicate):
            yield module

    def named_children(self) -> Iterator[tuple[str, "Module"]]:
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self) -> Iterator["Module"]:
        for _, module in self.named_children():
            yield module

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, value in getattr(module, store).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def get_submodule(self, target: str) -> "Module":
        module = self
        for item in target.split(".") if target else ():
            if item not in module._modules:
                raise AttributeError(f"{type(module).__name__} has no attribute `{item}`")
            module = module._modules[item]
        return module

    def get_parameter(self, target: str) -> Parameter:
        module_path, _, name = target.rpartition(".")
        module = self.get_submodule(module_path)
        if name not in module._parameters:
            raise AttributeError(f"{type(module).__name__} has no parameter `{name}`")
        return module._parameters[name]

    def apply(self: ModuleT, fn: Callable[["Module"], None]) -> ModuleT:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ modes and gradients
    def train(self: ModuleT, mode: bool = True) -> ModuleT:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self: ModuleT) -> ModuleT:
        return self.train(False)

    def requires_grad_(self: ModuleT, requires_grad: bool = True) -> ModuleT:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    @host_step
    def zero_grad(self, set_to_none: bool = True) -> None:
        zero_grads(self.parameters(), set_to_none)

    # ------------------------------------------------------------------ conversions
    def _apply(self, convert):
        """Replace every parameter's, gradient's and buffer's data by ``convert(tensor)``, in place."""
        with no_grad():
            for module in self.modules():
                for param in module._parameters.values():
                    if param is None:
                        continue
                    _swap_data(param, convert(param))
                    if param.grad is not None:
                        _swap_data(param.grad, convert(param.grad))
                for name, buf in module._buffers.items():
                    if buf is not None:
                        module._buffers[name] = convert(buf)
        return self

    def to(self: ModuleT, *args: Any, **kwargs: Any) -> ModuleT:
        device, dtype = _parse_to(args, dict(kwargs))

        def convert(t):
            target_dtype = dtype if dtype is not None and t.dtype.is_floating_point else None
            return t.to(device=device, dtype=target_dtype)

        return self._apply(convert)

    def cuda(self: ModuleT, device: Any = None) -> ModuleT:
        return self.to("cuda" if device is None else as_device(device, "Module.cuda"))

    def cpu(self: ModuleT) -> ModuleT:
        return self.to("cpu")

    def _cast_floating(self, dtype):
        return self._apply(lambda t: t.to(dtype=dtype) if t.dtype.is_floating_point else t)

    def half(self: ModuleT) -> ModuleT:
        return self._cast_floating(dt.float16)

    def float(self: ModuleT) -> ModuleT:
        return self._cast_floating(dt.float32)

    def double(self: ModuleT) -> ModuleT:
        return self._cast_floating(dt.float64)

    def bfloat16(self: ModuleT) -> ModuleT:
        return self._cast_floating(dt.bfloat16)

    def type(self: ModuleT, dst_type: Any) -> ModuleT:
        """Every parameter and buffer (integer ones included, as in PyTorch) converted to dst_type."""
        return self._apply(lambda t: t.type(dst_type))

    # ------------------------------------------------------------------ state dicts
    def _state_entries(self, prefix=""):
        """(key, tensor) of every parameter and persistent buffer, shared ones under each name."""
        for name, param in self._parameters.items():
            if param is not None:
                yield prefix + name, param
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, buf
        for name, module in self._modules.items():
            if module is not None:
                yield from module._state_entries(prefix + name + ".")

    def state_dict(
        self, *args: Any, destination: dict[str, Any] | None = None, prefix: str = "", keep_vars: bool = False
    ) -> dict[str, Any]:
        if args:  # PyTorch's deprecated positional form: state_dict(destination, prefix, keep_vars)
            destination = args[0]
            prefix = args[1] if len(args) > 1 else prefix
            keep_vars = args[2] if len(args) > 2 else keep_vars
        if destination is None:
            destination = collections.OrderedDict()
        for key, value in self._state_entries(prefix):
            destination[key] = value if keep_vars else value.detach()
        return destination

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Copy tensors from ``state_dict`` into this module's parameters and buffers.

        Missing and unexpected keys are errors when ``strict``; shape mismatches always are. Returns
        ``(missing_keys, unexpected_keys)``.
        """
        if not isinstance(state_dict, collections.abc.Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        expected = dict(self._state_entries())
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        errors = []
        for key, target in expected.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected adcuda.Tensor from '
                    f"checkpoint but received {type(value).__name__}"
                )
            elif tuple(value.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {target.shape}."
                )
        if strict:
            if unexpected:
                listed = ", ".join(f'"{k}"' for k in unexpected)
                errors.insert(0, f"Unexpected key(s) in state_dict: {listed}. ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise StateDictError(
                "Error(s) in loading state_dict for {}:\n\t{}".format(type(self).__name__, "\n\t".join(errors))
            )
        with no_grad():
            for key, target in expected.items():
                if key in state_dict:
                    self._load_entry(key, target, state_dict[key], assign)
        return _IncompatibleKeys(missing, unexpected)

    def _load_entry(self, key, target, value, assign):
        if not assign:
            target.copy_(value)
            return
        module_path, _, name = key.rpartition(".")
        module = self.get_submodule(module_path)
        if name in module._parameters:
            module._parameters[name] = Parameter(value.detach(), target.requires_grad)
        else:
            module._buffers[name] = value.detach()

    # ------------------------------------------------------------------ printing
    def extra_repr(self) -> str:
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2) for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        body = ""
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                body = extra_lines[0]
            else:
                body = "\n  " + "\n  ".join(lines) + "\n"
        return f"{self._get_name()}({body})"


def _swap_data(tensor, new):
    """Give ``tensor`` the data of ``new`` while keeping the object (and its identity) unchanged."""
    if new is not tensor:
        tensor.data = new
