"""Thread-local gradient recording switches: ``no_grad``, ``enable_grad``, ``set_grad_enabled``,
``inference_mode``."""

from __future__ import annotations

import functools
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any


class _GradState(threading.local):
    enabled = True  # each thread starts with gradients recorded


# The dispatch point reads ``state.enabled`` directly on every op call.
state = _state = _GradState()


def is_grad_enabled() -> bool:
    return _state.enabled


def _set_enabled(mode):
    _state.enabled = bool(mode)


class _GradModeContext:
    """Context manager that also works as a decorator (``@no_grad()`` and ``@no_grad``)."""

    _mode: bool | None = None  # the grad mode it enters (set by each subclass, by set_grad_enabled per use)
    _prev: bool  # the grad mode it restores

    def __new__(cls, func: Callable[..., Any] | None = None) -> Any:
        self = super().__new__(cls)
        if callable(func):  # used bare as ``@no_grad``
            return self(func)
        return self

    def __enter__(self) -> _GradModeContext:
        self._prev = is_grad_enabled()
        _set_enabled(self._mode)
        return self

    def __exit__(self, *exc: object) -> None:
        _set_enabled(self._prev)

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self._fresh():
                return func(*args, **kwargs)

        return wrapper

    def _fresh(self) -> _GradModeContext:
        """A new context doing what this one does, for one call of a function it decorates."""
        return self.__class__()


class no_grad(_GradModeContext):
    _mode = False


class enable_grad(_GradModeContext):
    _mode = True


class set_grad_enabled(_GradModeContext):
    """``set_grad_enabled(False)`` switches at once (as in PyTorch) and restores on ``__exit__``."""

    def __new__(cls, mode: bool) -> set_grad_enabled:
        self = object.__new__(cls)
        self._prev = is_grad_enabled()
        self._mode = bool(mode)
        _set_enabled(mode)
        return self

    def __enter__(self) -> set_grad_enabled:
        return self

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        _set_enabled(self._prev)  # as a decorator it switches per call only
        return super().__call__(func)

    def _fresh(self) -> set_grad_enabled:
        return set_grad_enabled(bool(self._mode))


class inference_mode(_GradModeContext):
    """PyTorch's ``inference_mode(mode=True)`` (context manager and decorator, bare or called).

    In adcuda it is ``no_grad`` while it is on: nothing is recorded. PyTorch's inference tensors
    (which refuse to enter autograd later) do not exist here, so a tensor made inside can be used in
    a graph afterwards; that is more lenient than PyTorch, never stricter.
    ``inference_mode(False)`` leaves the grad mode as it is, as in PyTorch."""

    _on: bool  # whether it switches inference mode on (False: it leaves both modes as they are)
    _prev_inference: bool

    def __new__(cls, mode: bool | Callable[..., Any] = True) -> Any:
        self = object.__new__(cls)
        if callable(mode):  # used bare as ``@inference_mode``
            self._on = True
            return self(mode)
        self._on = bool(mode)
        return self

    def __enter__(self) -> inference_mode:
        self._prev = is_grad_enabled()
        self._prev_inference = _state_inference.on
        if self._on:
            _set_enabled(False)
            _state_inference.on = True
        return self

    def __exit__(self, *exc: object) -> None:
        _set_enabled(self._prev)
        _state_inference.on = self._prev_inference

    def _fresh(self) -> inference_mode:
        return inference_mode(self._on)


class _InferenceState(threading.local):
    on = False


_state_inference = _InferenceState()


def is_inference_mode_enabled() -> bool:
    return _state_inference.on
