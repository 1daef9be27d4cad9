"""A replay program built from a ``Trace``: a flat list of primitive calls over numbered arrays, a
memory plan, and the Python function that replays it.

The memory plan: each array's lifetime is the span from the step that makes it to the last step
that reads it or a view of it (views extend the life of the array that owns the memory). An array
made by a call that has a replay kernel (``FAST_KERNELS``: elementwise ufuncs, the CPU primitives of
the unary ops that write into a given array with their ``out=`` and the program's ``Scratch``, those
declared to make many passes over big arrays a chunk at a time, 2-D matrix products, zero fills and
copies) is written by it with ``out=``: over an
elementwise operand that dies at that call (in place), else into a preallocated buffer, reused by
later arrays of the same shape and dtype once its occupant is dead; a copy of a dying array into its
own dtype is no copy; every other array is made by its primitive as in eager. Outputs, arrays a host
step or a gradient accumulation received, and arrays that outlived the captured run never get a
shared buffer, so nothing the caller or the library can still see is overwritten. Parameters, their
gradients and optimizer state are the library's own tensors, read and updated in place, so Module
and Optimizer objects stay the truth. Some pairs of calls become one: a relu after the bias add that
alone reads its sum (``_fusions``), the sums of zero arrays written in slices (``_scatter_sums``), and
attention's results and the row-major copies made of them (``_attention_destinations``).

The replay itself is one generated Python function (``replay``), a straight line of calls on local
variables with every primitive, constant and buffer prebound: no dispatch, no autograd, no argument
parsing. Calls of pure primitives whose results nothing reads are left out (``_dead_calls``), and
views of arrays that are the same on every replay are made once, when it is built (``_view_once``).
Host steps are calls of the library functions they recorded, or of the replay kernels that
stand for them (host_steps.py: optimizer steps, the class-target check); accumulation sets or adds to
``.grad`` as eager does; draws take the next seed and offset from their generator. A second version
of it, made when a profiler or ``emit_nvtx`` first observes a replay, puts each step in a range.
"""

import functools
import math
import warnings

import numpy as np

from .. import dtypes as dt
from .._native import _C
from ..backends import cpu, float_errors
from ..backends.cpu import threads as cpu_threads
from ..backends.cpu.elementwise import BINARY_OPS, UNARY_BACKWARD_INTO, UNARY_INTO, UNARY_OPS
from ..backends.seam import primitives_where
from ..ops.registry import lowering_of, replay_keep_of_backward
from ..profiler import _state as profiler_state
from ..profiler.observe import begin_range, end_range
from ..profiler.record_function import record_function
from ..tensor import Tensor, primitives_on
from .host_steps import host_step_replay
from .recorder import (
    Accumulate,
    ArraySpec,
    Call,
    Draw,
    Drawn,
    GradOf,
    HostData,
    HostStep,
    TensorArg,
    Value,
    add_into,
)

REPLAY_MODULE = "adcuda.capture.replay"  # the module name generated replays run under
_QUIET_MODULES = r"adcuda\.capture\.(replay|program)$"  # where a replay's NumPy calls are made

_MAY_WARN = frozenset({"div", "pow", "floor_divide", "remainder"})  # binary ops whose fast path the CPU skips
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _binary_kernel(call, scratch):
    """``binary(op, a, b, dtype)`` into a buffer, as the CPU primitive's fast path computes it (operands
    already in the result dtype, one ufunc call)."""
    op, a, b, dtype = (call.arrays_in + (None,) * 4)[:4]
    if op in _MAY_WARN or BINARY_OPS.get(op).__class__ is not np.ufunc or not isinstance(a, ArraySpec) or dtype is None:
        return None
    work = dtype.numpy
    if work is None or work is np.float16 or a.dtype != work:
        return None
    if isinstance(b, ArraySpec) and b.dtype == work or b.__class__ is float and work not in (np.int32, np.int64):
        return BINARY_OPS[op], (1, 2)
    return None


# bytes of each operand one chunk of a chunked kernel (``_in_chunks``) reads or writes: with the
# result and the kernel's scratch arrays, a few times this stays in a core's 1-2 MiB L2 cache
CHUNK_BYTES = 1 << 18


def _strided_operands(primitive):
    """Positions of ``primitive``'s operands it reads as row-strided views as well (its declaration's
    ``strided_operands``); () for most."""
    declared = lowering_of(primitive)
    return () if declared is None else declared.strided_operands


def _many_passes(op):
    """Whether the kernels of ``UNARY_INTO``/``UNARY_BACKWARD_INTO`` op ``op`` make so many passes over their
    arrays (its declaration's ``replay_passes``) that over arrays bigger than a chunk they run in
    chunks."""
    declared = lowering_of("unary", op)
    return declared is not None and declared.replay_passes


def _into(primitive, op, scratch, spec):
    """The ``primitive(op, ...)`` (``unary`` or ``unary_backward``) kernel writing into ``out`` with the
    program's scratch arrays, over operands laid out as ``spec``: in chunks (``_in_chunks``) where the
    op makes many passes over arrays bigger than a chunk."""
    count = math.prod(spec.shape)
    if not _many_passes(op) or count * spec.dtype.itemsize <= CHUNK_BYTES:
        return functools.partial(primitive, op, scratch=scratch)
    return _in_chunks(primitive, op, scratch, count, max(CHUNK_BYTES // spec.dtype.itemsize, 1))


def _in_chunks(primitive, op, scratch, count, step):
    """A kernel calling ``primitive(op, ..., out=, scratch=, inner=)`` on one chunk of ``step`` elements
    of its row-major operands at a time, so that the passes an op makes over its arrays reread what
    the last one wrote from the cache, not from memory (the GPT step's GELU backward over 32x64x384
    float32 arrays: 1.8 ms in one call, 1.3 ms in chunks of 64K elements, caches cold at the start).
    The same elementwise arithmetic on each element: the one-call result, bit for bit. ``out`` and
    ``inner`` are row-major (a buffer, a dying row-major operand or a new array; a kept array), so
    their flat views are views; an operand that is not is read through a row-major copy."""
    parts = [slice(start, start + step) for start in range(0, count, step)]

    def kernel(*operands, out, inner=None):
        flat = [None if a is None else a.reshape(-1) for a in operands]
        whole = out.reshape(-1)
        kept = None if inner is None else inner.reshape(-1)
        for part in parts:
            pieces = [None if a is None else a[part] for a in flat]
            if kept is None:
                primitive(op, *pieces, out=whole[part], scratch=scratch)
            else:
                primitive(op, *pieces, out=whole[part], scratch=scratch, inner=kept[part])
        return out

    return kernel


def _unary_kernel(call, scratch):
    """``unary(op, a)`` of a float32/float64 array: where the op is one ufunc, that ufunc (the primitive's
    own, without the primitive's wrapper, which costs more than a small array's call); where the op
    writes into a given array (``UNARY_INTO``), the primitive with ``out=``
    and the program's scratch arrays."""
    op, a = (call.arrays_in + (None, None))[:2]
    if not isinstance(a, ArraySpec) or a.dtype not in _FLOATS:
        return None
    fn = UNARY_OPS.get(op)
    if isinstance(fn, np.ufunc):
        return fn, (1,)
    if op in UNARY_INTO:
        return _into(cpu.unary, op, scratch, a), (1,)
    return None


def _unary_backward_kernel(call, scratch):
    """``unary_backward(op, x, y, g)`` where the op writes into a given array (``UNARY_BACKWARD_INTO``): the
    primitive with ``out=`` and the program's scratch arrays (relu's: ``_relu_backward``)."""
    op, x, y, g = (call.arrays_in + (None,) * 4)[:4]
    if op not in UNARY_BACKWARD_INTO or not isinstance(x, ArraySpec) or not isinstance(g, ArraySpec):
        return None
    if x.shape != g.shape or x.dtype not in _FLOATS or g.dtype != x.dtype:
        return None
    if op == "relu" and _C is not None:
        return _relu_backward, (1, 2, 3)
    return _into(cpu.unary_backward, op, scratch, x), (1, 2, 3)


def _row_major(*arrays):
    return all(a.__class__ is np.ndarray and a.flags.c_contiguous for a in arrays)


def _relu_backward(x, y, g, out):
    """relu's backward into ``out`` in one native pass over row-major operands (the CPU primitive makes
    three NumPy passes, with a bool array between them, for the same numbers); the primitive elsewhere."""
    if _row_major(x, g, out):
        _C.host_relu_backward(x, g, out)
        return out
    return cpu.unary_backward("relu", x, y, g, out=out)


def _bias_relu(a, bias, out):
    """relu(a + bias) into ``out``, ``bias`` a vector along a's last dim, in one native pass where a and out
    are row-major (``Program._fusions``), the same numbers as the add and the relu it stands for."""
    if _row_major(a, out):
        _C.host_bias_relu(a, bias, out)
        return out
    return np.maximum(np.add(a, bias, out=out), 0, out=out)


def _matmul_kernel(call, scratch):
    """``matmul(a, b)`` of two float32/float64 matrices (the CPU primitive's ``a.dot(b)``), on more than one
    thread only where its size pays for them (adcuda/backends/cpu/threads.py)."""
    args = call.arrays_in
    if len(args) != 2 or call.kwargs:
        return None
    a, b = args
    if not (isinstance(a, ArraySpec) and isinstance(b, ArraySpec)) or len(a.shape) != 2 or len(b.shape) != 2:
        return None
    if a.dtype != b.dtype or a.dtype not in _FLOATS:
        return None
    work = a.shape[0] * a.shape[1] * b.shape[1]
    if work < 2 * cpu_threads.WORK_PER_THREAD:
        cpu_threads.set_up()  # NumPy's BLAS pool at one thread, as the primitive would have set it
        return np.dot, (0, 1)
    return functools.partial(cpu_threads.dot_into, work=work), (0, 1)


def _full_kernel(call, scratch):
    """``full(shape, value, dtype)``: the primitive's ``fill`` into a buffer."""
    value = call.args[1] if len(call.args) > 1 else None
    if value.__class__ not in (bool, int, float):
        return None

    def fill(out):
        out.fill(value)
        return out

    return fill, ()


def _copy(a, out):
    np.copyto(out, a, casting="unsafe")
    return out


def _copy_kernel(call, scratch):
    """``contiguous(a)`` (where it copies) and ``astype(a, dtype)`` between float32 and float64: the
    same cast NumPy's ``astype`` makes, into a buffer."""
    a = call.arrays_in[0] if call.arrays_in else None
    if not isinstance(a, ArraySpec) or call.args[0].__class__ is not Value:
        return None
    if call.name == "astype" and not (a.dtype in _FLOATS and call.args[1].numpy in (np.float32, np.float64)):
        return None
    return _copy, (0,)


# primitive -> a function of the recorded call and the program's Scratch giving (a kernel that writes
# the call's result into its ``out`` argument, the positions of the call's arguments it takes), or None
# where it cannot
FAST_KERNELS = {
    "binary": _binary_kernel,
    "unary": _unary_kernel,
    "unary_backward": _unary_backward_kernel,
    "matmul": _matmul_kernel,
    "full": _full_kernel,
    "contiguous": _copy_kernel,
    "astype": _copy_kernel,
}
# what the primitives' declarations say capture may assume of their calls (adcuda/backends/seam.py, ``Traits``)
_FRESH = primitives_where("fresh")
_HANDS_BACK = primitives_where("returns_operand")
_PURE = primitives_where("pure")
ELEMENTWISE = primitives_where("elementwise")


class Layout:
    """Shape, dtype, size and owning array (the value whose memory it is; -1 for memory the program
    does not own) of each array of a trace, read before the trace lets its arrays go."""

    def __init__(self, trace):
        ids = {id(a): n for n, a in enumerate(trace.arrays)}
        self.shape, self.dtype, self.nbytes, self.owner, self.c_contiguous = [], [], [], [], []
        self.strides = []
        for n, a in enumerate(trace.arrays):
            self.shape.append(tuple(a.shape))
            self.dtype.append(a.dtype)
            self.strides.append(tuple(a.strides))
            self.c_contiguous.append(a.flags.c_contiguous)
            base = a.base
            owner = n if base is None else ids.get(id(base), -1)
            self.owner.append(owner)
            self.nbytes.append(a.nbytes if owner == n else 0)


def _walk(value, visit):
    """Call ``visit`` on every reference (Value, GradOf, Draw, TensorArg) inside an argument structure."""
    if value.__class__ in (Value, GradOf, Draw, TensorArg):
        visit(value)
    elif value.__class__ in (list, tuple):
        for v in value:
            _walk(v, visit)
    elif value.__class__ is dict:
        for v in value.values():
            _walk(v, visit)


class Program:
    """The replay program of one captured signature (see the module docstring)."""

    def __init__(self, trace, layout, outputs, name):
        self.name = name
        self.range_name = f"adcuda.compile replay: {name}"  # the profiler/NVTX range around each replay
        self.replays = 0
        self.trace = trace
        self.layout = layout
        self.outputs = outputs  # output template: value numbers / constants (see compiled.py)
        # checked before each replay: every persistent tensor still holds the array it read, every module
        # is still in the mode (train or eval) it ran in
        self.guards = [(t, a) for a, t in trace.externals.values() if t is not None]
        self.modes = list(trace.modules.values())
        n_steps = len(trace.steps)
        self.dead = self._dead_calls()
        self.views = self._attention_views()
        self.death = self._lifetimes(n_steps)
        self.scratch = Scratch()
        self.kernels, self.buffers, self.buffer_of = self._plan(n_steps)
        self.fused = self._fusions()
        self.scatter_sums = self._scatter_sums()
        self.buffer_arrays = [np.empty(shape, dtype) for shape, dtype in self.buffers]
        self.into, self.direct = self._attention_destinations()
        self.keeps = self._forward_keeps()
        self.mean_losses = self._mean_classifier_losses()
        self.early = self._early_reductions()
        self.lines = []
        self.replay = self._generate()

    def holds(self):
        """Whether the program may replay: every persistent tensor it reads still holds the array it
        captured (``p.data = ...`` rebinds it) and every module is in the mode it ran in."""
        for t, a in self.guards:
            if t._data is not a:
                return False
        for module, training in self.modes:
            if module.training != training:
                return False
        return True

    # ------------------------------------------------------------------ liveness and buffers
    def _dead_calls(self):
        """Indices of the calls the replay leaves out: calls of ``_PURE`` primitives whose results no later
        step that is not itself left out reads, that are no output and that nothing else received (the
        loss a step computes and drops, a view or copy eager made for a consumer that reads the
        persistent array itself), and calls of ``_HANDS_BACK`` primitives that returned their operand
        (a row-major array made row-major), whose result the replay already holds. {index: why}."""
        steps = self.trace.steps
        read = set(self.trace.handed_over) | set(self.output_values())  # values read after the step at hand
        dead = {}
        for i in range(len(steps) - 1, -1, -1):
            step = steps[i]
            if step.__class__ is Call and step.name in _PURE and not step.kwargs:
                results = [n for n in step.results if n is not None]
                if not any(n in read for n in results):
                    dead[i] = "nothing reads what it returns"
                    continue
                first = step.args[0] if step.args else None
                if step.name in _HANDS_BACK and results == [_number(first)] and step.result_kind == "array":
                    dead[i] = "it returns its operand"  # (which the replay holds already)
                    continue
            refs = []
            _walk(_arguments_of(step), refs.append)
            for ref in refs:
                if ref.__class__ in (Value, TensorArg):
                    read.add(ref.n if ref.__class__ is Value else ref.value)
        return dead

    def _attention_views(self):
        """{step index: source value} for ``contiguous`` copies that only primitives declared to read them
        strided read (``strided_operands``: attention and its backward, as q, k, v or the output's
        gradient): they read the view itself instead, the copy left out.
        Their products are BLAS matrix calls over the view's rows (a row stride of whole elements, the
        last dim unit-strided, at least two rows and columns, as NumPy's matmul hands to BLAS), which
        packs its operands whatever their strides: the same numbers as from the copy. The copy's value
        becomes a view of the source's memory, so the source lives as long as the copy would have (set
        here, before lifetimes are taken)."""
        steps, layout = self.trace.steps, self.layout
        readers = {}  # value -> the steps that read it
        for j, step in enumerate(steps):
            refs = []
            _walk(_arguments_of(step), refs.append)
            for ref in refs:
                if ref.__class__ in (Value, TensorArg):
                    readers.setdefault(ref.n if ref.__class__ is Value else ref.value, []).append(j)
        views = {}
        for i, step in enumerate(steps):
            if step.__class__ is not Call or step.name != "contiguous" or step.result_kind != "array":
                continue
            n, source = step.results[0], step.args[0]
            if n is None or source.__class__ is not Value or source.n == n or layout.owner[n] != n:
                continue
            if n in self.trace.handed_over or n in self.output_values() or layout.owner[source.n] < 0:
                continue
            uses = readers.get(n, [])
            if not uses or not all(
                steps[j].__class__ is Call
                and _strided_operands(steps[j].name)
                and not steps[j].kwargs
                and all(
                    a.__class__ is not Value or a.n != n or p in _strided_operands(steps[j].name)
                    for p, a in enumerate(steps[j].args)
                )
                for j in uses
            ):
                continue
            shape, strides, itemsize = layout.shape[source.n], layout.strides[source.n], layout.dtype[source.n].itemsize
            if layout.dtype[source.n] not in _FLOATS or len(shape) < 2 or strides[-1] != itemsize:
                continue
            if min(shape[-2:]) < 2:  # (a row or column vector: a BLAS vector call, whose stride would differ)
                continue
            if min(strides) < 0 or strides[-2] % itemsize or strides[-2] < shape[-1] * itemsize:
                continue
            views[i] = source.n
            layout.owner[n] = layout.owner[source.n]
            layout.nbytes[n] = 0
            layout.c_contiguous[n] = False
        return views

    def _lifetimes(self, n_steps):
        """Index of the last step that reads each owning array (through any of its views); n_steps
        for arrays that must outlive the replay."""
        layout = self.layout
        death = [-1] * len(layout.owner)
        forever = set(self.trace.handed_over) | set(self.output_values())
        for owner, steps in self._readers(live=True).items():
            death[owner] = max(steps)
        for n in forever:
            owner = layout.owner[n]
            if owner >= 0:
                death[owner] = n_steps
        return death

    def output_values(self):
        return [n for kind, n in self.outputs[1] if kind == "value"]

    def _plan(self, n_steps):
        """Which calls run a replay kernel (``FAST_KERNELS``) and where each result goes:

        - into the memory of an operand that no later step reads (``in_place``): elementwise kernels
          write over it, and a copy into its own dtype (``astype``) is no copy at all;
        - else into a preallocated buffer: a dead occupant's of the same shape and dtype (greedy
          reuse) or a new one;
        - else, for a result that outlives the replay, into a fresh array each replay.

        An operand's memory is taken only where every element of the result lands on the element it
        was computed from (same shape and dtype, row-major) and the memory is the program's own: a
        buffer (then only for a result that dies within the replay) or an array a primitive of this
        replay allocated (``_FRESH``), never an input, a persistent array or a view of one."""
        layout = self.layout
        kernels = {}
        buffers = []  # (shape, dtype)
        buffer_of = {}  # value number -> buffer index
        free_at = {}  # buffer index -> the step after which it is free
        by_layout = {}  # (shape, dtype) -> buffer indices
        self.in_place = {}  # step index -> the operand whose memory the result takes
        self.aliases = {}  # step index of a copy made no copy -> the operand it stands for
        for i, step in enumerate(self.trace.steps):
            if step.__class__ is not Call or step.result_kind != "array" or i in self.dead:
                continue
            n = step.results[0]
            if n is None or layout.owner[n] != n or self.trace.producer[n] != i or not layout.c_contiguous[n]:
                continue  # (a buffer is row-major: later views and copies must see the strides they saw)
            outlives = self.death[n] >= n_steps
            same_copy = step.name == "astype" and _is_same_dtype_copy(step, layout, n)
            kernel = None
            if not same_copy:
                factory = FAST_KERNELS.get(step.name)
                kernel = factory(step, self.scratch) if factory is not None else None
                if kernel is None:
                    continue
            if same_copy or step.name in ELEMENTWISE:
                taken = self._dying_operand(i, step, (0,) if same_copy else kernel[1], n, buffer_of, outlives)
                if taken is not None:
                    m, b = taken
                    self.in_place[i] = m
                    if same_copy:
                        self.aliases[i] = m
                    else:
                        kernels[i] = kernel
                    if b is not None:
                        buffer_of[n] = b
                        free_at[b] = max(self.death[n], i)
                    continue
            if same_copy:
                continue  # a real copy: the primitive's
            kernels[i] = kernel
            if outlives:
                continue  # a fresh array each replay
            key = (layout.shape[n], layout.dtype[n])
            chosen = None
            for b in by_layout.get(key, ()):
                if free_at[b] < i:
                    chosen = b
                    break
            if chosen is None:
                chosen = len(buffers)
                buffers.append(key)
                by_layout.setdefault(key, []).append(chosen)
            free_at[chosen] = max(self.death[n], i)
            buffer_of[n] = chosen
        return kernels, buffers, buffer_of

    def _readers(self, live=False):
        """{owning array: indices of the steps that read it, through any of its views}; ``live``: only the
        steps the replay runs (not those ``_dead_calls`` leaves out)."""
        layout = self.layout
        readers = {}
        for j, step in enumerate(self.trace.steps):
            if live and j in self.dead:
                continue
            refs = []
            _walk(_arguments_of(step), refs.append)
            for ref in refs:
                n = ref.n if ref.__class__ is Value else ref.value if ref.__class__ is TensorArg else -1
                owner = layout.owner[n] if n >= 0 else -1
                if owner >= 0:
                    readers.setdefault(owner, set()).add(j)
        return readers

    def _fusions(self):
        """{step index: the value it stands for} for the relus fused into the bias add before them: where
        ``add(a, bias)`` (a replay kernel, ``bias`` a row-major vector along a's last dim) makes a value
        that only a ``relu`` reads, written over it, the add's kernel computes relu(a + bias) in one pass
        (``_bias_relu``: the two calls' numbers) and the relu's result is that value, no call at all."""
        fused = {}
        if _C is None:
            return fused
        steps, layout = self.trace.steps, self.layout
        readers = self._readers()
        for i, (kernel, _) in list(self.kernels.items()):
            step = steps[i]
            if step.name != "binary" or step.args[0] != "add" or kernel is not np.add:
                continue
            n, bias = step.results[0], step.args[2]
            shape = layout.shape[n]
            if bias.__class__ is Value:
                vector = layout.shape[bias.n] == shape[-1:] and layout.c_contiguous[bias.n]
            else:
                vector = bias.__class__ is np.ndarray and bias.shape == shape[-1:] and bias.flags.c_contiguous
            if not vector or layout.owner[n] != n or len(readers.get(n, ())) != 1:
                continue
            (j,) = readers[n]
            relu = steps[j]
            if relu.name != "unary" or relu.args[0] != "relu" or j not in self.kernels or self.in_place.get(j) != n:
                continue
            self.kernels[i] = (_bias_relu, (1, 2))
            del self.kernels[j]
            fused[j] = n
        return fused

    def _mean_classifier_losses(self):
        """{step index: the replay's action there} for the mean cross-entropy of float32 logits and its
        gradient as eager records them: ``classifier_loss``'s row losses summed and divided by the count
        of targets not ignored (``ne``, ``sum``, ``astype``), then ``classifier_loss_backward`` of 1 / that
        count (a ``full`` of 1, ``div``, ``expand``, ``contiguous``). Where the eleven calls follow each
        other (calls left out aside), each value but the loss and the gradient read only by the next of
        them, the first becomes one call of ``_mean_classifier_loss`` (("loss", loss, gradient)) and the
        others are left out (("skip",)): the same numbers without ten Python calls and their arrays (the
        MLP step's replay spent about 150 us on them, its caches cold after the products, 50 us hot)."""
        steps, layout, dead, producer = self.trace.steps, self.layout, self.dead, self.trace.producer
        readers = self._readers(live=True)
        escaping = set(self.trace.handed_over) | set(self.output_values())
        taken = set(self.keeps) | set(self.into) | set(self.direct) | set(self.fused) | set(self.scatter_sums)

        def call(ref, name, *args):
            """The live step making value ``ref`` where it is a call of ``name`` with arguments matching
            ``args`` (None: any), else None."""
            j = producer[ref.n] if ref.__class__ is Value else -1
            step = steps[j] if j >= 0 else None
            if step is None or step.__class__ is not Call or step.name != name or j in dead or j in taken:
                return None
            if step.kwargs or len(step.args) != len(args):
                return None
            return j if all(x is None or _same(x, y) for x, y in zip(args, step.args)) else None

        def readers_of(ref):
            """The live steps reading value ``ref``, which owns its array and no caller sees (else None)."""
            if ref.__class__ is not Value or ref.n in escaping or layout.owner[ref.n] != ref.n:
                return None
            return readers.get(ref.n, set())

        def only_reader(ref):
            found = readers_of(ref)
            return next(iter(found)) if found is not None and len(found) == 1 else None

        actions = {}
        for a, forward in enumerate(steps):
            if forward.__class__ is not Call or forward.name != "classifier_loss" or a in dead or a in taken:
                continue
            if forward.kwargs or len(forward.args) != 5 or forward.result_kind != "tuple" or None in forward.results:
                continue
            logits, target, weight, ignore, smoothing = forward.args
            losses, stats = (Value(n) for n in forward.results)
            if logits.__class__ is not Value or layout.dtype[logits.n] != np.float32:
                continue
            e, k = only_reader(losses), only_reader(stats)
            if e is None or k is None or steps[e].__class__ is not Call or steps[k].__class__ is not Call:
                continue
            total, gradient = Value(steps[e].results[0]), Value(steps[k].results[0])
            if call(total, "reduce", "sum", losses, None, False) != e:
                continue
            if call(gradient, "classifier_loss_backward", logits, stats, target, weight, None, ignore, smoothing) != k:
                continue
            f = only_reader(total)
            if f is None or steps[f].__class__ is not Call or steps[f].result_kind != "array":
                continue
            loss = Value(steps[f].results[0])
            if call(loss, "binary", "div", total, None, dt.float32) != f or steps[f].args[2].__class__ is not Value:
                continue
            count, dtype, rows = steps[f].args[2], steps[f].args[3], steps[k].args[4]
            d = call(count, "astype", None, dtype)
            c = d is not None and call(steps[d].args[0], "reduce", "sum", None, None, False)
            b = c and call(steps[c].args[1], "binary", "ne", target, ignore, dt.int64)
            j = b and call(rows, "contiguous", None)
            i = j and call(steps[j].args[0], "expand", None, None)
            h = i and call(steps[i].args[0], "binary", "div", None, count, None)
            g = h and call(steps[h].args[1], "full", None, None, dt.float32)
            if not g or steps[g].args[1] != 1 or layout.shape[steps[g].results[0]] != ():
                continue
            quotient, view = steps[i].args[0], steps[j].args[0]
            chain = {a, b, c, d, e, f, g, h, i, j, k}
            if not (
                readers_of(count) == {f, h}
                and readers_of(steps[d].args[0]) == {d}
                and readers_of(steps[c].args[1]) == {c}
                and readers_of(steps[h].args[1]) == {h}
                and readers_of(quotient) == {i, j}
                and view.n not in escaping
                and readers_of(rows) == {k}
                and layout.dtype[count.n] == np.float32
                and all(m in chain or m in dead for m in range(a, k + 1))
                and not {loss.n, gradient.n} & set(self.buffer_of)
            ):
                continue
            actions[a] = ("loss", loss.n, gradient.n, layout.shape[rows.n])
            actions.update(dict.fromkeys(chain - {a}, ("skip",)))
        return actions

    def _early_reductions(self):
        """{step index: the step right after which it runs} for the reductions a replay makes as soon as
        their operands are made instead of where eager made them: a ``reduce`` call (pure, its result a
        new array of the primitive's) whose operands are values the program makes, with nothing between
        their making and it but calls of pure primitives and gradient accumulations (which write no
        array a reduction reads). A bias gradient's column sums then read the output gradient while it
        is still in the cache, before the products that follow evict it (the MLP step's three: 70-100
        us, against about 25 us)."""
        steps, producer = self.trace.steps, self.trace.producer
        early = {}
        for i, step in enumerate(steps):
            if step.__class__ is not Call or step.name != "reduce" or i in self.dead or i in self.kernels:
                continue
            if i in self.mean_losses or step.result_kind != "array" or step.results[0] in self.buffer_of:
                continue
            refs = []
            _walk(_arguments_of(step), refs.append)
            if not refs or any(r.__class__ is not Value or producer[r.n] < 0 for r in refs):
                continue
            after = max(producer[r.n] for r in refs)
            if after + 1 >= i or after in early:
                continue
            between = steps[after + 1 : i]
            if all(
                s.__class__ is Accumulate or s.__class__ is Call and (s.name in _PURE or j in self.dead)
                for j, s in enumerate(between, after + 1)
            ):
                early[i] = after
        return early

    def _scatter_sums(self):
        """Sums of zero arrays each written in disjoint slices (the backward of slicing one array into
        pieces, q, k and v of one product for one: one zero array per piece, its slice written, the
        arrays added up) made one array written in every slice, the other zero fills and the sums
        left out.

        ``add(a, b)`` is fused where it writes over ``a`` and each operand is such a piece (a ``full``
        of +0, or its same-dtype copy made no copy, written only by ``index_put_`` of basic slices with
        values of the slice's shape and dtype; ``a`` may also be a sum fused before) that dies at the
        sum, that nothing else reads, of the sum's shape and dtype, with slices disjoint from the
        other's. Each slice is then written as ``values + 0.0``, what the sum gives there (x + 0 makes
        -0.0 +0.0), and the rest stays the fill's zero, the sum of zeros: the eager sum, bit for bit.

        Returns {step index: what the replay does there}: ("skip",) for the fill and copy of a ``b``,
        ("put", value, key) for a slice's write, ("sum", value) for a sum, where ``value`` is the piece
        whose array all of them write into, and ("bare",) for that piece's fill where the slices cover
        all of it (its zeros would never be read: the array is taken unfilled)."""
        trace, layout = self.trace, self.layout
        steps, producer = trace.steps, trace.producer
        readers = self._readers()
        outputs = set(trace.handed_over) | set(self.output_values())
        fused = {}  # a fused sum's value -> (the piece it writes into, coverage)
        fill_of = {}  # such a piece -> the step of its fill

        def dies_at(n, at):
            """Whether value ``n`` owns its array (row-major), which no caller sees and step ``at`` reads last."""
            return layout.owner[n] == n and n not in outputs and self.death[n] == at and layout.c_contiguous[n]

        def piece(n, at):
            """(fill and copy steps, [(index_put_ step, slice key)], coverage) of value ``n`` as a zero
            array written in slices and read last by step ``at``, or None."""
            if not dies_at(n, at):
                return None
            fills = [producer[n]]
            if fills[0] in self.aliases:  # a same-dtype copy, made no copy, of the fill
                zero = steps[fills[0]].args[0].n
                if readers.get(zero) != {fills[0]}:
                    return None
                fills.insert(0, producer[zero])
            fill = steps[fills[0]] if fills[0] >= 0 else None
            if fill.__class__ is not Call or fill.name != "full" or fills[0] not in self.kernels:
                return None
            value = fill.args[1]
            if value.__class__ not in (int, float) or value != 0 or math.copysign(1.0, value) < 0:
                return None
            coverage = np.zeros(layout.shape[n], bool)
            puts = []
            for j in sorted(readers.get(n, ())):
                if j == at:
                    continue
                put = steps[j]
                if put.__class__ is not Call or put.name != "index_put_" or len(put.args) != 4 or put.kwargs:
                    return None
                target, key, values, accumulate = put.args
                if target.__class__ is not Value or target.n != n or values.__class__ is not Value:
                    return None
                if accumulate is not False or key.__class__ not in (list, tuple):
                    return None
                if not all(k.__class__ is slice for k in key):
                    return None
                key = tuple(key)
                region = coverage[key]
                if region.shape != layout.shape[values.n] or layout.dtype[values.n] != layout.dtype[n] or region.any():
                    return None
                region[...] = True
                puts.append((j, key))
            return (fills, puts, coverage) if puts else None

        plan = {}
        for i, step in enumerate(steps):
            if step.__class__ is not Call or step.name != "binary" or step.args[0] != "add" or step.kwargs:
                continue
            n = step.results[0] if step.result_kind == "array" else None
            a, b = step.args[1], step.args[2]
            if n is None or a.__class__ is not Value or b.__class__ is not Value or self.in_place.get(i) != a.n:
                continue
            if not all(layout.shape[m] == layout.shape[n] and layout.dtype[m] == layout.dtype[n] for m in (a.n, b.n)):
                continue
            if a.n in fused:
                if readers.get(a.n) != {i} or not dies_at(a.n, i):
                    continue
                base, covered = fused[a.n]
                first = None
            else:
                first = piece(a.n, i)
                if first is None:
                    continue
                base, covered = a.n, first[2]
            second = piece(b.n, i)
            if second is None or (covered & second[2]).any():
                continue
            for j, key in (first[1] if first else []) + second[1]:
                plan[j] = ("put", base, key)
            for f in second[0]:
                plan[f] = ("skip",)
            plan[i] = ("sum", base)
            fused[n] = (base, covered | second[2])
            if first is not None:
                fill_of[base] = first[0][0]
        for base, covered in fused.values():
            if covered.all():  # every element is written: the first piece's zeros are never read
                plan[fill_of[base]] = ("bare",)
        return plan

    def _attention_destinations(self):
        """Where attention's results may be written at once instead of copied there after: ({attention step:
        its ``into``}, {step left out: None, or the array that a copy's result is instead}).

        Attention's output (batch, heads, L, E) goes on as a permuted view copied row-major, into a buffer
        (the heads side by side again), and its backward's dq, dk and dv the same way, each copy then
        viewed as a slice of the fused sum of q, k and v's gradient (``_scatter_sums``), written there +
        0.0. Where nothing else reads a result, its permute or that copy, the primitive writes the result
        into the copy's buffer seen through the inverse permutation, or into the slice itself (a product
        written through ``out=``, the same numbers as a new array's; a BLAS product's zeros are +0.0, so
        adding 0.0 changes none of them), and the permute, copy, view and slice write are left out; the
        copy's result is its buffer. Only where that buffer holds nothing else from the attention's step
        to the copy's (the fill of the sum's zeros, for a slice)."""
        into, direct = {}, {}
        steps, layout, producer = self.trace.steps, self.layout, self.trace.producer
        readers = self._readers(live=True)
        escaping = set(self.trace.handed_over) | set(self.output_values())

        def free(b, value, start, end):
            """Whether buffer ``b`` holds no value but ``value`` at any step from ``start`` to ``end``."""
            return all(
                m == value or producer[m] > end or self.death[m] < start for m, c in self.buffer_of.items() if c == b
            )

        def permuted_copy(r, others=False):
            """(the permute, the copy, the copy's result, the permutation) where a permute reads result
            ``r`` and only a row-major copy (a replay kernel) reads that, or None; nothing else reads
            ``r``, but with ``others`` calls of pure primitives that read ``r`` itself (no view of it) and
            write none of their operands (the forward's output its backward reads), which then read the
            copy's buffer through the permutation: the same numbers. (Only for float32 and float64
            results, which attention computes in their own dtype: its ``into`` takes those.)"""
            if r is None or layout.owner[r] != r or layout.dtype[r] not in _FLOATS or r in escaping:
                return None
            found = sorted(readers.get(r, ()))  # (the steps that read r or a view of it)
            permutes = [j for j in found if steps[j].__class__ is Call and steps[j].name == "permute"]
            if len(permutes) != 1 or _number(steps[permutes[0]].args[0]) != r:
                return None
            p = permutes[0]
            permuted = steps[p].results[0]
            copies = [j for j in found if j != p and _reads_value(steps[j], permuted)]
            if len(copies) != 1:
                return None
            c = copies[0]
            rest = [j for j in found if j not in (p, c)]
            if rest and not (others and all(_reads_only(steps[j], r, layout) for j in rest)):
                return None
            permute, copy = steps[p], steps[c]
            if copy.__class__ is not Call or copy.name != "contiguous" or c not in self.kernels:
                return None
            if _number(copy.args[0]) != permuted or layout.owner[copy.results[0]] != copy.results[0]:
                return None
            return p, c, copy.results[0], np.argsort(permute.args[1])

        def as_shape(array, shape):
            """A view of ``array`` with ``shape``, or None where it would take a copy."""
            view = array.view()
            try:
                view.shape = shape
            except AttributeError:
                return None
            return view

        def sum_slice(copied, i):
            """(the view, the slice write, the fused sum's slice seen in ``copied``'s shape) where only a view
            that one slice write of a fused sum reads reads copy ``copied``, and the sum's zeros are never
            written (its slices cover it: ``_scatter_sums``' bare fill), nor anything else into its buffer
            from attention's step ``i`` on; or None."""
            if len(readers.get(copied, ())) != 2:
                return None
            a, j = sorted(readers[copied])
            put, view = self.scatter_sums.get(j), steps[a]
            if put is None or put[0] != "put" or view.__class__ is not Call or view.name != "view":
                return None
            base, key = put[1], put[2]
            b, fill = self.buffer_of.get(base), producer[base]
            if fill in self.aliases:  # (a same-dtype copy, made no copy, of the fill)
                fill = producer[steps[fill].args[0].n]
            if _number(steps[j].args[2]) != view.results[0] or b is None or self.scatter_sums.get(fill) != ("bare",):
                return None
            if not free(b, base, i, producer[base]):
                return None
            region = as_shape(self.buffer_arrays[b][key], layout.shape[copied])
            return None if region is None else (a, j, region)

        for i, step in enumerate(steps):
            if step.__class__ is not Call or step.kwargs or i in self.dead:
                continue
            if step.name == "attention":
                found = permuted_copy(step.results[0], others=True)
                b = None if found is None else self.buffer_of.get(found[2])
                if b is None:
                    continue
                # the buffer holds the output from attention's step to its last reader's, and nothing writes
                # the copy (or the output) in place before then: the copy and the output are one array now
                end = max(found[1], self.death[step.results[0]])
                if not free(b, found[2], i, end):
                    continue
                if end > found[1] and (
                    self._written(found[2], found[1] + 1, end + 1) or self._written(step.results[0], i + 1, end + 1)
                ):
                    continue
                p, c, _, inverse = found
                dest = self.buffer_arrays[b].transpose(inverse)
                if dest.shape == layout.shape[step.results[0]]:
                    into[i] = dest
                    direct[p], direct[c] = None, self.buffer_arrays[b]
            elif step.name == "attention_backward":
                dests, skips = [], {}
                for r in step.results:
                    found = permuted_copy(r)
                    written = None if found is None else sum_slice(found[2], i)
                    dest = None
                    if written is not None and written[2].transpose(found[3]).shape == layout.shape[r]:
                        p, c, _, inverse = found
                        a, j, region = written
                        dest = region.transpose(inverse)
                        skips.update({p: None, c: None, a: None, j: None})
                    dests.append(dest)
                if any(d is not None for d in dests):
                    into[i] = tuple(dests)
                    direct.update(skips)
        return into, direct

    def _forward_keeps(self):
        """{step index: (keyword, array)} for forwards whose backward in this program reads what they
        computed, and those backwards: the forward writes it into the array (the primitive's
        ``keyword``) and the backward reads it from there instead of computing it again, the same
        numbers (the primitives' docstrings). Each pair has an array of its own, alive through the
        replay, in one float dtype. What pairs is declared with the forward's op (``ReplayKeep`` in
        adcuda/ops/registry.py: attention's probabilities, a normalisation's normalised input...), with
        the operands holding the forward's numbers (``_same_numbers``)."""
        steps, layout = self.trace.steps, self.layout
        keeps = {}

        def declared(step, index, find):
            """The ``ReplayKeep`` that ``find`` gives for a call step (by its primitive and, for the
            unary ones, its op), where the call may take its keyword."""
            if step.__class__ is not Call or step.kwargs:
                return None
            keep = find(step.name, step.args[0] if step.name in ("unary", "unary_backward") else None)
            if keep is None or keep.kernels_only and index not in self.kernels:
                return None
            return keep

        def forward_keep(name, op):
            found = lowering_of(name, op)
            return None if found is None else found.replay_keeps

        linked = {}  # (ReplayKeep, the forward's results its backward reads) -> the forward's step index
        unlinked = {}  # ReplayKeep -> indices of its forwards, in order
        for i, step in enumerate(steps):
            keep = declared(step, i, forward_keep)
            if keep is None:
                continue
            if keep.results is None:
                unlinked.setdefault(keep, []).append(i)
            elif step.result_kind == "tuple":
                linked[keep, tuple(step.results[r] for r in keep.results)] = i
        for j, step in enumerate(steps):
            keep = declared(step, j, replay_keep_of_backward)
            if keep is None or len(step.args) < keep.arity:
                continue
            if keep.results is None:
                candidates = reversed([i for i in unlinked.get(keep, ()) if i < j])
            else:
                i = linked.get((keep, tuple(_number(step.args[r]) for r in keep.reads)))
                candidates = () if i is None else (i,)
            for i in candidates:
                found = keep.pair(
                    functools.partial(self._same_numbers, i=i, j=j),
                    lambda value: layout.shape[value.n],
                    steps[i].args,
                    step.args,
                )
                if found is None:
                    continue
                shape, values = found
                if all(v.__class__ is Value for v in values):
                    dtype = layout.dtype[values[0].n]
                    if dtype in _FLOATS and all(layout.dtype[v.n] == dtype for v in values):
                        keeps[j] = keeps.setdefault(i, (keep.keyword, np.empty(shape, dtype)))
                break
        return keeps

    def _same_numbers(self, a, b, i, j):
        """Whether trace values ``a`` (read at step ``i``) and ``b`` (read at step ``j`` > ``i``) hold the same
        numbers: one value, or each a ``contiguous`` copy of one value (the backward's fresh copy of
        what the forward read) whose memory no step writes in between."""
        if a.__class__ is not Value or b.__class__ is not Value:
            return False
        steps, producer, owner_of = self.trace.steps, self.trace.producer, self.layout.owner
        sources, reads = [], []
        for value, at in ((a, i), (b, j)):
            n, made = value.n, producer[value.n]
            copy = steps[made] if made >= 0 else None
            if copy.__class__ is Call and copy.name == "contiguous" and copy.args[0].__class__ is Value:
                n, at = copy.args[0].n, made
            sources.append(n)
            reads.append(at)
        owner = owner_of[sources[0]]
        if sources[0] != sources[1] or owner < 0 or owner in self.trace.handed_over:
            return False
        return not self._written(owner, reads[0] + 1, reads[1])

    def _written(self, owner, start, end):
        """Whether a step from ``start`` to ``end`` (excluded) may write the memory of owning array
        ``owner``: a host step handed it (which may write what it is handed), or an in-place primitive."""
        steps, producer, owner_of = self.trace.steps, self.trace.producer, self.layout.owner
        for between in range(start, end):
            step = steps[between]
            if step.__class__ is HostStep:
                refs = []
                _walk(_arguments_of(step), refs.append)
                if any(r.__class__ is TensorArg and owner_of[r.value] == owner for r in refs):
                    return True
            elif step.__class__ is Call and step.name not in _HANDS_BACK:
                for n in step.results:
                    if n is not None and producer[n] != between and owner_of[n] == owner:
                        return True  # an in-place primitive's result: it wrote its operand
        return False

    def _dying_operand(self, i, step, positions, n, buffer_of, outlives):
        """(an operand of call ``i`` whose memory its result ``n`` may take, that memory's buffer or None
        for an array of the replay's own), or None (see ``_plan``)."""
        layout = self.layout
        producer = self.trace.producer
        for p in positions:
            arg = step.args[p]
            if arg.__class__ is not Value:
                continue
            m = arg.n
            owner = layout.owner[m]
            if owner < 0 or self.death[owner] != i or producer[owner] < 0:
                continue
            if not (layout.shape[m] == layout.shape[owner] == layout.shape[n] and layout.c_contiguous[m]):
                continue
            if not (layout.dtype[m] == layout.dtype[owner] == layout.dtype[n]):
                continue
            if owner in buffer_of:
                if not outlives:
                    return m, buffer_of[owner]
            elif self.trace.steps[producer[owner]].name in _FRESH:
                return m, None  # (not in a buffer: the primitive's own new array, or a kernel's fresh one)
        return None

    # ------------------------------------------------------------------ the replay function
    def _generate(self):
        trace = self.trace
        names = {}
        # the replay's own NumPy calls warn as the CPU backend's do not (overflow in a matmul, a NaN in
        # a ufunc): this filter keeps them as quiet as eager (installed
        # with each program, not once at import: a ``warnings.catch_warnings`` block around the first
        # capture would take it away at its end)
        warnings.filterwarnings("ignore", category=RuntimeWarning, module=_QUIET_MODULES)
        env = {"_tensor": _tensor, "_accumulate": _accumulate, "_empty": np.empty, "__name__": REPLAY_MODULE}

        def bind(obj, prefix):
            key = (prefix, id(obj))
            name = names.get(key)
            if name is None:
                name = names[key] = f"{prefix}{len(names)}"
                env[name] = obj
            return name

        def expr(value):
            cls = value.__class__
            if cls is Value:
                return f"v{value.n}"
            if cls is GradOf:
                return f"{bind(trace.leaves[value.leaf], 'leaf')}.grad._data"
            if cls is Draw:
                return f"d{value.draw}[{value.index}]"
            if cls is TensorArg:
                return f"_tensor(v{value.value}, {bind(value.device, 'c')}, {value.requires_grad})"
            if cls is HostData:
                return f"{bind(value.array, 'c')}.copy()"
            if cls is list:
                return "[" + ", ".join(expr(v) for v in value) + "]"
            if cls is tuple:
                return "(" + "".join(expr(v) + ", " for v in value) + ")"
            if cls is dict:
                return "{" + ", ".join(f"{k!r}: {expr(v)}" for k, v in value.items()) + "}"
            if value is None or cls in (bool, int, str):
                return repr(value)
            return bind(value, "c")

        def call_args(args, kwargs):
            parts = [expr(a) for a in args] + [f"{k}={expr(v)}" for k, v in kwargs.items()]
            return ", ".join(parts)

        body = []
        ranges = []  # the profiler range of each line of ``body``: what a profiled replay shows inside it
        lines = self.lines
        draws = 0
        buffers = self.buffer_arrays
        held = {}  # value -> the array it is on every replay (a buffer, a view of one or of a persistent array)
        escaping = set(trace.handed_over) | set(self.output_values())  # (arrays made anew each replay)
        moved = {}  # step -> the reductions run right after it (_early_reductions)
        for i, after in sorted(self.early.items()):
            moved.setdefault(after, []).append(i)
        order = [j for i in range(len(trace.steps)) if i not in self.early for j in (i, *moved.get(i, ()))]
        for i in order:
            step = trace.steps[i]
            cls = step.__class__
            if i in self.dead:
                lines.append(self._describe(i, step) + f"  (left out: {self.dead[i]})")
                continue
            if i in self.direct:
                target = self.direct[i]
                if target is None:
                    lines.append(self._describe(i, step) + "  (left out: attention wrote its result there)")
                    continue
                held[step.results[0]] = target
                body.append(f"v{step.results[0]} = {bind(target, 'c')}")
                lines.append(self._describe(i, step) + "  (no copy: attention wrote its result there)")
                ranges.append(_range_name(step))
                continue
            ranges.append(_range_name(step))
            mean_loss = self.mean_losses.get(i)
            if mean_loss is not None:
                if mean_loss[0] == "loss":
                    body.append(
                        f"v{mean_loss[1]}, v{mean_loss[2]} = "
                        f"{bind(_mean_classifier_loss, 'k')}({call_args(step.args, step.kwargs)}, {mean_loss[3]!r})"
                    )
                    last = self.trace.producer[mean_loss[2]]
                    note = f"  (with steps to {last}: one call making %{mean_loss[1]} and %{mean_loss[2]})"
                else:
                    body.append("pass")
                    note = "  (left out: a step of the mean cross-entropy made in one call)"
                lines.append(self._describe(i, step) + note)
                continue
            fusion = self.scatter_sums.get(i)
            if fusion is not None and fusion[0] != "bare":
                if fusion[0] == "put":  # (x + 0.0: the fused sum's value there)
                    key = bind(fusion[2], "c")
                    body.append(f"{bind(np.add, 'k')}({expr(step.args[2])}, 0.0, out=v{fusion[1]}[{key}])")
                elif fusion[0] == "sum":
                    body.append(f"v{step.results[0]} = v{fusion[1]}")
                else:
                    body.append("pass")
                lines.append(self._describe(i, step) + _FUSION_NOTES[fusion[0]].format(*fusion[1:2]))
                continue
            if cls is Call:
                target = self._targets(step)
                view = _view_once(step, held, self.layout, escaping)
                if i in self.fused:
                    code = f"v{self.fused[i]}"
                    if self.fused[i] in held:
                        held[step.results[0]] = held[self.fused[i]]
                elif i in self.aliases:
                    code = f"v{self.aliases[i]}"
                elif i in self.views:
                    code = f"v{self.views[i]}"
                elif i in self.kernels:
                    kernel, positions = self.kernels[i]
                    first = last = ""  # a partial's arguments, written into the call (a partial costs more)
                    if kernel.__class__ is functools.partial:
                        first = "".join(expr(a) + ", " for a in kernel.args)
                        last = "".join(f", {k}={bind(v, 'c')}" for k, v in kernel.keywords.items())
                        kernel = kernel.func
                    fn = bind(kernel, "k")
                    n = step.results[0]
                    if n in self.buffer_of:
                        out = f"buf{self.buffer_of[n]}"
                        held[n] = buffers[self.buffer_of[n]]  # (a kernel returns its out)
                    elif i in self.in_place:
                        out = f"v{self.in_place[i]}"
                    else:
                        out = f"_empty({self.layout.shape[n]!r}, {bind(self.layout.dtype[n], 'c')})"
                    operands = "".join(expr(step.args[p]) + ", " for p in positions)
                    code = f"{fn}({first}{operands}out={out}{last})"
                    if fusion is not None:  # a fill every element of which a fused sum writes
                        code = out
                elif view is not None:
                    held[step.results[0]] = view
                    code = bind(view, "c")
                else:
                    primitive = bind(getattr(cpu, step.name), f"p_{step.name}_")
                    code = f"{primitive}({call_args(step.args, step.kwargs)})"
                note = "  (not filled: a fused sum writes all of it)" if fusion else ""
                if view is not None:
                    note = "  (a view made once, of an array that is the same on every replay)"
                if i in self.keeps:  # what a forward keeps for its backward (_forward_keeps)
                    keyword, kept = self.keeps[i]
                    code = code[:-1] + f", {keyword}={bind(kept, 'c')})"
                    note = f"  ({keyword} {'read' if step.name.endswith('backward') else 'kept'} in place)"
                if i in self.into:  # (attention's results written where their copies were going)
                    code = code[:-1] + f", into={bind(self.into[i], 'c')})"
                    note += "  (results written into their copies' buffers)"
                if i in self.early:
                    note += f"  (run right after step {self.early[i]}, its operands in the cache)"
                body.append(f"{target} = {code}" if target else code)
                lines.append(self._describe(i, step) + note)
            elif cls is HostStep:
                fast = host_step_replay(step, self.scratch)
                body.append(f"{bind(fast[0] if fast else step.fn, 'host')}({call_args(step.args, step.kwargs)})")
                lines.append(f"{i:4d}  host step {step.name}" + (f" (replayed by {fast[1]})" if fast else ""))
            elif cls is Accumulate:
                alias = self._may_alias(i, step)
                body.append(
                    f"_accumulate({bind(trace.leaves[step.leaf], 'leaf')}, {expr(step.grad)}, "
                    f"{bind(step.device, 'c')}, {alias})"
                )
                lines.append(f"{i:4d}  accumulate into leaf {step.leaf}'s .grad from {_ref(step.grad)}")
            elif cls is Drawn:
                body.append(f"d{draws} = {bind(step.generator, 'gen')}.next_offset({int(step.numel)})")
                lines.append(f"{i:4d}  draw {draws}: {int(step.numel)} values from the generator")
                draws += 1
        outputs = [
            f"v{x}" if kind == "value" else bind(x, "c") if kind == "array" else "None" for kind, x in self.outputs[1]
        ]
        params = ", ".join(f"v{n}" for n in trace.inputs)
        for b, array in enumerate(buffers):
            env[f"buf{b}"] = array
        returns = f"    return ({''.join(o + ', ' for o in outputs)})\n"
        self.source = f"def replay({params}):\n" + "".join(f"    {line}\n" for line in body) + returns
        # the same replay with each step in a profiler/NVTX range of its own (made on first need)
        env["_begin"], env["_end"] = begin_range, end_range
        self._observed_source = (
            f"def replay_observed({params}):\n"
            + "".join(
                f"    _r = _begin({name!r})\n    try:\n        {line}\n    finally:\n"
                "        if _r is not None:\n            _end(_r)\n"
                for line, name in zip(body, ranges)
            )
            + returns
        )
        self._env = env
        exec(compile(self.source, f"<adcuda.compile replay of {self.name}>", "exec"), env)
        return env["replay"]

    def run(self, arrays):
        """Replay with ``arrays`` as the inputs. While a profiler or ``emit_nvtx`` observes, the replay is
        one range with each step in a range of its own inside it; otherwise it is the bare replay. The
        replay calls primitives outside any op's entry, so it quiets NumPy's floating-point warnings
        itself, as every op's entry does (adcuda/backends/float_errors.py): an overflowing step under a
        GradScaler says nothing eager would not."""
        token = float_errors.quiet(float_errors.QUIET)
        try:
            if profiler_state.profilers or profiler_state.nvtx_emitter is not None:
                observed = self._env.get("replay_observed")
                if observed is None:
                    filename = f"<adcuda.compile profiled replay of {self.name}>"
                    exec(compile(self._observed_source, filename, "exec"), self._env)
                    observed = self._env["replay_observed"]
                with record_function(self.range_name):
                    return observed(*arrays)
            return self.replay(*arrays)
        finally:
            float_errors.restore(token)

    def _targets(self, step):
        if step.result_kind == "array":
            n = step.results[0]
            return f"v{n}" if n is not None else ""
        if step.result_kind == "tuple":
            return ", ".join(f"v{n}" if n is not None else "_" for n in step.results) + ","
        return ""

    def _may_alias(self, i, step):
        """Whether the gradient array may become ``.grad`` itself, as eager takes an exclusive gradient:
        no later step reads it and no other accumulation or host step takes it."""
        if step.grad.__class__ is not Value:
            return False
        n = step.grad.n
        owner = self.layout.owner[n]
        if owner != n or n in self.output_values():
            return False
        for j, other in enumerate(self.trace.steps):
            if j == i or (j < i and other.__class__ is Call):
                continue
            refs = []
            _walk(_arguments_of(other), refs.append)
            for r in refs:
                read = r.n if r.__class__ is Value else r.value if r.__class__ is TensorArg else None
                if read is not None and self.layout.owner[read] == owner:
                    return False
        return True

    def _describe(self, i, step):
        args = ", ".join(_ref(a) for a in step.args)
        out = ""
        if step.result_kind == "array" and step.results[0] is not None:
            n = step.results[0]
            out = f"%{n} = "
            shape = "x".join(map(str, self.layout.shape[n])) or "scalar"
            where = f", buffer {self.buffer_of[n]}" if n in self.buffer_of else ""
            if i in self.fused:
                where += f", computed by step {self.trace.producer[self.fused[i]]}'s kernel: %{self.fused[i]} itself"
            elif i in self.aliases:
                where += f", no copy: the memory of %{self.aliases[i]}"
            elif i in self.views:
                where += f", no copy: attention reads the view %{self.views[i]}"
            elif i in self.in_place:
                where += f" in place of %{self.in_place[i]}"
            return f"{i:4d}  {out}{step.name}({args})  [{shape} {self.layout.dtype[n]}{where}]"
        if step.result_kind == "tuple":
            out = ", ".join(f"%{n}" if n is not None else "_" for n in step.results) + " = "
        return f"{i:4d}  {out}{step.name}({args})"

    # ------------------------------------------------------------------ inspection
    def memory(self):
        """(bytes in preallocated buffers and kernels' scratch arrays, peak bytes of arrays alive at once
        during a replay)."""
        planned = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in self.buffers)
        planned += self.scratch.nbytes + sum({id(a): a.nbytes for _, a in self.keeps.values()}.values())
        layout = self.layout
        producer = self.trace.producer
        # a result written over a dying operand's own array (not a buffer) allocates nothing: that array
        # lives on as the result, to the result's death
        memory_of, end = {}, {}
        for i, m in sorted(self.in_place.items()):
            n = self.trace.steps[i].results[0]
            if n not in self.buffer_of:
                memory_of[n] = memory_of.get(layout.owner[m], layout.owner[m])
        for n, held in memory_of.items():
            end[held] = max(end.get(held, -1), self.death[n])
        events = []
        for n, owner in enumerate(layout.owner):
            if owner != n or producer[n] < 0 or n in self.buffer_of or n in memory_of or producer[n] in self.dead:
                continue
            dies = max(self.death[n], end.get(n, -1), producer[n])
            events.append((producer[n], layout.nbytes[n]))
            events.append((dies + 0.5, -layout.nbytes[n]))
        live = peak = planned
        for _, change in sorted(events):
            live += change
            peak = max(peak, live)
        return planned, peak

    def __str__(self):
        steps = self.trace.steps
        calls = sum(1 for s in steps if s.__class__ is Call)
        hosts = sum(1 for s in steps if s.__class__ is HostStep)
        accs = sum(1 for s in steps if s.__class__ is Accumulate)
        draws = sum(1 for s in steps if s.__class__ is Drawn)
        planned, peak = self.memory()
        head = (
            f"adcuda.compile program of {self.name}: {len(steps)} steps ({calls} primitive calls, "
            f"{len(self.dead)} left out as no-ops or unread, {len(self.kernels)} by replay kernels: "
            f"{len(self.buffer_of)} results in preallocated buffers, "
            f"{len(self.in_place)} written over a dying operand, {len(self.aliases)} copies dropped; "
            f"{hosts} host steps; {accs} gradient accumulations; {draws} random draws)\n"
            f"inputs: {', '.join(f'%{n}' for n in self.trace.inputs) or 'none'}; outputs: "
            f"{', '.join(f'%{n}' for n in self.output_values()) or 'none'}\n"
            f"buffers: {len(self.buffers)} preallocated and {len(self.scratch.arrays)} scratch, {planned} bytes; "
            f"peak memory of a replay: {peak} bytes\n"
        )
        return head + "\n".join(self.lines)


class Scratch:
    """A program's scratch arrays by (shape, dtype, k), the ``adcuda.backends.seam.Scratch`` its primitive
    calls and optimizer steps take their temporaries from: a replay runs one call at a time, and each
    is done with its scratch when it returns, so they share them. ``scratch(shape, dtype, k)`` is the
    k-th array of that layout, made at its first use."""

    def __init__(self):
        self.arrays = {}

    def __call__(self, shape, dtype, k=0):
        # (called once or more per primitive call of a replay: the key is the arguments as given, an
        # array's own ``shape`` and ``dtype``)
        try:
            return self.arrays[shape, dtype, k]
        except KeyError:
            a = self.arrays[shape, dtype, k] = np.empty(shape, dtype)
            return a

    @property
    def nbytes(self):
        """Bytes of the scratch arrays made so far (optimizer steps make theirs at the first replay)."""
        return sum(a.nbytes for a in self.arrays.values())


# how a printed program shows the steps of a fused sum of zero arrays written in slices (_scatter_sums)
_FUSION_NOTES = {
    "skip": "  (left out: a zero piece of a fused sum)",
    "put": "  (fused sum: written + 0.0 into %{0})",
    "sum": "  (fused sum: the array of %{0})",
}


def _same(a, b):
    """Whether two recorded arguments are the same: one value, one array, equal constants of one type."""
    if a.__class__ is not b.__class__:
        return False
    if a.__class__ is Value:
        return a.n == b.n
    if a.__class__ is np.ndarray:
        return a is b
    if a.__class__ in (list, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _mean_classifier_loss(logits, target, weight, ignore_index, smoothing, rows_shape):
    """(the mean cross-entropy, its gradient w.r.t. the logits) as the eleven calls
    ``Program._mean_classifier_losses`` stands for make them: the primitives of the two losses, the sum
    and the divisions; the count of targets not ignored made float32, and its reciprocal's copies
    (``rows_shape``: what the expand made), by the NumPy operations the ``ne``/``sum``/``astype`` and
    ``expand``/``contiguous`` calls are for int64 targets."""
    losses, stats = cpu.classifier_loss(logits, target, weight, ignore_index, smoothing)
    count = np.array(np.count_nonzero(np.not_equal(target, ignore_index)), np.int64).astype(np.float32)
    loss = cpu.binary("div", cpu.reduce("sum", losses, None, False), count, dt.float32)
    rows = np.full(rows_shape, cpu.binary("div", _ONE, count, dt.float32), np.float32)
    return loss, cpu.classifier_loss_backward(logits, stats, target, weight, rows, ignore_index, smoothing)


_ONE = np.ones((), np.float32)  # (the full([], 1) whose quotient by the count is each row's gradient)


def _range_name(step):
    """A step's profiler range in a profiled replay: the primitive (with its op for the elementwise
    families), the host step, the accumulation or the draw."""
    cls = step.__class__
    if cls is Call:
        op = step.args[0] if step.args and step.args[0].__class__ is str else None
        return f"{step.name}.{op}" if op else step.name
    if cls is HostStep:
        return step.name
    if cls is Accumulate:
        return "accumulate_grad"
    return "random_draw"


# primitives whose result is a view of their first operand, made from it and constant arguments alone
_VIEWS = frozenset({"view", "permute", "expand", "slice"})


def _view_once(step, held, layout, escaping):
    """The view call ``step`` makes, made now, where its operand is the same array on every replay (``held``:
    a buffer or a view of one; a persistent array) and its other arguments are constants: the same
    view of the same memory as the call would make, which a replay then need not make. None elsewhere
    (and where the view made is not a view of the operand in the captured layout). Not for a view
    that leaves the program (``escaping``: an output, what a host step or ``.grad`` receives): each
    replay gives those an array object of their own, as eager does."""
    if step.name not in _VIEWS or step.result_kind != "array" or step.kwargs or step.results[0] in (None, *escaping):
        return None
    source = step.args[0]
    array = held.get(source.n) if source.__class__ is Value else source if source.__class__ is np.ndarray else None
    refs = []
    _walk(step.args[1:], refs.append)
    if array is None or refs:
        return None
    view = getattr(cpu, step.name)(array, *step.args[1:])
    n = step.results[0]
    if view.__class__ is not np.ndarray or view.base is None or not np.may_share_memory(view, array):
        return None
    return view if view.shape == layout.shape[n] and view.strides == layout.strides[n] else None


def _is_same_dtype_copy(step, layout, n):
    """Whether call ``step`` (an ``astype``) copies a trace array into the dtype it already has."""
    a = step.args[0] if step.args else None
    return a.__class__ is Value and layout.dtype[a.n] == layout.dtype[n]


def _reads_value(step, n):
    """Whether ``step`` takes value ``n`` itself among its arguments."""
    refs = []
    _walk(_arguments_of(step), refs.append)
    return any(ref.__class__ is Value and ref.n == n for ref in refs)


def _reads_only(step, n, layout):
    """Whether ``step`` is a call of a pure primitive (no view: it writes none of its operands and returns
    none of them) that reads value ``n`` itself and no other view of ``n``'s memory."""
    if step.__class__ is not Call or step.name not in _PURE or step.name in _VIEWS or step.name in _HANDS_BACK:
        return False
    refs = []
    _walk(_arguments_of(step), refs.append)
    owner = layout.owner[n]
    for ref in refs:
        m = ref.n if ref.__class__ is Value else ref.value if ref.__class__ is TensorArg else None
        if m is not None and m != n and layout.owner[m] == owner:
            return False
    return _reads_value(step, n)


def _number(ref):
    """The value number a reference names (None for anything but a ``Value``)."""
    return ref.n if ref.__class__ is Value else None


def _arguments_of(step):
    if step.__class__ in (Call, HostStep):
        return (step.args, step.kwargs)
    if step.__class__ is Accumulate:
        return step.grad
    return ()


def _ref(value):
    cls = value.__class__
    if cls is Value:
        return f"%{value.n}"
    if cls is GradOf:
        return f"leaf{value.leaf}.grad"
    if cls is Draw:
        return f"draw{value.draw}.{'seed' if value.index == 0 else 'offset'}"
    if cls is np.ndarray:
        return f"<persistent {'x'.join(map(str, value.shape)) or 'scalar'} {value.dtype}>"
    if cls in (list, tuple):
        return "[" + ", ".join(_ref(v) for v in value) + "]"
    return repr(value)


def _tensor(array, device, requires_grad):
    t = Tensor._make(array, device)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _accumulate(leaf, array, device, alias):
    """A leaf's gradient accumulation as eager does it: ``.grad`` set (to the gradient array itself when
    nothing else reads it, else a copy) or added to."""
    grad = leaf.grad
    if grad is None:
        bk = primitives_on(device)
        leaf.grad = Tensor._make(bk.contiguous(array) if alias else bk.astype(array, bk.dtype_of(array)), device)
    else:
        add_into(grad, Tensor._make(array, device))
