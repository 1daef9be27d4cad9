"""``adcuda.compile``: a function captured once per input signature and replayed after.

The first call for a signature runs the function eagerly under a ``Recorder``; if everything it did
can be replayed, the trace becomes a ``Program`` and later calls with the same signature replay it
(inputs bound to the program's input arrays, outputs returned as new tensors). A signature is the
structure of the arguments, each tensor's shape, strides, dtype, device and requires_grad, every
other argument's value (or identity, if unhashable), the grad mode, the default dtype, the hooks
at the dispatch point (autocast, the profiler) and the calling thread's autocast regions. A program
also checks, before each replay, that every persistent tensor it reads (parameters, buffers,
optimizer state, the GradScaler's scale) still holds the array it captured and that every module
it ran is still in the same train/eval mode (``Program.holds``); if not, the call captures anew.

A run that leaves one of its own arrays alive in Python state (a lazily made tensor, such as the
GradScaler's scale on its first call) is not turned into a program: the next call captures again,
with that state made. What cannot be replayed ends the capture (see recorder.py): the function then
runs eagerly from then on, with one warning naming the op and the line, or, with
``fullgraph=True``, raises CaptureError naming them.

On CUDA tensors (all on one device) the trace becomes a ``CudaGraphProgram`` (cuda_graph.py) that
replays through CUDA graphs instead.
"""

import warnings

import numpy as np

from .. import dtypes as dt
from ..autograd.grad_mode import is_grad_enabled
from ..cuda.errors import GraphCaptureError
from ..device import CPU
from ..device import device as device_type
from ..errors import AdcudaError
from ..ops import autocast, dispatch
from ..profiler.record_function import record_function
from ..tensor import Tensor
from .cuda_graph import CudaGraphProgram, cuda_arrays_escaped
from .program import Layout, Program
from .recorder import Recorder, Uncapturable

CACHE_SIZE_LIMIT = 8  # signatures captured per function, as torch.compile's cache_size_limit
CAPTURE_ATTEMPTS = 2  # captures of one signature that may leave state behind before giving up


class CaptureError(AdcudaError, RuntimeError):
    """``fullgraph=True`` met something it cannot capture, or compile got an option it does not have."""


def compile(fn=None, *, fullgraph=False, dynamic=False):  # noqa: A001 (torch.compile's name)
    """``fn`` captured at its first call per input signature and replayed after (see the module
    docstring); usable as ``@adcuda.compile`` or ``@adcuda.compile(fullgraph=True)``."""
    if dynamic:
        raise CaptureError(
            "adcuda.compile: dynamic=True (one program for many shapes) is not supported; "
            "adcuda captures one program per input shape (dynamic=False)"
        )
    if fn is None:
        return lambda f: CompiledFunction(f, fullgraph=fullgraph)
    if not callable(fn):
        raise TypeError(f"adcuda.compile: expected a callable, got {type(fn).__name__}")
    return CompiledFunction(fn, fullgraph=fullgraph)


class CompiledFunction:
    """What ``adcuda.compile`` returns: call it as ``fn``; ``programs`` holds the captured programs
    (print one to see its primitives, buffers and peak memory)."""

    def __init__(self, fn, *, fullgraph=False):
        self.fn = fn
        self.fullgraph = fullgraph
        self.name = getattr(fn, "__qualname__", None) or type(fn).__name__
        self._cache = {}  # signature -> Program, or the number of captures that left state behind
        self._eager = False  # set once something could not be captured
        self._warned_limit = False
        self.__wrapped__ = fn
        self.__doc__ = getattr(fn, "__doc__", None)

    @property
    def programs(self):
        return [p for p in self._cache.values() if isinstance(p, (Program, CudaGraphProgram))]

    def __call__(self, *args, **kwargs):
        if self._eager:
            return self.fn(*args, **kwargs)
        tensors = []
        key = (
            _signature((args, kwargs), tensors),
            is_grad_enabled(),
            dt.get_default_dtype(),
            dispatch._hooks,
            _autocast_state() if dispatch._hooks else None,
        )
        program = self._cache.get(key)
        if program.__class__ is Program and program.holds():
            program.replays += 1
            return _rebuild(program.outputs[0], iter(program.run([t._data for t in tensors])))
        if program.__class__ is CudaGraphProgram and program.holds():
            return self._replay_cuda(program, tensors)
        elif program is None and len(self._cache) >= CACHE_SIZE_LIMIT:
            if not self._warned_limit:
                self._warned_limit = True
                warnings.warn(
                    f"adcuda.compile: {self.name} has been captured for {CACHE_SIZE_LIMIT} input signatures "
                    "(the cache size limit); calls with new signatures run eagerly",
                    stacklevel=2,
                )
            return self.fn(*args, **kwargs)
        return self._capture(key, tensors, args, kwargs)

    def _capture(self, key, tensors, args, kwargs):
        arrays = [t._data for t in tensors]
        devices = {t._device for t in tensors}
        if len({id(a) for a in arrays}) != len(arrays) or len(devices) > 1:
            # aliased inputs, or tensors on several devices: the plain call
            return self._give_up(
                Uncapturable(
                    "tensors on several devices" if len(devices) > 1 else "the same tensor passed twice",
                    "the call",
                ),
                args,
                kwargs,
                ran=False,
            )
        recorder = Recorder(strict=self.fullgraph, inputs=tensors, cuda=True)
        for a in arrays:
            recorder.add_input(a)
        try:
            with recorder:
                result = self.fn(*args, **kwargs)
        except Uncapturable as e:
            raise CaptureError(
                f"adcuda.compile(fullgraph=True): {self.name} cannot be captured: {e.what} at {e.where}"
            ) from None
        recorder.strict = False  # the run is over: what outputs() finds is reported by _give_up
        if recorder.failure is None:
            outputs = recorder.outputs(result)
        if recorder.failure is not None:
            return self._give_up(recorder.failure, args, kwargs, ran=True, result=result)
        device = _program_device(recorder.trace, devices)
        if device is None:
            failure = Uncapturable("CPU and CUDA arrays in one call", "the call")
            return self._give_up(failure, args, kwargs, ran=True, result=result)
        if device is not CPU:
            return self._keep_cuda_program(key, recorder, outputs, result, device, args, kwargs)
        layout = Layout(recorder.trace)
        weak = recorder.finish()
        escaped = _escaped(recorder.trace, layout, outputs, weak)
        if escaped:
            return self._retry_or_give_up(key, escaped, args, kwargs, result)
        self._cache[key] = Program(recorder.trace, layout, outputs, self.name)
        return result

    def _retry_or_give_up(self, key, escaped, args, kwargs, result):
        """After a capture whose function kept tensors it computed alive: the next call with this
        signature captures again, up to CAPTURE_ATTEMPTS captures, then ``_give_up`` (eager from then
        on, or CaptureError under fullgraph)."""
        attempts = self._cache.get(key, 0) + 1
        if attempts < CAPTURE_ATTEMPTS:
            self._cache[key] = attempts
            return result
        return self._give_up(
            Uncapturable(
                f"the function keeps {len(escaped)} tensor(s) it computed alive after returning "
                "(stored in a module, a list or another object)",
                "the call",
            ),
            args,
            kwargs,
            ran=True,
            result=result,
        )

    def _keep_cuda_program(self, key, recorder, outputs, result, device, args, kwargs):
        weak = recorder.finish()
        escaped = cuda_arrays_escaped(recorder.trace, outputs, weak)
        if escaped:
            return self._retry_or_give_up(key, escaped, args, kwargs, result)
        self._cache[key] = CudaGraphProgram(recorder.trace, outputs, self.name, device)
        return result

    def _replay_cuda(self, program, tensors):
        program.replays += 1
        try:
            with record_function(program.range_name):
                outputs = program.replay(*[t._data for t in tensors])
        except GraphCaptureError as e:
            if program.graphs is not None:
                raise
            # Something the recorder let through cannot be part of a graph; the steps before it ran
            # already, so running the function again here would repeat them.
            self._eager = True
            raise CaptureError(
                f"adcuda.compile: {self.name} cannot be replayed through CUDA graphs ({e}); it runs eagerly "
                "from the next call on"
            ) from e
        return _rebuild(program.outputs[0], iter(outputs))

    def _give_up(self, failure, args, kwargs, *, ran, result=None):
        if self.fullgraph:
            raise CaptureError(
                f"adcuda.compile(fullgraph=True): {self.name} cannot be captured: {failure.what} at {failure.where}"
            )
        self._eager = True
        warnings.warn(
            f"adcuda.compile: {self.name} cannot be captured ({failure.what} at {failure.where}); it runs "
            "eagerly from now on",
            stacklevel=3,
        )
        return result if ran else self.fn(*args, **kwargs)


def _program_device(trace, devices):
    """Where the recorded run computed: CPU, one CUDA device, or None for a mix."""
    arrays = list(trace.arrays) + [a for a, _ in trace.externals.values()]
    cuda = {a.device for a in arrays if a.__class__ is not np.ndarray}
    if not cuda:
        return None if devices - {CPU} else CPU
    if len(cuda) > 1 or any(a.__class__ is np.ndarray for a in arrays) or CPU in devices:
        return None
    return device_type("cuda", cuda.pop())


def _signature(value, tensors):
    """A hashable description of an argument structure; appends its tensors to ``tensors``."""
    if isinstance(value, Tensor):
        tensors.append(value)
        data = value._data
        return ("T", data.shape, getattr(data, "strides", None), data.dtype, value._device, value.requires_grad)
    cls = value.__class__
    if cls is tuple or cls is list:
        return (cls, tuple(_signature(v, tensors) for v in value))
    if cls is dict:
        return (dict, tuple((k, _signature(v, tensors)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return ("V", cls, value)


def _autocast_state():
    """Which autocast regions the calling thread is in, and their dtypes (the casts a capture recorded)."""
    return tuple((device, autocast.is_enabled(device), autocast.region_dtype(device)) for device in ("cpu", "cuda"))


def _rebuild(spec, outputs):
    """The function's result structure ``spec`` filled with the replay's output arrays."""
    kind = spec[0]
    if kind == "T":
        return Tensor._make(next(outputs), spec[1])
    if kind == "none":
        next(outputs)
        return None
    if kind == "seq":
        return spec[1](_rebuild(s, outputs) for s in spec[2])
    return {k: _rebuild(s, outputs) for k, s in spec[1]}


def _escaped(trace, layout, outputs, weak):
    """Value numbers of arrays the run made that are still alive (held by Python state) though they
    are neither outputs nor handed to a host step or an accumulation."""
    exempt = {layout.owner[n] for n in trace.handed_over}
    exempt.update(layout.owner[n] for kind, n in outputs[1] if kind == "value")
    exempt.update(layout.owner[n] for n in trace.inputs)
    escaped = []
    for n, ref in enumerate(weak):
        if trace.producer[n] < 0 or layout.owner[n] in exempt or layout.owner[n] < 0:
            continue
        if ref() is not None:
            escaped.append(n)
    return escaped
