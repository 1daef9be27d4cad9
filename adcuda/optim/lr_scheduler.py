"""Learning-rate schedulers with PyTorch's stepping semantics.

Building a scheduler records each group's ``initial_lr`` and performs step 0 (so the optimizer's lr
is the schedule's first value); each ``step()`` then advances ``last_epoch`` by one and writes the
new lr into every parameter group. ``get_lr()`` is PyTorch's (recursive) form, so sequences match
PyTorch's to the last bit; ``_get_closed_form_lr()`` serves the deprecated ``step(epoch)``.
"""

from __future__ import annotations

import bisect
import math
import types
import warnings
from typing import TYPE_CHECKING

from ..ops.dispatch import host_step
from .optimizer import Optimizer

if TYPE_CHECKING:
    from ..types import Any, Callable, Mapping, Sequence, Tensor

_EPOCH_DEPRECATION = (
    "The epoch parameter in `scheduler.step()` was not necessary and is being deprecated where "
    "possible. Please use `scheduler.step()` to step the scheduler."
)


class LRScheduler:
    # True while the constructor performs step 0: recursive forms keep the lr as the caller set it
    _is_initial = False

    def __init_subclass__(cls, **kwargs):
        # a scheduler's step is Python bookkeeping graph capture must run on every replay
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = host_step(cls.step)

    def __init__(self, optimizer: Optimizer, last_epoch: int = -1) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(
                        f"param 'initial_lr' is not specified in param_groups[{i}] when resuming an optimizer"
                    )
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        """Step 0, as the constructor (and ``SequentialLR``, handing over to a scheduler) performs it."""
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self) -> list[float]:
        raise NotImplementedError(f"{type(self).__name__} must implement get_lr()")

    def get_last_lr(self) -> list[float]:
        return self._last_lr

    @host_step
    def step(self, epoch: int | None = None) -> None:
        self._step_count += 1
        if epoch is not None:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=3)  # 3: past the host-step wrapper
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        """Advance one step (``epoch`` None) or jump to ``epoch`` through the closed form, and write
        the new lrs into the groups."""
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            closed_form = getattr(self, "_get_closed_form_lr", None)
            values = closed_form() if closed_form is not None else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self) -> dict[str, Any]:
        """Everything but the optimizer (which has its own state dict)."""
        return {key: value for key, value in self.__dict__.items() if key != "optimizer"}

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.__dict__.update(state_dict)

    def _state_dict_saving(self, name, save):
        """``state_dict`` of a scheduler whose attribute ``name`` is a list it saves item by item
        (``save(item)``)."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", name)}
        state[name] = [save(item) for item in getattr(self, name)]
        return state

    def _load_state_dict_restoring(self, state_dict, name, restore):
        """``load_state_dict`` of such a scheduler: ``restore(item, saved)`` for each item of ``name``."""
        state_dict = dict(state_dict)
        saved = state_dict.pop(name)
        self.__dict__.update(state_dict)
        for item, value in zip(getattr(self, name), saved):
            restore(item, value)


_LRScheduler = LRScheduler


def _lambda_per_group(optimizer, lr_lambda):
    """``lr_lambda`` as one function per parameter group: one function for all, or a list of one each."""
    if not isinstance(lr_lambda, (list, tuple)):
        return [lr_lambda] * len(optimizer.param_groups)
    if len(lr_lambda) != len(optimizer.param_groups):
        raise ValueError(f"Expected {len(optimizer.param_groups)} lr_lambdas, but got {len(lr_lambda)}")
    return list(lr_lambda)


def _restore_lambda(fn, saved):
    if saved is not None:
        fn.__dict__.update(saved)


class _LambdaScheduler(LRScheduler):
    """LambdaLR's and MultiplicativeLR's: a function of the epoch per group (``lr_lambdas``)."""

    def __init__(
        self,
        optimizer: Optimizer,
        lr_lambda: Callable[[int], float] | Sequence[Callable[[int], float]],
        last_epoch: int = -1,
    ) -> None:
        self.lr_lambdas = _lambda_per_group(optimizer, lr_lambda)
        super().__init__(optimizer, last_epoch)

    def state_dict(self) -> dict[str, Any]:
        """Plain functions and lambdas are not saved (they are code); callable objects' state is."""
        return self._state_dict_saving(
            "lr_lambdas", lambda fn: None if isinstance(fn, types.FunctionType) else dict(fn.__dict__)
        )

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._load_state_dict_restoring(state_dict, "lr_lambdas", _restore_lambda)


class LambdaLR(_LambdaScheduler):
    """lr = initial_lr * lr_lambda(epoch); ``lr_lambda`` is one function or one per group.

    Linear warm-up: ``LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup_steps))``.
    """

    def get_lr(self) -> list[float]:
        return [base_lr * fn(self.last_epoch) for fn, base_lr in zip(self.lr_lambdas, self.base_lrs)]


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer: Optimizer, step_size: int, gamma: float = 0.1, last_epoch: int = -1) -> None:
        if step_size <= 0:
            raise ValueError(f"StepLR: step_size must be a positive integer, got {step_size}")
        self.step_size = step_size
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma ** (self.last_epoch // self.step_size) for base_lr in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr follows half a cosine from the initial lr down to ``eta_min`` over ``T_max`` epochs (and
    back up, periodically, past ``T_max``, as PyTorch's does)."""

    def __init__(self, optimizer: Optimizer, T_max: int, eta_min: float = 0.0, last_epoch: int = -1) -> None:  # noqa: N803 (PyTorch's name)
        if T_max <= 0:
            raise ValueError(f"CosineAnnealingLR: T_max must be positive, got {T_max}")
        self.T_max = T_max
        self.eta_min = eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        t, T = self.last_epoch, self.T_max
        if self._is_initial:
            return [group["lr"] for group in groups]
        if self._step_count == 1 and t > 0:
            return [
                self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(t * math.pi / T)) / 2
                for base_lr in self.base_lrs
            ]
        if (t - 1 - T) % (2 * T) == 0:
            return [
                group["lr"] + (base_lr - self.eta_min) * (1 - math.cos(math.pi / T)) / 2
                for base_lr, group in zip(self.base_lrs, groups)
            ]
        return [
            (1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T)) * (group["lr"] - self.eta_min)
            + self.eta_min
            for group in groups
        ]

    def _get_closed_form_lr(self):
        return [
            self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
            for base_lr in self.base_lrs
        ]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer: Optimizer, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self._is_initial:
            return [group["lr"] for group in self.optimizer.param_groups]
        return [group["lr"] * self.gamma for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [base_lr * self.gamma**self.last_epoch for base_lr in self.base_lrs]


class LinearLR(LRScheduler):
    """The lr's factor moves linearly from ``start_factor`` to ``end_factor`` over ``total_iters``
    epochs, then stays (the usual linear warm-up)."""

    def __init__(
        self,
        optimizer: Optimizer,
        start_factor: float = 1.0 / 3,
        end_factor: float = 1.0,
        total_iters: int = 5,
        last_epoch: int = -1,
    ) -> None:
        if start_factor > 1.0 or start_factor <= 0:
            raise ValueError(
                f"LinearLR: start_factor expected to be greater than 0 and less or equal to 1, got {start_factor}"
            )
        if end_factor > 1.0 or end_factor < 0:
            raise ValueError(f"LinearLR: end_factor expected to be between 0 and 1, got {end_factor}")
        self.start_factor = start_factor
        self.end_factor = end_factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.start_factor for group in groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        # the ratio of this epoch's factor to the last one's (PyTorch's recursive form, bit for bit)
        span = self.end_factor - self.start_factor
        ratio = 1.0 + span / (self.total_iters * self.start_factor + (self.last_epoch - 1) * span)
        return [group["lr"] * ratio for group in groups]

    def _get_closed_form_lr(self):
        progress = min(self.total_iters, self.last_epoch) / self.total_iters
        return [
            base_lr * (self.start_factor + (self.end_factor - self.start_factor) * progress)
            for base_lr in self.base_lrs
        ]


class _ComposedScheduler(LRScheduler):
    """A scheduler stepping others (``self._schedulers``): its state dict holds theirs."""

    _schedulers: list[LRScheduler]

    def state_dict(self) -> dict[str, Any]:
        return self._state_dict_saving("_schedulers", lambda scheduler: scheduler.state_dict())

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self._load_state_dict_restoring(
            state_dict, "_schedulers", lambda scheduler, saved: scheduler.load_state_dict(saved)
        )


class SequentialLR(_ComposedScheduler):
    """Hand the optimizer from one scheduler to the next at each milestone epoch (the next one starts
    from its own epoch 0)."""

    def __init__(
        self, optimizer: Optimizer, schedulers: Sequence[LRScheduler], milestones: Sequence[int], last_epoch: int = -1
    ) -> None:
        if len(schedulers) < 1:
            raise ValueError("SequentialLR expects at least one scheduler, but got no scheduler.")
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"SequentialLR: the scheduler at index {i} should have `optimizer` as its attribute")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    "SequentialLR does not support `ReduceLROnPlateau` scheduler as it requires "
                    "additional kwargs to be specified when calling `step`, but got one at index "
                    f"{i} in the given schedulers sequence."
                )
            if scheduler.optimizer is not optimizer:
                raise ValueError(
                    f"SequentialLR expects all schedulers to belong to the same optimizer, but the "
                    f"{type(scheduler).__name__} at index {i} has another one"
                )
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(
                "Sequential Schedulers expects number of schedulers provided to be one more than the "
                f"number of milestone points, but got number of schedulers {len(schedulers)} and the "
                f"number of milestones to be equal to {len(milestones)}"
            )
        self._schedulers = list(schedulers)
        self._milestones = list(milestones)
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        # every scheduler took its step 0 when it was built: undo those, then let the first one
        # in charge take it again from the initial lrs
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"]
        self._undo_initial_steps(self)
        first = self._schedulers[bisect.bisect_right(self._milestones, 0)]
        first._initial_step()
        self._last_lr = first.get_last_lr()

    def _undo_initial_steps(self, scheduler):
        if hasattr(scheduler, "_schedulers"):
            for inner in scheduler._schedulers:
                self._undo_initial_steps(inner)
        elif hasattr(scheduler, "last_epoch"):
            scheduler.last_epoch -= 1

    def step(self) -> None:
        self.last_epoch += 1
        index = bisect.bisect_right(self._milestones, self.last_epoch)
        scheduler = self._schedulers[index]
        if index > 0 and self._milestones[index - 1] == self.last_epoch:
            scheduler._update_lr(0)  # the next scheduler starts at its epoch 0
        else:
            scheduler.step()
        self._last_lr = scheduler.get_last_lr()


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once a metric (passed to ``step``) has not improved for more than
    ``patience`` epochs; ``threshold``/``threshold_mode`` say what counts as an improvement, no
    reduction happens for ``cooldown`` epochs after one, and no lr goes below its ``min_lr`` (a
    reduction smaller than ``eps`` is skipped)."""

    def __init__(
        self,
        optimizer: Optimizer,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0,
        eps: float = 1e-8,
    ) -> None:
        if factor >= 1.0:
            raise ValueError(f"ReduceLROnPlateau: factor should be < 1.0, got {factor}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(
                    f"ReduceLROnPlateau: expected {len(optimizer.param_groups)} min_lrs, got {len(min_lr)}"
                )
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience = patience
        self.cooldown = cooldown
        self.eps = eps
        self.last_epoch = 0
        self._last_lr = [group["lr"] for group in optimizer.param_groups]
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics: float | Tensor, epoch: int | None = None) -> None:
        current = float(metrics)
        if epoch is None:
            epoch = self.last_epoch + 1
        else:
            warnings.warn(_EPOCH_DEPRECATION, UserWarning, stacklevel=2)
        self.last_epoch = epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.in_cooldown:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0  # bad epochs during a cooldown do not count
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _reduce_lr(self):
        groups = self.optimizer.param_groups
        if len(groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(
                    f"ReduceLROnPlateau: the optimizer has {len(groups)} parameter groups but "
                    f"{len(self.min_lrs)} min_lrs were given (a group was added after the scheduler "
                    "was built); set `min_lrs` to one value per group"
                )
            self.min_lrs = [self.default_min_lr] * len(groups)
        for group, min_lr in zip(groups, self.min_lrs):
            old_lr = float(group["lr"])
            new_lr = max(old_lr * self.factor, min_lr)
            if old_lr - new_lr > self.eps:
                group["lr"] = new_lr

    @property
    def in_cooldown(self) -> bool:
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min":
            return a < best * (1.0 - self.threshold) if self.threshold_mode == "rel" else a < best - self.threshold
        return a > best * (self.threshold + 1.0) if self.threshold_mode == "rel" else a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode {mode!r} is unknown (expected 'min' or 'max')")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(
                f"ReduceLROnPlateau: threshold mode {threshold_mode!r} is unknown (expected 'rel' or 'abs')"
            )
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode = mode
        self.threshold = threshold
        self.threshold_mode = threshold_mode

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


def _per_group(name, optimizer, value):
    """``value`` given once or per parameter group, as one value per group."""
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(
                f"{name} must have the same length as optimizer.param_groups. {name} has {len(value)} "
                f"values, param_groups has {len(optimizer.param_groups)}."
            )
        return list(value)
    return [value] * len(optimizer.param_groups)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: the lr rises from ``max_lr / div_factor`` to ``max_lr`` over the first
    ``pct_start`` of ``total_steps`` and anneals (``'cos'`` or ``'linear'``) to
    ``initial_lr / final_div_factor``; with ``three_phase`` it comes back down to the initial lr
    first and anneals to the minimum in a third phase. With ``cycle_momentum`` the momentum (SGD's
    ``momentum``, or Adam's first beta) moves the opposite way between ``max_momentum`` and
    ``base_momentum``. Step it once per batch."""

    def __init__(
        self,
        optimizer: Optimizer,
        max_lr: float | Sequence[float],
        total_steps: int | None = None,
        epochs: int | None = None,
        steps_per_epoch: int | None = None,
        pct_start: float = 0.3,
        anneal_strategy: str = "cos",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.85,
        max_momentum: float | Sequence[float] = 0.95,
        div_factor: float = 25.0,
        final_div_factor: float = 1e4,
        three_phase: bool = False,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        self.optimizer = optimizer
        if total_steps is not None:
            if not isinstance(total_steps, int) or total_steps <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer total_steps, but got {total_steps}")
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            if not isinstance(epochs, int) or epochs <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer epochs, but got {epochs}")
            if not isinstance(steps_per_epoch, int) or steps_per_epoch <= 0:
                raise ValueError(f"OneCycleLR: expected positive integer steps_per_epoch, but got {steps_per_epoch}")
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: you must define either total_steps OR (epochs AND steps_per_epoch)")
        if not isinstance(pct_start, float) or not 0 <= pct_start <= 1:
            raise ValueError(f"OneCycleLR: expected float between 0 and 1 pct_start, but got {pct_start}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(
                f"OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}"
            )
        self._anneal_func_type = anneal_strategy
        warm_end = float(pct_start * self.total_steps) - 1
        # each phase: (last step, lr from, lr to, momentum from, momentum to), named by group keys
        if three_phase:
            self._schedule_phases = [
                (warm_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (float(2 * pct_start * self.total_steps) - 2, "max_lr", "initial_lr", "base_momentum", "max_momentum"),
                (self.total_steps - 1, "initial_lr", "min_lr", "max_momentum", "max_momentum"),
            ]
        else:
            self._schedule_phases = [
                (warm_end, "initial_lr", "max_lr", "max_momentum", "base_momentum"),
                (self.total_steps - 1, "max_lr", "min_lr", "base_momentum", "max_momentum"),
            ]
        max_lrs = _per_group("max_lr", optimizer, max_lr)
        if last_epoch == -1:
            for group, group_max_lr in zip(optimizer.param_groups, max_lrs):
                group["initial_lr"] = group_max_lr / div_factor
                group["max_lr"] = group_max_lr
                group["min_lr"] = group["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "OneCycleLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            if last_epoch == -1:
                for group, group_max, group_base in zip(optimizer.param_groups, max_momentums, base_momentums):
                    self._set_momentum(group, group_max)
                    group["max_momentum"] = group_max
                    group["base_momentum"] = group_base
        super().__init__(optimizer, last_epoch)

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def _anneal(self, start, end, pct):
        if self._anneal_func_type == "cos":
            return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)
        return (end - start) * pct + start

    def get_lr(self) -> list[float]:
        step = self.last_epoch
        if step > self.total_steps:
            raise ValueError(
                f"OneCycleLR: tried to step {step} times. The specified number of total steps is {self.total_steps}"
            )
        lrs = []
        for group in self.optimizer.param_groups:
            start_step = 0.0
            for i, (end_step, lr_from, lr_to, momentum_from, momentum_to) in enumerate(self._schedule_phases):
                if step <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step - start_step) / (end_step - start_step)
                    lrs.append(self._anneal(group[lr_from], group[lr_to], pct))
                    if self.cycle_momentum:
                        self._set_momentum(group, self._anneal(group[momentum_from], group[momentum_to], pct))
                    break
                start_step = end_step
        return lrs


# ------------------------------------------------------------------------------------------------
# More of PyTorch's schedulers (issue 15), with its recursive forms
class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each milestone epoch (by gamma ** k at a milestone given k times)."""

    def __init__(
        self, optimizer: Optimizer, milestones: Sequence[int], gamma: float = 0.1, last_epoch: int = -1
    ) -> None:
        self.milestones = {}
        for m in milestones:
            self.milestones[m] = self.milestones.get(m, 0) + 1
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        times = self.milestones.get(self.last_epoch, 0)
        return [group["lr"] * self.gamma**times for group in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        passed = bisect.bisect_right(sorted(m for m, k in self.milestones.items() for _ in range(k)), self.last_epoch)
        return [base_lr * self.gamma**passed for base_lr in self.base_lrs]


class ConstantLR(LRScheduler):
    """The lr times ``factor`` until epoch ``total_iters``, then the lr itself."""

    def __init__(
        self, optimizer: Optimizer, factor: float = 1.0 / 3, total_iters: int = 5, last_epoch: int = -1
    ) -> None:
        if factor > 1.0 or factor < 0:
            raise ValueError(f"ConstantLR: constant factor expected to be between 0 and 1, got {factor}")
        self.factor = factor
        self.total_iters = total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0:
            return [group["lr"] * self.factor for group in groups]
        if self.last_epoch != self.total_iters:
            return [group["lr"] for group in groups]
        return [group["lr"] * (1.0 / self.factor) for group in groups]

    def _get_closed_form_lr(self):
        reached = self.last_epoch >= self.total_iters
        return [base_lr * (self.factor + reached * (1 - self.factor)) for base_lr in self.base_lrs]


class MultiplicativeLR(_LambdaScheduler):
    """Multiply the lr by ``lr_lambda(epoch)`` every epoch; one function or one per group."""

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch > 0:
            return [group["lr"] * fn(self.last_epoch) for fn, group in zip(self.lr_lambdas, groups)]
        return [group["lr"] for group in groups]


class PolynomialLR(LRScheduler):
    """The lr decays as (1 - epoch / total_iters) ** power, reaching 0 at ``total_iters``."""

    def __init__(self, optimizer: Optimizer, total_iters: int = 5, power: float = 1.0, last_epoch: int = -1) -> None:
        self.total_iters = total_iters
        self.power = power
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        groups = self.optimizer.param_groups
        if self.last_epoch == 0 or self.last_epoch > self.total_iters:
            return [group["lr"] for group in groups]
        t, n = self.last_epoch, self.total_iters
        decay = ((1.0 - t / n) / (1.0 - (t - 1) / n)) ** self.power
        return [group["lr"] * decay for group in groups]

    def _get_closed_form_lr(self):
        left = 1.0 - min(self.total_iters, self.last_epoch) / self.total_iters
        return [base_lr * left**self.power for base_lr in self.base_lrs]


class CosineAnnealingWarmRestarts(LRScheduler):
    """Cosine annealing from the initial lr to ``eta_min`` over ``T_0`` epochs, restarted at the
    initial lr each time, each period ``T_mult`` times the last (SGDR)."""

    def __init__(
        self,
        optimizer: Optimizer,
        T_0: int,  # noqa: N803 (PyTorch's names)
        T_mult: int = 1,  # noqa: N803
        eta_min: float = 0.0,
        last_epoch: int = -1,
    ) -> None:
        if T_0 <= 0 or not isinstance(T_0, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: expected a positive integer T_0, got {T_0}")
        if T_mult < 1 or not isinstance(T_mult, int):
            raise ValueError(f"CosineAnnealingWarmRestarts: expected an integer T_mult >= 1, got {T_mult}")
        self.T_0 = T_0
        self.T_i = T_0
        self.T_mult = T_mult
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [
            self.eta_min + (base_lr - self.eta_min) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
            for base_lr in self.base_lrs
        ]

    def step(self, epoch: float | None = None) -> None:
        """One epoch on, or (a fraction allowed) to ``epoch``: PyTorch's two ways of stepping SGDR."""
        self._step_count += 1
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur -= self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts: expected a non-negative epoch, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult**n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult**n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]


class CyclicLR(LRScheduler):
    """The lr cycles between ``base_lr`` and ``max_lr`` (up in ``step_size_up`` steps, down in
    ``step_size_down``), its amplitude scaled per cycle (``triangular2``: halved each cycle) or per
    step (``exp_range``: gamma ** step) or by ``scale_fn``; with ``cycle_momentum`` the momentum (or
    Adam's beta1) cycles the other way between ``max_momentum`` and ``base_momentum``. Stepped per
    batch, as PyTorch's."""

    def __init__(
        self,
        optimizer: Optimizer,
        base_lr: float | Sequence[float],
        max_lr: float | Sequence[float],
        step_size_up: int = 2000,
        step_size_down: int | None = None,
        mode: str = "triangular",
        gamma: float = 1.0,
        scale_fn: Callable[[float], float] | None = None,
        scale_mode: str = "cycle",
        cycle_momentum: bool = True,
        base_momentum: float | Sequence[float] = 0.8,
        max_momentum: float | Sequence[float] = 0.9,
        last_epoch: int = -1,
    ) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
        base_lrs = _per_group("base_lr", optimizer, base_lr)
        if last_epoch == -1:
            for lr, group in zip(base_lrs, optimizer.param_groups):
                group["lr"] = lr
        self.max_lrs = _per_group("max_lr", optimizer, max_lr)
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError(f"CyclicLR: mode {mode!r} is invalid and scale_fn is None")
        self.mode = mode
        self.gamma = gamma
        self._scale_fn_custom = scale_fn
        # the built-in modes fix the scale mode, as PyTorch's do
        self.scale_mode = scale_mode if scale_fn is not None else ("iterations" if mode == "exp_range" else "cycle")
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            if "momentum" not in optimizer.defaults and "betas" not in optimizer.defaults:
                raise ValueError(
                    "CyclicLR: optimizer must support momentum or beta1 with `cycle_momentum` option enabled"
                )
            self.use_beta1 = "betas" in optimizer.defaults
            self.base_momentums = _per_group("base_momentum", optimizer, base_momentum)
            self.max_momentums = _per_group("max_momentum", optimizer, max_momentum)
            if last_epoch == -1:
                for high, low, group in zip(self.max_momentums, self.base_momentums, optimizer.param_groups):
                    self._set_momentum(group, high)
                    group["max_momentum"] = high
                    group["base_momentum"] = low
        self._cycle_base_lrs = base_lrs
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _set_momentum(self, group, value):
        if self.use_beta1:
            group["betas"] = (value, *group["betas"][1:])
        else:
            group["momentum"] = value

    def scale_fn(self, x: float) -> float:
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        if self.mode == "exp_range":
            return self.gamma**x
        return 1.0

    def get_lr(self) -> list[float]:
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle
        scale_factor = x / self.step_ratio if x <= self.step_ratio else (x - 1) / (self.step_ratio - 1)
        scale = self.scale_fn(cycle if self.scale_mode == "cycle" else self.last_epoch)
        lrs = [base + (high - base) * scale_factor * scale for base, high in zip(self._cycle_base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for group, low, high in zip(self.optimizer.param_groups, self.base_momentums, self.max_momentums):
                self._set_momentum(group, high - (high - low) * scale_factor * scale)
        return lrs

    def state_dict(self) -> dict[str, Any]:
        """Without the optimizer; a custom ``scale_fn`` is saved only as a callable object's state."""
        state = {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "_scale_fn_custom")}
        fn = self._scale_fn_custom
        state["_scale_fn_custom"] = None if fn is None or isinstance(fn, types.FunctionType) else dict(fn.__dict__)
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        state_dict = dict(state_dict)
        saved = state_dict.pop("_scale_fn_custom")
        self.__dict__.update(state_dict)
        if saved is not None and self._scale_fn_custom is not None:
            self._scale_fn_custom.__dict__.update(saved)


class ChainedScheduler(_ComposedScheduler):
    """Steps every scheduler of ``schedulers`` (all of one optimizer) at each ``step()``, in order, so
    that their factors compose (a warm-up times a decay, say)."""

    def __init__(self, schedulers: Sequence[LRScheduler], optimizer: Optimizer | None = None) -> None:
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler expects at least one scheduler to be chained, but got no scheduler.")
        optimizer = optimizer or schedulers[0].optimizer
        for i, scheduler in enumerate(schedulers):
            if not hasattr(scheduler, "optimizer"):
                raise TypeError(f"ChainedScheduler: the scheduler at index {i} has no optimizer")
            if isinstance(scheduler, ReduceLROnPlateau):
                raise ValueError(
                    f"ChainedScheduler does not support ReduceLROnPlateau (index {i}): its step() needs a metric"
                )
            if scheduler.optimizer is not optimizer:
                raise ValueError(
                    f"ChainedScheduler expects all schedulers to belong to the same optimizer, but the one at index "
                    f"{i} ({type(scheduler).__name__}) has another"
                )
        self._schedulers = list(schedulers)
        self.optimizer = optimizer
        self._last_lr = [group["lr"] for group in optimizer.param_groups]

    def step(self) -> None:
        for scheduler in self._schedulers:
            scheduler.step()
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]
