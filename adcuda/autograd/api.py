"""``backward`` and ``grad``: what users call to run the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np  # a gradient given as Python data

from ..errors import AutogradError, fmt_shape
from ..tensor import Tensor, primitives
from .engine import run_backward

if TYPE_CHECKING:
    from ..types import Sequence


def _as_list(x):
    if x is None:
        return None
    return [x] if isinstance(x, Tensor) else list(x)


def _filled_like(t, value):
    return Tensor._make(primitives(t).full(tuple(t._data.shape), value, t.dtype), t._device)


def _root_grads(op, outputs, grad_outputs):
    grads = []
    for i, out in enumerate(outputs):
        g = grad_outputs[i] if grad_outputs is not None and i < len(grad_outputs) else None
        if g is None:
            if out._data.size != 1:
                raise AutogradError(
                    f"{op}: grad can be implicitly created only for scalar outputs; output "
                    f"{i} has shape {fmt_shape(out.shape)}, pass gradient= explicitly"
                )
            dtype = out.dtype
            if not dtype.is_floating_point:
                raise AutogradError(f"{op}: grad can be implicitly created only for real scalar outputs, got {dtype}")
            grads.append(Tensor._make(primitives(out).full(tuple(out._data.shape), 1, dtype), out._device))
            continue
        if not isinstance(g, Tensor):
            g = Tensor._make(primitives(out).from_numpy(np.array(g), out.dtype), out._device)
        if g._data.shape != out._data.shape:
            raise AutogradError(
                f"{op}: mismatch in shape: grad_output[{i}] has a shape of "
                f"{fmt_shape(g.shape)} and output[{i}] has a shape of {fmt_shape(out.shape)}"
            )
        if g.device != out.device:
            raise AutogradError(f"{op}: grad_output[{i}] is on {g.device} but output[{i}] is on {out.device}")
        grads.append(g)
    return grads


def backward(
    tensors: Tensor | Sequence[Tensor],
    grad_tensors: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Tensor | Sequence[Tensor] | None = None,
) -> None:
    """Accumulate d(tensors)/d(leaf) into each leaf's ``.grad``."""
    tensors = _as_list(tensors)
    grad_tensors = _as_list(grad_tensors)
    for i, t in enumerate(tensors):
        if not (t._requires_grad or t.grad_fn is not None):
            raise AutogradError(f"backward: element {i} of tensors does not require grad and does not have a grad_fn")
    if retain_graph is None:
        retain_graph = create_graph
    grads = _root_grads("backward", tensors, grad_tensors)
    if inputs is not None:
        inputs = _as_list(inputs)
        captured = run_backward(tensors, grads, retain_graph, create_graph, capture=inputs, allow_unused=True)
        for t, g in zip(inputs, captured):
            if g is not None:
                g = g if create_graph else g.detach()
                t.grad = g if t.grad is None else t.grad + g
        return
    run_backward(tensors, grads, retain_graph, create_graph)


def grad(
    outputs: Tensor | Sequence[Tensor],
    inputs: Tensor | Sequence[Tensor],
    grad_outputs: Tensor | Sequence[Tensor | None] | None = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    allow_unused: bool = False,
    only_inputs: bool = True,
    materialize_grads: bool = False,
) -> tuple[Tensor | None, ...]:
    """The gradients of ``outputs`` w.r.t. ``inputs`` (returned, not accumulated)."""
    outputs = _as_list(outputs)
    inputs = _as_list(inputs)
    grad_outputs = _as_list(grad_outputs)
    for i, t in enumerate(outputs):
        if not t.requires_grad:
            raise AutogradError(f"grad: element {i} of tensors does not require grad and does not have a grad_fn")
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads("grad", outputs, grad_outputs)
    result = run_backward(
        outputs, roots, retain_graph, create_graph, capture=inputs, allow_unused=allow_unused or materialize_grads
    )
    if materialize_grads:
        result = tuple(g if g is not None else _filled_like(x, 0) for g, x in zip(result, inputs))
    if not create_graph:
        result = tuple(g.detach() if g is not None else None for g in result)
    return result
