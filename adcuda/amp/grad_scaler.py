"""``GradScaler``: dynamic loss scaling with PyTorch's API, defaults, algorithm and error messages.

Each iteration: ``scaler.scale(loss).backward()`` multiplies the loss (so the gradients) by the
scale, which keeps small float16 gradients from underflowing; ``scaler.step(optimizer)`` unscales
the gradients and checks them for inf/NaN in one multi-tensor op per device, then steps the
optimizer unless something overflowed; ``scaler.update()`` backs the scale off after an overflow
and grows it after ``growth_interval`` clean iterations. Both steps are PyTorch's fused ops
(``adcuda._amp_foreach_non_finite_check_and_unscale_``, ``_amp_update_scale_``, in
adcuda/ops/optim.py). The scale, growth tracker and found-inf flags stay on the device: the host
reads a flag only in ``step()`` (to decide whether to step), and nothing else until ``get_scale()``.

Beyond PyTorch:

- ``step()`` returns whether the optimizer stepped (True/False), so a learning-rate scheduler can
  follow; PyTorch returns the optimizer's own return value (None without a closure, and closures
  are refused while the scaler is enabled, as in PyTorch). A disabled scaler steps and returns True.
- The scale stays within ``[min_scale, max_scale]`` (default ``[1.0, 2**24]``), so a run of
  overflows cannot drive it to 0 (which would zero every gradient without any overflow to notice)
  and growth cannot reach inf. Both are saved in ``state_dict``.
- Half gradients of an optimizer stepped through float32 master weights
  (``master_weights=True``) are accepted: ``unscale_`` writes their unscaled values into new
  float32 ``.grad`` tensors (unscaling in float16 would flush the small gradients the scaling
  saved); float16 gradients without master weights raise PyTorch's "Attempting to unscale FP16
  gradients." error.
- ``device`` only names where the scale lives first: the scale follows the outputs' device, and a
  ``"cuda"`` scaler on a machine without CUDA keeps working on the CPU fallback (which runs the same
  float16 program) instead of disabling itself as PyTorch's does.
- Where no float16 compute ran (float32 gradients and no float16 ``autocast`` region) the scaler
  says once, with a warning, that it is not needed there, and keeps working.
"""

from __future__ import annotations

import enum
import math
import warnings
from collections import abc, defaultdict
from typing import Any

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..device import as_device
from ..errors import AdcudaError
from ..factories import empty_like, full, zeros
from ..ops.dispatch import host_step
from ..ops.optim import _amp_foreach_non_finite_check_and_unscale_, _amp_update_scale_
from ..tensor import Tensor
from .autocast import float16_regions_entered

_HALF = (dt.float16, dt.bfloat16)


class GradScalerError(AdcudaError, RuntimeError):
    """GradScaler calls out of order: unscale_ twice, step before any gradient, update before scale."""


class GradScalerValueError(AdcudaError, ValueError):
    """A bad GradScaler argument or state dict, or float16 gradients it cannot unscale."""


class _OptState(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state():
    return {"stage": _OptState.READY, "found_inf_per_device": {}}


_STATE_KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")


class GradScaler:
    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
        min_scale: float = 1.0,
        max_scale: float = 2.0**24,
    ) -> None:
        self._device = as_device(device, "GradScaler").type
        self._enabled = bool(enabled)
        if self._enabled:
            _check_factors(growth_factor, backoff_factor, growth_interval)
            _check_range(min_scale, max_scale)
            _check_in_range("init_scale", init_scale, min_scale, max_scale)
        self._init_scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._min_scale = float(min_scale)
        self._max_scale = float(max_scale)
        self._init_growth_tracker = 0
        self._scale = None  # 0-d float32 tensor, made on the first scale() call
        self._growth_tracker = None  # 0-d int32 tensor: clean iterations since the last change
        self._need_checked = False
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    # ------------------------------------------------------------------ the iteration
    def scale(self, outputs: Any) -> Any:
        """``outputs`` (a tensor, or nested lists/tuples/iterables of tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)
        scales = {}

        def apply_scale(value):
            if isinstance(value, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(value.device)
                if value.device not in scales:
                    scales[value.device] = self._scale.to(device=value.device)
                return value * scales[value.device]
            if isinstance(value, abc.Iterable):
                scaled = map(apply_scale, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise GradScalerValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    # unscale_, step and update keep the skip decision and the scale's bookkeeping on the host (step
    # reads found_inf): graph capture runs them on every replay
    @host_step
    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale in place and record whether any is inf/NaN
        (call it before gradient clipping; ``step`` calls it when it was not called)."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is _OptState.UNSCALED:
            raise GradScalerError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is _OptState.STEPPED:
            raise GradScalerError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()  # as PyTorch: the reciprocal in fp64
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale)
        state["stage"] = _OptState.UNSCALED

    def _unscale_grads_(self, optimizer, inv_scale):
        per_device = defaultdict(lambda: ([], []))  # device -> (outputs, gradients)
        saw_float16 = False
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    saw_float16 = saw_float16 or g.dtype is dt.float16
                    if _stepped_through_float32_master(group, p) and g.dtype in _HALF:
                        out = empty_like(g, dtype=dt.float32)
                        p.grad = out
                    elif g.dtype is dt.float16:
                        raise GradScalerValueError(
                            f"Attempting to unscale FP16 gradients. (A float16 parameter of shape "
                            f"{tuple(p.shape)} is stepped in float16, where its unscaled gradient would "
                            "underflow; construct the optimizer with master_weights=True to keep float32 "
                            "master weights, or keep the parameters in float32 and use autocast.)"
                        )
                    else:
                        out = g
                    outs, grads = per_device[g.device]
                    outs.append(out)
                    grads.append(g)
            if per_device and not saw_float16:
                self._say_once_if_not_needed(optimizer)
            found_inf_per_device = {}
            for device, (outs, grads) in per_device.items():
                found_inf = found_inf_per_device[device] = zeros((), dtype=dt.float32, device=device)
                _amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale.to(device=device), out=outs)
        return found_inf_per_device

    def _say_once_if_not_needed(self, optimizer):
        if self._need_checked:
            return
        self._need_checked = True
        if not float16_regions_entered():
            devices = sorted({str(p.device) for g in optimizer.param_groups for p in g["params"]})
            warnings.warn(
                f"GradScaler: the gradients on {', '.join(devices)} are not float16 and no float16 "
                "autocast region has run, so there is no float16 underflow to prevent: loss scaling "
                "is not needed here (it keeps working)",
                stacklevel=5,
            )  # 5: past the host-step wrapper

    @host_step
    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> bool:
        """Unscale (unless ``unscale_`` was called) and step ``optimizer`` when no gradient is
        inf/NaN; returns whether it stepped."""
        if not self._enabled:
            optimizer.step(*args, **kwargs)
            return True
        if "closure" in kwargs:
            raise GradScalerError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is _OptState.STEPPED:
            raise GradScalerError("step() has already been called since the last update().")
        if state["stage"] is _OptState.READY:
            self.unscale_(optimizer)
        if not state["found_inf_per_device"]:
            raise GradScalerError(
                "No inf checks were recorded for this optimizer. (None of its parameters has a "
                "gradient: call scaler.scale(loss).backward() before scaler.step(optimizer).)"
            )
        found_inf = sum(v.item() for v in state["found_inf_per_device"].values())
        stepped = not found_inf
        if stepped:
            optimizer.step(*args, **kwargs)
        elif self._scale.item() <= self._min_scale:
            warnings.warn(
                f"GradScaler: gradients are inf/NaN even at the minimum scale {self._min_scale}; the "
                "optimizer step was skipped. The loss or the model itself overflows (or holds a NaN): "
                "lower min_scale only if the loss is legitimately huge",
                stacklevel=3,
            )  # 3: past host_step
        state["stage"] = _OptState.STEPPED
        return stepped

    @host_step
    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Back off or grow the scale from this iteration's inf checks (or set it to ``new_scale``),
        and start the next iteration."""
        if not self._enabled:
            return
        scale, growth_tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            self._set_scale(new_scale)
        else:
            found_infs = [
                found_inf.to(device=scale.device)
                for state in self._per_optimizer_states.values()
                for found_inf in state["found_inf_per_device"].values()
            ]
            if not found_infs:
                raise GradScalerError("No inf checks were recorded prior to update.")
            with no_grad():
                found_inf_combined = found_infs[0]
                for found_inf in found_infs[1:]:
                    found_inf_combined = found_inf_combined + found_inf
                _amp_update_scale_(
                    scale,
                    growth_tracker,
                    found_inf_combined,
                    self._growth_factor,
                    self._backoff_factor,
                    self._growth_interval,
                    min_scale=self._min_scale,
                    max_scale=self._max_scale,
                )
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def _set_scale(self, new_scale):
        reason = (
            "new_scale should be a float or a 1-element adcuda float32 Tensor with requires_grad=False, "
            f"on the scaler's device ({self._scale.device})"
        )
        if isinstance(new_scale, Tensor):
            if (
                new_scale.device != self._scale.device
                or new_scale.numel() != 1
                or new_scale.dtype is not dt.float32
                or new_scale.requires_grad
            ):
                raise GradScalerValueError(reason)
            value = float(new_scale.item())
        elif isinstance(new_scale, (int, float)) and not isinstance(new_scale, bool):
            value = float(new_scale)
        else:
            raise GradScalerValueError(reason)
        _check_in_range("new_scale", value, self._min_scale, self._max_scale)
        with no_grad():
            self._scale.fill_(value)

    # ------------------------------------------------------------------ scale bookkeeping
    def _lazy_init_scale_growth_tracker(self, device):
        self._scale = full((), self._init_scale, dtype=dt.float32, device=device)
        self._growth_tracker = full((), self._init_growth_tracker, dtype=dt.int32, device=device)

    def _check_scale_growth_tracker(self, funcname):
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise GradScalerError(f"Attempted {funcname} but _scale is None.  " + fix)
        return self._scale, self._growth_tracker

    def get_scale(self) -> float:
        """The current scale as a Python float (a host read), ``init_scale`` before the first
        ``scale()``, and 1.0 when disabled."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        _check_factors(new_factor, self._backoff_factor, self._growth_interval)
        self._growth_factor = float(new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        _check_factors(self._growth_factor, new_factor, self._growth_interval)
        self._backoff_factor = float(new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        _check_factors(self._growth_factor, self._backoff_factor, new_interval)
        self._growth_interval = int(new_interval)

    def get_min_scale(self) -> float:
        return self._min_scale

    def get_max_scale(self) -> float:
        return self._max_scale

    def is_enabled(self) -> bool:
        return self._enabled

    # ------------------------------------------------------------------ state dicts
    def state_dict(self) -> dict[str, Any]:
        """PyTorch's keys (``scale growth_factor backoff_factor growth_interval _growth_tracker``)
        plus ``min_scale`` and ``max_scale``; an empty dict when disabled."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._get_growth_tracker(),
            "min_scale": self._min_scale,
            "max_scale": self._max_scale,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore a state saved by ``state_dict`` (PyTorch's or ours); the scale bounds keep
        their current values when the state dict has none."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise GradScalerError(
                "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler."
            )
        missing = [key for key in _STATE_KEYS if key not in state_dict]
        if missing:
            raise GradScalerValueError(
                f"GradScaler.load_state_dict: the state dict lacks {', '.join(missing)} "
                f"(it has {', '.join(sorted(map(str, state_dict)))})"
            )
        min_scale = float(state_dict.get("min_scale", self._min_scale))
        max_scale = float(state_dict.get("max_scale", self._max_scale))
        _check_range(min_scale, max_scale)
        _check_in_range("the saved scale", state_dict["scale"], min_scale, max_scale)
        _check_factors(state_dict["growth_factor"], state_dict["backoff_factor"], state_dict["growth_interval"])
        self._min_scale, self._max_scale = min_scale, max_scale
        self._init_scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        with no_grad():
            if self._scale is not None:
                self._scale.fill_(self._init_scale)
            if self._growth_tracker is not None:
                self._growth_tracker.fill_(self._init_growth_tracker)


def _stepped_through_float32_master(group, p):
    """Whether the optimizer steps ``p`` through a float32 master copy: the rule of
    ``master_weights=True`` in adcuda.optim (half parameters of such a group), read from the
    parameter group as PyTorch's GradScaler reads optimizers, through ``param_groups`` only."""
    return bool(group.get("master_weights")) and p.dtype in _HALF


def _check_factors(growth_factor, backoff_factor, growth_interval):
    if not growth_factor > 1.0:
        raise GradScalerValueError(f"The growth factor must be > 1.0. (got {growth_factor})")
    if not 0.0 < backoff_factor < 1.0:
        raise GradScalerValueError(f"The backoff factor must be < 1.0. (and > 0; got {backoff_factor})")
    if isinstance(growth_interval, bool) or not isinstance(growth_interval, int) or growth_interval < 1:
        raise GradScalerValueError(f"growth_interval must be a positive int, got {growth_interval!r}")


def _check_range(min_scale, max_scale):
    if not (0.0 < min_scale <= max_scale and math.isfinite(max_scale)):
        raise GradScalerValueError(
            f"GradScaler needs 0 < min_scale <= max_scale < inf, got min_scale={min_scale}, max_scale={max_scale}"
        )


def _check_in_range(name, value, min_scale, max_scale):
    if not min_scale <= value <= max_scale:
        raise GradScalerValueError(
            f"GradScaler: {name} {value} is outside [min_scale, max_scale] = [{min_scale}, {max_scale}]"
        )
