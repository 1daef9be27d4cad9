"""Ranges around the library's steps that are not ops, named like PyTorch's profiler names them:
``Optimizer.step#SGD.step``, ``Optimizer.zero_grad#SGD.zero_grad``, ``GradScaler.unscale_``,
``GradScaler.update`` and ``enumerate(DataLoader)#_SingleProcessIter.__next__`` (a batch fetch).

These methods are wrapped only while a session is active, on the class that defines
them and on every subclass that overrides them (a user's own optimizer too).
"""

import functools

from ..amp.grad_scaler import GradScaler
from ..optim.optimizer import Optimizer
from ..utils.data.dataloader import _BaseIter
from . import _state
from .record_function import record_function

# (base class, methods, range name)
METHODS = (
    (Optimizer, ("step", "zero_grad"), "Optimizer.{method}#{cls}.{method}"),
    (GradScaler, ("unscale_", "update"), "GradScaler.{method}"),
    (_BaseIter, ("__next__",), "enumerate(DataLoader)#{cls}.{method}"),
)


def _class_tree(cls):
    seen, todo = [], [cls]
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.append(c)
            todo.extend(c.__subclasses__())
    return seen


def _ranged(fn, template, method):
    thread = _state.thread
    key = (template, method)

    @functools.wraps(fn)
    def in_range(self, *args, **kwargs):
        # an override calling super().step() stays inside the one range
        if key in thread.library_ranges:
            return fn(self, *args, **kwargs)
        thread.library_ranges.add(key)
        try:
            with record_function(template.format(method=method, cls=type(self).__name__)):
                return fn(self, *args, **kwargs)
        finally:
            thread.library_ranges.discard(key)

    return in_range


def install(swap):
    """Wrap every method listed in ``METHODS`` through ``swap(owner, attribute, replacement)``."""
    for base, methods, template in METHODS:
        for cls in _class_tree(base):
            for method in methods:
                fn = vars(cls).get(method)
                if callable(fn):
                    swap(cls, method, _ranged(fn, template, method))
