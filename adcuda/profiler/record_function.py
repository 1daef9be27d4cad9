"""``record_function(name)``: a named range around any code (a training step, an optimizer step, a
batch fetch). It becomes an NVTX range under ``emit_nvtx()`` and an event under ``profile()``; with
neither active, entering and leaving it costs one check."""

import functools

from .observe import begin_range, end_range


class record_function:
    __slots__ = ("name", "_range")

    def __init__(self, name):
        if not isinstance(name, str):
            raise TypeError(f"record_function: name must be a string, got {type(name).__name__}")
        self.name = name
        self._range = None

    def __enter__(self):
        self._range = begin_range(self.name)
        return self

    def __exit__(self, exc_type, exc, tb):
        r = self._range
        if r is not None:
            self._range = None
            end_range(r)
        return False

    def __call__(self, fn):
        """As a decorator: every call of ``fn`` runs in its own range of this name."""
        name = self.name

        @functools.wraps(fn)
        def in_range(*args, **kwargs):
            with record_function(name):
                return fn(*args, **kwargs)

        return in_range
