"""The C99 source of a lowered graph (c_graph.py): a memory plan and one loop nest per node.

Memory: every value lives in one of the caller's buffers (inputs, outputs), in the constants (embedded
arrays, or one weights array filled by the loader) or in one static scratch array, at an offset fixed
here. Values whose lifetimes (first write to last read) do not overlap share scratch space; a node never
writes over what it reads, so every kernel's pointers can be ``restrict``. Views (``alias`` nodes) map
to their source's memory and cost nothing. A node with a ``workspace`` attribute (attention) also gets
that many floats of the scratch array for the time it runs.

Loops: each kernel is a ``static`` function with its sizes written in as literals, its innermost loop
running over contiguous memory with unit stride (the matrix product in register blocks, the
convolution along an output row), so that a compiler vectorizes it (GCC and Clang at ``-O3``; GCC 12's
``-O2`` only the simplest loops). Only libm's float functions are called.
"""

import numpy as np

from .c_graph import binary_c, broadcast_strides, contiguous_strides, reduce_c, unary_c
from .trace import ExportError

# offsets of scratch values and constants are multiples of this many floats (64 bytes: a cache line)
ALIGN_FLOATS = 16
# the register block of a Linear: rows x columns of sums kept over the k loop (4 x 16 floats: 8 AVX registers)
LINEAR_ROWS = 4
LINEAR_COLUMNS = 16
WEIGHTS_MAGIC = b"ADCW"
WEIGHTS_VERSION = 1
ERROR_CODES = (
    ("OK", 0, "success"),
    ("ERR_NULL_ARGUMENT", 1, "a buffer pointer is NULL"),
    ("ERR_WEIGHTS_NOT_LOADED", 2, "the weights file has not been loaded (call the loader first)"),
    ("ERR_WEIGHTS_OPEN", 3, "the weights file cannot be opened"),
    ("ERR_WEIGHTS_FORMAT", 4, "the weights file is not this model's (bad header, size or version)"),
)


class MemoryPlan:
    """Where each value lives: ``location[root]`` is ("input", i), ("output", i), ("constant", offset)
    or ("scratch", offset); ``root[vid]`` the value whose memory a view uses; ``copies`` the outputs
    that are copied out at the end (an input, a constant or a value another output already holds)."""

    def __init__(self, graph):
        self.root = {}
        nodes = []
        for node in graph.nodes:
            if node.kind == "alias":
                self.root[node.out] = self.root_of(node.inputs[0])
            else:
                nodes.append(node)
        self.nodes = _live_nodes(nodes, [self.root_of(v) for v in graph.outputs], self)
        self.location, self.copies = {}, []
        for i, vid in enumerate(graph.inputs):
            self.location[vid] = ("input", i)
        offset = 0
        self.constant_order = sorted(graph.constants)
        for vid in self.constant_order:
            self.location[vid] = ("constant", offset)
            offset += _aligned(graph.constants[vid].size)
        self.constant_floats = offset
        produced = {node.out for node in self.nodes}
        for i, vid in enumerate(graph.outputs):
            root = self.root_of(vid)
            if root in produced and root not in self.location:
                self.location[root] = ("output", i)
            else:
                self.copies.append((i, root))
        self.scratch_floats = self._place_scratch(graph, produced)

    def root_of(self, vid):
        """The value whose memory ``vid`` uses (itself, unless it is a view)."""
        while vid in self.root:
            vid = self.root[vid]
        return vid

    def _place_scratch(self, graph, produced):
        """First-fit placement, largest first, of the values no caller buffer holds, among those whose
        lifetimes overlap theirs."""
        first, last = {}, {}
        sizes = {r: graph.numel(r) for r in produced}
        for step, node in enumerate(self.nodes):
            for vid in node.value_inputs():
                last[self.root_of(vid)] = step
            first.setdefault(node.out, step)
            last.setdefault(node.out, step)
            if node.attrs.get("workspace"):
                # a kernel's own working memory (attention's score row) lives only while it runs
                key = ("workspace", id(node))
                first[key] = last[key] = step
                sizes[key] = node.attrs["workspace"]
        pending = [r for r in sizes if r not in self.location]
        pending.sort(key=lambda r: (-sizes[r], first[r]))
        placed, total = [], 0
        for root in pending:
            size = _aligned(sizes[root])
            busy = sorted(
                (offset, end)
                for other, offset, end in placed
                if not (last[other] < first[root] or last[root] < first[other])
            )
            offset = 0
            for start, end in busy:
                if offset + size <= start:
                    break
                offset = max(offset, end)
            placed.append((root, offset, offset + size))
            self.location[root] = ("scratch", offset)
            total = max(total, offset + size)
        return total


def _aligned(count):
    return -(-max(int(count), 1) // ALIGN_FLOATS) * ALIGN_FLOATS


def _live_nodes(nodes, output_roots, plan):
    """``nodes`` less those whose results nothing reads (walking back from the outputs)."""
    needed = set(output_roots)
    live = []
    for node in reversed(nodes):
        if node.out in needed:
            live.append(node)
            needed.update(plan.root_of(v) for v in node.value_inputs())
    return live[::-1]


class CSource:
    """Writes ``<name>.c`` and ``<name>.h`` text for a graph (``weights``: "embedded" or "file")."""

    def __init__(self, graph, name, weights):
        self.graph = graph
        self.name = name
        self.macro = name.upper()
        self.weights = weights
        self.plan = MemoryPlan(graph)

    # ------------------------------------------------------------------ pointers
    def workspace_pointer(self, node):
        """The scratch a kernel with a ``workspace`` attribute may write while it runs."""
        return f"({self.name}_scratch + {self.plan.location[('workspace', id(node))][1]})"

    def pointer(self, vid):
        root = self.plan.root_of(vid)
        kind, where = self.plan.location[root]
        if kind == "input":
            return f"in{where}"
        if kind == "output":
            return f"out{where}"
        if kind == "constant":
            return f"({self.name}_weights + {where})"
        return f"({self.name}_scratch + {where})"

    # ------------------------------------------------------------------ sizes
    @property
    def weight_bytes(self):
        return 4 * self.plan.constant_floats

    @property
    def scratch_bytes(self):
        return 4 * self.plan.scratch_floats

    def weights_blob(self):
        """The constants as one float32 array, in the plan's order (what the weights file holds)."""
        blob = np.zeros(self.plan.constant_floats, np.float32)
        for vid in self.plan.constant_order:
            offset = self.plan.location[vid][1]
            data = self.graph.constants[vid].reshape(-1)
            blob[offset : offset + data.size] = data
        return blob

    def weights_file_bytes(self):
        blob = self.weights_blob().astype("<f4")
        header = WEIGHTS_MAGIC + np.array([WEIGHTS_VERSION, blob.size, 0], dtype="<u4").tobytes()
        return header + blob.tobytes()

    # ------------------------------------------------------------------ the header
    def header(self):
        g, m, n = self.graph, self.macro, self.name
        ins = ", ".join(f"const float* in{i}" for i in range(len(g.inputs)))
        outs = ", ".join(f"float* out{i}" for i in range(len(g.outputs)))
        lines = [
            f"/* {n}.h: generated by adcuda.export.to_c; C99, the standard library and libm only.",
            " *",
            f" * int {n}_forward({ins}, {outs});",
            f" * runs the model once over contiguous row-major float32 buffers and returns {m}_OK or an error code.",
            " * The shapes are fixed at export time (export again for another batch size):",
        ]
        for i, vid in enumerate(g.inputs):
            lines.append(f" *   in{i}:  {_shape_text(g.shapes[vid])} ({g.numel(vid)} floats)")
        for i, vid in enumerate(g.outputs):
            lines.append(f" *   out{i}: {_shape_text(g.shapes[vid])} ({g.numel(vid)} floats)")
        lines += [
            " * Output buffers must not overlap the inputs. All working memory is static "
            f"({self.scratch_bytes} bytes of scratch,",
            f" * {self.weight_bytes} bytes of weights): no malloc, and one call at a time (not reentrant).",
        ]
        if self.weights == "file":
            lines.append(
                f" * Call {n}_load_weights(path) once first, with the {n}.weights file written with this code."
            )
        lines += [" */", f"#ifndef {m}_H", f"#define {m}_H", ""]
        for i, vid in enumerate(g.inputs):
            lines.append(f"#define {m}_IN{i}_SIZE {g.numel(vid)}")
        for i, vid in enumerate(g.outputs):
            lines.append(f"#define {m}_OUT{i}_SIZE {g.numel(vid)}")
        lines += [
            f"#define {m}_NUM_INPUTS {len(g.inputs)}",
            f"#define {m}_NUM_OUTPUTS {len(g.outputs)}",
            f"#define {m}_SCRATCH_BYTES {self.scratch_bytes}",
            f"#define {m}_WEIGHT_BYTES {self.weight_bytes}",
            "",
        ]
        for code, value, meaning in ERROR_CODES:
            lines.append(f"#define {m}_{code} {value} /* {meaning} */")
        lines += ["", "#ifdef __cplusplus", 'extern "C" {', "#endif", "", f"int {n}_forward({ins}, {outs});"]
        if self.weights == "file":
            lines.append(
                f"/* Reads the weights file; returns {m}_OK, {m}_ERR_WEIGHTS_OPEN or {m}_ERR_WEIGHTS_FORMAT. */"
            )
            lines.append(f"int {n}_load_weights(const char* path);")
        lines += ["", "#ifdef __cplusplus", "}", "#endif", "", f"#endif /* {m}_H */", ""]
        return "\n".join(lines)

    # ------------------------------------------------------------------ the source
    def source(self):
        n, m = self.name, self.macro
        lines = [
            f"/* {n}.c: generated by adcuda.export.to_c (see {n}.h); C99, the standard library and libm only. */",
            "#include <math.h>",
            "#include <stddef.h>",
            "#include <stdio.h>",
            "#include <string.h>",
            "",
            f'#include "{n}.h"',
            "",
        ]
        lines += self._storage()
        kernels, calls = [], []
        for index, node in enumerate(self.plan.nodes):
            emit = getattr(self, f"_kernel_{node.kind}")
            params, body = emit(node)
            fname = f"{n}_k{index}"
            # a kernel with a workspace takes it writable, just before its result
            reads = len(params) - (2 if node.attrs.get("workspace") else 1)
            signature = ", ".join(
                [f"const float* restrict p{j}" for j in range(reads)]
                + (["float* restrict w"] if node.attrs.get("workspace") else [])
                + ["float* restrict y"]
            )
            kernels.append(f"/* {node.origin}: {self._node_shapes(node)} */")
            kernels.append(f"static void {fname}({signature}) {{")
            kernels.extend("    " + line for line in body)
            kernels.append("}")
            kernels.append("")
            calls.append(f"    {fname}({', '.join(params)});")
        lines += kernels
        ins = ", ".join(f"const float* in{i}" for i in range(len(self.graph.inputs)))
        outs = ", ".join(f"float* out{i}" for i in range(len(self.graph.outputs)))
        checks = " || ".join(
            [f"!in{i}" for i in range(len(self.graph.inputs))] + [f"!out{i}" for i in range(len(self.graph.outputs))]
        )
        lines.append(f"int {n}_forward({ins}, {outs}) {{")
        lines.append(f"    if ({checks}) return {m}_ERR_NULL_ARGUMENT;")
        if self.weights == "file" and self.plan.constant_floats:
            lines.append(f"    if (!{n}_weights_loaded) return {m}_ERR_WEIGHTS_NOT_LOADED;")
        lines += calls
        for i, root in self.plan.copies:
            lines.append(f"    memcpy(out{i}, {self.pointer(root)}, sizeof(float) * {self.graph.numel(root)});")
        lines += [f"    return {m}_OK;", "}", ""]
        if self.weights == "file":
            lines += self._loader()
        return "\n".join(lines)

    def _node_shapes(self, node):
        ins = ", ".join(_shape_text(self.graph.shapes[v]) for v in node.value_inputs())
        return f"{ins} -> {_shape_text(self.graph.shapes[node.out])}"

    def _storage(self):
        n = self.name
        lines = []
        if self.plan.scratch_floats:
            lines.append(f"static float {n}_scratch[{self.plan.scratch_floats}];")
        if self.weights == "file":
            lines.append(f"static float {n}_weights[{max(self.plan.constant_floats, 1)}];")
            lines.append(f"static int {n}_weights_loaded = {0 if self.plan.constant_floats else 1};")
        elif self.plan.constant_floats:
            blob = self.weights_blob()
            lines.append(f"static const float {n}_weights[{blob.size}] = {{")
            for start in range(0, blob.size, 8):
                lines.append("    " + ", ".join(_float_literal(v) for v in blob[start : start + 8]) + ",")
            lines.append("};")
        lines.append("")
        names = self.graph.constant_names
        for vid in self.plan.constant_order:
            where = self.plan.location[vid][1]
            label = names.get(vid, "data the forward made")
            lines.append(f"/* weights + {where}: {label} {_shape_text(self.graph.constants[vid].shape)} */")
        lines.append("")
        return lines

    def _loader(self):
        n, m = self.name, self.macro
        magic = ", ".join(f"'{chr(c)}'" for c in WEIGHTS_MAGIC)
        return [
            "static unsigned long read_le32(const unsigned char* p) {",
            "    return (unsigned long)p[0] | ((unsigned long)p[1] << 8) | ((unsigned long)p[2] << 16) |",
            "           ((unsigned long)p[3] << 24);",
            "}",
            "",
            f"int {n}_load_weights(const char* path) {{",
            f"    static const unsigned char magic[4] = {{{magic}}};",
            "    unsigned char header[16];",
            "    unsigned char probe[4];",
            "    const float one = 1.0f;",
            "    size_t got;",
            "    FILE* file;",
            f"    if (!path) return {m}_ERR_NULL_ARGUMENT;",
            f"    {n}_weights_loaded = 0; /* until the whole file is read: a failed load leaves none */",
            '    file = fopen(path, "rb");',
            f"    if (!file) return {m}_ERR_WEIGHTS_OPEN;",
            "    got = fread(header, 1, sizeof header, file);",
            "    if (got != sizeof header || memcmp(header, magic, 4) != 0 ||",
            f"        read_le32(header + 4) != {WEIGHTS_VERSION}ul ||",
            f"        read_le32(header + 8) != {self.plan.constant_floats}ul) {{",
            "        fclose(file);",
            f"        return {m}_ERR_WEIGHTS_FORMAT;",
            "    }",
            f"    got = fread({n}_weights, sizeof(float), {self.plan.constant_floats}, file);",
            f"    if (got != {self.plan.constant_floats} || fgetc(file) != EOF) {{",
            "        fclose(file);",
            f"        return {m}_ERR_WEIGHTS_FORMAT;",
            "    }",
            "    fclose(file);",
            "    memcpy(probe, &one, 4);",
            "    if (probe[0] != 0) { /* a big-endian machine: the file's floats are little-endian */",
            "        size_t i;",
            f"        for (i = 0; i < {self.plan.constant_floats}; ++i) {{",
            f"            unsigned char* b = (unsigned char*)&{n}_weights[i];",
            "            unsigned char t = b[0]; b[0] = b[3]; b[3] = t; t = b[1]; b[1] = b[2]; b[2] = t;",
            "        }",
            "    }",
            f"    {n}_weights_loaded = 1;",
            f"    return {m}_OK;",
            "}",
            "",
        ]

    # ------------------------------------------------------------------ kernels: (call arguments, body)
    def _kernel_unary(self, node):
        x = node.inputs[0]
        count = self.graph.numel(node.out)
        body = [
            f"for (long i = 0; i < {count}L; ++i) {{",
            "    const float v = p0[i];",
            f"    y[i] = {unary_c(node.attrs['op'])};",
            "}",
        ]
        return [self.pointer(x), self.pointer(node.out)], body

    def _kernel_clamp(self, node):
        count = self.graph.numel(node.out)
        body = [f"for (long i = 0; i < {count}L; ++i) {{", "    float v = p0[i];"]
        if node.attrs["lo"] is not None:
            body.append(f"    v = v < {_float_literal(node.attrs['lo'])} ? {_float_literal(node.attrs['lo'])} : v;")
        if node.attrs["hi"] is not None:
            body.append(f"    v = v > {_float_literal(node.attrs['hi'])} ? {_float_literal(node.attrs['hi'])} : v;")
        body += ["    y[i] = v;", "}"]
        return [self.pointer(node.inputs[0]), self.pointer(node.out)], body

    def _broadcast_operands(self, node, out_shape):
        """An elementwise node's operands: a C literal for a scalar, else a pointer parameter read with
        its strides broadcast to ``out_shape``; returns (the parameters, the operands in order)."""
        params, operands = [], []
        for v in node.inputs:
            if isinstance(v, float):
                operands.append(_float_literal(v))
            else:
                operands.append((f"p{len(params)}", broadcast_strides(self.graph.shapes[v], out_shape), 0))
                params.append(self.pointer(v))
        return params, operands

    def _kernel_binary(self, node):
        out_shape = self.graph.shapes[node.out]
        params, operands = self._broadcast_operands(node, out_shape)
        expression = binary_c(node.attrs["op"])
        body = _loop_nest(
            out_shape,
            [o for o in operands if isinstance(o, tuple)],
            lambda reads: _substitute(expression, _merge_scalars(operands, reads)),
        )
        return params + [self.pointer(node.out)], body

    def _kernel_where(self, node):
        out_shape = self.graph.shapes[node.out]
        params, operands = self._broadcast_operands(node, out_shape)

        def combine(reads):
            c, a, b = _merge_scalars(operands, reads)
            return f"({c} != 0.0f ? {a} : {b})"

        body = _loop_nest(out_shape, [o for o in operands if isinstance(o, tuple)], combine)
        return params + [self.pointer(node.out)], body

    def _kernel_strided_copy(self, node):
        out_shape = self.graph.shapes[node.out]
        body = _loop_nest(out_shape, [("p0", node.attrs["strides"], node.attrs["offset"])], lambda reads: reads[0])
        return [self.pointer(node.inputs[0]), self.pointer(node.out)], body

    def _kernel_index_put(self, node):
        """A copy of the base (or a fill), then the values written over the key's elements."""
        count = self.graph.numel(node.out)
        a = node.attrs
        params = [self.pointer(v) for v in node.inputs]
        if a["fill"] is None:
            body = [f"for (long i = 0; i < {count}L; ++i) y[i] = p0[i];"]
        else:
            body = [f"for (long i = 0; i < {count}L; ++i) y[i] = {_float_literal(a['fill'])};"]
        if a["value"] is None:
            values = [(f"p{len(params) - 1}", a["value_strides"], a.get("value_offset", 0))]
            body += _loop_nest(a["region"], values, lambda reads: reads[0], out=(a["strides"], a["offset"]))
        else:
            literal = _float_literal(a["value"])
            body += _loop_nest(a["region"], [], lambda reads: literal, out=(a["strides"], a["offset"]))
        return params + [self.pointer(node.out)], body

    def _kernel_cat(self, node):
        body = []
        for j, (v, offset) in enumerate(zip(node.inputs, node.attrs["offsets"])):
            shape = self.graph.shapes[v]
            own = (f"p{j}", contiguous_strides(shape), 0)
            body += _loop_nest(shape, [own], lambda reads: reads[0], out=(node.attrs["strides"], offset))
        return [self.pointer(v) for v in node.inputs] + [self.pointer(node.out)], body

    def _kernel_reduce(self, node):
        """Over (outer, reduced, inner): each output row of ``inner`` accumulates the ``reduced`` rows
        above it, so the innermost loop runs along contiguous memory."""
        a = node.attrs
        start, step, finish = reduce_c(a["op"])
        outer, reduced, inner = a["outer"], a["reduced"], a["inner"]
        body = [
            f"for (long o = 0; o < {outer}L; ++o) {{",
            f"    float* restrict yo = y + o * {inner}L;",
            f"    for (long i = 0; i < {inner}L; ++i) yo[i] = {start};",
            f"    for (long r = 0; r < {reduced}L; ++r) {{",
            f"        const float* restrict xr = p0 + (o * {reduced}L + r) * {inner}L;",
            f"        for (long i = 0; i < {inner}L; ++i) yo[i] = {step.format(acc='yo[i]', v='xr[i]')};",
            "    }",
        ]
        if finish is not None:
            body.append(
                f"    for (long i = 0; i < {inner}L; ++i) yo[i] = {finish.format(acc='yo[i]', count=f'{reduced}.0f')};"
            )
        body.append("}")
        return [self.pointer(node.inputs[0]), self.pointer(node.out)], body

    def _kernel_linear(self, node):
        """``x (M, K) @ w (K, N) + bias``. Blocks of ``LINEAR_ROWS`` rows by ``LINEAR_COLUMNS`` columns keep
        their sums in registers over the whole k loop (each weight row is read once per block of rows,
        not once per row); the rows and columns left over go row by row in i-k-j order."""
        x, w = node.inputs[0], node.inputs[1]
        k_size, n_size = self.graph.shapes[w]
        rows = self.graph.numel(x) // k_size
        params = [self.pointer(x), self.pointer(w)]
        has_bias = len(node.inputs) > 2
        if has_bias:
            params.append(self.pointer(node.inputs[2]))
        block_rows = rows // LINEAR_ROWS * LINEAR_ROWS
        block_cols = n_size // LINEAR_COLUMNS * LINEAR_COLUMNS
        r, c = range(LINEAR_ROWS), LINEAR_COLUMNS
        body = []
        if block_rows and block_cols:
            body += [
                f"for (long m = 0; m < {block_rows}L; m += {LINEAR_ROWS}) {{",
                f"    for (long n0 = 0; n0 < {block_cols}L; n0 += {c}) {{",
                "        float " + ", ".join(f"acc{i}[{c}]" for i in r) + ";",
                f"        for (long j = 0; j < {c}; ++j) {{",
                *(f"            acc{i}[j] = {'p2[n0 + j]' if has_bias else '0.0f'};" for i in r),
                "        }",
                f"        for (long k = 0; k < {k_size}L; ++k) {{",
                f"            const float* restrict wr = p1 + k * {n_size}L + n0;",
                *(f"            const float a{i} = p0[(m + {i}) * {k_size}L + k];" for i in r),
                f"            for (long j = 0; j < {c}; ++j) {{",
                "                const float wv = wr[j];",
                *(f"                acc{i}[j] += a{i} * wv;" for i in r),
                "            }",
                "        }",
                f"        for (long j = 0; j < {c}; ++j) {{",
                *(f"            y[(m + {i}) * {n_size}L + n0 + j] = acc{i}[j];" for i in r),
                "        }",
                "    }",
                "}",
            ]
        first = f"m < {block_rows}L ? {block_cols}L : 0" if block_rows and block_cols else "0"
        body += [
            f"for (long m = 0; m < {rows}L; ++m) {{",
            f"    const long n0 = {first};",
            f"    const float* restrict xr = p0 + m * {k_size}L;",
            f"    float* restrict yr = y + m * {n_size}L;",
            f"    for (long n = n0; n < {n_size}L; ++n) yr[n] = {'p2[n]' if has_bias else '0.0f'};",
            f"    for (long k = 0; k < {k_size}L; ++k) {{",
            "        const float a = xr[k];",
            f"        const float* restrict wr = p1 + k * {n_size}L;",
            f"        for (long n = n0; n < {n_size}L; ++n) yr[n] += a * wr[n];",
            "    }",
            "}",
        ]
        body += _activation_loop(node.attrs.get("act"), "y", rows * n_size)
        return params + [self.pointer(node.out)], body

    def _kernel_matmul(self, node):
        a, b = node.inputs
        sa, sb = self.graph.shapes[a], self.graph.shapes[b]
        m_size, k_size = sa[-2], sa[-1]
        n_size = sb[-1] if len(sb) > 1 else 1  # a vector b (K,) is read as the column (K, 1) it is laid out as
        batch = self.graph.numel(node.out) // (m_size * n_size) if m_size * n_size else 0
        b_step = 0 if len(sb) <= 2 else k_size * n_size
        body = [
            f"for (long t = 0; t < {batch}L; ++t) {{",
            f"    const float* restrict at = p0 + t * {m_size * k_size}L;",
            f"    const float* restrict bt = p1 + t * {b_step}L;",
            f"    for (long m = 0; m < {m_size}L; ++m) {{",
            f"        float* restrict yr = y + (t * {m_size}L + m) * {n_size}L;",
            f"        for (long n = 0; n < {n_size}L; ++n) yr[n] = 0.0f;",
            f"        for (long k = 0; k < {k_size}L; ++k) {{",
            f"            const float v = at[m * {k_size}L + k];",
            f"            const float* restrict br = bt + k * {n_size}L;",
            f"            for (long n = 0; n < {n_size}L; ++n) yr[n] += v * br[n];",
            "        }",
            "    }",
            "}",
        ]
        return [self.pointer(a), self.pointer(b), self.pointer(node.out)], body

    def _kernel_conv(self, node):
        x, w = node.inputs[0], node.inputs[1]
        batch, channels, height, width = self.graph.shapes[x]
        out_channels, group_channels, kh, kw = self.graph.shapes[w]
        _, _, out_h, out_w = self.graph.shapes[node.out]
        (sh, sw), (ph, pw), (dh, dw) = node.attrs["stride"], node.attrs["padding"], node.attrs["dilation"]
        per_group_out = out_channels // node.attrs["groups"]
        params = [self.pointer(x), self.pointer(w)]
        if len(node.inputs) > 2:
            params.append(self.pointer(node.inputs[2]))
            start = "p2[o]"
        else:
            start = "0.0f"
        plane = out_h * out_w
        body = [
            f"for (long b = 0; b < {batch}L; ++b) {{",
            f"    for (long o = 0; o < {out_channels}L; ++o) {{",
            f"        float* restrict yo = y + (b * {out_channels}L + o) * {plane}L;",
            f"        const long first_channel = (o / {per_group_out}L) * {group_channels}L;",
            f"        for (long i = 0; i < {plane}L; ++i) yo[i] = {start};",
            f"        for (long c = 0; c < {group_channels}L; ++c) {{",
            f"            const float* restrict xc = p0 + (b * {channels}L + first_channel + c) * {height * width}L;",
            f"            for (long ky = 0; ky < {kh}L; ++ky) {{",
            f"                const long oy0 = first_out(ky * {dh}L, {ph}L, {sh}L);",
            f"                const long oy1 = end_out(ky * {dh}L, {ph}L, {sh}L, {height}L, {out_h}L);",
            f"                const float* restrict wk = p1 + ((o * {group_channels}L + c) * {kh}L + ky) * {kw}L;",
            "                for (long oy = oy0; oy < oy1; ++oy) {",
            f"                    float* restrict yr = yo + oy * {out_w}L;",
            f"                    const long row = (oy * {sh}L - {ph}L + ky * {dh}L) * {width}L - {pw}L;",
            *("                    " + line for line in _conv_row(kw, width, out_w, sw, pw, dw)),
            "                }",
            "            }",
            "        }",
        ]
        body += ["        " + line for line in _activation_loop(node.attrs.get("act"), "yo", plane)]
        body += ["    }", "}"]
        return params + [self.pointer(node.out)], body

    def _kernel_maxpool(self, node):
        x = node.inputs[0]
        batch, channels, height, width = self.graph.shapes[x]
        _, _, out_h, out_w = self.graph.shapes[node.out]
        (kh, kw), (sh, sw) = node.attrs["kernel"], node.attrs["stride"]
        (ph, pw), (dh, dw) = node.attrs["padding"], node.attrs["dilation"]
        body = [
            f"for (long p = 0; p < {batch * channels}L; ++p) {{",
            f"    const float* restrict xp = p0 + p * {height * width}L;",
            f"    float* restrict yp = y + p * {out_h * out_w}L;",
            f"    for (long i = 0; i < {out_h * out_w}L; ++i) yp[i] = -INFINITY;",
            f"    for (long ky = 0; ky < {kh}L; ++ky) {{",
            f"        const long oy0 = first_out(ky * {dh}L, {ph}L, {sh}L);",
            f"        const long oy1 = end_out(ky * {dh}L, {ph}L, {sh}L, {height}L, {out_h}L);",
            f"        for (long kx = 0; kx < {kw}L; ++kx) {{",
            f"            const long ox0 = first_out(kx * {dw}L, {pw}L, {sw}L);",
            f"            const long ox1 = end_out(kx * {dw}L, {pw}L, {sw}L, {width}L, {out_w}L);",
            "            for (long oy = oy0; oy < oy1; ++oy) {",
            f"                float* restrict yr = yp + oy * {out_w}L;",
            f"                const long row = (oy * {sh}L - {ph}L + ky * {dh}L) * {width}L + kx * {dw}L - {pw}L;",
            "                for (long ox = ox0; ox < ox1; ++ox) {",
            f"                    const float v = xp[row + ox * {sw}L];",
            "                    yr[ox] = (v > yr[ox] || v != v) ? v : yr[ox];",
            "                }",
            "            }",
            "        }",
            "    }",
            "}",
        ]
        return [self.pointer(x), self.pointer(node.out)], body

    def _kernel_avgpool(self, node):
        """Each output's window (fixed: kernel, stride, padding; or adaptive) summed over the input it covers
        and divided by PyTorch's divisor (the override, or the window clipped to the padded input or to the
        input)."""
        x = node.inputs[0]
        batch, channels, height, width = self.graph.shapes[x]
        _, _, out_h, out_w = self.graph.shapes[node.out]
        a = node.attrs
        (kh, kw), (sh, sw), (ph, pw) = a["kernel"], a["stride"], a["padding"]

        padded = not a["adaptive"] and a["count_include_pad"] and not a["divisor"]

        def bounds(axis, o, size, out, k, s, pad):
            if a["adaptive"]:
                start = f"{o} * {size}L / {out}L"
                return [f"const long {axis}0 = {start}, {axis}1 = (({o} + 1) * {size}L + {out}L - 1) / {out}L;"]
            return [
                f"long {axis}0 = {o} * {s}L - {pad}L, {axis}1 = {axis}0 + {k}L;",
                f"if ({axis}1 > {size + pad}L) {axis}1 = {size + pad}L;",
                *([f"const long {axis}n = {axis}1 - {axis}0;"] if padded else []),
                f"if ({axis}0 < 0) {axis}0 = 0;",
                f"if ({axis}1 > {size}L) {axis}1 = {size}L;",
            ]

        if a["divisor"]:
            divisor = f"{float(a['divisor'])!r}f"
        elif padded:
            divisor = "(float)(hn * wn)"
        else:
            divisor = "(float)((h1 - h0) * (w1 - w0))"
        body = [
            f"for (long p = 0; p < {batch * channels}L; ++p) {{",
            f"    const float* restrict xp = p0 + p * {height * width}L;",
            f"    float* restrict yp = y + p * {out_h * out_w}L;",
            f"    for (long oy = 0; oy < {out_h}L; ++oy) {{",
            *("        " + line for line in bounds("h", "oy", height, out_h, kh, sh, ph)),
            f"        for (long ox = 0; ox < {out_w}L; ++ox) {{",
            *("            " + line for line in bounds("w", "ox", width, out_w, kw, sw, pw)),
            "            float sum = 0.0f;",
            "            for (long iy = h0; iy < h1; ++iy) {",
            f"                for (long ix = w0; ix < w1; ++ix) sum += xp[iy * {width}L + ix];",
            "            }",
            f"            yp[oy * {out_w}L + ox] = sum / {divisor};",
            "        }",
            "    }",
            "}",
        ]
        return [self.pointer(x), self.pointer(node.out)], body

    def _kernel_layernorm(self, node):
        x = node.inputs[0]
        shape = self.graph.shapes[x]
        size = int(np.prod(shape[len(shape) - node.attrs["normalized"] :], dtype=np.int64))
        rows = self.graph.numel(x) // size if size else 0
        params = [self.pointer(v) for v in node.inputs]
        scale = " * p1[j]" if node.attrs["has_weight"] else ""
        shift_index = 2 if node.attrs["has_weight"] else 1
        shift = f" + p{shift_index}[j]" if node.attrs["has_bias"] else ""
        body = [
            f"for (long r = 0; r < {rows}L; ++r) {{",
            f"    const float* restrict xr = p0 + r * {size}L;",
            f"    float* restrict yr = y + r * {size}L;",
            "    float mean = 0.0f, var = 0.0f, rstd;",
            f"    for (long j = 0; j < {size}L; ++j) mean += xr[j];",
            f"    mean /= {size}.0f;",
            f"    for (long j = 0; j < {size}L; ++j) var += (xr[j] - mean) * (xr[j] - mean);",
            f"    rstd = 1.0f / sqrtf(var / {size}.0f + {_float_literal(node.attrs['eps'])});",
            f"    for (long j = 0; j < {size}L; ++j) yr[j] = (xr[j] - mean) * rstd{scale}{shift};",
            "}",
        ]
        return params + [self.pointer(node.out)], body

    def _kernel_softmax(self, node):
        x = node.inputs[0]
        shape = self.graph.shapes[x]
        axis = node.attrs["axis"]
        outer = int(np.prod(shape[:axis], dtype=np.int64))
        length = shape[axis]
        inner = int(np.prod(shape[axis + 1 :], dtype=np.int64))
        finish = (
            [
                "    s = m + logf(s);",
                f"    for (long j = 0; j < {length}L; ++j) yr[j * {inner}L] = xr[j * {inner}L] - s;",
            ]
            if node.attrs["log"]
            else ["    s = 1.0f / s;", f"    for (long j = 0; j < {length}L; ++j) yr[j * {inner}L] *= s;"]
        )
        body = [
            f"for (long r = 0; r < {outer * inner}L; ++r) {{",
            f"    const long base = (r / {inner}L) * {length * inner}L + r % {inner}L;",
            "    const float* restrict xr = p0 + base;",
            "    float* restrict yr = y + base;",
            "    float m = -INFINITY, s = 0.0f;",
            f"    for (long j = 0; j < {length}L; ++j) m = xr[j * {inner}L] > m ? xr[j * {inner}L] : m;",
            f"    for (long j = 0; j < {length}L; ++j) {{",
            f"        const float e = expf(xr[j * {inner}L] - m);",
            f"        yr[j * {inner}L] = e;",
            "        s += e;",
            "    }",
        ]
        body += finish + ["}"]
        return [self.pointer(x), self.pointer(node.out)], body

    def _kernel_attention(self, node):
        """softmax(q k^T * scale + mask) v, one query row at a time: the row's scores (unit-stride sums
        over the keys transposed into the workspace), the causal and given masks, the row max subtracted
        before expf, then the probabilities times v's rows. A row with every key masked (max -inf) is
        all zeros, as on the CPU backend: its max is taken as 0, every exp is 0 and the sum is not divided by."""
        q, k, v = node.inputs[:3]
        mask = node.inputs[3] if len(node.inputs) > 3 else None
        out_shape = self.graph.shapes[node.out]
        batch_shape = out_shape[:-2]
        length, keys = out_shape[-2], self.graph.shapes[k][-2]
        depth, value_depth = self.graph.shapes[q][-1], out_shape[-1]
        batch = int(np.prod(batch_shape, dtype=np.int64))

        def batch_offset(vid):
            """C expression of the offset of batch entry ``b`` in ``vid`` (broadcast over the batch dims)."""
            shape = self.graph.shapes[vid]
            strides = broadcast_strides(shape, batch_shape + tuple(shape[-2:]))[: len(batch_shape)]
            terms, inner = [], 1
            for size, stride in reversed(list(zip(batch_shape, strides))):
                if stride and size != 1:
                    index = "b" if inner == 1 else f"(b / {inner}L)"
                    index = index if inner * size == batch else f"({index} % {size}L)"
                    terms.append(f"{index} * {stride}L")
                inner *= size
            return " + ".join(reversed(terms)) or "0"

        params = [self.pointer(q), self.pointer(k), self.pointer(v)]
        body = [
            f"for (long b = 0; b < {batch}L; ++b) {{",
            f"    const float* restrict qb = p0 + {batch_offset(q)};",
            f"    const float* restrict kb = p1 + {batch_offset(k)};",
            f"    const float* restrict vb = p2 + {batch_offset(v)};",
            f"    float* restrict yb = y + b * {length * value_depth}L;",
            "    float* restrict kt = w;",
            f"    float* restrict s = w + {depth * keys}L;",
            f"    for (long j = 0; j < {keys}L; ++j)",
            f"        for (long e = 0; e < {depth}L; ++e) kt[e * {keys}L + j] = kb[j * {depth}L + e];",
            f"    for (long i = 0; i < {length}L; ++i) {{",
            f"        const float* restrict qi = qb + i * {depth}L;",
            f"        float* restrict yi = yb + i * {value_depth}L;",
            "        float m = -INFINITY, total = 0.0f;",
            f"        for (long j = 0; j < {keys}L; ++j) s[j] = 0.0f;",
            f"        for (long e = 0; e < {depth}L; ++e) {{",
            "            const float a = qi[e];",
            f"            const float* restrict kr = kt + e * {keys}L;",
            f"            for (long j = 0; j < {keys}L; ++j) s[j] += a * kr[j];",
            "        }",
        ]
        scale = _float_literal(node.attrs["scale"])
        if mask is None:
            body.append(f"        for (long j = 0; j < {keys}L; ++j) s[j] *= {scale};")
        else:
            params.append(self.pointer(mask))
            mask_shape = self.graph.shapes[mask]
            row_strides = broadcast_strides(mask_shape, batch_shape + (length, keys))[-2:]
            column = "mr[j]" if row_strides[1] else "mr[0]"
            body.append(f"        const float* restrict mr = p3 + {batch_offset(mask)} + i * {row_strides[0]}L;")
            if node.attrs["mask_is_bool"]:
                body.append(
                    f"        for (long j = 0; j < {keys}L; ++j) s[j] = {column} != 0.0f ? s[j] * {scale} : -INFINITY;"
                )
            else:
                body.append(f"        for (long j = 0; j < {keys}L; ++j) s[j] = s[j] * {scale} + {column};")
        if node.attrs["causal"]:
            body.append(f"        for (long j = i + 1; j < {keys}L; ++j) s[j] = -INFINITY;")
        body += [
            f"        for (long j = 0; j < {keys}L; ++j) m = s[j] > m ? s[j] : m;",
            "        if (!isfinite(m)) m = 0.0f;",
            f"        for (long j = 0; j < {keys}L; ++j) {{",
            "            s[j] = expf(s[j] - m);",
            "            total += s[j];",
            "        }",
            "        if (total > 0.0f)",
            f"            for (long j = 0; j < {keys}L; ++j) s[j] /= total;",
            f"        for (long n = 0; n < {value_depth}L; ++n) yi[n] = 0.0f;",
            f"        for (long j = 0; j < {keys}L; ++j) {{",
            "            const float pj = s[j];",
            f"            const float* restrict vr = vb + j * {value_depth}L;",
            f"            for (long n = 0; n < {value_depth}L; ++n) yi[n] += pj * vr[n];",
            "        }",
            "    }",
            "}",
        ]
        return params + [self.workspace_pointer(node), self.pointer(node.out)], body

    # ------------------------------------------------------------------ putting it together
    def write(self):
        """``(header text, source text)``; each helper function goes in only where a kernel calls it
        (an unused static function would fail -Wall -Werror)."""
        source = self.source()
        marker = f'#include "{self.name}.h"\n'
        helpers = [text for name, text in _helpers().items() if f"{name}(" in source]
        if helpers:
            source = source.replace(marker, marker + "\n" + "\n".join(helpers), 1)
        return self.header(), source


def _helpers():
    """name -> C text of the static helper functions kernels may call."""
    return {"first_out": WINDOW_HELPERS, "erf_rational": _erf_helper()}


# erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (beyond, erf is 1 to float32 precision): a rational
# approximation fitted by iteratively reweighted least squares on the relative error (2e-9 in
# float64); evaluated in float32 its rounding dominates, about 3 ulp, as with the CPU backend's tanh
# form (backends/cpu/elementwise.py, fewer NumPy passes; in C, tanhf would be a call per element).
# Coefficients from the highest power down.
_ERF_P = (
    -1.320218606659651e-08,
    4.6847686940576505e-06,
    0.0003796083678672549,
    0.0038496057579662218,
    0.054316888748941576,
    0.18520311315347807,
    1.1283791693790333,
)
_ERF_Q = (
    6.311048666503283e-05,
    0.0013075679687991264,
    0.015462076866827856,
    0.11395836396140764,
    0.49746539941178164,
    1.0,
)
_ERF_CLAMP = 4.0


def _erf_helper():
    """erf within float32 rounding of the CPU backend's: x P(x^2) / Q(x^2) on [-4, 4], so the C
    output matches adcuda's to rounding."""

    def horner(name, coefficients):
        text = f"    float {name} = {_float_literal(coefficients[0])};\n"
        for c in coefficients[1:]:
            text += f"    {name} = {name} * z2 + {_float_literal(c)};\n"
        return text

    clamp = _float_literal(_ERF_CLAMP)
    return (
        "/* erf(x) = x P(x^2) / Q(x^2) on [-4, 4] (beyond it erf is +-1 in float32): branch-free, so that\n"
        " * loops over it vectorize (adcuda's CPU backend agrees to rounding). */\n"
        "static inline float erf_rational(float x) {\n"
        f"    const float z = x < -{clamp} ? -{clamp} : (x > {clamp} ? {clamp} : x);\n"
        "    const float z2 = z * z;\n"
        "    float r;\n" + horner("p", _ERF_P) + horner("q", _ERF_Q) + "    r = z * p / q;\n"
        "    return r < -1.0f ? -1.0f : (r > 1.0f ? 1.0f : r);\n"
        "}\n"
    )


WINDOW_HELPERS = """/* The outputs o of a sliding window (stride s, padding p) whose tap at offset t reads inside the
 * input (0 <= o * s - p + t < size) run from first_out(...) to end_out(...): the loops over them then
 * need no bounds check (zero padding adds nothing, and max pooling never picks a pad). */
static inline long first_out(long tap, long pad, long stride) {
    const long need = pad - tap;
    return need <= 0 ? 0 : (need + stride - 1) / stride;
}

static inline long end_out(long tap, long pad, long stride, long size, long out) {
    const long last = size - 1 + pad - tap;
    long end;
    if (last < 0) return 0;
    end = last / stride + 1;
    return end < out ? end : out;
}
"""


def _shape_text(shape):
    return "(" + ", ".join(str(s) for s in shape) + ")" if shape else "scalar"


def _float_literal(value):
    value = float(np.float32(value))
    if np.isnan(value):
        return "NAN"
    if np.isinf(value):
        return "INFINITY" if value > 0 else "-INFINITY"
    text = f"{value:.9g}"
    if "e" not in text and "." not in text:
        text += ".0"
    return text + "f"


def _conv_row(kw, width, out_w, stride, pad, dilation):
    """The loops adding one input row's ``kw`` taps (weights ``wk[0..kw)``) into an output row ``yr``.
    Where every tap reads inside the row (the interior, known here) one loop adds all of them, so each
    output is loaded and stored once per row of taps instead of once per tap; near the edges, where
    some taps fall in the zero padding, each tap has its own loop over the outputs it reaches."""
    starts = [_first_out(kx * dilation, pad, stride) for kx in range(kw)]
    ends = [_end_out(kx * dilation, pad, stride, width, out_w) for kx in range(kw)]
    inner_start, inner_end = max(starts), min(ends)
    lines = []
    if inner_end > inner_start:
        taps = " + ".join(f"wk[{kx}] * xc[at + {kx * dilation}L]" for kx in range(kw))
        lines += [
            f"for (long ox = {inner_start}L; ox < {inner_end}L; ++ox) {{",
            f"    const long at = row + ox * {stride}L;",
            f"    yr[ox] += {taps};",
            "}",
        ]
    else:
        inner_start = inner_end = out_w  # no interior: every tap's range is an edge
    for kx, (start, end) in enumerate(zip(starts, ends)):
        for lo, hi in ((start, min(end, inner_start)), (max(start, inner_end), end)):
            if hi > lo:
                lines.append(
                    f"for (long ox = {lo}L; ox < {hi}L; ++ox) "
                    f"yr[ox] += wk[{kx}] * xc[row + ox * {stride}L + {kx * dilation}L];"
                )
    return lines


def _first_out(tap, pad, stride):
    """The first output whose window tap at offset ``tap`` reads inside the input (first_out in C)."""
    need = pad - tap
    return 0 if need <= 0 else (need + stride - 1) // stride


def _end_out(tap, pad, stride, size, out):
    """One past the last such output (end_out in C)."""
    last = size - 1 + pad - tap
    return 0 if last < 0 else min(last // stride + 1, out)


def _activation_loop(act, row, count):
    if act is None:
        return []
    return [
        f"for (long n = 0; n < {count}L; ++n) {{",
        f"    const float v = {row}[n];",
        f"    {row}[n] = {unary_c(act)};",
        "}",
    ]


def _merge_scalars(operands, reads):
    """The C operands of an elementwise node in order: scalar literals as they are, arrays as their reads."""
    reads = iter(reads)
    return [o if isinstance(o, str) else next(reads) for o in operands]


def _substitute(expression, operands):
    a, b = operands
    return expression.format(a=f"({a})", b=f"({b})")


def _loop_nest(shape, operands, combine, out=None):
    """Loops over ``shape`` writing ``y`` from ``operands`` ``(pointer name, element strides, offset)``:
    ``combine(reads)`` gives the C expression of an element from the operands' reads. ``y`` is
    contiguous, or ``out = (strides, offset)``. Adjacent dims that every array walks as one are merged,
    so the innermost loop is as long as it can be."""
    target = ("y",) + (out if out is not None else (contiguous_strides(shape), 0))
    arrays = [target] + list(operands)
    dims = [(size, tuple(a[1][i] for a in arrays)) for i, size in enumerate(shape) if size != 1]
    merged = []
    for size, strides in dims:
        if merged:
            outer_size, outer_strides = merged[-1]
            if all(so == si * size for so, si in zip(outer_strides, strides)):
                merged[-1] = (outer_size * size, strides)
                continue
        merged.append((size, strides))
    if not merged:
        merged = [(1, tuple(0 for _ in arrays))]
    lines, indent = [], ""
    for level, (size, _) in enumerate(merged):
        lines.append(f"{indent}for (long i{level} = 0; i{level} < {size}L; ++i{level})")
        indent += "    "
    accesses = []
    for j, (pointer, _, offset) in enumerate(arrays):
        terms = [str(offset)] if offset else []
        terms += [
            f"i{level}" if stride == 1 else f"i{level} * {stride}L"
            for level, (_, strides) in enumerate(merged)
            for stride in (strides[j],)
            if stride
        ]
        accesses.append(f"{pointer}[{' + '.join(terms) or '0'}]")
    lines.append(f"{indent}{accesses[0]} = {combine(accesses[1:])};")
    return lines


def check_name(name):
    """``name`` if it is a C identifier (it prefixes every symbol and names the files), else an ExportError."""
    if not (isinstance(name, str) and name.isidentifier() and name.isascii()):
        raise ExportError(f"adcuda.export.to_c: name must be a C identifier (letters, digits, _), got {name!r}")
    return name
