"""``Optimizer``: parameter groups, per-parameter state and PyTorch's state-dict format.

Subclasses implement ``step`` by gathering, per group and device, the parameters that have a gradient
and handing them to one fused multi-tensor op (``adcuda._fused_sgd_``, ``_fused_adam_``,
``_fused_adamw_``, adcuda/ops/optim.py), which checks what it writes and bumps its versions.

Master weights (beyond PyTorch): a group with ``master_weights=True`` steps each of its float16
(or bfloat16) parameters through a float32 copy kept in the state (``"master_param"``) with float32
buffers, and writes the rounded result back into the half parameter, so updates far below half
precision still accumulate. The rules:

- float32 and float64 parameters of such a group are stepped directly (they are their own masters):
  ``master_weights=True`` costs nothing where it is not needed, so it can be set before
  ``model.half()`` (masters are made on the first step, from the parameters as they are then);
- half parameters must not be split between groups with and without master weights (the latter
  would silently lose the small updates the former keep): that raises ``OptimizerError``;
- a master copy follows outside writes: when a parameter was changed by something other than this
  optimizer (loading weights, pruning) and no longer equals its master rounded to half precision,
  the master is made again from it;
- ``state_dict`` saves the masters, so a resumed run continues bit for bit; ``load_state_dict``
  keeps each group's own ``master_weights`` setting, and refuses a state holding masters for a
  group without master weights.

Fused gradient clipping (beyond PyTorch): ``optimizer.clip_grad_norm_(max_norm)`` computes the total
norm of the optimizer's gradients (one multi-tensor reduction per device, left on the device) and
returns it, as ``nn.utils.clip_grad_norm_`` does; ``Adam``/``AdamW`` then apply the clip coefficient
inside the next ``step()``'s multi-tensor kernel, which reads it from device memory, instead of a
separate pass over every gradient; the gradients themselves are left unscaled (the step uses them
scaled exactly as ``clip_grad_norm_`` would have left them). ``zero_grad`` drops a pending coefficient.
Other optimizers scale the gradients in place at once.

Working copies (beyond PyTorch): ``Adam``/``AdamW`` write the float16/bfloat16 copy of each float32
parameter that autocast regions cast (``adcuda/ops/autocast.py``) in the same kernel pass as the
update, and the next region reads the copy instead of casting the weight again.

Graph capture's protocol: ``adcuda.compile`` replays a captured ``optimizer.step()`` (a host step)
by calling ``optimizer._step_with_scratch(scratch)`` where the class that defines ``step`` also
defines that method (looked up by name: capture sits below optim in the layers), else ``step()``
itself. It does what ``step()`` without a closure does, hyperparameters, step counts and state read
afresh, with its fused op's primitive taking its temporaries from ``scratch``
(``adcuda.backends.seam.Scratch``: arrays the replay keeps from one replay to the next); ``SGD`` and
``Adam``/``AdamW`` define it.
"""

import collections
import copy
import functools
import warnings
from collections.abc import Callable, Iterable
from typing import Any

from .. import dtypes as dt
from ..autograd.grad_mode import enable_grad, no_grad
from ..errors import AdcudaError, DeviceError
from ..factories import tensor
from ..hooks import RemovableHandle
from ..ops.dispatch import host_step
from ..ops.optim import _foreach_mul_, _foreach_version, _global_norm, pre_hook_arguments, zero_grads
from ..tensor import Tensor

_HALF = (dt.float16, dt.bfloat16)
# how PyTorch's messages name the hyperparameters it checks (the others: "<name> value")
_DESCRIBED = {"lr": "learning rate", "eps": "epsilon value"}


class OptimizerError(AdcudaError, ValueError):
    """An invalid optimizer argument, parameter group or state dict."""


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


ParamsT = Iterable[Tensor] | Iterable[dict[str, Any]]


class Optimizer:
    def __init_subclass__(cls, **kwargs):
        # every optimizer's step is a host step: graph capture runs it on each replay, so its step
        # counts and learning rates are read afresh (never frozen into a captured program)
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = host_step(_with_step_hooks(cls.step))

    def __init__(self, params: ParamsT, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        # a defaultdict, as in PyTorch: custom optimizers read ``self.state[p]`` before filling it
        self.state = collections.defaultdict(dict)
        self._master_versions = {}  # half parameter -> its version when its master last matched it
        self._grad_multipliers = {}  # device -> clip coefficient the next step applies (clip_grad_norm_)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError(
                "params argument given to the optimizer should be an iterable of Tensors or dicts, "
                f"but got {type(params).__name__}"
            )
        if isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering "
                "of tensors in sets will change between runs. Please use a list instead."
            )
        param_groups = list(params)
        if not param_groups:
            raise OptimizerError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the ordering "
                "of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but parameter {i} is {type(p).__name__}")
            if not p.is_leaf:
                raise OptimizerError(
                    f"can't optimize a non-leaf Tensor (parameter {i} of shape {tuple(p.shape)} "
                    f"has grad_fn={p.grad_fn.name}); optimize the leaf it was computed from"
                )
        group = dict(param_group, params=params)
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise OptimizerError(
                    f"parameter group didn't specify a value of required optimization parameter {name}"
                )
            group.setdefault(name, default)
        self._validate_group(group)
        _validate_master_weights(group, len(self.param_groups))
        if len({id(p) for p in params}) != len(params):
            warnings.warn(
                "optimizer contains a parameter group with duplicate parameters; in future, this will cause an error",
                stacklevel=3,
            )
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in params):
            raise OptimizerError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        self._check_master_groups()

    # the hyperparameters PyTorch's constructor requires to be >= 0, checked in every group
    _nonnegative: tuple[str, ...] = ()
    # whether PyTorch's constructor checks a ``betas`` pair (the Adam family)
    _checks_betas = False

    def _validate_group(self, group):
        """Check a group's hyperparameters: those ``_nonnegative`` names here, the others in subclasses
        (each raises OptimizerError naming the optimizer and the bad value, in PyTorch's words)."""
        for name in self._nonnegative:
            value = group[name]
            if value is not required and value < 0.0:
                what = _DESCRIBED.get(name, f"{name} value")
                raise OptimizerError(f"{type(self).__name__}: Invalid {what}: {value} ({name} must be >= 0)")
        if self._checks_betas:
            _check_betas(type(self).__name__, group["betas"])

    # ------------------------------------------------------------------ gradients and stepping
    @host_step
    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (``set_to_none``, PyTorch's default: the next backward
        allocates fresh ones), or zero them in place, detached from any graph that produced them."""
        self._grad_multipliers = {}
        zero_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    # Optimizers whose fused step applies clip_grad_norm_'s coefficient itself (``grad_multiplier``)
    _fuses_clip = False

    # a host step, as step() is: the coefficient it leaves for the next step() is Python state, so a
    # captured program (adcuda.compile) must run this again on every replay, not replay its kernels
    @host_step
    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> Tensor:
        """``nn.utils.clip_grad_norm_`` over this optimizer's parameters: returns their gradients' total
        ``norm_type``-norm (a 0-d tensor on the first gradient's device, no host sync) and clips them
        to ``max_norm``. Adam and AdamW apply the coefficient inside the next ``step()`` (the
        gradients stay as they are until then); other optimizers scale the gradients now."""
        norm_type = float(norm_type)
        if not norm_type > 0:
            raise OptimizerError(f"clip_grad_norm_: norm_type must be positive or inf, got {norm_type}")
        grads = [p.grad for group in self.param_groups for p in group["params"] if p.grad is not None]
        with no_grad():
            if self._grad_multipliers:  # a coefficient still pending from an earlier call: apply it first
                self._apply_grad_multipliers(grads)
            if not grads:
                return tensor(0.0)
            by_device = {}
            for g in grads:
                by_device.setdefault(g.device, []).append(g)
            norms = [_global_norm(group, norm_type) for group in by_device.values()]
            first = grads[0].device
            total = norms[0] if len(norms) == 1 else _global_norm([n.to(first) for n in norms], norm_type)
            # the expression nn.utils.clip_grad_norm_ scales by, so both give the same gradients
            coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
            self._grad_multipliers = {device: coef.to(device) for device in by_device}
            if not self._fuses_clip:
                self._apply_grad_multipliers(grads)
        return total

    def _apply_grad_multipliers(self, grads):
        multipliers, self._grad_multipliers = self._grad_multipliers, {}
        by_device = {}
        for g in grads:
            by_device.setdefault(g.device, []).append(g)
        for device, group in by_device.items():
            if device in multipliers:
                _foreach_mul_(group, multipliers[device])

    def _run_closure(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def _step_each_group(self, closure):
        """The usual ``step()``: the closure's loss, then ``self._step_group(group)`` for every group,
        under no_grad."""
        loss = self._run_closure(closure)
        with no_grad():
            for group in self.param_groups:
                self._step_group(group)
        return loss

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement step()")

    # ------------------------------------------------------------------ master weights
    def _check_master_groups(self):
        """Half parameters are stepped either all through float32 masters or all directly."""
        with_masters = without_masters = None
        for i, group in enumerate(self.param_groups):
            if any(p.dtype in _HALF for p in group["params"]):
                if group.get("master_weights"):
                    with_masters = i if with_masters is None else with_masters
                elif without_masters is None:
                    without_masters = i
        if with_masters is not None and without_masters is not None:
            raise OptimizerError(
                f"parameter group {without_masters} has float16/bfloat16 parameters without master weights while "
                f"group {with_masters} keeps float32 master copies of its own: group {without_masters} would lose "
                "every update below half precision; give every group with half parameters the same "
                "master_weights (True keeps float32 masters)"
            )

    def _masters_for(self, params):
        """The float32 master copies of half ``params``, each made from its parameter on first use,
        and made again when something else wrote the parameter since this optimizer did and the two
        disagree."""
        masters = []
        for p, version in zip(params, _foreach_version(params)):
            state = self.state[p]
            master = state.get("master_param")
            if master is None:
                master = state["master_param"] = p.detach().to(dtype=dt.float32, copy=True)
            elif self._master_versions.get(p) != version and not bool((master.to(dtype=p.dtype) == p.detach()).all()):
                master.copy_(p.detach())
            masters.append(master)
        return masters

    def _masters_written(self, params):
        """Record that ``params`` were just written from their masters."""
        self._master_versions.update(zip(params, _foreach_version(params)))

    @staticmethod
    def _params_with_grad(group):
        """The parameters of ``group`` that have a gradient, each checked against its gradient."""
        params = []
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if g.device != p.device:
                raise DeviceError(
                    f"optimizer step: a parameter of shape {tuple(p.shape)} is on {p.device} but its "
                    f"gradient is on {g.device}"
                )
            if tuple(g.shape) != tuple(p.shape):
                raise OptimizerError(
                    f"optimizer step: a parameter of shape {tuple(p.shape)} has a gradient of shape {tuple(g.shape)}"
                )
            params.append(p)
        return params

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]}`` (PyTorch's format)."""
        index_of = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index_of.setdefault(id(p), len(index_of))
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index_of[id(p)]: s for p, s in self.state.items() if id(p) in index_of}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore hyperparameters and per-parameter state saved by ``state_dict``; state tensors are
        copied onto each parameter's device (and into its dtype, except ``step``)."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise OptimizerError("optimizer state dict must be a dict with 'state' and 'param_groups' entries")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise OptimizerError(
                f"loaded state dict has a different number of parameter groups "
                f"({len(saved_groups)} saved, {len(self.param_groups)} in this optimizer)"
            )
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(group["params"]) != len(saved["params"]):
                raise OptimizerError(
                    f"loaded state dict contains a parameter group that doesn't match the size of "
                    f"optimizer's group (group {i}: {len(saved['params'])} saved, "
                    f"{len(group['params'])} here)"
                )
        param_of = {}
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            for index, p in zip(saved["params"], group["params"]):
                param_of[index] = (p, group, i)
        new_state = collections.defaultdict(dict)
        for index, values in state_dict["state"].items():
            if index not in param_of:
                raise OptimizerError(
                    f"loaded optimizer state refers to parameter index {index}, which no parameter group lists"
                )
            p, group, i = param_of[index]
            if "master_param" in values and not group.get("master_weights"):
                raise OptimizerError(
                    f"loaded optimizer state holds a float32 master copy of parameter {index} "
                    f"(saved with master_weights=True), but its group {i} here has "
                    "master_weights=False and would drop it; construct the optimizer with "
                    "master_weights=True to resume"
                )
            state_dtype = dt.float32 if keeps_master_copy(group, p) else p.dtype
            new_state[p] = {
                key: _state_value_for(p, key, value, state_dtype)
                for key, value in values.items()
                if key != "master_param" or keeps_master_copy(group, p)
            }
        self.state = new_state
        self.param_groups = [
            dict(
                copy.deepcopy({k: v for k, v in saved.items() if k not in ("params", "master_weights")}),
                params=group["params"],
                **_own_master_setting(group),
            )
            for group, saved in zip(self.param_groups, saved_groups)
        ]
        for group in self.param_groups:
            for name, default in self.defaults.items():
                if default is not required:  # keys a state dict from an older or foreign version lacks
                    group.setdefault(name, default)
        # a master loaded here is authoritative for the parameter's current value
        with_masters = [p for p, s in self.state.items() if "master_param" in s]
        self._master_versions = dict(zip(with_masters, _foreach_version(with_masters)))

    # ------------------------------------------------------------------ step hooks (PyTorch's)
    def register_step_pre_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs before each ``step``; it may return new ``(args, kwargs)``."""
        return RemovableHandle(self.__dict__.setdefault("_step_pre_hooks", {}), hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> RemovableHandle:
        """``hook(optimizer, args, kwargs)`` runs after each ``step``."""
        return RemovableHandle(self.__dict__.setdefault("_step_post_hooks", {}), hook)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._master_versions = {}
        self._grad_multipliers = {}

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines.extend(f"    {key}: {group[key]}" for key in sorted(group) if key != "params")
        lines.append(")")
        return "\n".join(lines)


def _with_step_hooks(step):
    """An optimizer's ``step`` that runs its registered step hooks around it (and costs one dict lookup
    when there are none)."""

    @functools.wraps(step)
    def stepped(self, *args, **kwargs):
        pre, post = self.__dict__.get("_step_pre_hooks"), self.__dict__.get("_step_post_hooks")
        for hook in list(pre.values()) if pre else ():
            args, kwargs = pre_hook_arguments(hook(self, args, kwargs), args, kwargs, type(self).__name__, "step")
        out = step(self, *args, **kwargs)
        for hook in list(post.values()) if post else ():
            hook(self, args, kwargs)
        return out

    return stepped


def hyperparameters(arguments: dict[str, Any]) -> dict[str, Any]:
    """An optimizer's defaults from its constructor's ``locals()``: every argument but ``self`` and
    ``params``, in signature order (PyTorch's ``defaults`` holds the same names)."""
    return {name: value for name, value in arguments.items() if name not in ("self", "params", "__class__")}


def decayed_gradient(p: Tensor, group: dict[str, Any]) -> Tensor:
    """The gradient a step uses: ``p.grad`` (negated under ``maximize``) plus ``weight_decay * p``, or, with
    ``decoupled_weight_decay``, ``p.grad`` as it is and ``p`` shrunk in place by ``lr * weight_decay``."""
    grad = -p.grad if group["maximize"] else p.grad
    weight_decay = group["weight_decay"]
    if weight_decay != 0:
        if group.get("decoupled_weight_decay"):
            p.mul_(1 - group["lr"] * weight_decay)
        else:
            grad = grad.add(p.detach(), alpha=weight_decay)
    return grad


def keeps_master_copy(group: dict[str, Any], p: Tensor) -> bool:
    """Whether ``p``, a parameter of ``group``, is stepped through a float32 master copy."""
    return bool(group.get("master_weights")) and p.dtype in _HALF


def _check_betas(optimizer, betas):
    """PyTorch's check of ``betas``: a pair, each in [0, 1), raised as OptimizerError naming ``optimizer``."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise OptimizerError(f"{optimizer}: Invalid betas: expected a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise OptimizerError(f"{optimizer}: Invalid beta parameter at index {i}: {beta} (must be in [0, 1))")


def _validate_master_weights(group, index):
    master_weights = group.get("master_weights", False)
    if not isinstance(master_weights, bool):
        raise OptimizerError(f"master_weights must be True or False, got {master_weights!r} (group {index})")
    if master_weights:
        for i, p in enumerate(group["params"]):
            if not p.dtype.is_floating_point:
                raise OptimizerError(
                    f"master_weights=True needs floating point parameters, but parameter {i} of "
                    f"group {index} (shape {tuple(p.shape)}) is {p.dtype}"
                )


def _own_master_setting(group):
    return {"master_weights": group["master_weights"]} if "master_weights" in group else {}


def _state_value_for(param, key, value, dtype):
    """A private copy of a saved state value, on ``param``'s device (and in ``dtype``, for float
    tensors other than the step count), so optimizers never share buffers through a state dict."""
    if not isinstance(value, Tensor):
        return copy.deepcopy(value)
    value = value.detach()
    if key == "step":
        return value.clone()
    if value.dtype.is_floating_point and dtype.is_floating_point:
        return value.to(device=param.device, dtype=dtype, copy=True)
    return value.to(device=param.device, copy=True)
