"""``adcuda.autograd.Function``: user-defined ops with ``forward(ctx, ...)`` and ``backward(ctx, grad)``."""
from ..errors import AutogradError, fmt_shape
from .grad_mode import is_grad_enabled, no_grad


class FunctionCtx:
    """The ``ctx`` passed to forward and backward."""

    def __init__(self):
        self._to_save = ()
        self._node = None
        self.needs_input_grad = ()
        self.materialize_grads = True
        self._non_differentiable = set()
        self._dirty = ()

    def save_for_backward(self, *tensors):
        self._to_save = tensors

    @property
    def saved_tensors(self):
        if self._node is None:
            return self._to_save
        return self._node.saved_tensors

    def mark_non_differentiable(self, *tensors):
        self._non_differentiable.update(id(t) for t in tensors)

    def mark_dirty(self, *tensors):
        self._dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = bool(value)


class FunctionMeta(type):
    def __init__(cls, name, bases, attrs):
        super().__init__(name, bases, attrs)
        cls._backward_name = name + "Backward"


class Function(metaclass=FunctionMeta):
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``, call
    ``apply``. Backward returns one gradient (or ``None``) per forward argument."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("a Function subclass must implement forward(ctx, ...)")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("a Function subclass must implement backward(ctx, *grad_outputs)")

    @classmethod
    def apply(cls, *args, **kwargs):
        from ..tensor import Tensor
        from ..ops._core import needs_grad, record
        ctx = FunctionCtx()
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            raw = cls.forward(ctx, *args, **kwargs)
        is_tuple = isinstance(raw, tuple)
        outputs = raw if is_tuple else (raw,)
        if not needs_grad(*tensor_args):
            return raw
        # outputs that are inputs (returned unchanged) get a fresh tensor so the graph stays acyclic
        fresh = []
        for o in outputs:
            if isinstance(o, Tensor) and any(o is a for a in tensor_args) and not any(o is d for d in ctx._dirty):
                o = o.detach()
            fresh.append(o)
        tensor_outputs = [o for o in fresh if isinstance(o, Tensor)]
        differentiable = [o for o in tensor_outputs if id(o) not in ctx._non_differentiable
                          and o.dtype.is_floating_point]
        arg_shapes = [tuple(a.shape) if isinstance(a, Tensor) else None for a in args]
        out_meta = [(tuple(o.shape), o.dtype, o.device) for o in differentiable]

        def backward(node, *grads):
            if ctx.materialize_grads:
                from ..factories import zeros
                grads = tuple(g if g is not None else zeros(s, dtype=d, device=dev)
                              for g, (s, d, dev) in zip(grads, out_meta))
            result = cls.backward(ctx, *grads)
            if not isinstance(result, tuple):
                result = (result,)
            if len(result) != len(args):
                raise AutogradError(f"function {cls.__name__}Backward returned an incorrect number of "
                                    f"gradients (expected {len(args)}, got {len(result)})")
            out = []
            for i, (g, shape, arg) in enumerate(zip(result, arg_shapes, args)):
                if g is None or shape is None:
                    out.append(None)
                    continue
                if not isinstance(g, Tensor):
                    raise AutogradError(f"function {cls.__name__}Backward returned a {type(g).__name__} "
                                        f"as gradient {i}; expected a Tensor or None")
                if tuple(g.shape) != shape:
                    try:
                        from ..ops._core import sum_to_shape
                        g = sum_to_shape(g, shape)
                    except Exception:
                        raise AutogradError(f"function {cls.__name__}Backward returned an invalid gradient at "
                                            f"index {i} - got {fmt_shape(g.shape)} but expected shape "
                                            f"compatible with {fmt_shape(shape)}") from None
                out.append(g)
            return tuple(out)

        node = record(cls._backward_name, None, args, backward, outputs=differentiable)
        if ctx._to_save:
            node.save(ctx._to_save, differentiable)
        ctx._node = node
        node.ctx = ctx
        return tuple(fresh) if is_tuple else fresh[0]
