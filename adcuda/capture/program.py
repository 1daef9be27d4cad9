"""A replay program built from a ``Trace``: a flat list of primitive calls over numbered arrays, a
memory plan, and the Python function that replays it.

The memory plan: each array's lifetime is the span from the step that makes it to the last step
that reads it or a view of it (views extend the life of the array that owns the memory). An array
made by a kernel that can write into a given buffer (``FAST_KERNELS``: elementwise ufuncs and 2-D
matrix products on the CPU) gets a preallocated buffer, reused by later arrays of the same shape and
dtype once its occupant is dead; every other array is made by its primitive as in eager. Outputs,
arrays a host step or a gradient accumulation received, and arrays that outlived the captured run
never get a shared buffer, so nothing the caller or the library can still see is overwritten.
Parameters, their gradients and optimizer state are the library's own tensors, read and updated in
place, so Module and Optimizer objects stay the truth.

The replay itself is one generated Python function (``replay``), a straight line of calls on local
variables with every primitive, constant and buffer prebound: no dispatch, no autograd, no argument
parsing. Host steps are calls of the library functions they recorded; accumulation sets or adds to
``.grad`` as eager does; draws take the next seed and offset from their generator.
"""

import warnings

import numpy as np

from ..backends import cpu
from ..backends.cpu.elementwise import BINARY_OPS, UNARY_OPS
from ..tensor import Tensor, primitives_on
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
warnings.filterwarnings("ignore", category=RuntimeWarning, module=REPLAY_MODULE)

_MAY_WARN = frozenset({"div", "pow", "floor_divide", "remainder"})  # binary ops whose fast path the CPU skips
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _binary_kernel(call):
    """``binary(op, a, b, dtype)`` into a buffer, as the CPU primitive's fast path computes it (operands
    already in the result dtype, one ufunc call)."""
    op, a, b, dtype = (call.arrays_in + (None,) * 4)[:4]
    if op in _MAY_WARN or op not in BINARY_OPS or not isinstance(a, ArraySpec) or dtype is None:
        return None
    work = dtype.numpy
    if work is None or work is np.float16 or a.dtype != work:
        return None
    if isinstance(b, ArraySpec) and b.dtype == work or b.__class__ is float and work not in (np.int32, np.int64):
        return BINARY_OPS[op], (1, 2)
    return None


def _unary_kernel(call):
    """``unary(op, a)`` of a float32/float64 array where the primitive is one ufunc call (or relu's)."""
    op, a = (call.arrays_in + (None, None))[:2]
    if not isinstance(a, ArraySpec) or a.dtype not in _FLOATS:
        return None
    if op == "relu":
        zero = np.zeros((), a.dtype)
        return (lambda x, out: np.maximum(x, zero, out=out)), (1,)
    fn = UNARY_OPS.get(op)
    return (fn, (1,)) if isinstance(fn, np.ufunc) else None


def _unary_backward_kernel(call):
    """relu's gradient ``g * (x > 0)`` with the mask in a scratch array of its own (no allocation)."""
    op, x, y, g = (call.arrays_in + (None,) * 4)[:4]
    if op != "relu" or not isinstance(x, ArraySpec) or not isinstance(g, ArraySpec) or x.shape != g.shape:
        return None
    if x.dtype not in _FLOATS or g.dtype != x.dtype:
        return None
    mask = np.empty(x.shape, bool)

    def relu_backward(x, g, out):
        return np.multiply(g, np.greater(x, 0, out=mask), out=out)

    return relu_backward, (1, 3)


def _matmul_kernel(call):
    """``matmul(a, b)`` of two float32/float64 matrices (the CPU primitive's ``a.dot(b)``)."""
    args = call.arrays_in
    if len(args) != 2 or call.kwargs:
        return None
    a, b = args
    if not (isinstance(a, ArraySpec) and isinstance(b, ArraySpec)) or len(a.shape) != 2 or len(b.shape) != 2:
        return None
    if a.dtype != b.dtype or a.dtype not in _FLOATS:
        return None
    return np.dot, (0, 1)


# primitive -> a function of the recorded call giving (a kernel that writes the call's result into its
# ``out`` argument, the positions of the call's arguments it takes), or None where it cannot
FAST_KERNELS = {
    "binary": _binary_kernel,
    "unary": _unary_kernel,
    "unary_backward": _unary_backward_kernel,
    "matmul": _matmul_kernel,
}


class Layout:
    """Shape, dtype, size and owning array (the value whose memory it is; -1 for memory the program
    does not own) of each array of a trace, read before the trace lets its arrays go."""

    def __init__(self, trace):
        ids = {id(a): n for n, a in enumerate(trace.arrays)}
        self.shape, self.dtype, self.nbytes, self.owner, self.c_contiguous = [], [], [], [], []
        for n, a in enumerate(trace.arrays):
            self.shape.append(tuple(a.shape))
            self.dtype.append(a.dtype)
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
        self.death = self._lifetimes(n_steps)
        self.kernels, self.buffers, self.buffer_of = self._plan(n_steps)
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
    def _lifetimes(self, n_steps):
        """Index of the last step that reads each owning array (through any of its views); n_steps
        for arrays that must outlive the replay."""
        layout = self.layout
        death = [-1] * len(layout.owner)
        forever = set(self.trace.handed_over) | set(self.output_values())

        for i, step in enumerate(self.trace.steps):
            refs = []
            _walk(_arguments_of(step), refs.append)
            for ref in refs:
                n = ref.n if ref.__class__ is Value else ref.value if ref.__class__ is TensorArg else -1
                owner = layout.owner[n] if n >= 0 else -1
                if owner >= 0:
                    death[owner] = max(death[owner], i)
        for n in forever:
            owner = layout.owner[n]
            if owner >= 0:
                death[owner] = n_steps
        return death

    def output_values(self):
        return [n for kind, n in self.outputs[1] if kind == "value"]

    def _plan(self, n_steps):
        """Which calls write into a preallocated buffer, and which buffer: greedy reuse of a dead
        occupant's buffer of the same shape and dtype."""
        layout = self.layout
        kernels = {}
        buffers = []  # (shape, dtype)
        buffer_of = {}  # value number -> buffer index
        free_at = {}  # buffer index -> the step after which it is free
        by_layout = {}  # (shape, dtype) -> buffer indices
        for i, step in enumerate(self.trace.steps):
            if step.__class__ is not Call or step.result_kind != "array" or step.name not in FAST_KERNELS:
                continue
            n = step.results[0]
            if n is None or layout.owner[n] != n or self.death[n] >= n_steps or self.trace.producer[n] != i:
                continue
            if not layout.c_contiguous[n]:
                continue  # a buffer is row-major: later views and copies must see the strides they saw
            kernel = FAST_KERNELS[step.name](step)
            if kernel is None:
                continue
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
            kernels[i] = kernel
            buffer_of[n] = chosen
        return kernels, buffers, buffer_of

    # ------------------------------------------------------------------ the replay function
    def _generate(self):
        trace = self.trace
        names = {}
        # the replay's NumPy calls warn as the CPU backend's do not (overflow in a matmul, a NaN in a ufunc):
        # the filter below keeps them as quiet as eager
        env = {"_tensor": _tensor, "_accumulate": _accumulate, "__name__": REPLAY_MODULE}

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
        lines = self.lines
        draws = 0
        for i, step in enumerate(trace.steps):
            cls = step.__class__
            if cls is Call:
                target = self._targets(step)
                if i in self.kernels:
                    kernel, positions = self.kernels[i]
                    fn = bind(kernel, "k")
                    buf = f"buf{self.buffer_of[step.results[0]]}"
                    code = f"{fn}({', '.join(expr(step.args[p]) for p in positions)}, out={buf})"
                else:
                    primitive = bind(getattr(cpu, step.name), f"p_{step.name}_")
                    code = f"{primitive}({call_args(step.args, step.kwargs)})"
                body.append(f"{target} = {code}" if target else code)
                lines.append(self._describe(i, step))
            elif cls is HostStep:
                body.append(f"{bind(step.fn, 'host')}({call_args(step.args, step.kwargs)})")
                lines.append(f"{i:4d}  host step {step.name}")
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
        for b, (shape, dtype) in enumerate(self.buffers):
            env[f"buf{b}"] = np.empty(shape, dtype)
        source = (
            f"def replay({params}):\n"
            + "".join(f"    {line}\n" for line in body)
            + f"    return ({''.join(o + ', ' for o in outputs)})\n"
        )
        self.source = source
        exec(compile(source, f"<adcuda.compile replay of {self.name}>", "exec"), env)
        return env["replay"]

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
            return f"{i:4d}  {out}{step.name}({args})  [{shape} {self.layout.dtype[n]}{where}]"
        if step.result_kind == "tuple":
            out = ", ".join(f"%{n}" if n is not None else "_" for n in step.results) + " = "
        return f"{i:4d}  {out}{step.name}({args})"

    # ------------------------------------------------------------------ inspection
    def memory(self):
        """(bytes in preallocated buffers, peak bytes of arrays alive at once during a replay)."""
        planned = sum(int(np.prod(shape)) * np.dtype(dtype).itemsize for shape, dtype in self.buffers)
        layout = self.layout
        events = []
        for n, owner in enumerate(layout.owner):
            if owner != n or self.trace.producer[n] < 0 or n in self.buffer_of:
                continue
            events.append((self.trace.producer[n], layout.nbytes[n]))
            events.append((max(self.death[n], self.trace.producer[n]) + 0.5, -layout.nbytes[n]))
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
            f"{len(self.kernels)} into preallocated buffers; {hosts} host steps; {accs} gradient "
            f"accumulations; {draws} random draws)\n"
            f"inputs: {', '.join(f'%{n}' for n in self.trace.inputs) or 'none'}; outputs: "
            f"{', '.join(f'%{n}' for n in self.output_values()) or 'none'}\n"
            f"buffers: {len(self.buffers)} preallocated, {planned} bytes; peak memory of a replay: {peak} bytes\n"
        )
        return head + "\n".join(self.lines)


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
