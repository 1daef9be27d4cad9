"""``adcuda.compile`` on CUDA tensors: the recorded trace replayed through CUDA graphs.

The first call of a signature runs eagerly under the recorder, as on the CPU (it also warms up what
CUDA initialises lazily). The next call captures: it runs the trace's steps itself, each run of
consecutive primitive calls (and the random draws among them) captured as one CUDA graph
(``adcuda.cuda.CUDAGraph``, all of a program's graphs sharing one private pool) and replayed at once;
later calls replay those graphs. What a graph cannot hold runs as Python between the segments, on every
call:

- host steps (optimizer and scheduler steps, ``zero_grad``, GradScaler): they read Python state (step
  counts, learning rates, the scaler's skip decision) that a graph would freeze, and they update the
  library's own tensors in place, so Module and Optimizer objects stay the truth, as on the CPU;
- gradient accumulation into ``.grad``: the first accumulation of a leaf binds ``.grad`` to an array the
  program keeps (so graphs that read the gradient later find it at the address they captured); later
  ones copy into it, or add when ``.grad`` already holds a gradient, as eager does;
- uploads of host data the function makes (``adcuda.tensor(...)`` inside it): made afresh and copied
  into the array the graphs read.

Inputs are copied into the program's own input arrays; outputs are copied out of the graphs' memory
(the next replay overwrites it). Random ops draw from the default generator on every replay, the same
numbers eager draws (graphs.py). A gradient a graph reads that is not the array it captured (``.grad``
set by the caller) is copied in before the segment and back after it.
"""

import warnings

from ..backends import backend_for
from ..cuda.graphs import CUDAGraph, graph, graph_pool_handle
from ..tensor import Tensor
from .recorder import Accumulate, Call, Draw, Drawn, GradOf, HostData, HostStep, TensorArg, Value, add_into


class CudaGraphProgram:
    """The CUDA-graph replay of one captured signature (see the module docstring)."""

    def __init__(self, trace, outputs, name, device):
        self.name = name
        self.range_name = f"adcuda.compile CUDA graph replay: {name}"
        self.replays = 0
        self.trace = trace
        self.outputs = outputs
        self.device = device
        self.backend = backend_for(device)
        self.guards = [(t, a) for a, t in trace.externals.values() if t is not None]
        self.modes = list(trace.modules.values())
        self.segments = _segments(trace.steps)
        self.graphs = None  # segment index -> CUDAGraph, from the first replay on
        self.env = {}  # value number -> the array the graphs read or write
        self.inputs = None  # the program's own input arrays
        self.static_grads = {}  # leaf index -> the array its first accumulation binds .grad to
        self.captured_grads = {}  # segment index -> [(leaf index, array the graph read)]

    def holds(self):
        """Whether the program may replay: every persistent tensor it reads still holds the array it
        captured, and every module is in the mode it ran in."""
        for t, a in self.guards:
            if t._data is not a:
                return False
        return all(module.training == training for module, training in self.modes)

    # ------------------------------------------------------------------ replay
    def replay(self, *arrays):
        if self.graphs is None:
            return self._capture(arrays)
        bk = self.backend
        for own, given in zip(self.inputs, arrays):
            bk.copy_(own, given)
        for i, (kind, steps) in enumerate(self.segments):
            if kind == "graph":
                self._replay_graph(i)
            else:
                self._run_step(steps[0], replaying=True)
        return self._output_arrays()

    def _replay_graph(self, i):
        bk = self.backend
        moved = []
        for leaf, captured in self.captured_grads.get(i, ()):
            grad = self.trace.leaves[leaf].grad
            current = None if grad is None else grad._data
            if current is not captured:
                if current is None:
                    raise RuntimeError(
                        f"adcuda.compile: {self.name} reads the .grad of a parameter that has none on this call "
                        "(it had one when the function was captured)"
                    )
                bk.copy_(captured, current)
                moved.append((current, captured))
        self.graphs[i].replay()
        for current, captured in moved:
            bk.copy_(current, captured)

    def _output_arrays(self):
        bk = self.backend
        values = []
        for kind, x in self.outputs[1]:
            if kind == "value":
                array = self.env[x]
                values.append(bk.astype(array, bk.dtype_of(array)))  # a copy: the next replay overwrites x
            elif kind == "array":
                values.append(x)
            else:
                values.append(None)
        return values

    # ------------------------------------------------------------------ capture
    def _capture(self, arrays):
        bk = self.backend
        self.inputs = [bk.astype(a, bk.dtype_of(a)) for a in arrays]
        self.env = dict(zip(self.trace.inputs, self.inputs))
        pool = graph_pool_handle()
        graphs = {}
        draws = []  # (seed, offset) by draw number, numbered over the whole run as Draw references are
        for i, (kind, steps) in enumerate(self.segments):
            if kind != "graph":
                self._run_step(steps[0], replaying=False)
                continue
            g = CUDAGraph()
            reads = []
            with graph(g, pool=pool):
                for step in steps:
                    if step.__class__ is Drawn:
                        draws.append(step.generator.next_offset(int(step.numel)))
                    else:
                        self._call(step, draws, reads)
            self.captured_grads[i] = reads
            graphs[i] = g
            g.replay()
        self.graphs = graphs
        return self._output_arrays()

    def _call(self, step, draws, reads):
        args = self._resolve(step.args, draws, reads)
        kwargs = {k: self._resolve(v, draws, reads) for k, v in step.kwargs.items()}
        result = getattr(self.backend, step.name)(*args, **kwargs)
        if step.result_kind == "array":
            if step.results[0] is not None:
                self.env[step.results[0]] = result
        elif step.result_kind == "tuple":
            for n, r in zip(step.results, result):
                if n is not None:
                    self.env[n] = r

    def _resolve(self, value, draws, reads):
        cls = value.__class__
        if cls is Value:
            return self.env[value.n]
        if cls is GradOf:
            array = self.trace.leaves[value.leaf].grad._data
            reads.append((value.leaf, array))
            return array
        if cls is Draw:
            return draws[value.draw][value.index]
        if cls is TensorArg:
            t = Tensor._make(self.env[value.value], value.device)
            if value.requires_grad:
                t.requires_grad_(True)
            return t
        if cls is HostData:
            return value.array.copy()
        if cls in (list, tuple):
            return cls(self._resolve(v, draws, reads) for v in value)
        if cls is dict:
            return {k: self._resolve(v, draws, reads) for k, v in value.items()}
        return value

    def _run_step(self, step, *, replaying):
        """A step no graph holds (see the module docstring), run as eager runs it."""
        cls = step.__class__
        if cls is HostStep:
            args = self._resolve(step.args, {}, [])
            kwargs = {k: self._resolve(v, {}, []) for k, v in step.kwargs.items()}
            step.fn(*args, **kwargs)
        elif cls is Accumulate:
            self._accumulate(step)
        elif replaying:  # an upload: made afresh, into the array the graphs read
            n = step.results[0]
            fresh = getattr(self.backend, step.name)(*self._resolve(step.args, {}, []))
            self.backend.copy_(self.env[n], fresh)
        else:
            self._call(step, {}, [])

    def _accumulate(self, step):
        bk = self.backend
        leaf = self.trace.leaves[step.leaf]
        array = self._resolve(step.grad, {}, [])
        if leaf.grad is not None:
            add_into(leaf.grad, Tensor._make(array, step.device))
            return
        own = self.static_grads.get(step.leaf)
        if own is None:
            own = self.static_grads[step.leaf] = bk.astype(array, bk.dtype_of(array))
        else:
            bk.copy_(own, array)
        leaf.grad = Tensor._make(own, step.device)

    def __str__(self):
        calls = sum(1 for s in self.trace.steps if s.__class__ is Call)
        graphs = sum(1 for kind, _ in self.segments if kind == "graph")
        lines = [
            f"adcuda.compile CUDA-graph program of {self.name}: {calls} primitive calls in {graphs} CUDA graphs, "
            f"{len(self.segments) - graphs} steps between them run as Python"
        ]
        for i, (kind, steps) in enumerate(self.segments):
            if kind == "graph":
                nodes = self.graphs[i].num_nodes if self.graphs else "?"
                names = ", ".join(s.name for s in steps if s.__class__ is Call)
                lines.append(f"{i:4d}  graph of {len(steps)} steps ({nodes} nodes): {names}")
            else:
                lines.append(f"{i:4d}  {kind} {getattr(steps[0], 'name', '')}")
        return "\n".join(lines)


def _segments(steps):
    """The steps in order as ("graph", [calls and draws]) runs and single steps no graph holds."""
    segments = []
    run = []
    for step in steps:
        cls = step.__class__
        if cls is Drawn or cls is Call and not _is_upload(step):
            run.append(step)
            continue
        if run:
            segments.append(("graph", run))
            run = []
        kind = "host step" if cls is HostStep else "accumulate" if cls is Accumulate else "upload"
        segments.append((kind, [step]))
    if run:
        segments.append(("graph", run))
    return segments


def _is_upload(step):
    return step.name == "from_numpy" and any(a.__class__ is HostData for a in step.args)


def cuda_arrays_escaped(trace, outputs, weak):
    """Value numbers of arrays the run made that are still alive (held by Python state) though they are
    neither outputs nor handed to a host step or an accumulation: a graph replay would overwrite them."""
    exempt = set(trace.handed_over) | set(trace.inputs) | {n for kind, n in outputs[1] if kind == "value"}
    return [n for n, ref in enumerate(weak) if trace.producer[n] >= 0 and n not in exempt and ref() is not None]


def warn_uncapturable_graph(name, error):
    warnings.warn(
        f"adcuda.compile: {name} could not be captured into a CUDA graph ({error}); it runs eagerly from now on",
        stacklevel=4,
    )
