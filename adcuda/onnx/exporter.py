"""The ONNX writer: ``export`` traces the model (adcuda/export/trace.py) and translates its graph,
one primitive at a time, into ONNX operators.

Each primitive's translation is declared with the op that calls it (``lowering(..., onnx=...)`` in
adcuda/ops/<family>.py, see adcuda/ops/registry.py), mostly as a call of one method here; parameters
and buffers become initializers under their state-dict names (a weight's transpose, folded at trace time, is written
as the weight itself with Gemm's ``transB``). Two patterns read two nodes as one: a 2-D
``matmul`` by a constant followed by the add of a constant bias is a ``Gemm``, and a ``conv2d``
followed by the add of its per-channel bias is a ``Conv`` with a bias. Attention is written out as
MatMul, Softmax and MatMul with its scale, its given mask (boolean: Where; additive: Add) and the
causal mask (Trilu of a -inf matrix the size of the scores, so it follows dynamic sequence sizes).

Dynamic axes: sizes the trace made symbolic (``Dim``) are read at run time from the input that
carries them (``Shape``), so reshapes and expands hold for every batch size; a target with one
symbolic size uses ``-1`` instead.
"""

import numpy as np

from .. import dtypes as dt
from ..errors import AdcudaError
from ..export.trace import Dim, ExportError, Ref, has_dim, trace_forward
from ..ops.registry import lowering_of

DEFAULT_OPSET = 18
MIN_OPSET = 17  # LayerNormalization
OP = "adcuda.onnx.export"
_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


class OnnxNotInstalledError(AdcudaError, ImportError):
    """The ``onnx`` package, which ``adcuda.onnx.export`` writes models with, is not installed."""


def _require_onnx():
    try:
        import onnx
    except ImportError:
        raise OnnxNotInstalledError(
            f"{OP} needs the onnx package: pip install adcuda[onnx] (or pip install onnx)"
        ) from None
    return onnx


def export(
    model,
    args,
    f,
    input_names=None,
    output_names=None,
    dynamic_axes=None,
    opset_version=None,
):
    """Write ``model``'s eval forward on ``args`` (a tensor or a tuple of tensors) as ONNX to ``f`` (a
    path or a binary file object), as ``torch.onnx.export`` does.

    ``input_names``/``output_names`` name the graph's inputs and outputs (default ``input_0``...,
    ``output_0``...). ``dynamic_axes`` maps an input or output name to the axes whose size may change
    at run time: a list of axes, or ``{axis: name}`` (axes sharing a name share one size). The model
    is traced in eval mode (its train/eval flags are restored), the parameters become initializers,
    and the result passes ``onnx.checker``. ``opset_version`` defaults to ``DEFAULT_OPSET``. Returns the
    ``onnx.ModelProto`` written. Raises ``ExportError`` naming the primitive (and the model's line)
    for what ONNX cannot express here, ``OnnxNotInstalledError`` without the onnx package."""
    onnx = _require_onnx()
    opset = DEFAULT_OPSET if opset_version is None else opset_version
    newest = onnx.defs.onnx_opset_version()
    if not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise ExportError(f"{OP}: opset_version must be an int from {MIN_OPSET} to {newest}, got {opset!r}")
    n_inputs = 1 if not isinstance(args, (tuple, list)) else len(args)
    input_names = _names(input_names, n_inputs, "input", "input_names")
    by_input, by_output = _dynamic_axes(dynamic_axes, input_names)
    graph = trace_forward(model, args, op=OP, dynamic_axes=by_input)
    output_names = _names(output_names, len(graph.outputs), "output", "output_names")
    if len(set(input_names) | set(output_names)) != len(input_names) + len(output_names):
        raise ExportError(f"{OP}: input and output names must all differ, got {input_names} and {output_names}")
    unknown = set(by_output) - set(output_names) - set(input_names)
    if unknown:
        raise ExportError(
            f"{OP}: dynamic_axes names {sorted(unknown)}, which are neither inputs {input_names} nor outputs "
            f"{output_names}"
        )
    proto = _Writer(onnx, graph, opset, model).write(input_names, output_names, by_output)
    try:
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as e:
        raise ExportError(f"{OP}: the written model fails onnx.checker: {e}") from None
    onnx.save_model(proto, f)
    return proto


def _names(names, count, prefix, what):
    if names is None:
        names = []
    names = list(names)
    if len(names) > count or not all(isinstance(n, str) and n for n in names):
        raise ExportError(f"{OP}: {what} must be at most {count} non-empty strings, got {names}")
    return names + [f"{prefix}_{i}" for i in range(len(names), count)]


def _dynamic_axes(dynamic_axes, input_names):
    """({input position: {axis: symbol}}, {output name: {axis: label}}) from torch's form."""
    by_input, by_output = {}, {}
    for name, axes in (dynamic_axes or {}).items():
        if isinstance(axes, dict):
            named = {int(a): str(s) for a, s in axes.items()}
        elif isinstance(axes, (list, tuple)):
            named = {int(a): f"{name}_dynamic_axes_{k + 1}" for k, a in enumerate(axes)}
        else:
            raise ExportError(
                f"{OP}: dynamic_axes[{name!r}] must be a list of axes or a dict axis -> name, got {axes!r}"
            )
        if name in input_names:
            by_input[input_names.index(name)] = named
        else:
            by_output[name] = named
    return by_input, by_output


def _state_arrays(model):
    arrays = {}
    for attr in ("named_parameters", "named_buffers"):
        for name, t in getattr(model, attr, lambda: ())():
            if t is not None:
                arrays.setdefault(name, t._data)
    return arrays


class _Writer:
    """Builds the ONNX graph of one traced ``Graph``."""

    def __init__(self, onnx, graph, opset, model):
        self.onnx = onnx
        self.helper = onnx.helper
        self.graph = graph
        self.opset = opset
        self.model = model
        self.state = _state_arrays(model)
        self.replacements = {}  # id(node) -> what to write there instead (a pattern ending or starting there)
        self.originals = {}  # constant value -> initializer of the parameter it is the transpose of, or None
        self.nodes = []
        self.initializers = []
        self.names = {}  # value number -> ONNX tensor name
        self.used_names = set()
        self.suffixes = {}  # name hint -> the last number appended to it
        self.skip = set()  # ids of graph nodes another node's translation absorbed
        self.symbols = {}  # dynamic size name -> (input name, axis)
        self.symbol_tensors = {}  # dynamic size name -> a 1-D int64 tensor holding it
        self.shape_tensors = {}  # symbolic shape -> the 1-D int64 tensor computed for it
        self.small = {}  # (dtype, values) -> name of a small constant already written
        self.location = None

    # ------------------------------------------------------------------ names and constants
    def fresh(self, hint):
        """A tensor or node name not used yet: ``hint``, else ``hint_1``, ``hint_2``..."""
        name = hint
        while name in self.used_names:
            self.suffixes[hint] = self.suffixes.get(hint, 0) + 1
            name = f"{hint}_{self.suffixes[hint]}"
        self.used_names.add(name)
        return name

    def name(self, value):
        """The ONNX name of value number ``value`` (made on first use: a constant's initializer is written
        only once something reads it)."""
        if value not in self.names:
            constant = self.graph.constants.get(value)
            if constant is not None:
                self.names[value] = self.constant_initializer(value, constant)
            else:
                self.names[value] = self.fresh(f"v{value}")
        return self.names[value]

    def initializer(self, array, hint):
        name = self.fresh(hint)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.array(array, order="C"), name))
        return name

    def const(self, values, dtype):
        """A small constant tensor (a scalar for a scalar ``values``) of NumPy ``dtype``."""
        array = np.asarray(values, dtype=dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self.small:
            self.small[key] = self.initializer(array, "const")
        return self.small[key]

    def emit(self, op_type, inputs, outputs=1, **attributes):
        """Add an ONNX node; ``outputs`` is a count (fresh names) or a list of names. -> output names."""
        names = [self.fresh(f"{op_type.lower()}") for _ in range(outputs)] if isinstance(outputs, int) else outputs
        node_name = self.fresh(f"{op_type}_{len(self.nodes)}")
        self.nodes.append(self.helper.make_node(op_type, list(inputs), names, name=node_name, **attributes))
        return names if len(names) != 1 else names[0]

    def refuse(self, what):
        where = f" (at {self.location})" if self.location else ""
        raise ExportError(f"{OP}: {what}{where}")

    # ------------------------------------------------------------------ values
    def info(self, value):
        return self.graph.values[value]

    def np_dtype(self, value):
        return self.info(value).dtype.numpy

    def onnx_type(self, np_dtype):
        return self.helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))

    def rank(self, value):
        return len(self.info(value).shape)

    def operand(self, arg, dtype):
        """``arg`` (a Ref or a scalar) as a tensor name in adcuda dtype ``dtype`` (cast where needed)."""
        if isinstance(arg, Ref):
            name = self.name(arg.value)
            if self.info(arg.value).dtype is not dtype:
                name = self.emit("Cast", [name], to=self.onnx_type(dtype.numpy))
            return name
        return self.const(arg, dtype.numpy)

    def cast(self, name, np_dtype):
        return self.emit("Cast", [name], to=self.onnx_type(np_dtype))

    def shape_tensor(self, dims, for_reshape):
        """A 1-D int64 tensor of the sizes ``dims`` (ints and ``Dim``s)."""
        symbolic = [d for d in dims if isinstance(d, Dim)]
        if not symbolic:
            return self.const(list(dims), np.int64)
        if for_reshape and len(symbolic) == 1 and all(isinstance(d, Dim) or d > 0 for d in dims):
            return self.const([-1 if isinstance(d, Dim) else d for d in dims], np.int64)
        key = tuple(dims)
        if key not in self.shape_tensors:
            parts = [self.dim_tensor(d) if isinstance(d, Dim) else self.const([d], np.int64) for d in dims]
            self.shape_tensors[key] = self.emit("Concat", parts, axis=0)
        return self.shape_tensors[key]

    def dim_tensor(self, dim):
        """``dim`` (a ``Dim``) computed at run time from the inputs' shapes, as a 1-D int64 tensor."""
        terms = [self.symbol_tensor(s) for s in dim.symbols]
        if dim.coefficient != 1:
            terms.append(self.const([dim.coefficient], np.int64))
        result = terms[0]
        for t in terms[1:]:
            result = self.emit("Mul", [result, t])
        return result

    def symbol_tensor(self, symbol):
        if symbol not in self.symbol_tensors:
            input_name, axis = self.symbols[symbol]
            self.symbol_tensors[symbol] = self.emit("Shape", [input_name], start=axis, end=axis + 1)
        return self.symbol_tensors[symbol]

    def static_size(self, value, axes, what):
        """The number of elements over ``axes`` of ``value``, which must not follow a dynamic size."""
        dims = self.info(value).symbolic_shape
        n = 1
        for a in axes:
            if isinstance(dims[a], Dim):
                self.refuse(f"{what} over a dynamic axis ({dims[a]})")
            n *= dims[a]
        return n

    # ------------------------------------------------------------------ the whole graph
    def write(self, input_names, output_names, output_axes):
        helper = self.helper
        graph = self.graph
        inputs = []
        for value, name in zip(graph.inputs, input_names):
            self.names[value] = name
            self.used_names.add(name)
            for axis, d in enumerate(self.info(value).symbolic_shape):
                if isinstance(d, Dim) and d.coefficient == 1 and len(d.symbols) == 1:
                    self.symbols.setdefault(d.symbols[0], (name, axis))
            inputs.append(self.value_info(name, value, {}))
        self.used_names.update(output_names)
        outputs_written = {}
        for value, name in zip(graph.outputs, output_names):
            if value not in self.names and value not in graph.constants and value not in outputs_written:
                outputs_written[value] = name
                self.names[value] = name
        self.plan_patterns()
        for node in graph.nodes:
            if id(node) in self.skip:
                continue
            self.location = node.where
            if id(node) in self.replacements:
                self.replacements[id(node)]()
                continue
            declared = lowering_of(node.op)
            if declared is None or declared.onnx is None:
                self.refuse(f"primitive {node.op} has no ONNX translation")
            declared.onnx(self, node, **node.params)
        self.location = None
        outputs = []
        for value, name in zip(graph.outputs, output_names):
            if outputs_written.get(value) != name:
                self.emit("Identity", [self.name(value)], [name])
            outputs.append(self.value_info(name, value, output_axes.get(name, {})))
        self.drop_identities([i.name for i in inputs], output_names)
        onnx_graph = helper.make_graph(self.nodes, "adcuda_model", inputs, outputs, self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        return helper.make_model(
            onnx_graph,
            opset_imports=opsets,
            producer_name="adcuda",
            ir_version=helper.find_min_ir_version_for(opsets),
        )

    def drop_identities(self, input_names, output_names):
        """Translations end in an Identity onto the value's name where their last step was made before
        the name was known; the step that made the Identity's input writes the name itself instead."""
        made_by = {}
        readers = {}
        for node in self.nodes:
            for o in node.output:
                made_by[o] = node
            for i in node.input:
                readers[i] = readers.get(i, 0) + 1
        kept_names = set(input_names) | set(output_names) | {t.name for t in self.initializers}
        dropped = set()
        for node in self.nodes:
            if node.op_type != "Identity":
                continue
            source = node.input[0]
            producer = made_by.get(source)
            if producer is None or source in kept_names or readers.get(source) != 1:
                continue
            index = list(producer.output).index(source)
            producer.output[index] = node.output[0]
            made_by[node.output[0]] = producer
            dropped.add(id(node))
        self.nodes = [n for n in self.nodes if id(n) not in dropped]

    def value_info(self, name, value, labels):
        dims = [
            labels.get(axis, str(d) if isinstance(d, Dim) else d)
            for axis, d in enumerate(self.info(value).symbolic_shape)
        ]
        return self.helper.make_tensor_value_info(name, self.onnx_type(self.np_dtype(value)), dims)

    def constant_initializer(self, value, constant):
        """Parameters and buffers keep their state-dict names; a weight's folded transpose is written as
        the weight itself where a Gemm reads it (see ``_gemm``), else named after its source."""
        if constant.name:
            return self.initializer(constant.array, constant.name)
        if constant.source:
            original = self.state.get(constant.source)
            transposed = (
                original is not None
                and original.ndim == 2
                and constant.array.shape == original.shape[::-1]
                and np.array_equal(constant.array, np.asarray(original).T)
            )
            return self.initializer(constant.array, f"{constant.source}.T" if transposed else constant.source)
        return self.initializer(constant.array, "constant")

    def out(self, node, index=0):
        value = node.outputs[index]
        return None if value is None else self.name(value)

    def single_consumer(self, value):
        """The one node reading ``value``, unless it is also a model output."""
        consumers = self.graph.consumers(value)
        if len(consumers) != 1 or value in self.graph.outputs:
            return None
        return consumers[0]

    def bias_add(self, node, shape):
        """The constant of ``shape`` that the one consumer of ``node``'s result adds to it, and that
        consumer; (None, None) where there is no such add."""
        consumer = self.single_consumer(node.outputs[0])
        if consumer is None or consumer.op != "binary" or consumer.params["op"] != "add":
            return None, None
        a, b = consumer.params["a"], consumer.params["b"]
        other = b if isinstance(a, Ref) and a.value == node.outputs[0] else a
        if not isinstance(other, Ref) or other.value not in self.graph.constants:
            return None, None
        info = self.info(other.value)
        result = node.outputs[0]
        if info.shape != shape or info.dtype is not self.info(result).dtype:
            return None, None
        if consumer.params["dtype"] is not self.info(result).dtype:
            return None, None
        return other.value, consumer

    # ------------------------------------------------------------------ patterns of several primitives
    def plan_patterns(self):
        """Find the primitive sequences that one ONNX operator says better: an eval-mode batch norm
        (``(x - mean) * rsqrt(var + eps) * weight + bias`` over folded constants)."""
        for node in self.graph.nodes:
            if node.op == "binary" and node.params["op"] == "sub" and id(node) not in self.skip:
                self.plan_batch_norm(node)

    def constant_operand(self, node, other_than):
        """The constant operand of a binary ``node`` whose other operand is value ``other_than``."""
        a, b = node.params["a"], node.params["b"]
        if isinstance(a, Ref) and a.value == other_than and isinstance(b, Ref) and b.value in self.graph.constants:
            return self.graph.constants[b.value]
        if node.params["op"] in ("add", "mul") and isinstance(b, Ref) and b.value == other_than:
            if isinstance(a, Ref) and a.value in self.graph.constants:
                return self.graph.constants[a.value]
        return None

    def plan_batch_norm(self, sub):
        x = sub.params["a"]
        mean = self.constant_operand(sub, x.value) if isinstance(x, Ref) else None
        if mean is None or not (mean.source or "").endswith("running_mean") or self.rank(x.value) < 2:
            return
        prefix = mean.source[: -len("running_mean")]
        module = dict(self.model.named_modules()).get(prefix.rstrip("."))
        eps = getattr(module, "eps", None)
        if module is None or eps is None or getattr(module, "running_var", None) is None:
            return
        chain, steps = [sub], {}
        for op, name in (("mul", "running_var"), ("mul", "weight"), ("add", "bias")):
            last = chain[-1].outputs[0]
            consumer = self.single_consumer(last)
            constant = None
            if consumer is not None and consumer.op == "binary" and consumer.params["op"] == op:
                constant = self.constant_operand(consumer, last)
            if constant is None or constant.source != prefix + name:
                break
            chain.append(consumer)
            steps[name] = constant.array
        if "running_var" not in steps:
            return
        channels = self.info(x.value).shape[1]
        state = {name: np.asarray(t._data) for name, t in module.named_parameters()}
        state.update({name: np.asarray(t._data) for name, t in module.named_buffers() if t is not None})
        expected = {
            "running_var": 1.0 / np.sqrt(state["running_var"].astype(np.float64) + eps),
            "weight": state.get("weight"),
            "bias": state.get("bias"),
        }
        if mean.array.size != channels or not np.array_equal(mean.array.reshape(-1), state["running_mean"]):
            return
        for name, array in steps.items():
            if not np.allclose(array.reshape(-1), expected[name], rtol=1e-6, atol=0):
                return
        dtype = self.np_dtype(x.value)

        def write():
            def param(name):
                if name in steps or name in ("running_mean", "running_var"):
                    return self.initializer(state[name].astype(dtype), prefix + name)
                return self.const(np.ones(channels) if name == "weight" else np.zeros(channels), dtype)

            inputs = [self.name(x.value)] + [param(n) for n in ("weight", "bias", "running_mean", "running_var")]
            self.emit("BatchNormalization", inputs, [self.name(chain[-1].outputs[0])], epsilon=float(eps))

        self.replacements[id(sub)] = write
        self.skip.update(id(n) for n in chain[1:])

    # ------------------------------------------------------------------ storage and views
    def astype(self, node, a, dtype):
        self.emit("Cast", [self.name(a.value)], [self.out(node)], to=self.onnx_type(dtype.numpy))

    def view(self, node, a, shape):
        target = self.shape_tensor(self.info(node.outputs[0]).symbolic_shape, for_reshape=True)
        self.emit("Reshape", [self.name(a.value), target], [self.out(node)])

    def permute(self, node, a, axes):
        rank = self.rank(a.value)
        self.emit("Transpose", [self.name(a.value)], [self.out(node)], perm=[ax % rank for ax in axes])

    def expand(self, node, a, shape):
        target = self.shape_tensor(self.info(node.outputs[0]).symbolic_shape, for_reshape=False)
        self.emit("Expand", [self.name(a.value), target], [self.out(node)])

    def flip(self, node, a, axes):
        rank = self.rank(a.value)
        axes = list(range(rank)) if axes is None else sorted({ax % rank for ax in axes})
        if not axes:
            self.emit("Identity", [self.name(a.value)], [self.out(node)])
            return
        n = len(axes)
        self.emit(
            "Slice",
            [
                self.name(a.value),
                self.const([-1] * n, np.int64),
                self.const([_INT64_MIN] * n, np.int64),
                self.const(axes, np.int64),
                self.const([-1] * n, np.int64),
            ],
            [self.out(node)],
        )

    def slice(self, node, a, key):
        """Basic indexing: one Slice over the sliced axes, a Gather per integer index (removing its
        axis), an Unsqueeze for the new axes (None)."""
        rank = self.rank(a.value)
        key = key if isinstance(key, tuple) else (key,)
        consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
        items = []
        for k in key:
            if k is Ellipsis:
                items.extend([slice(None)] * (rank - consuming))
            else:
                items.append(k)
        items.extend([slice(None)] * (rank - sum(1 for k in items if k is not None)))
        starts, ends, axes, steps, picks, new_axes = [], [], [], [], [], []
        axis = out_axis = 0
        for k in items:
            if k is None:
                new_axes.append(out_axis)
                out_axis += 1
                continue
            if isinstance(k, slice):
                if isinstance(k.step, Dim):
                    self.refuse("a slice step that follows a dynamic size")
                if k != slice(None):
                    step = 1 if k.step is None else k.step
                    starts.append(k.start if k.start is not None else (0 if step > 0 else _INT64_MAX))
                    ends.append(k.stop if k.stop is not None else (_INT64_MAX if step > 0 else _INT64_MIN))
                    axes.append(axis)
                    steps.append(step)
                out_axis += 1
            else:
                if isinstance(k, Dim):
                    self.refuse("an index that follows a dynamic size")
                picks.append((axis, int(k)))
            axis += 1
        name = self.name(a.value)
        if axes:
            name = self.emit(
                "Slice",
                [
                    name,
                    self.shape_tensor(starts, for_reshape=False),
                    self.shape_tensor(ends, for_reshape=False),
                    self.const(axes, np.int64),
                    self.const(steps, np.int64),
                ],
            )
        for axis, index in reversed(picks):  # the highest axis first: the lower ones keep their numbers
            name = self.emit("Gather", [name, self.const(index, np.int64)], axis=axis)
        if new_axes:
            name = self.emit("Unsqueeze", [name, self.const(new_axes, np.int64)])
        self.emit("Identity", [name], [self.out(node)])

    def full(self, node, shape, value, dtype):
        """A tensor of one value whose shape follows a dynamic size (static ones were folded)."""
        fill = self.onnx.numpy_helper.from_array(np.array([value], dtype.numpy))
        size = self.shape_tensor(self.info(node.outputs[0]).symbolic_shape, for_reshape=False)
        self.emit("ConstantOfShape", [size], [self.out(node)], value=fill)

    def arange(self, node, start, stop, step, dtype):
        """A range with a bound that follows a dynamic size (positions 0..T-1)."""
        work = np.float64 if np.issubdtype(dtype.numpy, np.floating) else np.int64

        def scalar(v):
            if isinstance(v, Dim):
                return self.cast(self.emit("Reshape", [self.dim_tensor(v), self.const([], np.int64)]), work)
            return self.const(v, work)

        result = self.emit("Range", [scalar(start), scalar(stop), scalar(step)])
        self.emit("Cast", [result], [self.out(node)], to=self.onnx_type(dtype.numpy))

    def copy_(self, node, dst, src):
        """The graph's ``copy_``: a new array of ``dst``'s shape and dtype holding ``src`` broadcast."""
        dtype = self.info(dst.value).dtype
        size = self.shape_tensor(self.info(dst.value).symbolic_shape, for_reshape=False)
        self.emit("Expand", [self.operand(src, dtype), size], [self.out(node)])

    def index_put_(self, node, a, key, values, accumulate):
        """The graph's ``index_put_`` over a basic key (ints and unit-step slices): the values, broadcast
        to the region and padded with zeros to ``a``'s shape, replace (or add to) ``a`` where the
        region is."""
        dims = self.info(a.value).symbolic_shape
        dtype = self.info(a.value).dtype
        key = key if isinstance(key, tuple) else (key,)
        if any(isinstance(k, Ref) or k is None for k in key):
            self.refuse("index_put_ with a tensor index or a new axis in its key (only ints and slices)")
        consuming = sum(1 for k in key if k is not Ellipsis)
        items = []
        for k in key:
            items.extend([slice(None)] * (len(dims) - consuming) if k is Ellipsis else [k])
        items.extend([slice(None)] * (len(dims) - len(items)))
        region, picked, before, after = [], [], [], []
        for axis, (k, size) in enumerate(zip(items, dims)):
            if isinstance(size, Dim) or has_dim(k):
                if k != slice(None):
                    self.refuse("index_put_ into part of an axis whose size is dynamic")
                region.append(size)
                before.append(0)
                after.append(0)
                continue
            if isinstance(k, slice):
                start, stop, step = k.indices(size)
                if step != 1:
                    self.refuse("index_put_ over a slice with a step")
                stop = max(stop, start)
                region.append(stop - start)
            else:
                start, stop = k % size, k % size + 1
                picked.append(axis)
            before.append(start)
            after.append(size - stop)
        filled = self.emit(
            "Expand",
            [self.operand(values, dtype), self.shape_tensor(tuple(region), for_reshape=False)],
        )
        if picked:
            filled = self.emit("Unsqueeze", [filled, self.const(picked, np.int64)])
        pads = self.const(before + after, np.int64)
        padded = self.emit("Pad", [filled, pads, self.const(0, dtype.numpy)])
        if accumulate:
            self.emit("Add", [self.name(a.value), padded], [self.out(node)])
            return
        ones = self.emit("Expand", [self.const(1, np.float32), self.emit("Shape", [filled])])
        inside = self.cast(self.emit("Pad", [ones, pads, self.const(0, np.float32)]), np.bool_)
        self.emit("Where", [inside, padded, self.name(a.value)], [self.out(node)])

    # ------------------------------------------------------------------ elementwise
    def unary(self, node, op, a):
        """``unary(op, a)``: the op's declared ONNX operator, or its declared translation."""
        self.apply_unary(op, self.name(a.value), self.np_dtype(a.value), self.out(node), "unary op")

    def apply_unary(self, op, x, dtype, out, what):
        """Unary op ``op`` of tensor ``x`` (NumPy ``dtype``) as declared, into ``out``. -> its name."""
        declared = lowering_of("unary", op)
        if declared is None or declared.onnx is None:
            self.refuse(f"{what} {op!r} has no ONNX translation")
        if isinstance(declared.onnx, str):
            return self.emit(declared.onnx, [x], [out])
        return declared.onnx(self, x, dtype, out)

    def binary(self, node, op, a, b, dtype):
        """``binary(op, a, b, dtype)``: the op's declared ONNX operator over both operands in ``dtype``, or
        its declared translation (given the operands as traced: Refs or scalars)."""
        declared = lowering_of("binary", op)
        if declared is None or declared.onnx is None:
            self.refuse(f"binary op {op!r} has no ONNX translation")
        if isinstance(declared.onnx, str):
            self.emit(declared.onnx, [self.operand(a, dtype), self.operand(b, dtype)], [self.out(node)])
        else:
            declared.onnx(self, a, b, dtype, self.out(node))

    def floor_division(self, x, y, dtype, out, remainder):
        """floor_divide (or, ``remainder``, remainder) of tensors ``x`` and ``y`` in adcuda dtype ``dtype``."""
        work = dtype.numpy
        floating = np.issubdtype(work, np.floating)
        if not floating and remainder:
            self.emit("Mod", [x, y], [out], fmod=0)  # Python's sign (the divisor's), as PyTorch
            return
        xf, yf = (x, y) if floating else (self.cast(x, np.float64), self.cast(y, np.float64))
        quotient = self.emit("Floor", [self.emit("Div", [xf, yf])])
        if remainder:
            self.emit("Sub", [x, self.emit("Mul", [quotient, y])], [out])
        elif floating:
            self.emit("Identity", [quotient], [out])
        else:
            self.emit("Cast", [quotient], [out], to=self.onnx_type(work))

    def logical(self, op_type, a, b, out):
        """ONNX's ``op_type`` (And, Or, Xor) over the truth values of operands ``a`` and ``b`` (Refs or scalars)."""
        self.emit(op_type, [self.operand(a, dt.bool_), self.operand(b, dt.bool_)], [out])

    def where(self, node, cond, a, b, dtype):
        self.emit(
            "Where", [self.operand(cond, dt.bool_), self.operand(a, dtype), self.operand(b, dtype)], [self.out(node)]
        )

    def clamp(self, node, a, lo, hi):
        x = self.name(a.value)
        dtype = self.np_dtype(a.value)
        if lo is not None:
            x = self.emit("Max", [x, self.const(lo, dtype)])
        if hi is not None:
            x = self.emit("Min", [x, self.const(hi, dtype)])
        self.emit("Identity", [x], [self.out(node)])

    # ------------------------------------------------------------------ reductions
    def reduce_over(self, op_type, x, axes, keepdim, out=None):
        """``op_type`` over ``axes`` (None: all), axes given as an input (ReduceSum from opset 13, the
        others from opset 18) or an attribute."""
        keep = int(bool(keepdim))
        outputs = [out] if out is not None else 1
        if axes is None:
            return self.emit(op_type, [x], outputs, keepdims=keep)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.emit(op_type, [x, self.const(list(axes), np.int64)], outputs, keepdims=keep)
        return self.emit(op_type, [x], outputs, keepdims=keep, axes=list(axes))

    def axes_of(self, value, axes):
        if axes is None:
            return None
        rank = self.rank(value)
        axes = (axes,) if isinstance(axes, int) else tuple(axes)
        return tuple(sorted({a % rank for a in axes})) if rank else ()

    def reduce(self, node, op, a, axes, keepdim):
        """``reduce(op, a, axes, keepdim)``: the op's declared ONNX reduction in the result's dtype, or its
        declared translation."""
        x = self.name(a.value)
        out = self.out(node)
        axes = self.axes_of(a.value, axes)
        in_dtype = self.np_dtype(a.value)
        out_dtype = self.np_dtype(node.outputs[0])
        if axes == ():  # NumPy reduces nothing; ONNX would reduce everything
            self.emit("Cast", [x], [out], to=self.onnx_type(out_dtype))
            return
        declared = lowering_of("reduce", op)
        if declared is None or declared.onnx is None:
            self.refuse(f"reduction {op!r} has no ONNX translation")
        if not isinstance(declared.onnx, str):
            declared.onnx(self, x, in_dtype, axes, keepdim, out)
            return
        if in_dtype != out_dtype:
            x = self.cast(x, out_dtype)
        self.reduce_over(declared.onnx, x, axes, keepdim, out)

    def reduce_truth(self, op_type, x, in_dtype, axes, keepdim, out):
        """``op_type`` (ReduceMin: all, ReduceMax: any) over the truth values of ``x``, as 0/1 integers (no
        Reduce* takes bool)."""
        truth = self.cast(self.cast(x, np.bool_) if in_dtype != np.bool_ else x, np.int32)
        reduced = self.reduce_over(op_type, truth, axes, keepdim)
        self.emit("Cast", [reduced], [out], to=self.onnx_type(np.bool_))

    def argreduce(self, node, op, a, axis, keepdim):
        x = self.name(a.value)
        if axis is None:
            x = self.emit("Reshape", [x, self.const([-1], np.int64)])
            axis = 0
            keep_flat = 0
        else:
            axis = axis % max(self.rank(a.value), 1)
            keep_flat = int(bool(keepdim))
        result = self.emit(
            "ArgMax" if op == "argmax" else "ArgMin", [x], axis=axis, keepdims=keep_flat, select_last_index=0
        )
        target = self.shape_tensor(self.info(node.outputs[0]).symbolic_shape, for_reshape=True)
        self.emit("Reshape", [result, target], [self.out(node)])

    def var(self, node, a, axes, correction, keepdim):
        x = self.name(a.value)
        rank = self.rank(a.value)
        axes = self.axes_of(a.value, axes)
        axes = tuple(range(rank)) if axes is None else axes
        count = self.static_size(a.value, axes, "var")
        dtype = self.np_dtype(a.value)
        mean = self.reduce_over("ReduceMean", x, axes, True)
        d = self.emit("Sub", [x, mean])
        total = self.reduce_over("ReduceSum", self.emit("Mul", [d, d]), axes, keepdim)
        self.emit("Div", [total, self.const(count - correction, dtype)], [self.out(node)])

    def logsumexp(self, node, a, axes, keepdim):
        axes = self.axes_of(a.value, axes)
        self.reduce_over("ReduceLogSumExp", self.name(a.value), axes, keepdim, self.out(node))

    def cumsum(self, node, a, axis):
        x = self.name(a.value)
        if axis is None:
            x = self.emit("Reshape", [x, self.const([-1], np.int64)])
            axis = 0
        out_dtype = self.np_dtype(node.outputs[0])
        if self.np_dtype(a.value) != out_dtype:
            x = self.cast(x, out_dtype)
        self.emit("CumSum", [x, self.const(axis, np.int64)], [self.out(node)])

    # ------------------------------------------------------------------ indexing and layout
    def index(self, node, a, key):
        """Advanced indexing by one integer array among full slices: a Gather along its axis."""
        key = key if isinstance(key, tuple) else (key,)
        arrays = [i for i, k in enumerate(key) if isinstance(k, Ref)]
        if len(arrays) != 1 or any(not isinstance(k, Ref) and k != slice(None) for k in key):
            self.refuse("advanced indexing other than by one integer tensor among full slices (x[:, idx])")
        index = key[arrays[0]]
        self.emit("Gather", [self.name(a.value), self.operand(index, dt.int64)], [self.out(node)], axis=arrays[0])

    def gather(self, node, a, axis, idx):
        axis = axis % max(self.rank(a.value), 1)
        self.emit("GatherElements", [self.name(a.value), self.operand(idx, dt.int64)], [self.out(node)], axis=axis)

    def scatter_add(self, node, a, axis, idx, src):
        axis = axis % max(self.rank(a.value), 1)
        idx_name = self.operand(idx, dt.int64)
        src_name = self.name(src.value)
        if self.info(src.value).shape != self.info(idx.value).shape:  # src no smaller than idx: its leading block
            src_name = self.emit(
                "Slice",
                [
                    src_name,
                    self.const([0] * self.rank(idx.value), np.int64),
                    self.emit("Shape", [idx_name]),
                ],
            )
        self.emit(
            "ScatterElements", [self.name(a.value), idx_name, src_name], [self.out(node)], axis=axis, reduction="add"
        )

    def cat(self, node, arrays, axis):
        rank = self.rank(arrays[0].value)
        self.emit("Concat", [self.name(r.value) for r in arrays], [self.out(node)], axis=axis % rank)

    def tril(self, node, a, k):
        self.emit("Trilu", [self.name(a.value), self.const(k, np.int64)], [self.out(node)], upper=0)

    def triu(self, node, a, k):
        self.emit("Trilu", [self.name(a.value), self.const(k, np.int64)], [self.out(node)], upper=1)

    def embedding(self, node, weight, indices):
        self.emit("Gather", [self.name(weight.value), self.operand(indices, dt.int64)], [self.out(node)], axis=0)

    # ------------------------------------------------------------------ linear algebra and NN
    def matmul(self, node, a, b, bias=None, activation=None, save_preactivation=False):
        if activation is None and not save_preactivation and self._gemm(node, a, b, bias):
            return
        result = self.emit("MatMul", [self.name(a.value), self.name(b.value)])
        if bias is not None:
            result = self.emit("Add", [result, self.name(bias.value)])
        pre = result
        if activation is not None:
            result = self.apply_unary(activation, result, self.np_dtype(a.value), None, "matmul's fused activation")
        self.emit("Identity", [result], [self.out(node)])
        if save_preactivation and self.out(node, 1) is not None:
            self.emit("Identity", [pre], [self.out(node, 1)])

    def _gemm(self, node, a, b, bias):
        """``x @ W^T + bias`` over 2-D ``x`` and a constant weight, the bias fused into the matmul or
        added by the one node reading its result: one Gemm, reading the weight as the model stores it
        (``transB``), as torch.onnx writes nn.Linear."""
        if self.rank(a.value) != 2 or b.value not in self.graph.constants or self.rank(b.value) != 2:
            return False
        n = self.info(b.value).shape[1]
        consumer = None
        if bias is None:
            bias, consumer = self.bias_add(node, (n,))
            if consumer is None:
                return False
            output = consumer.outputs[0]
            self.skip.add(id(consumer))
        else:
            bias, output = bias.value, node.outputs[0]
            if self.info(bias).shape != (n,):
                return False
        original = self.original_weight(b.value)
        weight = original if original is not None else self.name(b.value)
        self.emit(
            "Gemm",
            [self.name(a.value), weight, self.name(bias)],
            [self.name(output)],
            transB=int(original is not None),
        )
        return True

    def original_weight(self, value):
        """The initializer holding the parameter that constant ``value`` is the folded transpose of, or
        None (made once, shared by every Gemm reading it)."""
        if value not in self.originals:
            constant = self.graph.constants[value]
            original = self.state.get(constant.source) if constant.source else None
            self.originals[value] = None
            if (
                original is not None
                and original.ndim == 2
                and original.shape == constant.array.shape[::-1]
                and np.array_equal(np.asarray(original).T, constant.array)
            ):
                self.originals[value] = self.initializer(np.asarray(original), constant.source)
        return self.originals[value]

    def softmax(self, node, a, axis, log):
        self.emit("LogSoftmax" if log else "Softmax", [self.name(a.value)], [self.out(node)], axis=axis)

    def layer_norm(self, node, x, weight, bias, n, eps):
        dims = self.info(x.value).symbolic_shape[-n:]
        dtype = self.np_dtype(x.value)
        if weight is None or bias is None:
            if any(isinstance(d, Dim) for d in dims):
                self.refuse("layer_norm without weight or bias over a dynamic axis")
        scale = self.name(weight.value) if weight is not None else self.const(np.ones(dims), dtype)
        shift = self.name(bias.value) if bias is not None else self.const(np.zeros(dims), dtype)
        outputs = [self.out(node, i) or "" for i in range(3)]
        while outputs and outputs[-1] == "":
            outputs.pop()
        self.emit("LayerNormalization", [self.name(x.value), scale, shift], outputs, axis=-n, epsilon=float(eps))

    def batch_norm(self, node, x, weight, bias, eps):
        """Normalisation by the batch's own statistics (a BatchNorm without running statistics)."""
        rank = self.rank(x.value)
        dtype = self.np_dtype(x.value)
        axes = [0] + list(range(2, rank))
        channels = [1, -1] + [1] * (rank - 2)
        xn = self.name(x.value)
        mean = self.reduce_over("ReduceMean", xn, axes, True)
        d = self.emit("Sub", [xn, mean])
        var = self.reduce_over("ReduceMean", self.emit("Mul", [d, d]), axes, True)
        rstd = self.emit("Reciprocal", [self.emit("Sqrt", [self.emit("Add", [var, self.const(eps, dtype)])])])
        y = self.emit("Mul", [d, rstd])
        if weight is not None:
            y = self.emit("Mul", [y, self.emit("Reshape", [self.name(weight.value), self.const(channels, np.int64)])])
        if bias is not None:
            y = self.emit("Add", [y, self.emit("Reshape", [self.name(bias.value), self.const(channels, np.int64)])])
        self.emit("Identity", [y], [self.out(node)])
        for index, stat in ((1, mean), (2, rstd)):
            if self.out(node, index) is not None:
                flat = self.emit("Reshape", [stat, self.const([-1], np.int64)])
                self.emit(
                    "Cast", [flat], [self.out(node, index)], to=self.onnx_type(self.np_dtype(node.outputs[index]))
                )

    def attention(self, node, q, k, v, mask, is_causal, scale, dropout_p=0.0, seed=0, offset=0):
        """softmax(q k^T * scale + mask) v, the masks as -inf; dropout never runs in an eval forward."""
        if dropout_p:
            self.refuse("attention with dropout (an exported graph has no random numbers)")
        dtype = self.info(q.value).dtype
        kn, vn = self.operand(k, dtype), self.operand(v, dtype)
        rank = self.rank(k.value)
        perm = list(range(rank - 2)) + [rank - 1, rank - 2]
        scores = self.emit("MatMul", [self.name(q.value), self.emit("Transpose", [kn], perm=perm)])
        scores = self.emit("Mul", [scores, self.const(scale, dtype.numpy)])
        if mask is not None:
            if self.info(mask.value).dtype is dt.bool_:
                scores = self.emit("Where", [self.name(mask.value), scores, self.const(-np.inf, dtype.numpy)])
            else:
                scores = self.emit("Add", [scores, self.operand(mask, dtype)])
        if is_causal:
            size = self.emit("Shape", [scores], start=-2)
            blocked = self.emit(
                "ConstantOfShape",
                [size],
                value=self.onnx.numpy_helper.from_array(np.array([-np.inf], dtype.numpy)),
            )
            scores = self.emit("Add", [scores, self.emit("Trilu", [blocked, self.const(1, np.int64)], upper=1)])
        probabilities = self.emit("Softmax", [scores], axis=-1)
        self.emit("MatMul", [probabilities, vn], [self.out(node)])
        if self.out(node, 1) is not None:
            lse = self.reduce_over("ReduceLogSumExp", scores, (rank - 1,), False)
            self.emit("Cast", [lse], [self.out(node, 1)], to=self.onnx_type(self.np_dtype(node.outputs[1])))

    def gates(self, x, count, size):
        """``x`` (B, count * size) split into ``count`` gates along dim 1."""
        return self.emit("Split", [x, self.const([size] * count, np.int64)], count, axis=1)

    def lstm_cell(self, node, gi, gh, c):
        hidden = self.info(c.value).shape[-1]
        i, f, g, o = self.gates(self.emit("Add", [self.name(gi.value), self.name(gh.value)]), 4, hidden)
        i, f, o = (self.emit("Sigmoid", [t]) for t in (i, f, o))
        cell = self.emit(
            "Add", [self.emit("Mul", [f, self.name(c.value)]), self.emit("Mul", [i, self.emit("Tanh", [g])])]
        )
        h = self.emit("Mul", [o, self.emit("Tanh", [cell])])
        zero = self.const([0], np.int64)
        stacked = [self.emit("Unsqueeze", [t, zero]) for t in (h, cell)]
        self.emit("Concat", stacked, [self.out(node)], axis=0)

    def lstm_layer(self, node, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, batch_first):
        """A whole LSTM layer (the CPU and CUDA backends run it as one primitive), unrolled over its
        static number of steps: the input projection of the whole sequence, then per step the hidden
        product and the cell's gates as in ``_op_lstm_cell``. The output stacks every step's h in the
        input's row order, then the last h and c; the extra outputs (the backward's) are not made."""
        if self.out(node, 1) is not None or self.out(node, 2) is not None:
            self.refuse("an LSTM layer's saved gates and cell states (they serve the backward only)")
        shape = self.info(x.value).shape
        steps = shape[1] if batch_first else shape[0]
        if isinstance(steps, Dim) or steps == 0:
            self.refuse("an LSTM layer over a dynamic or empty number of time steps")
        hidden = self.info(c0.value).shape[-1]
        sequence = self.name(x.value)
        if batch_first:
            sequence = self.emit("Transpose", [sequence], perm=[1, 0, 2])
        proj = self.emit("MatMul", [sequence, self.emit("Transpose", [self.name(w_ih.value)], perm=[1, 0])])
        if b_ih is not None:
            proj = self.emit("Add", [proj, self.name(b_ih.value)])
        h, c = self.name(h0.value), self.name(c0.value)
        w_t = self.emit("Transpose", [self.name(w_hh.value)], perm=[1, 0])
        zero = self.const([0], np.int64)
        hs = [None] * steps
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            gh = self.emit("MatMul", [h, w_t])
            if b_hh is not None:
                gh = self.emit("Add", [gh, self.name(b_hh.value)])
            z = self.emit("Add", [self.emit("Gather", [proj, self.const(t, np.int64)], axis=0), gh])
            i, f, g, o = self.gates(z, 4, hidden)
            i, f, o = (self.emit("Sigmoid", [v]) for v in (i, f, o))
            c = self.emit("Add", [self.emit("Mul", [f, c]), self.emit("Mul", [i, self.emit("Tanh", [g])])])
            h = self.emit("Mul", [o, self.emit("Tanh", [c])])
            hs[t] = self.emit("Unsqueeze", [h, zero])
        sequence = self.emit("Concat", hs, axis=0)  # (T, B, H)
        if batch_first:
            sequence = self.emit("Transpose", [sequence], perm=[1, 0, 2])
        rows = self.emit("Reshape", [sequence, self.const([-1, hidden], np.int64)])
        self.emit("Concat", [rows, h, c], [self.out(node)], axis=0)

    def gru_cell(self, node, gi, gh, h):
        hidden = self.info(h.value).shape[-1]
        ri, zi, ni = self.gates(self.name(gi.value), 3, hidden)
        rh, zh, nh = self.gates(self.name(gh.value), 3, hidden)
        r = self.emit("Sigmoid", [self.emit("Add", [ri, rh])])
        z = self.emit("Sigmoid", [self.emit("Add", [zi, zh])])
        n = self.emit("Tanh", [self.emit("Add", [ni, self.emit("Mul", [r, nh])])])
        update = self.emit("Mul", [z, self.emit("Sub", [self.name(h.value), n])])
        self.emit("Add", [n, update], [self.out(node)])  # (1 - z) n + z h

    def conv2d(self, node, x, weight, stride, padding, dilation, groups):
        inputs = [self.name(x.value), self.name(weight.value)]
        out_channels = self.info(weight.value).shape[0]
        bias, consumer = self.bias_add(node, (1, out_channels, 1, 1))
        output = self.out(node)
        if consumer is not None:
            self.skip.add(id(consumer))
            flat = self.graph.constants[bias].array.reshape(-1)
            source = self.graph.constants[bias].source
            inputs.append(self.initializer(flat, source or "conv_bias"))
            output = self.name(consumer.outputs[0])
        self.emit(
            "Conv",
            inputs,
            [output],
            strides=list(stride),
            pads=list(padding) * 2,
            dilations=list(dilation),
            group=int(groups),
        )

    def conv2d_backward_input(self, node, g, weight, input_shape, stride, padding, dilation, groups):
        """The input gradient of a convolution, which is a transposed convolution (nn.ConvTranspose2d)."""
        if has_dim(tuple(input_shape)[2:]):
            self.refuse("a transposed convolution whose output height or width is dynamic")
        kernel = self.info(weight.value).shape[2:]
        g_size = self.info(g.value).shape[2:]
        extra = [
            size - ((n - 1) * s - 2 * p + d * (k - 1) + 1)
            for size, n, s, p, d, k in zip(tuple(input_shape)[2:], g_size, stride, padding, dilation, kernel)
        ]
        self.emit(
            "ConvTranspose",
            [self.name(g.value), self.name(weight.value)],
            [self.out(node)],
            strides=list(stride),
            pads=list(padding) * 2,
            dilations=list(dilation),
            group=int(groups),
            output_padding=extra,
        )

    # ------------------------------------------------------------------ resampling
    def interpolate_nearest(self, node, x, out_size, scales, exact):
        """Resize (nearest): floor(o * step) is 'asymmetric' floored, floor((o + 0.5) * step) 'half_pixel'
        rounded half up."""
        if exact:
            self._resize(node, x, out_size, scales, "nearest", "half_pixel", nearest_mode="round_prefer_ceil")
        else:
            self._resize(node, x, out_size, scales, "nearest", "asymmetric", nearest_mode="floor")

    def interpolate_bilinear(self, node, x, out_size, scales, align_corners):
        self._resize(node, x, out_size, scales, "linear", "align_corners" if align_corners else "half_pixel")

    def _resize(self, node, x, out_size, steps, mode, transformation, **attributes):
        """Resize to out_size: by its sizes where PyTorch steps by in / out (or aligns corners), else by
        scales 1 / step (a scale_factor's own steps)."""
        shape = self.info(x.value).shape
        by_size = transformation == "align_corners" or all(
            float(step) == size / out for step, size, out in zip(steps, shape[2:], out_size)
        )
        if by_size:  # (N, C) read from x at run time: the batch may be a dynamic axis
            lead = self.emit("Shape", [self.name(x.value)], start=0, end=2)
            sizes = self.emit("Concat", [lead, self.const(list(out_size), np.int64)], axis=0)
            inputs = [self.name(x.value), "", "", sizes]
        else:
            inputs = [self.name(x.value), "", self.const([1.0, 1.0] + [1.0 / float(s) for s in steps], np.float32)]
        self.emit(
            "Resize", inputs, [self.out(node)], mode=mode, coordinate_transformation_mode=transformation, **attributes
        )

    def pad(self, node, x, pads, mode, value):
        """Pad over every dim (the unpadded ones by 0): ONNX's constant, reflect, edge and wrap (opset 19)."""
        pads = [int(p) for p in pads]
        if mode != "constant" and min(pads, default=0) < 0:
            self.refuse(f"{mode} padding with negative (cropping) amounts")
        if mode == "circular" and self.opset < 19:
            self.refuse("circular padding below opset 19 (ONNX's Pad mode 'wrap')")
        lead = [0] * (self.rank(x.value) - len(pads) // 2)
        inputs = [self.name(x.value), self.const(lead + pads[0::2] + lead + pads[1::2], np.int64)]
        if mode == "constant":
            inputs.append(self.const(value, self.np_dtype(x.value)))
        onnx_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
        self.emit("Pad", inputs, [self.out(node)], mode=onnx_mode)

    def max_pool2d(self, node, x, kernel, stride, padding, dilation, out_size):
        if node.outputs[1] is not None:
            self.refuse("max_pool2d's indices (return_indices=True): ONNX numbers them differently")
        height, width = self.info(x.value).shape[2:]
        floor_size = tuple(
            (size + 2 * p - d * (k - 1) - 1) // s + 1
            for size, p, d, k, s in zip((height, width), padding, dilation, kernel, stride)
        )
        self.emit(
            "MaxPool",
            [self.name(x.value)],
            [self.out(node)],
            kernel_shape=list(kernel),
            strides=list(stride),
            pads=list(padding) * 2,
            dilations=list(dilation),
            ceil_mode=int(tuple(out_size) != floor_size),
        )

    def avg_pool2d(self, node, x, kernel, stride, padding, out_size, count_include_pad, divisor_override):
        """AveragePool over x zero-padded for every window (ceil_mode's last ones too), then, where PyTorch's
        divisor is not the window's size (padding not counted, windows cut at the padded end, a divisor
        override), a Div by the ratio of the two."""
        height, width = self.info(x.value).shape[2:]
        dtype = self.np_dtype(x.value)
        counts, extra = [], []
        for size, o, k, s, p in zip((height, width), out_size, kernel, stride, padding):
            starts = np.arange(o) * s - p
            ends = np.minimum(starts + k, size + p)
            counts.append(ends - starts if count_include_pad else np.minimum(ends, size) - np.maximum(starts, 0))
            extra.append(max(0, (o - 1) * s + k - (size + 2 * p)))
        divisor = (
            np.full(tuple(out_size), float(divisor_override))
            if divisor_override is not None
            else np.multiply.outer(counts[0], counts[1]).astype(np.float64)
        )
        source = self.name(x.value)
        if any(padding) or any(extra):
            pads = [0, 0, padding[0], padding[1], 0, 0, padding[0] + extra[0], padding[1] + extra[1]]
            source = self.emit("Pad", [source, self.const(pads, np.int64)])
        window = float(kernel[0] * kernel[1])
        if np.all(divisor == window):
            self.emit("AveragePool", [source], [self.out(node)], kernel_shape=list(kernel), strides=list(stride))
            return
        mean = self.emit("AveragePool", [source], kernel_shape=list(kernel), strides=list(stride))
        self.emit("Div", [mean, self.const(divisor / window, dtype)], [self.out(node)])

    def adaptive_avg_pool2d(self, node, x, out_size):
        """ReduceMean (global), AveragePool (windows of equal size), else the two averaging matrices."""
        height, width = self.info(x.value).shape[2:]
        ho, wo = out_size
        if (ho, wo) == (1, 1):
            self.reduce_over("ReduceMean", self.name(x.value), [2, 3], True, out=self.out(node))
            return
        if height % ho == 0 and width % wo == 0:
            kernel = [height // ho, width // wo]
            self.emit("AveragePool", [self.name(x.value)], [self.out(node)], kernel_shape=kernel, strides=kernel)
            return
        dtype = self.np_dtype(x.value)

        def averaging(size, out):
            m = np.zeros((out, size))
            for o in range(out):
                start, end = (o * size) // out, -((-(o + 1) * size) // out)
                m[o, start:end] = 1.0 / (end - start)
            return m

        rows = self.emit("MatMul", [self.const(averaging(height, ho), dtype), self.name(x.value)])
        self.emit("MatMul", [rows, self.const(averaging(width, wo).T, dtype)], [self.out(node)])

    def rms_norm(self, node, x, weight, n, eps):
        xn = self.name(x.value)
        dtype = self.np_dtype(x.value)
        axes = list(range(self.rank(x.value) - n, self.rank(x.value)))
        mean_square = self.reduce_over("ReduceMean", self.emit("Mul", [xn, xn]), axes, True)
        rstd = self.emit("Reciprocal", [self.emit("Sqrt", [self.emit("Add", [mean_square, self.const(eps, dtype)])])])
        y = self.emit("Mul", [xn, rstd])
        if weight is not None:
            y = self.emit("Mul", [y, self.name(weight.value)])
        self.emit("Identity", [y], [self.out(node)])
        if self.out(node, 1) is not None:
            self.emit("Cast", [rstd], [self.out(node, 1)], to=self.onnx_type(self.np_dtype(node.outputs[1])))

    def group_norm(self, node, x, weight, bias, groups, eps):
        """Statistics over (n, group) rows of the input reshaped to (N, groups, -1), then the per-channel affine."""
        if self.out(node, 1) is not None or self.out(node, 2) is not None:
            self.refuse("group_norm's statistics as outputs")
        rank = self.rank(x.value)
        dtype = self.np_dtype(x.value)
        xn = self.name(x.value)
        rows = self.emit("Reshape", [xn, self.const([0, groups, -1], np.int64)])
        mean = self.reduce_over("ReduceMean", rows, [2], True)
        d = self.emit("Sub", [rows, mean])
        var = self.reduce_over("ReduceMean", self.emit("Mul", [d, d]), [2], True)
        rstd = self.emit("Reciprocal", [self.emit("Sqrt", [self.emit("Add", [var, self.const(eps, dtype)])])])
        y = self.emit("Reshape", [self.emit("Mul", [d, rstd]), self.emit("Shape", [xn])])
        channels = [1, -1] + [1] * (rank - 2)
        if weight is not None:
            y = self.emit("Mul", [y, self.emit("Reshape", [self.name(weight.value), self.const(channels, np.int64)])])
        if bias is not None:
            y = self.emit("Add", [y, self.emit("Reshape", [self.name(bias.value), self.const(channels, np.int64)])])
        self.emit("Identity", [y], [self.out(node)])

    def adaptive_max_pool2d(self, node, x, out_size):
        if node.outputs[1] is not None:
            self.refuse("adaptive_max_pool2d's indices (return_indices=True): ONNX numbers them differently")
        height, width = self.info(x.value).shape[2:]
        if tuple(out_size) == (1, 1):
            self.emit("GlobalMaxPool", [self.name(x.value)], [self.out(node)])
            return
        if height % out_size[0] or width % out_size[1]:
            self.refuse(
                f"adaptive_max_pool2d to {tuple(out_size)} of a {height}x{width} input (windows of unequal size)"
            )
        kernel = [height // out_size[0], width // out_size[1]]
        self.emit("MaxPool", [self.name(x.value)], [self.out(node)], kernel_shape=kernel, strides=kernel)
