"""Lowering the frozen eval-forward graph (trace.py's ``Graph``) to the few loop nests the C generator
writes (c_code.py).

The graph's primitives are small (a BatchNorm in eval mode is a sub and two muls by constants the trace
already folded), so the lowering works in two passes:

1. every node becomes ``CNode``s by its primitive's declared C lowering (``lowering(..., c=...)`` in
   adcuda/ops/<family>.py, calling a method of ``Lowerer``), or the export is refused with an
   ``ExportError`` naming the primitive (and what would have to change);
2. ``fold_affine`` folds per-channel constant adds, subs, muls and divides that follow a Linear or a
   Conv2d into its weight and bias (this is how BatchNorm disappears into the convolution), and an
   activation right after one into its loop (``act``); ``merge_repeats`` turns a node that repeats an
   earlier one into a view of its result.

Values are numbered; every value is float32, contiguous and row-major in C. Views and ``contiguous``
change no data there, so they become ``alias`` nodes that the memory plan maps to their source's
buffer.
"""

import numpy as np

from .. import dtypes as dt
from ..ops.registry import lowering_of, lowerings
from .trace import ExportError, Ref

# astype(bool) in C: a test against 0 (a C value is a float; see ``Lowerer.astype``)
_NONZERO = "(v != 0.0f ? 1.0f : 0.0f)"


def unary_c(op):
    """The C expression over ``v`` (a float) of unary op ``op``, as its declaration gives it (libm's float
    functions, c_code.py's branch-free ``erf_rational`` where an erf is needed), or None."""
    if op == "nonzero":
        return _NONZERO
    declared = lowering_of("unary", op)
    return None if declared is None else declared.c


def binary_c(op):
    """The C expression over ``{a}`` and ``{b}`` of binary op ``op``, as declared (a bool value is a float 0
    or 1 in C), or None."""
    declared = lowering_of("binary", op)
    return None if declared is None else declared.c


def reduce_c(op):
    """(The accumulator's start, how it takes one more ``{v}`` into ``{acc}``, how the result is finished
    from ``{acc}`` and the ``{count}`` of values or None) of reduction ``op``, as declared, or None."""
    declared = lowering_of("reduce", op)
    return None if declared is None else declared.c


def fusable_activation(op):
    """Whether a Linear or a Conv2d applies unary op ``op`` in its own loop when it follows directly."""
    declared = lowering_of("unary", op)
    return declared is not None and declared.c_fusable


def _c_ops(primitive):
    return ", ".join(sorted(d.op for d in lowerings(primitive) if d.c is not None))


def supported():
    """What the C export covers, for its refusals."""
    return (
        f"unary ({_c_ops('unary')}), binary ({_c_ops('binary')}), where, astype (float32/bool), clamp, matmul (a "
        "Linear, or batched products), conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, layer_norm, "
        "softmax/log_softmax, attention (eval: causal, boolean or additive masks), reduce "
        f"({_c_ops('reduce')}), view, permute, expand, slice, cat, index_put_ and pad (constant)"
    )


class CNode:
    """One loop nest: ``kind`` (see ``Lowerer``), its value operands ``inputs`` (value numbers; a binary's
    scalar operand stays a float), its result ``out`` and what else it needs in ``attrs``."""

    __slots__ = ("kind", "inputs", "out", "attrs", "origin")

    def __init__(self, kind, inputs, out, origin, **attrs):
        self.kind = kind
        self.inputs = list(inputs)
        self.out = out
        self.attrs = attrs
        self.origin = origin  # the primitive it came from, for comments and errors

    def value_inputs(self):
        """The operands that are values (a binary's scalar operand is a float, never a value number)."""
        return [v for v in self.inputs if isinstance(v, int)]


class CGraph:
    """The lowered program: ``inputs`` and ``outputs`` (value numbers), ``shapes`` of every value,
    ``constants`` (value number -> float32 array, with ``constant_names`` where a parameter or buffer
    gave it), and ``nodes`` in execution order."""

    def __init__(self, shapes, inputs, outputs, constants, constant_names, nodes):
        self.shapes = shapes
        self.inputs = inputs
        self.outputs = outputs
        self.constants = constants
        self.constant_names = constant_names
        self.nodes = nodes

    def numel(self, vid):
        return int(np.prod(self.shapes[vid], dtype=np.int64))

    def uses(self, vid):
        return [n for n in self.nodes if vid in n.value_inputs()]


def lower(graph):
    """The ``CGraph`` of a trace ``Graph``."""
    shapes = {v: tuple(info.shape) for v, info in graph.values.items()}
    for position, vid in enumerate(graph.inputs):
        _require_float32(graph.values[vid].dtype, f"input {position}", shapes[vid])
    constants = {v: np.ascontiguousarray(c.array) for v, c in graph.constants.items()}
    names = {}
    for v, c in graph.constants.items():
        if c.name or c.source:
            names[v] = c.name or f"computed from {c.source}"
    nodes = []
    lowerer = Lowerer(constants, shapes, {v: info.dtype for v, info in graph.values.items()})
    for node in graph.nodes:
        declared = lowering_of(node.op)
        if declared is None or declared.c is None:
            raise ExportError(
                f"adcuda.export.to_c: the primitive {node.op} ({_describe(node, shapes)}) has no C "
                f"lowering; the C export covers {supported()}"
            )
        first = node.outputs[0]
        if first is not None:
            _require_float32(graph.values[first].dtype, f"the result of {node.op}", shapes[first], bool_too=True)
        nodes.extend(declared.c(lowerer, node))
    for position, vid in enumerate(graph.outputs):
        _require_float32(graph.values[vid].dtype, f"output {position}", shapes[vid])
    lowered = CGraph(shapes, list(graph.inputs), list(graph.outputs), constants, names, nodes)
    _drop_unused_constants(lowered)
    return lowered


def _require_float32(dtype, what, shape, bool_too=False):
    """Values are float32 in C; a bool one inside the forward (a mask) is a float 0 or 1."""
    if dtype != dt.float32 and not (bool_too and dtype == dt.bool_):
        raise ExportError(
            f"adcuda.export.to_c: {what} {tuple(shape)} is {dtype}; the C export computes in "
            "float32 only (export a float32 model with float32 inputs)"
        )


def _describe(node, shapes):
    parts = ["x".join(map(str, shapes[v])) or "scalar" for v in node.inputs]
    return "operands " + ", ".join(parts) if parts else "no array operands"


def _drop_unused_constants(graph):
    used = {v for n in graph.nodes for v in n.value_inputs()} | set(graph.outputs)
    for vid in [v for v in graph.constants if v not in used]:
        del graph.constants[vid]


# --------------------------------------------------------------------------------------------------
# what the lowerings (``Lowerer`` below) share
def _operand(value, what):
    if isinstance(value, Ref):
        return value.value
    if isinstance(value, (bool, int, float, np.floating, np.integer)):
        return float(value)
    raise ExportError(f"adcuda.export.to_c: {what}: an operand of type {type(value).__name__} cannot be exported")


def _shape_of(shapes, vid):
    return "x".join(map(str, shapes[vid])) or "scalar"


class _Renamed:
    """A traced call seen with some parameters replaced and only ``outputs`` (a lowering made of
    another's: add_layer_norm's layer norm reads the sum)."""

    def __init__(self, node, params, outputs):
        self.op = node.op
        self.params = {**node.params, **params}
        self.outputs = list(outputs)


def _only_first_result(node):
    """max_pool2d's indices, layer_norm's statistics and attention's logsumexp are for backward: the C code
    does not make them."""
    if any(r is not None for r in node.outputs[1:]):
        raise ExportError(
            f"adcuda.export.to_c: the model reads {node.op}'s second result (indices or statistics); the C "
            "export computes only its first"
        )


def _basic_key(op, shape, key):
    """``(offset, strides, shape)`` of the elements ``key`` (ints, slices, None, Ellipsis) picks from a
    contiguous array of ``shape``, in elements."""
    key = tuple(key) if isinstance(key, (list, tuple)) else (key,)
    if Ellipsis in key:
        at = key.index(Ellipsis)
        fill = len(shape) - (len(key) - 1 - sum(k is None for k in key))
        key = key[:at] + (slice(None),) * fill + key[at + 1 :]
    own = contiguous_strides(shape)
    offset, strides, sizes, dim = 0, [], [], 0
    for k in key:
        if k is None:
            strides.append(0)
            sizes.append(1)
        elif isinstance(k, slice):
            start, stop, step = k.indices(shape[dim])
            offset += start * own[dim]
            strides.append(step * own[dim])
            sizes.append(len(range(start, stop, step)))
            dim += 1
        elif isinstance(k, (int, np.integer)):
            offset += (int(k) % shape[dim]) * own[dim]
            dim += 1
        else:
            raise ExportError(
                f"adcuda.export.to_c: {op} with a {type(k).__name__} index cannot be exported (ints, slices and "
                "None only)"
            )
    strides.extend(own[dim:])
    sizes.extend(shape[dim:])
    return offset, tuple(strides), tuple(sizes)


class Lowerer:
    """The C lowerings the op declarations call (``lowering(..., c=lambda lower, node: lower.<kind>(node))``
    in adcuda/ops/<family>.py): each gives one traced call's ``CNode``s. ``node.params`` holds the call's
    arguments by the primitive's parameter names (backends/cpu), arrays as ``Ref``s."""

    def __init__(self, constants, shapes, dtypes):
        self.constants = constants
        self.shapes = shapes
        self.dtypes = dtypes

    def _truth_op(self, op, operand):
        """On bool masks (&, |, ^, ~) the bitwise ops are the logical ones (a bool is a float 0 or 1 in C);
        on integers they are refused."""
        if op.startswith("bitwise_") and isinstance(operand, Ref) and self.dtypes[operand.value] == dt.bool_:
            return "logical_" + op[len("bitwise_") :]
        return op

    def unary(self, node):
        shapes = self.shapes
        op, x = self._truth_op(node.params["op"], node.params["a"]), node.params["a"].value
        if unary_c(op) is None:
            raise ExportError(
                f"adcuda.export.to_c: unary {op} (on {_shape_of(shapes, x)}) has no C lowering; the unary "
                f"functions it writes: {_c_ops('unary')}"
            )
        return [CNode("unary", [x], node.outputs[0], f"unary {op}", op=op)]

    def binary(self, node):
        op, a, b = self._truth_op(node.params["op"], node.params["a"]), node.params["a"], node.params["b"]
        if binary_c(op) is None:
            raise ExportError(
                f"adcuda.export.to_c: binary {op} has no C lowering (it writes {_c_ops('binary')}); "
                "comparisons and integer ops are not exported"
            )
        operands = [_operand(a, f"binary {op}"), _operand(b, f"binary {op}")]
        return [CNode("binary", operands, node.outputs[0], f"binary {op}", op=op)]

    def where(self, node):
        p = node.params
        operands = [_operand(p[k], "where") for k in ("cond", "a", "b")]
        return [CNode("where", operands, node.outputs[0], "where")]

    def astype(self, node):
        """Between float32 and bool, the only dtypes a C value has: to bool is a test against 0, from bool
        (already 0 or 1) a copy."""
        target = node.params["dtype"]
        if target not in (dt.float32, dt.bool_):
            raise ExportError(f"adcuda.export.to_c: astype to {target}: the C export computes in float32 only")
        if target == dt.bool_:
            return [CNode("unary", [node.params["a"].value], node.outputs[0], "astype bool", op="nonzero")]
        return [CNode("alias", [node.params["a"].value], node.outputs[0], "astype float32")]

    def clamp(self, node):
        x, lo, hi = node.params["a"].value, node.params["lo"], node.params["hi"]
        if isinstance(lo, Ref) or isinstance(hi, Ref):
            raise ExportError("adcuda.export.to_c: clamp with tensor bounds cannot be exported (scalar bounds only)")
        bounds = {"lo": None if lo is None else float(lo), "hi": None if hi is None else float(hi)}
        return [CNode("clamp", [x], node.outputs[0], "clamp", **bounds)]

    def view(self, node):
        return [CNode("alias", [node.params["a"].value], node.outputs[0], node.op)]

    def permute(self, node):
        shapes = self.shapes
        x = node.params["a"].value
        axes = tuple(int(a) % len(shapes[x]) for a in node.params["axes"])
        in_strides = contiguous_strides(shapes[x])
        strides = tuple(in_strides[a] for a in axes)
        return [CNode("strided_copy", [x], node.outputs[0], "permute", offset=0, strides=strides)]

    def expand(self, node):
        shapes = self.shapes
        x, out = node.params["a"].value, node.outputs[0]
        strides = broadcast_strides(shapes[x], shapes[out])
        return [CNode("strided_copy", [x], out, "expand", offset=0, strides=strides)]

    def slice(self, node):
        shapes = self.shapes
        x = node.params["a"].value
        offset, strides, _ = _basic_key("slice", shapes[x], node.params["key"])
        return [CNode("strided_copy", [x], node.outputs[0], "slice", offset=offset, strides=strides)]

    def index_put(self, node):
        """``a`` with ``a[key] = values``, into a new value (what padding records: zeros, then the input
        written into their middle). A constant ``a`` of one repeated value (zeros) is written as a fill."""
        constants, shapes = self.constants, self.shapes
        p = node.params
        base, values = p["a"].value, p["values"]
        if p["accumulate"]:
            raise ExportError("adcuda.export.to_c: index_put_ with accumulate=True cannot be exported")
        offset, strides, region = _basic_key("index_put_", shapes[base], p["key"])
        inputs, attrs = [], {"offset": offset, "strides": strides, "region": region, "fill": None, "value": None}
        if base in constants and constants[base].size and (constants[base] == constants[base].flat[0]).all():
            attrs["fill"] = float(constants[base].flat[0])
        else:
            inputs.append(base)
        if isinstance(values, Ref):
            inputs.append(values.value)
            attrs["value_strides"] = broadcast_strides(shapes[values.value], region)
        else:
            attrs["value"] = _operand(values, "index_put_")
        return [CNode("index_put", inputs, node.outputs[0], "index_put_", **attrs)]

    def pad(self, node):
        """Constant padding as an index_put: a fill of ``value``, the (cropped) input written into its window."""
        shapes = self.shapes
        p = node.params
        x, out, pads = p["x"].value, node.outputs[0], [int(v) for v in p["pads"]]
        if p["mode"] != "constant":
            raise ExportError(f"adcuda.export.to_c: {p['mode']} padding cannot be exported (constant padding only)")
        in_shape, out_shape = shapes[x], shapes[out]
        lead = len(in_shape) - len(pads) // 2
        in_strides, out_strides = contiguous_strides(in_shape), contiguous_strides(out_shape)
        region, out_offset, in_offset = list(in_shape[:lead]), 0, 0
        for d, (before, after) in enumerate(zip(pads[0::2], pads[1::2]), start=lead):
            region.append(max(in_shape[d] - max(-before, 0) - max(-after, 0), 0))
            in_offset += max(-before, 0) * in_strides[d]
            out_offset += max(before, 0) * out_strides[d]
        attrs = {"offset": out_offset, "strides": out_strides, "region": tuple(region), "fill": float(p["value"])}
        attrs.update(value=None, value_strides=in_strides, value_offset=in_offset)
        return [CNode("index_put", [x], out, "pad", **attrs)]

    def cat(self, node):
        """Each operand copied into its block of the result along ``axis``."""
        shapes = self.shapes
        parts = [r.value for r in node.params["arrays"]]
        out = node.outputs[0]
        axis = int(node.params["axis"]) % len(shapes[out])
        strides = contiguous_strides(shapes[out])
        offsets, at = [], 0
        for v in parts:
            offsets.append(at * strides[axis])
            at += shapes[v][axis]
        return [CNode("cat", parts, out, "cat", offsets=offsets, strides=strides)]

    def reduce(self, node):
        shapes = self.shapes
        p = node.params
        op, x = p["op"], p["a"].value
        shape = shapes[x]
        if reduce_c(op) is None:
            raise ExportError(f"adcuda.export.to_c: reduce {op} has no C lowering (it writes {_c_ops('reduce')})")
        axes = range(len(shape)) if p["axes"] is None else p["axes"]
        axes = {int(a) % len(shape) for a in ((axes,) if isinstance(axes, int) else axes)} if shape else set()
        spread = [d for d in sorted(axes) if shape[d] != 1]
        if spread and any(d not in axes and shape[d] != 1 for d in range(spread[0], spread[-1] + 1)):
            raise ExportError(
                f"adcuda.export.to_c: reduce {op} over dims {tuple(sorted(axes))} of {tuple(shape)}: only adjacent "
                "dims can be reduced in C (permute them together first)"
            )
        lo = spread[0] if spread else len(shape)
        hi = spread[-1] if spread else len(shape) - 1
        outer = int(np.prod([shape[d] for d in range(lo) if d not in axes], dtype=np.int64))
        reduced = int(np.prod([shape[d] for d in axes], dtype=np.int64))
        inner = int(np.prod(shape[hi + 1 :], dtype=np.int64))
        return [CNode("reduce", [x], node.outputs[0], f"reduce {op}", op=op, outer=outer, reduced=reduced, inner=inner)]

    def matmul(self, node):
        constants, shapes = self.constants, self.shapes
        p = node.params
        a, b, bias, activation = p["a"].value, p["b"].value, p.get("bias"), p.get("activation")
        if p.get("save_preactivation"):
            raise ExportError(
                "adcuda.export.to_c: matmul saving its pre-activation (a training forward) cannot be exported"
            )
        out = node.outputs[0]
        if b in constants and constants[b].ndim == 2:
            if bias is not None and bias.value not in constants:
                raise ExportError("adcuda.export.to_c: matmul with a computed bias cannot be exported")
            inputs = [a, b] + ([bias.value] if bias is not None else [])
            return [CNode("linear", inputs, out, "matmul", act=activation)]
        if bias is not None or activation is not None:
            raise ExportError("adcuda.export.to_c: a batched matmul with a bias or an activation cannot be exported")
        sa, sb = shapes[a], shapes[b]
        if len(sb) > 2 and sa[:-2] != sb[:-2]:  # a matrix or a vector b (K,) serves every batch
            raise ExportError(
                f"adcuda.export.to_c: matmul of {tuple(sa)} and {tuple(sb)}: broadcast batch dims cannot be "
                "exported (equal batch dims, or a 2-d or 1-d right operand)"
            )
        return [CNode("matmul", [a, b], out, "matmul")]

    def conv2d(self, node):
        constants = self.constants
        p = node.params
        x, w = p["x"].value, p["weight"].value
        if w not in constants:
            raise ExportError("adcuda.export.to_c: conv2d with a computed weight cannot be exported (parameters only)")
        window = {k: tuple(int(v) for v in p[k]) for k in ("stride", "padding", "dilation")}
        return [CNode("conv", [x, w], node.outputs[0], "conv2d", groups=int(p["groups"]), act=None, **window)]

    def max_pool2d(self, node):
        _only_first_result(node)
        p = node.params
        window = {k: tuple(int(v) for v in p[k]) for k in ("kernel", "stride", "padding", "dilation")}
        return [CNode("maxpool", [p["x"].value], node.outputs[0], "max_pool2d", **window)]

    def avg_pool2d(self, node):
        p = node.params
        window = {k: tuple(int(v) for v in p[k]) for k in ("kernel", "stride", "padding")}
        return [
            CNode(
                "avgpool",
                [p["x"].value],
                node.outputs[0],
                "avg_pool2d",
                adaptive=False,
                count_include_pad=bool(p["count_include_pad"]),
                divisor=int(p["divisor_override"] or 0),
                **window,
            )
        ]

    def adaptive_avg_pool2d(self, node):
        window = {"kernel": (1, 1), "stride": (1, 1), "padding": (0, 0)}
        return [
            CNode(
                "avgpool",
                [node.params["x"].value],
                node.outputs[0],
                "adaptive_avg_pool2d",
                adaptive=True,
                count_include_pad=True,
                divisor=0,
                **window,
            )
        ]

    def layer_norm(self, node):
        constants = self.constants
        _only_first_result(node)
        p = node.params
        weight, bias = p["weight"], p["bias"]
        for what, param in (("weight", weight), ("bias", bias)):
            if param is not None and param.value not in constants:
                raise ExportError(f"adcuda.export.to_c: layer_norm with a computed {what} cannot be exported")
        return [
            CNode(
                "layernorm",
                [p["x"].value] + [param.value for param in (weight, bias) if param is not None],
                node.outputs[0],
                "layer_norm",
                normalized=int(p["n"]),
                eps=float(p["eps"]),
                has_weight=weight is not None,
                has_bias=bias is not None,
            )
        ]

    def add_layer_norm(self, node):
        """The fused residual add and layer norm as its two loop nests: the sum (into a value of its own
        where the model does not read it), then layer_norm of it."""
        if any(r is not None for r in node.outputs[2:]):
            raise ExportError(
                "adcuda.export.to_c: the model reads add_layer_norm's statistics; the C export computes none"
            )
        p = node.params
        x, residual = p["x"].value, p["residual"].value
        total = node.outputs[1]
        if total is None:
            total = max(self.shapes) + 1
            self.shapes[total] = self.shapes[x]
            self.dtypes[total] = self.dtypes[x]
        sum_node = CNode("binary", [x, residual], total, "add_layer_norm", op="add")
        norm = self.layer_norm(_Renamed(node, {"x": Ref(total)}, node.outputs[:1]))
        return [sum_node] + norm

    def softmax(self, node):
        shapes = self.shapes
        x, log = node.params["a"].value, bool(node.params["log"])
        axis = int(node.params["axis"]) % len(shapes[x])
        return [CNode("softmax", [x], node.outputs[0], "log_softmax" if log else "softmax", axis=axis, log=log)]

    def attention(self, node):
        """softmax(q k^T * scale + mask) v as one kernel (c_code.py's ``_kernel_attention``): q (..., L, E),
        k (..., S, E), v (..., S, Ev), their batch dims and the mask's broadcast to the result's."""
        shapes = self.shapes
        _only_first_result(node)
        p = node.params  # (dropout never reaches here: the trace refuses a random draw)
        q, k, v = (p[name].value for name in ("q", "k", "v"))
        mask = p["mask"]  # an array or None (the primitive takes no scalar mask)
        inputs = [q, k, v] + ([mask.value] if mask is not None else [])
        return [
            CNode(
                "attention",
                inputs,
                node.outputs[0],
                "attention",
                scale=float(p["scale"]),
                causal=bool(p["is_causal"]),
                # a bool mask is a float 0 or 1 in C: the kernel has to know to test it rather than add it
                mask_is_bool=self.dtypes[mask.value] == dt.bool_ if mask is not None else None,
                # one batch entry's keys transposed (E x S, so the scores of a query are unit-stride sums) and
                # one query's score row (S)
                workspace=(shapes[k][-1] + 1) * shapes[k][-2],
            )
        ]


def contiguous_strides(shape):
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def broadcast_strides(shape, out_shape):
    """Element strides of a contiguous array of ``shape`` read broadcast to ``out_shape`` (0 where it repeats)."""
    own = contiguous_strides(shape)
    lead = len(out_shape) - len(shape)
    return tuple(0 if i < lead or shape[i - lead] == 1 else own[i - lead] for i in range(len(out_shape)))


# --------------------------------------------------------------------------------------------------
# folding
def fold_affine(graph):
    """Fold constant per-channel adds, subs, muls and divides after a Linear or a Conv2d into its weight
    and bias, then an activation right after one into its loop."""
    changed = True
    while changed:
        changed = False
        for node in list(graph.nodes):
            if node.kind not in ("linear", "conv") or node.attrs.get("act") is not None:
                continue
            consumer = _only_consumer(graph, node.out)
            if consumer is None:
                continue
            if consumer.kind == "binary" and _fold_binary(graph, node, consumer):
                changed = True
            elif consumer.kind == "unary" and fusable_activation(consumer.attrs["op"]):
                node.attrs["act"] = consumer.attrs["op"]
                _replace(graph, node, consumer)
                changed = True


def _only_consumer(graph, vid):
    if vid in graph.outputs:
        return None
    users = graph.uses(vid)
    return users[0] if len(users) == 1 and users[0].value_inputs().count(vid) == 1 else None


def _replace(graph, node, consumer):
    """``node`` now computes ``consumer``'s result; ``consumer`` goes."""
    node.out = consumer.out
    graph.nodes.remove(consumer)


def _fold_binary(graph, node, binary):
    op = binary.attrs["op"]
    a, b = binary.inputs
    mine_first = isinstance(a, int) and a == node.out  # a scalar operand is a float: 2.0 == 2 must not count
    other = b if mine_first else a
    if op not in ("add", "sub", "mul", "div") or (op == "div" and not mine_first):
        return False
    if graph.shapes[binary.out] != graph.shapes[node.out]:
        return False
    channels = _per_channel(graph, node, other)
    if channels is None:
        return False
    weight = graph.constants[node.inputs[1]]
    out_channels = channels.shape[0]
    bias = graph.constants[node.inputs[2]] if len(node.inputs) > 2 else np.zeros(out_channels, np.float32)
    scale, shift = np.ones(out_channels, np.float64), np.zeros(out_channels, np.float64)
    if op == "add":
        shift = channels
    elif op == "sub":
        if mine_first:
            shift = -channels
        else:  # c - y
            scale, shift = -scale, channels
    elif op == "mul":
        scale = channels
    else:
        scale = 1.0 / channels
    if node.kind == "linear":  # weight (K, N): a scale per column
        new_weight = weight.astype(np.float64) * scale[None, :]
    else:  # weight (O, C/g, kh, kw): a scale per output channel
        new_weight = weight.astype(np.float64) * scale[:, None, None, None]
    new_bias = bias.astype(np.float64) * scale + shift
    names, folded = graph.constant_names, ", with the per-channel ops after it folded in"
    weight_name = names.get(node.inputs[1], "weight").split(",")[0] + folded
    bias_name = (names.get(node.inputs[2], "bias") if len(node.inputs) > 2 else "bias").split(",")[0] + folded
    weight_vid, bias_vid = _new_constant(graph, new_weight, weight_name), _new_constant(graph, new_bias, bias_name)
    node.inputs = [node.inputs[0], weight_vid, bias_vid]
    _replace(graph, node, binary)
    _drop_unused_constants(graph)
    return True


def _per_channel(graph, node, other):
    """``other`` as one float64 value per output channel of ``node`` when it is a scalar or a constant
    that varies along that channel only; else None."""
    out_shape = graph.shapes[node.out]
    out_channels = out_shape[-1] if node.kind == "linear" else out_shape[1]
    if isinstance(other, float):
        return np.full(out_channels, other, np.float64)
    if other not in graph.constants:
        return None
    c = graph.constants[other]
    if c.size == 1:
        return np.full(out_channels, float(c.reshape(-1)[0]), np.float64)
    channel_dim = len(out_shape) - 1 if node.kind == "linear" else 1
    lead = len(out_shape) - c.ndim
    if lead < 0:
        return None
    for i, size in enumerate(c.shape):
        if size != 1 and i + lead != channel_dim:
            return None
    if channel_dim - lead < 0 or c.shape[channel_dim - lead] != out_channels:
        return None
    return c.reshape(-1).astype(np.float64)


def _new_constant(graph, array, name):
    vid = max(graph.shapes) + 1
    graph.constants[vid] = np.ascontiguousarray(array, dtype=np.float32)
    graph.shapes[vid] = tuple(array.shape)
    graph.constant_names[vid] = name
    return vid


def merge_repeats(graph):
    """A node that repeats an earlier one (the same kind, operands and attributes: every kernel is a pure
    function of them) becomes a view of the earlier result, so its loop and its scratch go. Self-attention
    records this: the same input is permuted three times, once each for q, k and v. The result's shape is
    part of the key: some kernels take a size from it alone (an adaptive pool's output size)."""
    seen = {}
    for node in graph.nodes:
        if node.kind == "alias":
            continue
        # the operands' types are part of the key: a scalar 2.0 is not value number 2
        operands = tuple((type(v).__name__, v) for v in node.inputs)
        key = (node.kind, operands, graph.shapes[node.out], repr(sorted(node.attrs.items())))
        earlier = seen.setdefault(key, node.out)
        if earlier != node.out:
            node.kind, node.inputs, node.attrs = "alias", [earlier], {}
            node.origin += " (repeats an earlier one)"
