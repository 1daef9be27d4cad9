"""``adcuda.autograd.Function``: user-defined ops with ``forward(ctx, ...)`` and ``backward(ctx, grad)``."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from ..errors import AutogradError, fmt_shape
from ..tensor import Tensor, primitives_on
from .grad_mode import no_grad
from .graph import Node, edge_of, needs_grad, set_history, sum_to_shape

if TYPE_CHECKING:
    from ..types import Any


class FunctionCtx:
    """The ``ctx`` passed to forward and backward."""

    def __init__(self) -> None:
        self._to_save: tuple[Tensor | None, ...] = ()
        self._node_ref: weakref.ref[Node] | None = None
        self.needs_input_grad: tuple[bool, ...] = ()
        self.materialize_grads = True
        self._non_differentiable: set[int] = set()  # ids of the outputs marked non-differentiable
        self._dirty: tuple[Tensor, ...] = ()

    def save_for_backward(self, *tensors: Tensor | None) -> None:
        self._to_save = tensors

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        node = self._node_ref() if self._node_ref is not None else None
        if node is None:
            return self._to_save
        return node.saved_tensors

    def mark_non_differentiable(self, *tensors: Tensor) -> None:
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors: Tensor) -> None:
        self._dirty = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = name + "Backward"


def _expandable(shape, to):
    """Whether ``shape`` broadcasts to ``to`` (so a gradient of shape ``to`` can be summed back)."""
    if len(shape) > len(to):
        return False
    return all(n == m or n == 1 for n, m in zip(reversed(shape), reversed(to)))


class Function(metaclass=FunctionMeta):
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``, call
    ``apply``. Backward receives one gradient per forward output and returns one gradient (or
    ``None``) per forward argument."""

    @staticmethod
    def forward(ctx: FunctionCtx, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement forward(ctx, ...)")

    @staticmethod
    def backward(ctx: FunctionCtx, *grad_outputs: Tensor) -> Any:
        raise NotImplementedError("a Function subclass must implement backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = FunctionCtx()
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        recording = needs_grad(*tensor_args)
        ctx.needs_input_grad = tuple(recording and isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            raw = cls.forward(ctx, *args, **kwargs)
        if not recording:
            return raw
        is_tuple = isinstance(raw, tuple)
        outputs = list(raw if is_tuple else (raw,))
        for o in ctx._dirty:
            if o.grad_fn is None and o._requires_grad:
                raise AutogradError(
                    f"{cls.__name__}: a leaf Variable that requires grad has been used in "
                    "an in-place operation (marked dirty)."
                )
        for i, o in enumerate(outputs):
            # an input returned unchanged gets a fresh tensor, so the graph stays acyclic
            if isinstance(o, Tensor) and any(o is a for a in tensor_args) and not any(o is d for d in ctx._dirty):
                outputs[i] = o.detach()
        differentiable = [
            isinstance(o, Tensor) and id(o) not in ctx._non_differentiable and o.dtype.is_floating_point
            for o in outputs
        ]
        # metadata only: the backward closure must not keep the inputs or outputs alive
        arg_meta = [(tuple(a.shape), a.dtype, a.device) if isinstance(a, Tensor) else None for a in args]
        out_meta = [(tuple(o.shape), o.dtype, o.device) if isinstance(o, Tensor) else None for o in outputs]
        name = cls._backward_name

        def backward(node, *grads):
            if ctx.materialize_grads:
                grads = tuple(_zeros(m) if g is None and m is not None else g for g, m in zip(grads, out_meta))
            result = cls.backward(ctx, *grads)
            return _check_grads(name, result, arg_meta)

        node = Node(name, tuple(edge_of(a) for a in args), backward, len(outputs))
        for i, (o, diff) in enumerate(zip(outputs, differentiable)):
            if diff:
                set_history(o, node, i)
        if ctx._to_save:
            node.save(ctx._to_save, [o for o, d in zip(outputs, differentiable) if d])
            ctx._to_save = ()
        ctx._node_ref = weakref.ref(node)
        node.ctx = ctx
        return tuple(outputs) if is_tuple else outputs[0]


def _zeros(meta):
    shape, dtype, device = meta
    return Tensor._make(primitives_on(device).full(shape, 0, dtype), device)


def _check_grads(name, result, arg_meta):
    """PyTorch's checks on what a custom backward returned: one gradient per forward argument,
    None for non-tensor arguments, a shape the argument broadcasts to (then summed back)."""
    if not isinstance(result, tuple):
        result = (result,)
    n = len(arg_meta)
    if len(result) > n and all(g is None for g in result[n:]):
        result = result[:n]
    if len(result) != n:
        raise AutogradError(
            f"function {name} returned an incorrect number of gradients (expected {n}, got {len(result)})"
        )
    out = []
    for i, (g, meta) in enumerate(zip(result, arg_meta)):
        if g is None:
            out.append(None)
            continue
        if meta is None:
            raise AutogradError(
                f"function {name} returned a gradient different than None at position "
                f"{i}, but the corresponding forward input was not a Tensor"
            )
        if not isinstance(g, Tensor):
            raise AutogradError(
                f"function {name} returned a {type(g).__name__} as gradient {i}; expected a Tensor or None"
            )
        shape, dtype, device = meta
        if tuple(g.shape) != shape:
            if not _expandable(shape, tuple(g.shape)):
                raise AutogradError(
                    f"function {name} returned an invalid gradient at index {i} - got "
                    f"{fmt_shape(g.shape)} but expected shape compatible with {fmt_shape(shape)}"
                )
            g = sum_to_shape(g, shape)
        if g.device != device:
            raise AutogradError(
                f"function {name} returned an invalid gradient at index {i} - expected "
                f"device {device} but got {g.device}"
            )
        if g.dtype is not dtype:
            g = g.to(dtype=dtype)
        out.append(g)
    return tuple(out)
