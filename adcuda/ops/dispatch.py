"""The one call path of every op: ``make_entry`` turns a registry declaration into the function
users call (``adcuda.mul``, ``Tensor.__mul__``, ``Tensor.mul_``, ...).

On the common path an entry runs the op's forward and, when a gradient is needed, records a node:
a handful of attribute reads beyond the forward itself. Everything else attaches here as a hook
(``add_hook``), so its cost is one falsy check while it is off:

- ``around_op(name, op, call, args, kwargs)``: runs the op (``call(*args, **kwargs)``) in between;
  autocast casts the arguments here, the profiler and NVTX time and name it, graph capture sees
  the op call;
- ``wrap_backend(backend)``: a stand-in for a backend module through which every primitive call of
  the ops and of autograd passes (the profiler counts kernel launches; capture records them);
- ``around_backward(node, fn, *args)``: runs a backward rule or a leaf's accumulation;
- ``on_node(node)``: sees every autograd node as it is recorded.

Recording, views and in-place forms follow the declaration: the values a formula reads are saved
(tensors with their version counters), a view shares its base's version counter and can be rebuilt
from it, an in-place form checks, writes, bumps the version counter and moves the history.
"""
from .. import tensor as tensor_module
from ..autograd import engine, graph
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import FREED_MESSAGE, Node, edge_of, pack, set_history, sum_to_shape, unpack
from ..errors import AutogradError, DTypeError
from ..tensor import Tensor, primitives
from .mutation import check_inplace_allowed, commit_inplace, link_view

# ----------------------------------------------------------------------------------------------
# hooks
_hooks = ()          # innermost last
_slow = False        # True while any hook wants to see op calls
_around_chain = None


def add_hook(hook, *, innermost=False):
    """Attach ``hook`` (an object with any of ``around_op``, ``wrap_backend``, ``around_backward``,
    ``on_node``); ``innermost`` puts its ``around_op`` closest to the op (autocast does, so the
    profiler's ranges include its casts)."""
    global _hooks
    _hooks = _hooks + (hook,) if innermost else (hook,) + _hooks
    _refresh()


def remove_hook(hook):
    global _hooks
    _hooks = tuple(h for h in _hooks if h is not hook)
    _refresh()


def _refresh():
    global _slow, _around_chain
    around = [h.around_op for h in _hooks if hasattr(h, "around_op")]
    _around_chain = _chain(around) if around else None
    _slow = bool(around)
    wrappers = [h.wrap_backend for h in _hooks if hasattr(h, "wrap_backend")]
    tensor_module.set_primitive_observer(_compose_backend_wrappers(wrappers) if wrappers else None)
    backward = [h.around_backward for h in _hooks if hasattr(h, "around_backward")]
    engine.set_backward_observer(_chain_backward(backward) if backward else None)
    node_observers = [h.on_node for h in _hooks if hasattr(h, "on_node")]
    graph.set_node_observer(_all_of(node_observers) if node_observers else None)


def _chain(arounds):
    """One function running ``arounds`` outermost first around the op."""
    def run(index, name, op, call, args, kwargs):
        if index == len(arounds):
            return call(*args, **kwargs)

        def inner(*a, **k):
            return run(index + 1, name, op, call, a, k)
        return arounds[index](name, op, inner, args, kwargs)
    return lambda name, op, call, args, kwargs: run(0, name, op, call, args, kwargs)


def _compose_backend_wrappers(wrappers):
    cache = {}

    def observed(backend):
        wrapped = cache.get(backend)
        if wrapped is None:
            wrapped = backend
            for wrap in reversed(wrappers):
                wrapped = wrap(wrapped)
            cache[backend] = wrapped
        return wrapped
    return observed


def _chain_backward(arounds):
    def run(index, node, fn, args):
        if index == len(arounds):
            return fn(*args)
        return arounds[index](node, lambda *a: run(index + 1, node, fn, a), *args)
    return lambda node, fn, *args: run(0, node, fn, args)


def _all_of(observers):
    def observe(node):
        for o in observers:
            o(node)
    return observe


def _hooked(name, op, call, args, kwargs):
    return _around_chain(name, op, call, args, kwargs)


# ----------------------------------------------------------------------------------------------
# entries
def _takes_part(t):
    return t.__class__ is Tensor and (t._requires_grad or t._grad_fn is not None
                                      or (t._base is not None and t.grad_fn is not None))


def make_entry(op):
    """The function an op is called through."""
    forward = op.forward
    name = op.name
    binder = _binder(op)
    if op.view:
        return _name(_make_view_entry(op), op)
    if op.composite or not op.differentiable:
        def entry(*args, **kwargs):
            if _slow:
                return _around_chain(name, op, forward, args, kwargs)
            return forward(*args, **kwargs)
        return _name(entry, op)

    extras = bool(op.extra_outputs)
    if len(op.inputs) == 1 and op.params[0] == op.inputs[0] and not extras:
        first = op.inputs[0]

        def body(*args, **kwargs):
            out = forward(*args, **kwargs)
            if grad_state.enabled:
                x = args[0] if args else kwargs.get(first)
                if x.__class__ is Tensor:
                    if x._requires_grad or x._grad_fn is not None or (x._base is not None and x.grad_fn is not None):
                        _record(op, args, kwargs, out, ())
                elif x.__class__ in (list, tuple) and any(_takes_part(t) for t in x):
                    _record(op, args, kwargs, out, ())
            return out

        def entry(*args, **kwargs):
            if _slow:
                return _around_chain(name, op, body, args, kwargs)
            out = forward(*args, **kwargs)
            if grad_state.enabled:
                x = args[0] if args else kwargs.get(first)
                if x.__class__ is Tensor:
                    if x._requires_grad or x._grad_fn is not None or (x._base is not None and x.grad_fn is not None):
                        _record(op, args, kwargs, out, ())
                elif x.__class__ in (list, tuple) and any(_takes_part(t) for t in x):
                    _record(op, args, kwargs, out, ())
            return out
        return _name(entry, op)

    def body(*args, **kwargs):
        result = forward(*args, **kwargs)
        out, more = (result[0], result[1:]) if extras else (result, ())
        if grad_state.enabled:
            for value in binder(op.inputs, args, kwargs):
                if value.__class__ is Tensor:
                    if _takes_part(value):
                        _record(op, args, kwargs, out, more)
                        break
                elif value.__class__ in (list, tuple) and any(_takes_part(t) for t in value):
                    _record(op, args, kwargs, out, more)
                    break
        return out

    def entry(*args, **kwargs):
        if _slow:
            return _around_chain(name, op, body, args, kwargs)
        return body(*args, **kwargs)
    return _name(entry, op)


def _name(entry, op):
    entry.__name__ = entry.__qualname__ = op.name
    entry.__doc__ = op.doc
    entry.__module__ = op.forward.__module__
    entry.__wrapped__ = op.forward
    entry.op = op
    return entry


def _binder(op):
    """``bind(names, args, kwargs)``: the values of the forward parameters ``names`` in a call."""
    positions = {}
    for i, (pname, p) in enumerate(op.signature.parameters.items()):
        if p.kind == p.VAR_POSITIONAL:
            positions[pname] = (i, True, ())
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positions[pname] = (i, False, None if p.default is p.empty else p.default)
        else:
            positions[pname] = (None, False, None if p.default is p.empty else p.default)

    def bind(names, args, kwargs):
        values = []
        n = len(args)
        for pname in names:
            i, var, default = positions[pname]
            if var:
                values.append(args[i:])
            elif i is not None and i < n:
                values.append(args[i])
            else:
                values.append(kwargs.get(pname, default))
        return values
    op.bind = bind
    return bind


class NotAView:
    """What a view op's forward returns where it had to copy instead (reshape of a tensor whose
    strides allow no view): ``tensor``, made by other ops, which recorded its history."""
    __slots__ = ("tensor",)

    def __init__(self, tensor):
        self.tensor = tensor


def _make_view_entry(op):
    forward = op.forward
    name = op.name
    grads = bool(op.grads)

    def body(*args, **kwargs):
        base = args[0]
        out = forward(*args, **kwargs)
        if out is base:
            return out
        if out.__class__ is NotAView:
            return out.tensor
        link_view(base, out, entry, args[1:], kwargs)
        if grads and grad_state.enabled and (base._requires_grad or base._grad_fn is not None
                                             or (base._base is not None and base.grad_fn is not None)):
            _record(op, args, kwargs, out, ())
        return out

    def entry(*args, **kwargs):
        if _slow:
            return _around_chain(name, op, body, args, kwargs)
        return body(*args, **kwargs)
    return entry


# ----------------------------------------------------------------------------------------------
# recording
def _record(op, args, kwargs, out, extras):
    """Make ``out`` the result of a node of ``op`` (its inputs require grad; grad mode is on)."""
    if len(op.inputs) == 1:
        values = [args[0] if args else kwargs.get(op.inputs[0])] if op.params[0] == op.inputs[0] else \
            op.bind(op.inputs, args, kwargs)
    else:
        values = op.bind(op.inputs, args, kwargs)
    for v in values:
        if v is out:  # the op returned its input unchanged (contiguous of a contiguous tensor)
            return
    if not out.dtype.is_floating_point:
        return
    mask = []
    edges = []
    metas = []
    for v in values:
        if v.__class__ is Tensor:
            e = edge_of(v)
            mask.append(e is not None)
            edges.append(e)
            metas.append((v._data.shape, v.dtype) if e is not None else None)
        elif v.__class__ in (list, tuple):
            wanted = False
            for t in v:
                e = edge_of(t)
                wanted = wanted or e is not None
                edges.append(e)
                metas.append((t._data.shape, t.dtype) if e is not None else None)
            mask.append(wanted)
        else:
            mask.append(False)
            edges.append(None)
            metas.append(None)
    plan = op.plan(tuple(mask))
    node = OpNode(op.node_name(args, kwargs), tuple(edges), plan, op)
    node.metas = metas
    node.list_sizes = None if len(edges) == len(values) else tuple(
        len(v) if v.__class__ in (list, tuple) else 1 for v in values)
    reads = plan.reads
    if reads:
        saved = []
        raw = []
        locs = []
        bound = None
        for r in reads:
            if r == "result":
                v = out
            elif r in op.extra_outputs:
                v = extras[op.extra_outputs.index(r)]
            else:
                if bound is None:
                    bound = dict(zip(op.params, op.bind(op.params, args, kwargs)))
                if r in bound:
                    v = bound[r]
                else:  # "<parameter>_shape", "_dtype" or "_device"
                    param, _, what = r.rpartition("_")
                    v = _metadata(bound[param], what)
            if v.__class__ is Tensor:
                locs.append(len(saved))
                saved.append(pack(v, (out,)))
            else:
                locs.append(-2 - len(raw))
                raw.append(v)
        node.locs = locs
        node.raw = raw
        if saved:
            node._saved = saved
    set_history(out, node)


def _metadata(value, what):
    """The shape, dtype or device of a tensor argument (a tuple of them for a list of tensors; None
    for None)."""
    if value.__class__ is Tensor:
        return value._data.shape if what == "shape" else getattr(value, what)
    if value.__class__ in (list, tuple):
        return tuple(_metadata(v, what) for v in value)
    return None


class OpNode(Node):
    """A node of a registry op: runs the op's backward formulas (``op_backward``)."""

    def __init__(self, name, next_edges, plan, op):
        super().__init__(name, next_edges, op_backward, 1)
        self.plan = plan
        self.op = op


def op_backward(node, grad):
    """Run the formulas of ``node``'s plan: the fused ones for plain first-order backward, the
    composite ones while a graph of the backward is being built."""
    plan = node.plan
    formulas = plan.fused if plan.fused is not None and not grad_state.enabled else plan.formulas
    values = ()
    if plan.reads:
        saved = node._saved
        if saved is None and node._released:
            raise AutogradError(FREED_MESSAGE)
        raw = node.raw
        values = [unpack(saved[loc], node) if loc >= 0 else raw[-2 - loc] for loc in node.locs]
    n_inputs = len(node.op.inputs)
    per_input = [None] * n_inputs
    for fn, slots, targets in formulas:
        result = fn(*[grad if s == -1 else values[s] for s in slots])
        if len(targets) == 1:
            per_input[targets[0]] = result
        else:
            for t, g in zip(targets, result):
                per_input[t] = g
    sizes = node.list_sizes
    if sizes is None:
        grads = per_input
    else:
        grads = []
        for g, n in zip(per_input, sizes):
            if n == 1 and not isinstance(g, (list, tuple)):
                grads.append(g)
            else:
                grads.extend(g if g is not None else (None,) * n)
    metas = node.metas
    for i, g in enumerate(grads):
        meta = metas[i]
        if meta is None or g is None:
            grads[i] = None
            continue
        shape, dtype = meta
        if g._data.shape != shape:
            g = sum_to_shape(g, shape)
        if g.dtype is not dtype:
            g = g.to(dtype=dtype)
        grads[i] = g
    return grads


# ----------------------------------------------------------------------------------------------
# in-place forms
def make_inplace_entry(op):
    """``Tensor.<name>_``: the out-of-place op written into the tensor. While recording, the op runs
    on a clone, so a backward rule that saved the old value keeps it."""
    name = op.forms["inplace"][0]
    forward = op.forward
    entry_of = op

    def body(self, *args, **kwargs):
        check_inplace_allowed(self, name)
        recording = grad_state.enabled and (_takes_part(self) or any(_takes_part(a) for a in args)
                                            or any(_takes_part(a) for a in kwargs.values()))
        if not recording:
            result = forward(self, *args, **kwargs)
            if entry_of.extra_outputs:
                result = result[0]
            result = _as_dtype_of(self, result, name)
            if result._data.shape != self._data.shape:
                try:
                    result = Tensor._make(primitives(result).expand(result._data, self._data.shape),
                                          result._device)
                except ValueError:
                    pass  # commit_inplace raises the error naming the op
            return commit_inplace(self, result, name)
        source = self.clone()
        result = _as_dtype_of(self, entry_of.entry(source, *args, **kwargs), name)
        return commit_inplace(self, result, name)

    def inplace_entry(self, *args, **kwargs):
        if _slow:
            return _around_chain(name, op, body, (self,) + args, kwargs)
        return body(self, *args, **kwargs)
    inplace_entry.__name__ = inplace_entry.__qualname__ = name
    inplace_entry.__doc__ = f"In-place {op.name}: {op.doc}"
    inplace_entry.op = op
    return inplace_entry


def _as_dtype_of(t, result, name):
    if result.dtype is t.dtype:
        return result
    if result.dtype.category > t.dtype.category:
        raise DTypeError(f"{name}: result type {result.dtype} can't be cast to the desired output type {t.dtype}")
    return result.to(dtype=t.dtype)

