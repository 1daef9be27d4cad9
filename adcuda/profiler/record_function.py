"""``record_function(name)``: a named range around any code (a training step, an optimizer step, a
batch fetch). It becomes an NVTX range under ``emit_nvtx()`` and an event under ``profile()``; with
neither active, entering and leaving it costs one check."""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

from .observe import begin_range, end_range

_Fn = TypeVar("_Fn", bound=Callable[..., Any])  # a decorated function keeps its signature


class record_function:
    __slots__ = ("name", "_range")

    def __init__(self, name: str) -> None:
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a string, got {type(name).__name__}")
        self.name = name
        self._range = None

    def __enter__(self) -> record_function:
        self._range = begin_range(self.name)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        r = self._range
        if r is not None:
            self._range = None
            end_range(r)
        return False

    def __call__(self, fn: _Fn) -> _Fn:
        """As a decorator: every call of ``fn`` runs in its own range of this name."""
        name = self.name

        @functools.wraps(fn)
        def in_range(*args, **kwargs):
            with record_function(name):
                return fn(*args, **kwargs)

        return in_range  # type: ignore[return-value] (the same signature, by functools.wraps)
