"""The autograd side of ``Tensor``: ``grad_fn``, ``requires_grad``, ``is_leaf``, ``detach``,
``retain_grad``, ``register_hook``, ``backward``. ``adcuda.tensor`` keeps the fields they read and
write; this module gives them their meaning and attaches them to the class when autograd loads."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ..errors import AutogradError, DTypeError, ShapeError
from ..hooks import RemovableHandle
from ..tensor import Tensor, replay_view
from .api import backward as _run_backward
from .grad_mode import enable_grad, is_grad_enabled
from .graph import edge_of, version_counter, version_of

if TYPE_CHECKING:
    from ..tensor import GradFn
    from ..types import Callable, Sequence


def _grad_fn(self: Tensor) -> GradFn | None:
    # A view whose base was written in place since its history was recorded reads its history
    # again from the base (PyTorch regenerates a view's grad_fn the same way).
    if self._view_version is not None and self._view_version != version_of(self):
        _refresh_view_history(self)
    return self._grad_fn


def _set_grad_fn(self, node):
    self._grad_fn = node
    if self._view_version is not None:
        self._view_version = version_of(self)


def _refresh_view_history(view):
    base = view._base
    view._view_version = version_of(view)
    if view._grad_fn is None and not base.requires_grad:
        return
    with enable_grad():
        fresh = replay_view(view._view_fn, base)
    view._grad_fn, view._output_nr = fresh._grad_fn, fresh._output_nr


def _requires_grad(self: Tensor) -> bool:
    return self._requires_grad or self.grad_fn is not None


def _set_requires_grad(self, value):
    if self.grad_fn is not None:
        if not value:
            raise AutogradError(
                "you can only change requires_grad flags of leaf variables. If you want to use a "
                "computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach()."
            )
        return
    if value and not self.dtype.is_floating_point:
        raise DTypeError(f"requires_grad: only Tensors of floating point dtype can require gradients, got {self.dtype}")
    self._requires_grad = bool(value)


def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    return self


def _is_leaf(self: Tensor) -> bool:
    return self.grad_fn is None


def _retains_grad(self: Tensor) -> bool:
    return self._retains_grad


def _data(self: Tensor) -> Tensor:
    return self.detach()


def _set_data(self, value):
    if value.shape != self.shape and self._base is not None:
        raise ShapeError("data: cannot change the shape of a view's data")
    self._data = value._data
    self._device = value._device


def detach(self: Tensor) -> Tensor:
    """The same data and version counter, outside the graph."""
    t = Tensor._make(self._data, self._device)
    t._vc = version_counter(self)
    return t


def detach_(self: Tensor) -> Tensor:
    if self._base is not None and self._base.requires_grad:
        raise AutogradError("detach_: can't detach a view of a tensor that requires grad in place; use detach()")
    self._grad_fn = None
    self._view_version = None
    self._requires_grad = False
    return self


def retain_grad(self: Tensor) -> None:
    node = self.grad_fn
    if node is None:
        if not self._requires_grad:
            raise AutogradError("retain_grad: can't retain_grad on Tensor that has requires_grad=False")
        return
    if self._retains_grad:
        return
    self._retains_grad = True
    attach_retain_hook(self, node)


def attach_retain_hook(t, node):
    """Hook ``retain_grad`` on the node that produces ``t`` now (an in-place op moves it to the new
    node, so ``.grad`` is the gradient of the latest value). The hook holds the tensor weakly: the
    graph must not keep it alive."""
    ref = weakref.ref(t)

    def retain(grad):
        kept = ref()
        if kept is not None:
            g = grad if is_grad_enabled() else grad.detach()
            kept.grad = g.clone() if kept.grad is None else kept.grad + g

    node.set_retain_hook(t._output_nr, retain)


def register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
    if not self.requires_grad:
        raise AutogradError("register_hook: cannot register a hook on a tensor that doesn't require gradient")
    if self.grad_fn is not None:
        return self.grad_fn.add_pre_hook(self._output_nr, hook)
    if self._hooks is None:
        self._hooks = {}
    return RemovableHandle(self._hooks, hook)


def backward(
    self: Tensor,
    gradient: Tensor | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    _run_backward([self], None if gradient is None else [gradient], retain_graph, create_graph, inputs)


def _edge(self):
    """(node, output index) that gradients for this tensor flow into, or (None, 0)."""
    return edge_of(self) or (None, 0)


# Attached at import (tensor.py does not import autograd); _tensor_ops.pyi declares them on Tensor for type
# checkers, so mypy sees each assignment as replacing a declared method: the ignores are for that.
Tensor.grad_fn = property(_grad_fn, _set_grad_fn)  # type: ignore[method-assign, assignment]
Tensor.requires_grad = property(_requires_grad, _set_requires_grad)  # type: ignore[method-assign, assignment]
Tensor.requires_grad_ = requires_grad_  # type: ignore[method-assign, assignment]
Tensor.is_leaf = property(_is_leaf)  # type: ignore[method-assign, assignment]
Tensor.retains_grad = property(_retains_grad)  # type: ignore[method-assign, assignment]
Tensor.data = property(_data, _set_data)  # type: ignore[method-assign, assignment]
Tensor.detach = detach  # type: ignore[method-assign, assignment]
Tensor.detach_ = detach_  # type: ignore[method-assign, assignment]
Tensor.retain_grad = retain_grad  # type: ignore[method-assign, assignment]
Tensor.register_hook = register_hook  # type: ignore[method-assign, assignment]
Tensor.backward = backward  # type: ignore[method-assign, assignment]
Tensor._edge = _edge  # type: ignore[attr-defined]  # private: autograd reads it, Tensor does not declare it
