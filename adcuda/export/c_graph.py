"""Lowering the frozen eval-forward graph (trace.py's ``Graph``) to the few loop nests the C generator
writes (c_code.py).

The graph's primitives are small (a BatchNorm in eval mode is a sub and two muls by constants the trace
already folded), so the lowering works in two passes:

1. every node becomes a ``CNode`` of one of the kinds of ``_LOWER``, or the export is refused with an
   ``ExportError`` naming the primitive (and what would have to change);
2. ``fold_affine`` folds per-channel constant adds, subs, muls and divides that follow a Linear or a
   Conv2d into its weight and bias (this is how BatchNorm disappears into the convolution), and an
   activation right after one into its loop (``act``); ``merge_repeats`` turns a node that repeats an
   earlier one into a view of its result.

Values are numbered; every value is float32, contiguous and row-major in C. Views and ``contiguous``
change no data there, so they become ``alias`` nodes that the memory plan maps to their source's
buffer.
"""

import dataclasses

import numpy as np

from .. import dtypes as dt
from .trace import ExportError, Ref

# unary primitives and their C expression over ``v`` (a float): libm's float functions, and a rational
# erf within rounding of the CPU backend's (c_code.py's ``erf_rational``: branch-free, so the loops
# vectorize; libm's erff is a call per element and would take most of a GELU MLP's time)
UNARY_C = {
    "neg": "-v",
    "abs": "fabsf(v)",
    "exp": "expf(v)",
    "log": "logf(v)",
    "log1p": "log1pf(v)",
    "sqrt": "sqrtf(v)",
    "rsqrt": "1.0f / sqrtf(v)",
    "sin": "sinf(v)",
    "cos": "cosf(v)",
    "tanh": "tanhf(v)",
    "sigmoid": "1.0f / (1.0f + expf(-v))",
    "relu": "(v > 0.0f ? v : 0.0f)",
    "gelu": "0.5f * v * (1.0f + erf_rational(v * 0.70710678118654752f))",
    "gelu_tanh": "0.5f * v * (1.0f + tanhf(0.79788456080286536f * (v + 0.044715f * v * v * v)))",
    "silu": "v / (1.0f + expf(-v))",
    "erf": "erf_rational(v)",
    "floor": "floorf(v)",
    "ceil": "ceilf(v)",
    "trunc": "truncf(v)",
    "round": "rintf(v)",  # the default rounding mode rounds halves to even, as NumPy's round
    "exp2": "exp2f(v)",
    "log2": "log2f(v)",
    "log10": "log10f(v)",
    "sign": "(float)((v > 0.0f) - (v < 0.0f))",
    "logical_not": "(v == 0.0f ? 1.0f : 0.0f)",
    "nonzero": "(v != 0.0f ? 1.0f : 0.0f)",  # astype(bool)
}

# binary primitives and their C expression over ``a`` and ``b``; maximum and minimum pass a NaN on, as NumPy's
BINARY_C = {
    "add": "{a} + {b}",
    "sub": "{a} - {b}",
    "mul": "{a} * {b}",
    "div": "{a} / {b}",
    "pow": "powf({a}, {b})",
    "maximum": "(({a} != {a} || {a} > {b}) ? {a} : {b})",
    "minimum": "(({a} != {a} || {a} < {b}) ? {a} : {b})",
    # comparisons and logic: a bool value is a float 0 or 1 in C (never a buffer of the caller's)
    "eq": "({a} == {b} ? 1.0f : 0.0f)",
    "ne": "({a} != {b} ? 1.0f : 0.0f)",
    "lt": "({a} < {b} ? 1.0f : 0.0f)",
    "le": "({a} <= {b} ? 1.0f : 0.0f)",
    "gt": "({a} > {b} ? 1.0f : 0.0f)",
    "ge": "({a} >= {b} ? 1.0f : 0.0f)",
    "logical_and": "({a} != 0.0f && {b} != 0.0f ? 1.0f : 0.0f)",
    "logical_or": "({a} != 0.0f || {b} != 0.0f ? 1.0f : 0.0f)",
    "logical_xor": "(({a} != 0.0f) != ({b} != 0.0f) ? 1.0f : 0.0f)",
}

# reductions: (the accumulator's start, how it takes one more value ``v``); mean is sum's, divided at the end;
# amax and amin pass a NaN on, as NumPy's
REDUCE_C = {
    "sum": ("0.0f", "{acc} + {v}"),
    "mean": ("0.0f", "{acc} + {v}"),
    "prod": ("1.0f", "{acc} * {v}"),
    "amax": ("-INFINITY", "(({v} != {v} || {v} > {acc}) ? {v} : {acc})"),
    "amin": ("INFINITY", "(({v} != {v} || {v} < {acc}) ? {v} : {acc})"),
}

# activations a Linear or a Conv2d applies in its own loop when one follows it directly
FUSABLE_ACTIVATIONS = frozenset({"relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "silu"})

SUPPORTED = (
    "unary ({}), binary ({}), where, astype (float32/bool), clamp, matmul (a Linear, or batched products), "
    "conv2d, max_pool2d, avg_pool2d, adaptive_avg_pool2d, layer_norm, softmax/log_softmax, attention (eval: "
    "causal, boolean or additive masks), reduce ({}), view, permute, expand, slice, cat, index_put_ and pad (constant)"
).format(", ".join(sorted(UNARY_C)), ", ".join(sorted(BINARY_C)), ", ".join(sorted(REDUCE_C)))


class CNode:
    """One loop nest: ``kind`` (see ``_LOWER``), its value operands ``inputs`` (value numbers; a binary's
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
    for node in graph.nodes:
        lowering = _LOWER.get(node.op)
        if lowering is None:
            raise ExportError(
                f"adcuda.export.to_c: the primitive {node.op} ({_describe(node, shapes)}) has no C "
                f"lowering; the C export covers {SUPPORTED}"
            )
        if node.op in ("unary", "binary") and str(node.params["op"]).startswith("bitwise_"):
            # on bool masks (&, |, ^, ~) the bitwise ops are the logical ones; on integers they are refused
            operand = node.params["a"]
            if isinstance(operand, Ref) and graph.values[operand.value].dtype == dt.bool_:
                node = dataclasses.replace(node, params={**node.params, "op": "logical_" + node.params["op"][8:]})
        if node.op == "attention" and isinstance(node.params["mask"], Ref):
            # a bool mask is a float 0 or 1 in C: the kernel has to know to test it rather than add it
            mask_is_bool = graph.values[node.params["mask"].value].dtype == dt.bool_
            node = dataclasses.replace(node, params={**node.params, "mask_is_bool": mask_is_bool})
        first = node.outputs[0]
        if first is not None:
            _require_float32(graph.values[first].dtype, f"the result of {node.op}", shapes[first], bool_too=True)
        nodes.extend(lowering(node, constants, shapes))
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
# one lowering per primitive: (node, constants, shapes) -> [CNode]; node.params holds the call's arguments
# by the primitive's parameter names (backends/cpu), arrays as ``Ref``s
def _operand(value, what):
    if isinstance(value, Ref):
        return value.value
    if isinstance(value, (bool, int, float, np.floating, np.integer)):
        return float(value)
    raise ExportError(f"adcuda.export.to_c: {what}: an operand of type {type(value).__name__} cannot be exported")


def _shape_of(shapes, vid):
    return "x".join(map(str, shapes[vid])) or "scalar"


def _only_first_result(node):
    """max_pool2d's indices, layer_norm's statistics and attention's logsumexp are for backward: the C code
    does not make them."""
    if any(r is not None for r in node.outputs[1:]):
        raise ExportError(
            f"adcuda.export.to_c: the model reads {node.op}'s second result (indices or statistics); the C "
            "export computes only its first"
        )


def _lower_unary(node, constants, shapes):
    op, x = node.params["op"], node.params["a"].value
    if op not in UNARY_C:
        raise ExportError(
            f"adcuda.export.to_c: unary {op} (on {_shape_of(shapes, x)}) has no C lowering; the unary "
            f"functions it writes: {', '.join(sorted(UNARY_C))}"
        )
    return [CNode("unary", [x], node.outputs[0], f"unary {op}", op=op)]


def _lower_binary(node, constants, shapes):
    op, a, b = node.params["op"], node.params["a"], node.params["b"]
    if op not in BINARY_C:
        raise ExportError(
            f"adcuda.export.to_c: binary {op} has no C lowering (it writes {', '.join(sorted(BINARY_C))}); "
            "comparisons and integer ops are not exported"
        )
    operands = [_operand(a, f"binary {op}"), _operand(b, f"binary {op}")]
    return [CNode("binary", operands, node.outputs[0], f"binary {op}", op=op)]


def _lower_where(node, constants, shapes):
    p = node.params
    operands = [_operand(p[k], "where") for k in ("cond", "a", "b")]
    return [CNode("where", operands, node.outputs[0], "where")]


def _lower_astype(node, constants, shapes):
    """Between float32 and bool, the only dtypes a C value has: to bool is a test against 0, from bool
    (already 0 or 1) a copy."""
    target = node.params["dtype"]
    if target not in (dt.float32, dt.bool_):
        raise ExportError(f"adcuda.export.to_c: astype to {target}: the C export computes in float32 only")
    if target == dt.bool_:
        return [CNode("unary", [node.params["a"].value], node.outputs[0], "astype bool", op="nonzero")]
    return [CNode("alias", [node.params["a"].value], node.outputs[0], "astype float32")]


def _lower_clamp(node, constants, shapes):
    x, lo, hi = node.params["a"].value, node.params["lo"], node.params["hi"]
    if isinstance(lo, Ref) or isinstance(hi, Ref):
        raise ExportError("adcuda.export.to_c: clamp with tensor bounds cannot be exported (scalar bounds only)")
    bounds = {"lo": None if lo is None else float(lo), "hi": None if hi is None else float(hi)}
    return [CNode("clamp", [x], node.outputs[0], "clamp", **bounds)]


def _lower_view(node, constants, shapes):
    return [CNode("alias", [node.params["a"].value], node.outputs[0], node.op)]


def _lower_permute(node, constants, shapes):
    x = node.params["a"].value
    axes = tuple(int(a) % len(shapes[x]) for a in node.params["axes"])
    in_strides = contiguous_strides(shapes[x])
    strides = tuple(in_strides[a] for a in axes)
    return [CNode("strided_copy", [x], node.outputs[0], "permute", offset=0, strides=strides)]


def _lower_expand(node, constants, shapes):
    x, out = node.params["a"].value, node.outputs[0]
    strides = broadcast_strides(shapes[x], shapes[out])
    return [CNode("strided_copy", [x], out, "expand", offset=0, strides=strides)]


def _lower_slice(node, constants, shapes):
    x = node.params["a"].value
    offset, strides, _ = _basic_key("slice", shapes[x], node.params["key"])
    return [CNode("strided_copy", [x], node.outputs[0], "slice", offset=offset, strides=strides)]


def _lower_index_put(node, constants, shapes):
    """``a`` with ``a[key] = values``, into a new value (what padding records: zeros, then the input
    written into their middle). A constant ``a`` of one repeated value (zeros) is written as a fill."""
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


def _lower_pad(node, constants, shapes):
    """Constant padding as an index_put: a fill of ``value``, the (cropped) input written into its window."""
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


def _lower_cat(node, constants, shapes):
    """Each operand copied into its block of the result along ``axis``."""
    parts = [r.value for r in node.params["arrays"]]
    out = node.outputs[0]
    axis = int(node.params["axis"]) % len(shapes[out])
    strides = contiguous_strides(shapes[out])
    offsets, at = [], 0
    for v in parts:
        offsets.append(at * strides[axis])
        at += shapes[v][axis]
    return [CNode("cat", parts, out, "cat", offsets=offsets, strides=strides)]


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


def _lower_reduce(node, constants, shapes):
    p = node.params
    op, x = p["op"], p["a"].value
    shape = shapes[x]
    if op not in REDUCE_C:
        raise ExportError(
            f"adcuda.export.to_c: reduce {op} has no C lowering (it writes {', '.join(sorted(REDUCE_C))})"
        )
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


def _lower_matmul(node, constants, shapes):
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


def _lower_conv2d(node, constants, shapes):
    p = node.params
    x, w = p["x"].value, p["weight"].value
    if w not in constants:
        raise ExportError("adcuda.export.to_c: conv2d with a computed weight cannot be exported (parameters only)")
    window = {k: tuple(int(v) for v in p[k]) for k in ("stride", "padding", "dilation")}
    return [CNode("conv", [x, w], node.outputs[0], "conv2d", groups=int(p["groups"]), act=None, **window)]


def _lower_max_pool2d(node, constants, shapes):
    _only_first_result(node)
    p = node.params
    window = {k: tuple(int(v) for v in p[k]) for k in ("kernel", "stride", "padding", "dilation")}
    return [CNode("maxpool", [p["x"].value], node.outputs[0], "max_pool2d", **window)]


def _lower_avg_pool2d(node, constants, shapes):
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


def _lower_adaptive_avg_pool2d(node, constants, shapes):
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


def _lower_layer_norm(node, constants, shapes):
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


def _lower_softmax(node, constants, shapes):
    x, log = node.params["a"].value, bool(node.params["log"])
    axis = int(node.params["axis"]) % len(shapes[x])
    return [CNode("softmax", [x], node.outputs[0], "log_softmax" if log else "softmax", axis=axis, log=log)]


def _lower_attention(node, constants, shapes):
    """softmax(q k^T * scale + mask) v as one kernel (c_code.py's ``_kernel_attention``): q (..., L, E),
    k (..., S, E), v (..., S, Ev), their batch dims and the mask's broadcast to the result's."""
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
            mask_is_bool=bool(p.get("mask_is_bool", False)) if mask is not None else None,
            # one batch entry's keys transposed (E x S, so the scores of a query are unit-stride sums) and
            # one query's score row (S)
            workspace=(shapes[k][-1] + 1) * shapes[k][-2],
        )
    ]


_LOWER = {
    "unary": _lower_unary,
    "binary": _lower_binary,
    "clamp": _lower_clamp,
    "where": _lower_where,
    "astype": _lower_astype,
    "view": _lower_view,
    "permute": _lower_permute,
    "expand": _lower_expand,
    "slice": _lower_slice,
    "index_put_": _lower_index_put,
    "pad": _lower_pad,
    "reduce": _lower_reduce,
    "cat": _lower_cat,
    "matmul": _lower_matmul,
    "conv2d": _lower_conv2d,
    "max_pool2d": _lower_max_pool2d,
    "avg_pool2d": _lower_avg_pool2d,
    "adaptive_avg_pool2d": _lower_adaptive_avg_pool2d,
    "layer_norm": _lower_layer_norm,
    "softmax": _lower_softmax,
    "attention": _lower_attention,
}


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
            elif consumer.kind == "unary" and consumer.attrs["op"] in FUSABLE_ACTIVATIONS:
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
