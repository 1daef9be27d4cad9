"""A model's eval forward frozen as a graph of backend primitives: what the exporters (ONNX, C) read.

``trace_forward(model, args)`` runs ``model(*args)`` once in eval mode under ``no_grad`` through
graph capture's ``Recorder`` (adcuda/capture/recorder.py: it records every backend primitive call at
the dispatch point) and returns a ``Graph``. The model's train/eval flags are restored afterwards.
``args`` is a tensor or a tuple/list of tensors, on the CPU; the model returns a tensor or a
(nested) tuple/list of tensors, flattened in order into the graph's outputs.

The ``Graph`` (every value numbered: inputs first, then constants, then node results in order):

- ``inputs``: value numbers of the model's tensor arguments, in order;
- ``constants``: value number -> ``Constant(array, name, source)``: a parameter or buffer (``name``
  its state-dict name), host data the forward made (``name`` None), or a value computed from
  constants alone (folded at export: a weight's transpose, a batch norm's ``rsqrt(var + eps)``,
  a slice of a packed in-projection; ``name`` None, ``source`` the state-dict name it was computed
  from where there is exactly one). ``array`` is a contiguous NumPy copy;
- ``nodes``: ``Node``s in execution order, each one primitive call with
  ``op`` (the primitive's name, as in the table of adcuda/backends/__init__.py),
  ``params`` (every argument of the call by the primitive's parameter name, defaults filled in;
  arrays are ``Ref(value)``, everything else (ops, axes, strides, eps, scalars...) as recorded),
  ``inputs`` (the value numbers the call reads, in argument order) and
  ``outputs`` (value numbers of its results by position: one for a primitive returning one array,
  one per tuple item otherwise; None for a result nothing downstream reads, e.g. max_pool2d's
  indices or layer_norm's mean and rstd) and ``where`` (the user's ``file:line`` that made it, for
  an exporter's refusals);
- ``outputs``: value numbers of the model's results, in order (an input or a constant may be one);
- ``values``: value number -> ``ValueInfo(shape, dtype)`` for every value (``dtype`` an adcuda dtype).

What the trace already did, once for every exporter:

- ``contiguous`` calls and views that failed (``view`` returning None) are dropped: values are
  logical row-major arrays, strides do not exist in the graph (so a ``view`` may read a ``permute``'s
  result: it reshapes the permuted elements in row-major order, as a copy then a view did);
- a write in place into an array the forward made, or into a slice of one (padding a pooling input,
  a recurrent layer filling its output; ``empty`` is traced as zeros), is a node making a new value:
  ``index_put_(a, key, values, accumulate)`` (a ``copy_`` into ``a[key]`` included) or
  ``copy_(dst, src)`` (a whole array), whose output is ``a`` after the write; the key holds ints,
  slices and, for ``index_put_`` proper, index arrays as ``Ref``s;
- nodes whose every array argument is a constant, and whose sizes are static, are evaluated and
  become constants (so ``matmul(x, permute(weight))`` reads a constant second operand, already
  transposed, and a ``full`` or ``arange`` of static size is a constant);
- nodes none of whose results reach an output are dropped.

What it refuses (``ExportError``, naming the op and the user's line where there is one): a value
read on the host (``.item()``, ``bool(t)``, printing), a random draw (dropout in training mode,
``randn`` in forward), a write in place into an input, a parameter or buffer, or a view other than a
slice, a read of a view made before a write into its array, forward hooks, optimizer/host steps,
boolean-mask indexing, CUDA tensors, arguments or results that are not tensors. (The ops' checks of
index values, host steps too, run once at the trace and are left out of the graph.)

Dynamic sizes: with ``dynamic_axes`` ({input position: {axis: name}}; axes sharing a name share one
size) the model is traced once more per name with that size changed, and every size or integer
argument that moved becomes a ``Dim(coefficient, symbols)``: ``coefficient`` times the product of the
named sizes (``view``'s ``(5 * batch, 8)`` is ``(Dim(5, ("batch",)), 8)``), checked against each
trace. ``ValueInfo.dims`` then holds the symbolic shape (``symbolic_shape`` gives ``dims`` or
``shape``); ``shape`` stays the traced one. Tensors made from a dynamic size stay nodes with
``Dim`` arguments (``arange(0, Dim(1, ("seq",)), 1, dtype)`` for positions, ``full`` for a causal
mask or a zero state, and what is computed from them). Refused: a model that runs other primitives
for another size (an unrolled loop over a dynamic length), host data that changes with a size, a
size that is no such product (``H // 2`` of a dynamic ``H``), a float argument that follows a size.

``Graph.consumers(value)`` lists the nodes reading a value and ``Graph.producer(value)`` the node
making it (None for inputs and constants); ``str(graph)`` prints one line per node.
"""

from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..backends import cpu
from ..backends.seam import seam_signature
from ..capture.recorder import (
    RANDOM_PRIMITIVES,
    Call,
    Draw,
    Drawn,
    GradOf,
    HostData,
    HostStep,
    Recorder,
    Uncapturable,
    Value,
    user_line,
)
from ..errors import AdcudaError
from ..tensor import Tensor

__all__ = ["ExportError", "Graph", "Node", "Constant", "ValueInfo", "Ref", "Dim", "trace_forward"]

# primitives that pass their argument through as it is, for the graph's logical (row-major) values
_IDENTITY_PRIMITIVES = frozenset({"contiguous"})
# primitives writing into their first argument that the trace records as making a new version of it
_WRITES = frozenset({"copy_", "index_put_"})


class ExportError(AdcudaError, RuntimeError):
    """A model, or a part of it, that an exporter cannot express; the message names the op and the line."""


@dataclass(frozen=True)
class Ref:
    """An array argument of a node: value number ``value`` of the graph."""

    value: int


@dataclass(frozen=True, repr=False)
class Dim:
    """A symbolic size: ``coefficient`` times the product of the dynamic sizes named in ``symbols``."""

    coefficient: int
    symbols: tuple

    def evaluate(self, sizes):
        """The size for ``sizes`` ({symbol name: size})."""
        n = self.coefficient
        for s in self.symbols:
            n *= sizes[s]
        return n

    def __str__(self):
        return "*".join(([str(self.coefficient)] if self.coefficient != 1 else []) + list(self.symbols))

    def __repr__(self):
        return f"Dim({self})"


@dataclass(frozen=True)
class ValueInfo:
    """The shape and adcuda dtype of one value of a graph (``dims``: see "Dynamic sizes")."""

    shape: tuple
    dtype: dt.dtype
    dims: tuple = None  # ``shape`` with a ``Dim`` for each size that follows a dynamic axis (None: static)

    @property
    def symbolic_shape(self):
        """``dims`` where some size is dynamic, else ``shape``."""
        return self.shape if self.dims is None else self.dims


@dataclass(frozen=True)
class Constant:
    """A value known at export time: a parameter or buffer, host data, or one folded from constants."""

    array: np.ndarray
    name: str | None = None  # the state-dict name of a parameter or buffer
    source: str | None = None  # for a folded constant: the one state-dict name it was computed from


@dataclass
class Node:
    """One primitive call: ``op``, its arguments by name (arrays as ``Ref``), the values it reads and makes."""

    op: str
    params: dict
    inputs: tuple
    outputs: tuple
    where: str | None = None  # the user's line (``file:line``) that made the call

    def __str__(self):
        outs = ", ".join("_" if o is None else f"%{o}" for o in self.outputs)
        args = ", ".join(f"{k}={_show(v)}" for k, v in self.params.items())
        return f"{outs} = {self.op}({args})"


@dataclass
class Graph:
    """A model's eval forward as primitive calls over numbered values (see the module docstring)."""

    inputs: tuple
    outputs: tuple
    constants: dict
    nodes: list
    values: dict
    _consumers: dict = field(default=None, repr=False, init=False)
    _producers: dict = field(default=None, repr=False, init=False)

    def producer(self, value):
        """The node making ``value``, or None for an input or a constant."""
        if self._producers is None:
            self._producers = {o: node for node in self.nodes for o in node.outputs if o is not None}
        return self._producers.get(value)

    def consumers(self, value):
        """The nodes reading ``value``, in order."""
        if self._consumers is None:
            self._consumers = {}
            for node in self.nodes:
                for v in dict.fromkeys(node.inputs):
                    self._consumers.setdefault(v, []).append(node)
        return list(self._consumers.get(value, ()))

    def is_constant(self, value):
        return value in self.constants

    def __str__(self):
        lines = [f"inputs: {', '.join(f'%{v} {self._info(v)}' for v in self.inputs)}"]
        for v, c in self.constants.items():
            label = c.name or (f"from {c.source}" if c.source else "data")
            lines.append(f"  %{v} = constant {label} {self._info(v)}")
        lines.extend(f"  {node}" for node in self.nodes)
        lines.append(f"outputs: {', '.join(f'%{v}' for v in self.outputs)}")
        return "\n".join(lines)

    def _info(self, v):
        info = self.values[v]
        return f"{info.dtype.name}{list(info.shape)}"


def _show(value):
    if isinstance(value, Ref):
        return f"%{value.value}"
    if value.__class__ in (list, tuple):
        return "(" + ", ".join(_show(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


class _ForwardRecorder(Recorder):
    """The capture recorder, strict, refusing also what a replay can redo but an export cannot: random
    draws and host steps. A write in place into an array the forward made (a buffer it fills) is
    recorded as a new version of that array (see ``_write``)."""

    def __init__(self, inputs):
        super().__init__(strict=True, inputs=inputs)
        self.lines = {}  # step index -> the user's line that made that primitive call
        self._stale = set()  # value numbers of views whose memory a later write changed

    def call(self, name, fn, args, kwargs):
        if not self.recording:
            return super().call(name, fn, args, kwargs)
        if name in RANDOM_PRIMITIVES:
            self.fail(f"a random draw ({name}) in the forward: an exported graph has no random numbers")
        if self._stale and any(self._ids.get(id(a)) in self._stale for a in _arrays_in((args, kwargs))):
            self.fail(f"{name} reads a view of a tensor that was written in place after the view was made")
        self.lines[len(self.trace.steps)] = user_line()[0]
        if name == "empty":
            # contents undefined: zeros, so that a buffer the forward then fills holds one known value
            params = _bind(name, args, kwargs)
            return super().call("full", cpu.full, (params["shape"], 0, params["dtype"]), {})
        if name in _WRITES:
            return self._write(name, fn, args, kwargs)
        if name.endswith("_"):
            self.fail(f"{name} writes into an array in place (exported graphs are made of new values only)")
        return super().call(name, fn, args, kwargs)

    def _write(self, name, fn, args, kwargs):
        """``copy_``/``index_put_`` into an array the forward made (or into a slice of one): recorded as
        ``index_put_(a, key, values, accumulate)`` (``copy_`` of a whole array as ``copy_(dst, src)``)
        whose result is a new version of the array; views of it made before are stale from then on."""
        params = _bind(name, args, kwargs)
        target = params["dst" if name == "copy_" else "a"]
        n = self._ids.get(id(target))
        if n is None or self.trace.producer[n] < 0:
            kind = "an input" if n is not None else "a parameter, a buffer or a tensor made outside the forward"
            self.fail(f"{name} writes into {kind} in place (exported graphs are made of new values only)")
            return fn(*args, **kwargs)
        owner, key = target, None
        if target.base is not None:
            maker = self.trace.steps[self.trace.producer[n]]
            base = target.base
            if (
                maker.__class__ is not Call
                or maker.name != "slice"
                or base.base is not None
                or id(base) not in self._ids
                or name != "copy_"
            ):
                self.fail(f"{name} writes in place into a view other than a slice of a tensor the forward made")
                return fn(*args, **kwargs)
            owner, key = base, maker.args[1]
        old = self._ids[id(owner)]
        if self.trace.producer[old] < 0:
            self.fail(f"{name} writes into an input in place (exported graphs are made of new values only)")
            return fn(*args, **kwargs)
        for v, array in enumerate(self.trace.arrays):
            if array is not None and np.may_share_memory(array, owner):
                self.trace.arrays[v] = array.copy()  # what the value held before the write
                if v != old:
                    self._stale.add(v)
        if name == "copy_" and key is None:
            call = Call("copy_", (Value(old), self._references(params["src"])), {})
        elif name == "copy_":
            call = Call("index_put_", (Value(old), key, self._references(params["src"]), False), {})
        else:
            call = Call(
                "index_put_",
                (Value(old), self._references(params["key"]), self._references(params["values"]), params["accumulate"]),
                {},
            )
        result = fn(*args, **kwargs)
        step = len(self.trace.steps)
        self.trace.steps.append(call)
        call.result_kind = "array"
        call.results = (self._new_value(owner, step),)
        return result

    def _drawn(self, generator, numel, seed, offset):
        if self.recording:
            self.fail("a random draw in the forward: an exported graph has no random numbers")

    def _host_step(self, fn, args, kwargs):
        if self.recording and _is_value_check(fn):
            # the ops' checks of index or target values: they held for the example inputs; at run time
            # the exported graph's own operators check what they read
            self._host_depth += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._host_depth -= 1
        if self.recording:
            self.fail(f"the host step {getattr(fn, '__qualname__', fn)} (Python a graph cannot hold)")
        return fn(*args, **kwargs)


def _is_value_check(fn):
    """A host step of the ops layer that only reads values and raises (``_check_index_range``...), as
    opposed to one that changes state (optimizer and scheduler steps, zero_grad)."""
    return getattr(fn, "__module__", "").startswith("adcuda.ops.") and fn.__name__.startswith("_check")


def trace_forward(model, args, *, op="export", dynamic_axes=None):
    """The ``Graph`` of ``model(*args)`` in eval mode (see the module docstring); ``op`` names the
    caller in errors (``adcuda.onnx.export``, ``adcuda.export.to_c``). ``dynamic_axes``
    ({input position: {axis: symbol name}}) makes those input sizes symbolic (see "Dynamic sizes")."""
    tensors = _argument_tensors(args, op)
    modes = [(m, m.training) for m in model.modules()] if hasattr(model, "modules") else []
    names = _state_names(model)
    try:
        if hasattr(model, "eval"):
            model.eval()
        graph = _trace_once(model, tensors, names, op)
        if dynamic_axes:
            graph = _with_symbolic_sizes(graph, model, tensors, names, op, dynamic_axes)
    finally:
        for m, training in modes:
            m.training = training
    return _fold(graph)


def _trace_once(model, tensors, names, op):
    recorder = _ForwardRecorder(tensors)
    for t in tensors:
        recorder.add_input(t._data)
    try:
        with no_grad(), recorder:
            result = model(*tensors)
        _, leaves = recorder.outputs(result)
    except Uncapturable as e:
        raise ExportError(f"{op}: cannot trace {_model_name(model)}: {e.what} at {e.where}") from None
    return _Builder(recorder.trace, names, op, recorder.lines).build(leaves)


def _argument_tensors(args, op):
    items = (args,) if isinstance(args, Tensor) else args
    if not isinstance(items, (tuple, list)) or not all(isinstance(t, Tensor) for t in items):
        raise ExportError(f"{op}: args must be a tensor or a tuple of tensors, got {_describe(args)}")
    for i, t in enumerate(items):
        if t.device.type != "cpu":
            raise ExportError(
                f"{op}: argument {i} is on {t.device}; export traces on the CPU: move the model and its "
                "example inputs there (model.cpu(), x.cpu())"
            )
    if len({id(t._data) for t in items}) != len(items):
        raise ExportError(f"{op}: the same tensor is passed twice in args; pass separate tensors")
    return list(items)


def _describe(value):
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__} of ({', '.join(type(v).__name__ for v in value)})"
    return type(value).__name__


def _model_name(model):
    return type(model).__name__


def _state_names(model):
    """id(array) -> state-dict name of every parameter and buffer of the model."""
    names = {}
    for attr in ("named_parameters", "named_buffers"):
        if hasattr(model, attr):
            for name, t in getattr(model, attr)():
                if t is not None:
                    names.setdefault(id(t._data), name)
    return names


class _Builder:
    """Turns a recorder's ``Trace`` into a ``Graph`` (constants not folded yet: ``_fold`` does that once
    the sizes are known to be static or symbolic): identities dropped, dead nodes dropped, values
    renumbered (inputs, constants, node results)."""

    def __init__(self, trace, names, op, lines):
        self.trace = trace
        self.lines = lines
        self.names = names
        self.op = op
        self.arrays = list(trace.arrays)  # value number -> array (trace values, then constants)
        self.alias = {}  # value number -> the value it is the same logical array as
        self.constants = {}  # value number -> state-dict name or None
        self._external = {}  # id(persistent array) -> its value number

    def build(self, leaves):
        nodes = []
        for index, step in enumerate(self.trace.steps):
            if step.__class__ is not Call:
                what = "a random draw" if step.__class__ is Drawn else type(step).__name__
                if step.__class__ is HostStep:
                    what = f"the host step {step.name}"
                raise ExportError(f"{self.op}: the forward runs {what}, which a graph cannot hold")
            node = self._node(index, step)
            if node is not None:
                nodes.append(node)
        outputs = []
        for kind, ref in leaves:
            if kind == "none":
                raise ExportError(f"{self.op}: the model returns None among its outputs; return tensors only")
            outputs.append(self._resolve(ref) if kind == "value" else self._constant_value(ref, None))
        return self._finish(nodes, outputs)

    def _node(self, index, call):
        if call.name in _IDENTITY_PRIMITIVES or not call.results:
            # contiguous; a view whose strides did not allow it (no result); a call whose results are
            # persistent arrays read as they were (contiguous of a parameter)
            for r in call.results:
                if r is not None and self.trace.producer[r] == index:
                    self.alias[r] = self._resolve(self._references(call.args[0]).value)
            return None
        args = self._references(call.args)
        kwargs = {k: self._references(v) for k, v in call.kwargs.items()}
        params = _bind(call.name, args, kwargs)
        inputs = tuple(_refs(params))
        outputs = []
        for r in call.results:
            if r is not None and self.trace.producer[r] != index:
                r = None  # the primitive returned an array it was given: nothing new
            outputs.append(r)
        return Node(call.name, params, inputs, tuple(outputs), self.lines.get(index))

    def _references(self, value):
        if value.__class__ is Value:
            return Ref(self._resolve(value.n))
        if value.__class__ is np.ndarray:
            return Ref(self._constant_value(value, self.names.get(id(value))))
        if value.__class__ is HostData:
            return Ref(self._constant_value(value.array, None))
        if value.__class__ in (GradOf, Draw):
            where, _ = user_line()
            raise ExportError(f"{self.op}: a gradient or random state read in the forward at {where}")
        if value.__class__ in (list, tuple):
            return value.__class__(self._references(v) for v in value)
        return value

    def _resolve(self, n):
        while n in self.alias:
            n = self.alias[n]
        return n

    def _constant_value(self, array, name):
        n = self._external.get(id(array))
        if n is None:
            n = self._external[id(array)] = len(self.arrays)
            self.arrays.append(np.array(array, order="C"))  # a copy; 0-d stays 0-d
            self.constants[n] = name
        return n

    def _finish(self, nodes, outputs):
        numbers = set(self.trace.inputs) | set(self.constants) | set(outputs)
        numbers.update(r for node in nodes for r in node.outputs if r is not None)
        values = {
            n: ValueInfo(tuple(self.arrays[n].shape), dt.from_numpy_dtype(self.arrays[n].dtype, self.op))
            for n in numbers
        }
        constants = {n: Constant(self.arrays[n], name) for n, name in self.constants.items()}
        return _compact(self.trace.inputs, outputs, constants, nodes, values)


def _compact(inputs, outputs, constants, nodes, values):
    """A ``Graph`` of what reaches the outputs, its values renumbered: inputs, constants, node results."""
    live = set(outputs)
    kept = []
    for node in reversed(nodes):
        if any(r in live for r in node.outputs if r is not None):
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    order = list(dict.fromkeys(list(inputs) + [v for v in constants if v in live]))
    seen = set(order)
    for node in kept:
        for r in node.outputs:
            if r is not None and r in live and r not in seen:
                seen.add(r)
                order.append(r)
    number = {old: new for new, old in enumerate(order)}

    def renumber(value):
        if isinstance(value, Ref):
            return Ref(number[value.value])
        if value.__class__ in (list, tuple):
            return value.__class__(renumber(v) for v in value)
        return value

    graph_nodes = [
        Node(
            node.op,
            {k: renumber(v) for k, v in node.params.items()},
            tuple(number[v] for v in node.inputs),
            tuple(number[r] if r is not None and r in live else None for r in node.outputs),
            node.where,
        )
        for node in kept
    ]
    return Graph(
        inputs=tuple(number[v] for v in inputs),
        outputs=tuple(number[v] for v in outputs),
        constants={number[v]: constants[v] for v in order if v in constants},
        nodes=graph_nodes,
        values={number[v]: values[v] for v in order},
    )


def _fold(graph):
    """Every node whose inputs are all constants and whose sizes are static, computed now (with the CPU
    primitives) and made a constant; ``source`` names the one parameter or buffer it came from."""
    constants = dict(graph.constants)
    kept = []
    for node in graph.nodes:
        static = all(o is None or graph.values[o].dims is None for o in node.outputs)
        if not static or has_dim(node.params) or not all(v in constants for v in node.inputs):
            kept.append(node)
            continue
        args = [_constant_argument(v, constants) for v in node.params.values()]
        if node.op in _WRITES:
            args[0] = args[0].copy()  # the graph's index_put_/copy_ make a new array
        result = getattr(cpu, node.op)(*args)
        sources = {constants[v].name or constants[v].source for v in node.inputs} - {None}
        source = sources.pop() if len(sources) == 1 else None
        for o, r in zip(node.outputs, result if isinstance(result, tuple) else (result,)):
            if o is not None:
                constants[o] = Constant(np.array(r, order="C"), None, source)
    return _compact(graph.inputs, graph.outputs, constants, kept, graph.values)


def _constant_argument(value, constants):
    if isinstance(value, Ref):
        return constants[value.value].array
    if value.__class__ in (list, tuple):
        return value.__class__(_constant_argument(v, constants) for v in value)
    return value


def has_dim(value):
    """Whether an argument (an int, a slice, a tuple of them...) holds a symbolic ``Dim``."""
    if isinstance(value, Dim):
        return True
    if value.__class__ in (list, tuple):
        return any(has_dim(v) for v in value)
    if value.__class__ is slice:
        return any(isinstance(p, Dim) for p in (value.start, value.stop, value.step))
    return False


_SIGNATURES = {}


def _bind(name, args, kwargs):
    """The call's arguments by the primitive's parameter names, defaults filled in."""
    signature = _SIGNATURES.get(name)
    if signature is None:
        signature = _SIGNATURES[name] = seam_signature(name, getattr(cpu, name))  # (no CPU replay keywords)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def _leaves(value):
    """What ``value`` holds, through its lists, tuples and dicts."""
    if value.__class__ in (list, tuple):
        for v in value:
            yield from _leaves(v)
    elif value.__class__ is dict:
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def _arrays_in(value):
    return (v for v in _leaves(value) if v.__class__ is np.ndarray)


def _refs(value):
    return (v.value for v in _leaves(value) if isinstance(v, Ref))


# ---------------------------------------------------------------------------------------------
# dynamic sizes: the graph traced again with each dynamic size changed, the differences made symbolic
def _with_symbolic_sizes(graph, model, tensors, names, op, dynamic_axes):
    base_sizes = _symbol_sizes(tensors, dynamic_axes, op)
    variants = {}
    for symbol, size in base_sizes.items():
        other = size - 1 if size >= 3 else size + 1  # smaller first: models with a maximum length still run
        varied = [_resized(t, dynamic_axes.get(i, {}), symbol, other) for i, t in enumerate(tensors)]
        try:
            variant = _trace_once(model, varied, names, op)
        except ExportError:
            raise
        except Exception as e:
            raise ExportError(
                f"{op}: the model fails when dynamic size '{symbol}' is {other} instead of {size} "
                f"({type(e).__name__}: {e}); a dynamic axis must accept other sizes, and axes that must stay "
                "equal need one name in dynamic_axes"
            ) from None
        variants[symbol] = (other, variant)
    return _Symbolizer(graph, base_sizes, variants, op).run()


def _symbol_sizes(tensors, dynamic_axes, op):
    sizes = {}
    for i, axes in dynamic_axes.items():
        if not 0 <= i < len(tensors):
            raise ExportError(f"{op}: dynamic_axes names input {i}, but the model takes {len(tensors)} input(s)")
        shape = tensors[i].shape
        for axis, symbol in axes.items():
            if not -len(shape) <= axis < len(shape):
                raise ExportError(
                    f"{op}: dynamic axis {axis} of input {i} is out of range for its shape {tuple(shape)}"
                )
            size = shape[axis]
            if sizes.setdefault(symbol, size) != size:
                raise ExportError(
                    f"{op}: dynamic size '{symbol}' is {sizes[symbol]} on one axis and {size} on another "
                    f"(input {i}, axis {axis}): axes sharing a name must have one size"
                )
    return sizes


def _resized(tensor, axes, symbol, size):
    """``tensor`` with every axis named ``symbol`` cut or extended (repeating its first entries, so
    index inputs stay valid) to ``size``."""
    array = tensor._data
    for axis, name in axes.items():
        if name != symbol:
            continue
        current = array.shape[axis]
        if size <= current:
            array = np.take(array, np.arange(size), axis=axis)
        else:
            array = np.concatenate([array, np.take(array, np.arange(size - current) % current, axis=axis)], axis)
    return Tensor._make(np.array(array, order="C"), tensor._device)


class _Symbolizer:
    """Compares the base graph with one variant per dynamic size and writes each size or integer
    argument that moved as a ``Dim``: a product of the dynamic sizes it follows and a coefficient,
    checked against every variant."""

    def __init__(self, graph, sizes, variants, op):
        self.graph = graph
        self.sizes = sizes
        self.variants = variants
        self.op = op

    def run(self):
        graph = self.graph
        for symbol, (_, variant) in self.variants.items():
            self._same_structure(variant, symbol)
        values = {}
        for v, info in graph.values.items():
            dims = tuple(
                self._symbolic(size, [var.values[v].shape[k] for _, var in self.variants.values()], v)
                for k, size in enumerate(info.shape)
            )
            values[v] = ValueInfo(info.shape, info.dtype, dims if any(isinstance(d, Dim) for d in dims) else None)
        for v, constant in graph.constants.items():
            if values[v].dims is not None or any(
                not np.array_equal(var.constants[v].array, constant.array) for _, var in self.variants.values()
            ):
                label = constant.name or "data"
                raise ExportError(
                    f"{self.op}: constant %{v} ({label}, shape {values[v].shape}) changes with the dynamic "
                    f"sizes {sorted(self.sizes)}: the forward computes it from an input's size; export with "
                    "that axis static"
                )
        nodes = []
        for index, node in enumerate(graph.nodes):
            others = [var.nodes[index].params for _, var in self.variants.values()]
            params = {k: self._argument(value, [o[k] for o in others], node) for k, value in node.params.items()}
            nodes.append(Node(node.op, params, node.inputs, node.outputs, node.where))
        return Graph(graph.inputs, graph.outputs, graph.constants, nodes, values)

    def _same_structure(self, variant, symbol):
        base = self.graph
        if [n.op for n in variant.nodes] != [n.op for n in base.nodes] or [n.inputs for n in variant.nodes] != [
            n.inputs for n in base.nodes
        ]:
            raise ExportError(
                f"{self.op}: the model runs different primitives when dynamic size '{symbol}' changes (its "
                "Python branches on a size): it cannot be exported with that axis dynamic"
            )

    def _symbolic(self, base, others, value, what=None):
        """``base`` (an int of the base graph) as a ``Dim`` where a variant changed it, else itself."""
        symbols = tuple(s for s, other in zip(self.variants, others) if other != base)
        if not symbols:
            return base
        product = 1
        for s in symbols:
            product *= self.sizes[s]
        coefficient = base // product if product else 0
        dim = Dim(coefficient, symbols)
        fits = coefficient * product == base and all(
            other == dim.evaluate({**self.sizes, s: self.variants[s][0]}) for s, other in zip(self.variants, others)
        )
        if not fits:
            place = what or f"a size of %{value}, made by {self._maker(value)}"
            raise ExportError(
                f"{self.op}: {place} follows the dynamic sizes {list(symbols)} other than as a product "
                f"of them ({base} for {self.sizes}): export with those axes static"
            )
        return dim

    def _maker(self, value):
        node = self.graph.producer(value)
        return node.op if node is not None else "an input"

    def _argument(self, value, others, node):
        if value.__class__ is int and all(o.__class__ is int for o in others):
            return self._symbolic(value, others, None, f"an integer argument of {node.op}")
        if value.__class__ in (list, tuple) and all(
            o.__class__ is value.__class__ and len(o) == len(value) for o in others
        ):
            return value.__class__(self._argument(v, [o[i] for o in others], node) for i, v in enumerate(value))
        if value.__class__ is slice and all(o.__class__ is slice for o in others):
            return slice(
                *(
                    self._argument(getattr(value, a), [getattr(o, a) for o in others], node)
                    for a in ("start", "stop", "step")
                )
            )
        if any(o != value for o in others):
            raise ExportError(
                f"{self.op}: an argument of {node.op} ({value!r}) changes with the dynamic sizes: the forward "
                "computes it from an input's size; export with that axis static"
            )
        return value
