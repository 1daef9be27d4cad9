"""Recording one eager run of a function as a flat list of backend primitive calls.

The recorder attaches at the dispatch point (``adcuda.ops.dispatch``) while the function runs
eagerly, below autograd: it sees every primitive call of the forward, of the backward rules and of
the library's ops through the backend stand-in of ``wrap_backend``, leaf accumulations through
``around_backward``, host steps (``dispatch.host_step``: optimizer and scheduler steps, GradScaler,
zero_grad, value checks) through the host-step observer, and random draws through
``adcuda.random``'s draw observer. What it writes down (``Trace``):

- ``Call``: one primitive call, its arguments with every array replaced by a reference: ``Value``
  (an array made earlier in the trace or an input), ``GradOf`` (a leaf's ``.grad`` as it is when the
  call runs: gradients change identity from step to step), ``Draw`` (the seed or offset of a random
  draw, drawn again on replay), or the array itself for one made before the call (a parameter, an
  optimizer moment: a persistent array, updated in place, that the program reads as it is);
- ``HostStep``: a host-step call, run again on replay (its primitive calls are not recorded);
- ``Accumulate``: a leaf's gradient accumulation (``.grad`` set or added to);
- ``Drawn``: a draw from a generator, made again on replay.

Whatever it cannot replay ends the recording (``Uncapturable``, naming the op and the user's line):
a value read on the host (``.item()``, ``.numpy()``, ``bool(t)``, printing), a primitive reading an
array a host step made, a leaf with gradient hooks, a higher-order backward.
"""

import os
import sys
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import _native
from .. import random as random_module
from ..autograd import engine
from ..autograd.graph import AccumulateGrad
from ..backends import cpu
from ..backends.seam import PRIMITIVES
from ..ops import dispatch
from ..tensor import Tensor

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# random primitives whose last two positional arguments are a draw's (seed, offset)
RANDOM_PRIMITIVES = frozenset({"rand", "randn", "randint", "bernoulli", "dropout", "attention_dropout_mask"})
# primitives that hand a value to the host
HOST_READS = frozenset({"to_numpy"})
# the backends' array classes: NumPy's, and the CUDA backend's DeviceArray in a CUDA build
ARRAY_CLASSES = (np.ndarray,) + tuple(cls for cls in (getattr(_native._C, "DeviceArray", None),) if cls is not None)


class Uncapturable(Exception):
    """Something in the function cannot be replayed; ``what`` names it and ``where`` the user's line."""

    def __init__(self, what, where):
        super().__init__(f"{what} at {where}")
        self.what = what
        self.where = where


@dataclass(slots=True, eq=False)
class Value:
    """A reference to array number ``n`` of the trace."""

    n: int


@dataclass(slots=True, eq=False)
class GradOf:
    """The ``.grad`` array of leaf ``leaf`` (an index into ``Trace.leaves``) when the call runs."""

    leaf: int


@dataclass(slots=True, eq=False)
class Draw:
    """Item ``index`` (0: seed, 1: offset) of draw number ``draw``."""

    draw: int
    index: int


@dataclass(slots=True, eq=False)
class HostData:
    """Host data a ``from_numpy`` call took (a copy made at capture): a replay hands the primitive a
    fresh copy of it each time, as eager makes the array afresh from the Python data on each call."""

    array: np.ndarray


class Call:
    __slots__ = ("name", "args", "kwargs", "results", "result_kind", "arrays_in")

    def __init__(self, name, args, kwargs):
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.results = ()  # value numbers of the arrays the call returned, in order
        self.result_kind = None  # "array", "tuple" (results by position, None where not an array) or None
        self.arrays_in = ()  # the real arrays of the call's arguments at capture (for the fast kernels)


class HostStep:
    __slots__ = ("fn", "args", "kwargs", "name")

    def __init__(self, fn, args, kwargs):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.name = getattr(fn, "__qualname__", repr(fn))


@dataclass(slots=True, eq=False)
class Accumulate:
    leaf: int
    grad: Any
    device: Any


@dataclass(slots=True, eq=False)
class Drawn:
    generator: Any
    numel: int


@dataclass(slots=True, eq=False)
class TensorArg:
    """A host step's tensor argument over trace array ``value`` (rebuilt around the replay's array)."""

    value: int
    device: Any
    requires_grad: bool


class Trace:
    """What one recording saw (see the module docstring)."""

    def __init__(self):
        self.steps = []
        self.arrays = []  # value number -> the array at capture (released after the capture)
        self.producer = []  # value number -> index of the step that made it (-1: an input)
        self.inputs = []  # value numbers of the inputs, in order
        self.leaves = []  # leaf tensors whose gradients the trace accumulates or reads
        self.externals = {}  # id(array) -> (array, tensor or None): persistent arrays read as they are
        self.handed_over = set()  # value numbers a host step or an accumulation received
        self.modules = {}  # id(module) -> (module, its training flag): every nn.Module the run called


def user_line():
    """``file:line`` of the innermost frame outside adcuda, and the adcuda function it called."""
    frame = sys._getframe(1)
    inner = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE_DIR + os.sep):
            return f"{filename}:{frame.f_lineno}", inner
        inner = frame.f_code.co_name
        frame = frame.f_back
    return "<unknown>", inner


class Recorder:
    """Installs itself at the dispatch point for one eager run and builds its ``Trace``."""

    def __init__(self, *, strict=False, inputs=(), cuda=False):
        self.strict = strict  # raise at the first thing that cannot be captured (fullgraph=True)
        self.cuda = cuda  # recording for a CUDA graph (capture/cuda_graph.py): CUDA primitives are fine
        self._input_ids = {id(t) for t in inputs}
        self.trace = Trace()
        self._ids = {}  # id(array) -> value number
        self._grad_ids = {}  # id(array) -> leaf index, for arrays that are a leaf's .grad now
        self._leaf_index = {}  # id(leaf) -> index into trace.leaves
        self._host_made = {}  # id(array) -> array made inside a host step (kept: its id is a key)
        self._alive = []  # other arrays whose ids are keys
        self._tensors = {}  # id(array) -> tensor seen holding it (for the identity guards)
        self._draws = {}  # (seed, offset) -> number of the draw of this run that gave them
        self._draw_count = 0
        self._host_depth = 0
        self.failure = None  # the first Uncapturable met
        self.backward_ran = False
        self._previous = None
        self._thread = threading.get_ident()  # only this thread's calls are the function's

    # ------------------------------------------------------------------ attaching
    def __enter__(self):
        dispatch.add_hook(self, innermost=True)
        self._previous = (
            dispatch.set_host_step_observer(self._host_step),
            random_module.set_draw_observer(self._drawn),
            dispatch.set_module_call_observer(self._module_called),
        )
        return self

    def __exit__(self, *exc):
        dispatch.remove_hook(self)
        dispatch.set_host_step_observer(self._previous[0])
        random_module.set_draw_observer(self._previous[1])
        dispatch.set_module_call_observer(self._previous[2])
        return False

    def add_input(self, array):
        n = self._new_value(array, -1)
        self.trace.inputs.append(n)

    def _new_value(self, array, producer):
        n = len(self.trace.arrays)
        self.trace.arrays.append(array)
        self.trace.producer.append(producer)
        self._ids[id(array)] = n
        return n

    def fail(self, what, where=None):
        if self.failure is None:
            self.failure = Uncapturable(what, where or user_line()[0])
            if self.strict:
                raise self.failure

    @property
    def recording(self):
        return self._host_depth == 0 and self.failure is None and threading.get_ident() == self._thread

    # ------------------------------------------------------------------ dispatch hooks
    def around_op(self, name, op, call, args, kwargs):
        if self.recording:
            for a in args:
                if a.__class__ is Tensor:
                    self._tensors.setdefault(id(a._data), a)
                elif a.__class__ in (list, tuple):
                    for t in a:
                        if t.__class__ is Tensor:
                            self._tensors.setdefault(id(t._data), t)
        return call(*args, **kwargs)

    def wrap_backend(self, backend):
        return _RecordingBackend(backend, self)

    # ------------------------------------------------------------------ the function's result
    def outputs(self, result):
        """The result's structure and its leaves as ``(spec, [(kind, value)])``: kind "value" (an array of
        the trace), "array" (a persistent array, returned as it is) or "none"."""
        leaves = []

        def walk(value):
            if isinstance(value, Tensor):
                if value.requires_grad and value.grad_fn is not None and not self.backward_ran:
                    self.fail(
                        "the function returns a tensor that requires grad and runs no backward: a backward "
                        "outside the compiled function is not captured",
                        "the function's return",
                    )
                n = self._ids.get(id(value._data))
                leaves.append(("value", n) if n is not None else ("array", value._data))
                return ("T", value._device)
            if value is None:
                leaves.append(("none", None))
                return ("none",)
            if value.__class__ in (list, tuple):
                return ("seq", value.__class__, tuple(walk(v) for v in value))
            if value.__class__ is dict:
                return ("dict", tuple((k, walk(v)) for k, v in value.items()))
            self.fail(
                f"the function returns a {type(value).__name__} (only tensors, None and lists, tuples or dicts "
                "of them are replayed)",
                "the function's return",
            )
            return None

        spec = walk(result)
        return spec, leaves

    def around_backward(self, node, fn, *args):
        if node.__class__ is not AccumulateGrad or not self.recording:
            if self.recording:
                self.backward_ran = True
            return fn(*args)
        _, grads, create_graph = args
        leaf = node.variable
        g = grads[0] if grads else None
        if leaf is None or g is None:
            return fn(*args)
        if create_graph:
            self.fail("a backward with create_graph=True (higher-order gradients)")
            return fn(*args)
        if leaf._hooks:
            self.fail("a gradient hook on a leaf tensor")
            return fn(*args)
        if id(leaf) in self._input_ids:
            self.fail("a gradient for a tensor passed to the compiled function (its leaf changes every call)")
            return fn(*args)
        grad_ref = self._reference(g._data)
        self._host_depth += 1
        try:
            result = fn(*args)
        finally:
            self._host_depth -= 1
        if isinstance(grad_ref, Value):
            self.trace.handed_over.add(grad_ref.n)
        index = self._leaf(leaf)
        self.trace.steps.append(Accumulate(index, grad_ref, g._device))
        if leaf.grad is not None:
            self._grad_ids[id(leaf.grad._data)] = index
            self._alive.append(leaf.grad._data)  # its id is a key while recording: keep it from reuse
        return result

    def _leaf(self, leaf):
        index = self._leaf_index.get(id(leaf))
        if index is None:
            index = self._leaf_index[id(leaf)] = len(self.trace.leaves)
            self.trace.leaves.append(leaf)
        return index

    # ------------------------------------------------------------------ host steps and draws
    def _host_step(self, fn, args, kwargs):
        if not self.recording:
            return fn(*args, **kwargs)
        step = HostStep(fn, self._host_arguments(args), self._host_arguments(kwargs))
        self.trace.steps.append(step)
        self._host_depth += 1
        try:
            result = fn(*args, **kwargs)
        finally:
            self._host_depth -= 1
        return None if result is None else HostResult(result, self, step.name)

    def _host_arguments(self, value):
        if value.__class__ is Tensor:
            n = self._ids.get(id(value._data))
            if n is None:
                return value
            self.trace.handed_over.add(n)
            return TensorArg(n, value._device, value.requires_grad)
        if value.__class__ in (list, tuple):
            return value.__class__(self._host_arguments(v) for v in value)
        if value.__class__ is dict:
            return {k: self._host_arguments(v) for k, v in value.items()}
        return value

    def _module_called(self, module):
        if not self.recording:
            return
        if module._forward_pre_hooks or module._forward_hooks:
            self.fail(f"a forward hook on a {type(module).__name__} (it runs Python a replay would skip)")
        self.trace.modules.setdefault(id(module), (module, module.training))

    def _drawn(self, generator, numel, seed, offset):
        if not self.recording:
            return
        self.trace.steps.append(Drawn(generator, numel))
        self._draws[(seed, offset)] = self._draw_count
        self._draw_count += 1

    # ------------------------------------------------------------------ primitive calls
    def call(self, name, fn, args, kwargs):
        if not self.recording:
            result = fn(*args, **kwargs)
            if self._host_depth and threading.get_ident() == self._thread:
                self._note_host_made(result, args)
            return result
        if name in HOST_READS:
            where, inner = user_line()
            self.fail(f"{inner or name}() reads a tensor's value on the host", where)
            return fn(*args, **kwargs)
        if name == "index" and len(args) > 1 and _has_bool_array(args[1]):
            # the result's shape is the mask's count of True: a replay's later calls have the capture's shapes
            self.fail("indexing with a boolean mask (its result's shape depends on the values)")
            return fn(*args, **kwargs)
        try:
            if name == "from_numpy" and args and args[0].__class__ is np.ndarray and id(args[0]) not in self._ids:
                call = Call(
                    name,
                    (HostData(args[0].copy()),) + self._references(args[1:]),
                    {k: self._references(v) for k, v in kwargs.items()},
                )
            else:
                call = Call(name, self._references(args), {k: self._references(v) for k, v in kwargs.items()})
        except Uncapturable as e:
            self.fail(e.what, e.where)
            return fn(*args, **kwargs)
        if self._draws:
            try:
                self._link_draws(call)
            except Uncapturable as e:
                self.fail(e.what, e.where)
                return fn(*args, **kwargs)
        elif name in RANDOM_PRIMITIVES:
            self.fail(f"a {name} draw whose seed and offset no generator gave (a replay would repeat its numbers)")
            return fn(*args, **kwargs)
        call.arrays_in = args
        result = fn(*args, **kwargs)
        step = len(self.trace.steps)
        if result.__class__ in ARRAY_CLASSES:
            call.result_kind = "array"
            call.results = (self._result_value(result, step),)
        elif result.__class__ is tuple:
            call.result_kind = "tuple"
            call.results = tuple(self._result_value(r, step) if r.__class__ in ARRAY_CLASSES else None for r in result)
        self.trace.steps.append(call)
        return result

    def _result_value(self, array, step):
        key = id(array)
        n = self._ids.get(key)
        if n is not None and self.trace.arrays[n] is array:
            return n  # the call returned an array it was given (contiguous of a contiguous one)
        if key in self.trace.externals or key in self._grad_ids:
            return None  # it wrote a persistent array in place and returned it: read as before
        return self._new_value(array, step)

    def _link_draws(self, call):
        """Point every (seed, offset) pair among a primitive's arguments that a generator draw of this run
        gave at that draw, so that a replay draws again: a random primitive's last two arguments, and
        the pair attention takes for its dropout (forward and backward). A random primitive whose pair no
        draw gave would repeat its numbers on every replay."""
        args = list(call.args)
        linked = False
        for i in range(len(args) - 1):
            pair = (args[i], args[i + 1])
            if pair[0].__class__ is int and pair[1].__class__ is int and pair in self._draws:
                draw = self._draws[pair]
                args[i], args[i + 1] = Draw(draw, 0), Draw(draw, 1)
                linked = linked or i == len(args) - 2
        pair = (call.kwargs.get("seed"), call.kwargs.get("offset"))
        if pair in self._draws:
            call.kwargs = dict(call.kwargs, seed=Draw(self._draws[pair], 0), offset=Draw(self._draws[pair], 1))
        call.args = tuple(args)
        if call.name in RANDOM_PRIMITIVES and not linked:
            raise Uncapturable(
                f"a {call.name} draw whose seed and offset no generator gave (a replay would repeat its numbers)",
                user_line()[0],
            )

    def _references(self, value):
        if value.__class__ in ARRAY_CLASSES:
            return self._reference(value)
        if value.__class__ in (list, tuple):
            return value.__class__(self._references(v) for v in value)
        return value

    def _reference(self, array):
        key = id(array)
        leaf = self._grad_ids.get(key)
        if leaf is not None:
            g = self.trace.leaves[leaf].grad
            if g is not None and g._data is array:
                return GradOf(leaf)
            del self._grad_ids[key]
        n = self._ids.get(key)
        if n is not None:
            return Value(n)
        if key in self._host_made:
            raise Uncapturable(
                "a primitive reads a tensor made inside a host step (an optimizer, scheduler or GradScaler call)",
                user_line()[0],
            )
        self.trace.externals[key] = (array, self._tensors.get(key))
        return array

    def _note_host_made(self, result, args=()):
        # an argument given back (to_numpy of a CPU array, contiguous of a contiguous one) was made
        # before the host step: a class-target check's host read must not taint the targets
        arrays = result if result.__class__ is tuple else (result,)
        for a in arrays:
            if a.__class__ in ARRAY_CLASSES and not any(a is x for x in args):
                self._host_made[id(a)] = a

    def finish(self):
        """The trace's arrays as weak references (so the caller can see what outlives the run), the
        recorder's own references dropped."""
        arrays = self.trace.arrays
        weak = [_weak(a) for a in arrays]
        self.trace.arrays = None
        self._ids = self._host_made = self._tensors = self._grad_ids = self._alive = None
        for step in self.trace.steps:
            if step.__class__ is Call:
                step.arrays_in = _shapes_of(step.arrays_in)
        return weak


class HostResult:
    """What a host step returned, handed to the function while it is captured. A replay runs the host
    step again but not the Python that used its result, so a result the function looks at (``if
    scaler.step(opt): scheduler.step()``) could steer it differently on a later call: the first use
    ends the capture. Used in any way, it acts as the value it holds."""

    __slots__ = ("_value", "_recorder", "_name")

    def __init__(self, value, recorder, name):
        self._value = value
        self._recorder = recorder
        self._name = name

    def _used(self):
        where, _ = user_line()
        self._recorder.fail(f"the function uses the result of the host step {self._name}", where)
        return self._value

    def __bool__(self):
        return bool(self._used())

    def __eq__(self, other):
        return self._used() == other

    def __ne__(self, other):
        return self._used() != other

    def __hash__(self):
        return hash(self._used())

    def __int__(self):
        return int(self._used())

    def __float__(self):
        return float(self._used())

    def __index__(self):
        return self._used().__index__()

    def __repr__(self):
        return repr(self._used())

    def __getattr__(self, name):
        return getattr(self._used(), name)


def _has_bool_array(key):
    items = key if key.__class__ in (list, tuple) else (key,)
    return any(k.__class__ in ARRAY_CLASSES and k.dtype.name == "bool" for k in items)


def _shapes_of(value):
    """Arguments with each array replaced by (shape, dtype, strides, contiguous) for the planner."""
    if value.__class__ in ARRAY_CLASSES:
        return ArraySpec(value)
    if value.__class__ in (list, tuple):
        return value.__class__(_shapes_of(v) for v in value)
    return value


class ArraySpec:
    """The layout of an array an argument had at capture."""

    __slots__ = ("shape", "dtype")

    def __init__(self, array):
        self.shape = tuple(array.shape)
        self.dtype = array.dtype


def _weak(array):
    try:
        return weakref.ref(array)
    except TypeError:
        return lambda: None


class _RecordingBackend:
    """A backend module whose primitives go through the recorder."""

    def __init__(self, backend, recorder):
        self._backend = backend
        self._recorder = recorder

    def __getattr__(self, name):
        attr = getattr(self._backend, name)
        if name in PRIMITIVES and callable(attr):
            recorder = self._recorder
            fn = attr
            on_cpu = self._backend is cpu

            def recorded(*args, **kwargs):
                if not on_cpu and not recorder.cuda and recorder.recording:
                    recorder.fail(f"{name} on a CUDA tensor (adcuda.compile captures CPU programs only)")
                return recorder.call(name, fn, args, kwargs)

            recorded.__name__ = name
            setattr(self, name, recorded)
            attr = recorded
        return attr


# engine's accumulation into an existing .grad, which an Accumulate step repeats on replay
add_into = engine._add_into
