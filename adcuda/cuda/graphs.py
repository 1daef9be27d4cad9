"""CUDA graphs with PyTorch's API: ``CUDAGraph``, ``graph``, ``graph_pool_handle`` and
``make_graphed_callables``.

A capture records what the calling thread queues on its current stream (kernels/runtime/graph.h) and
``replay()`` launches all of it again at once, without Python or per-kernel launch costs. As in
PyTorch:

- the graph reads and writes the same memory on every replay: inputs are copied into the tensors that
  were used during the capture ("static" inputs), and outputs are those tensors captured, overwritten
  by each replay;
- memory allocated during the capture comes from a private pool that the graph keeps alive; graphs
  captured with the same ``pool`` (``graph_pool_handle()`` or another graph's ``pool()``) share it and
  must then be replayed in the order they were captured;
- random ops read the Philox seed and offset from device memory that each replay rewrites from the
  default generator, which the replay then advances by what the capture drew: the replays of a seeded
  program draw exactly the numbers its eager runs would draw at that point (the capture itself draws
  nothing from the generator's stream);
- nothing in the captured region may wait for the device or read device memory on the host
  (``.item()``, printing, ``synchronize()``) or upload host data: those raise ``GraphCaptureError``
  naming the call, and the capture is discarded.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from .. import _native
from .. import random as _random
from ..autograd import Function, grad
from ..factories import empty_like, ones_like
from ..tensor import Tensor
from .devices import _require_cuda, synchronize
from .errors import GraphCaptureError
from .streams import StreamContext

if TYPE_CHECKING:
    from .streams import Stream

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "make_graphed_callables"]

_U64 = (1 << 64) - 1
# cudaStreamCaptureMode values by PyTorch's capture_error_mode names.
_CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}


def _C():
    return _native._C


class _PoolHandle:
    """An opaque private-pool id (what ``graph_pool_handle()`` and ``CUDAGraph.pool()`` return)."""

    __slots__ = ("id",)

    def __init__(self, pool_id: int) -> None:
        self.id = int(pool_id)

    def __repr__(self) -> str:
        return f"adcuda.cuda graph pool {self.id}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _PoolHandle) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)


def graph_pool_handle() -> _PoolHandle:
    """A new private memory pool id, for graphs that should share one (``graph(g, pool=...)``)."""
    _require_cuda("graph_pool_handle")
    return _PoolHandle(_C().new_private_pool_id())


def _pool_id(pool: Any, op_name: str) -> int:
    if pool is None:
        return 0
    if isinstance(pool, _PoolHandle):
        return pool.id
    raise TypeError(
        f"{op_name}: pool must be None or a handle from graph_pool_handle() or CUDAGraph.pool(), got {pool!r}"
    )


class CUDAGraph:
    """A CUDA graph (PyTorch's ``torch.cuda.CUDAGraph``): ``capture_begin()``, the work, ``capture_end()``,
    then ``replay()`` as often as needed; ``reset()`` frees it. Usually captured with ``with graph(g):``."""

    def __init__(self) -> None:
        _require_cuda("CUDAGraph")
        self._graph = _C().CudaGraph()
        self._rng_start = 0
        self._rng_increment = 0
        self._previous_observer = None

    def capture_begin(self, pool: _PoolHandle | None = None, capture_error_mode: str = "global") -> None:
        """Start capturing the calling thread's current stream (the device is synchronised first).
        ``pool``: share a private pool with other graphs. ``capture_error_mode``: which threads may not
        make unsafe calls meanwhile ("global": any, "thread_local": this one, "relaxed": none)."""
        if capture_error_mode not in _CAPTURE_MODES:
            raise ValueError(
                f"CUDAGraph.capture_begin: capture_error_mode must be one of {sorted(_CAPTURE_MODES)}, "
                f"got {capture_error_mode!r}"
            )
        generator = _random.default_generator
        self._rng_start = generator.get_state()[1]
        self._graph.capture_begin(_pool_id(pool, "CUDAGraph.capture_begin"), _CAPTURE_MODES[capture_error_mode])
        self._previous_observer = _random.set_draw_observer(self._observe_draw)

    def _observe_draw(self, generator, numel, seed, offset):
        if generator is not _random.default_generator:
            raise GraphCaptureError(
                "CUDA graph capture: a random op drew from a Generator other than the default one; a graph's "
                "random ops are keyed from the default generator on each replay, so pass no generator"
            )
        if self._previous_observer is not None:
            self._previous_observer(generator, numel, seed, offset)

    def _stop_observing(self) -> None:
        _random.set_draw_observer(self._previous_observer)
        self._previous_observer = None

    def capture_end(self) -> None:
        """End the capture and instantiate the graph. Raises ``GraphCaptureError`` if a call during the
        capture invalidated it."""
        if not self._graph.capturing:
            raise GraphCaptureError("CUDAGraph.capture_end: no capture in progress (call capture_begin first)")
        self._stop_observing()
        generator = _random.default_generator
        # The capture's draws are replayed, not made: the generator goes back to where it was.
        seed, offset = generator.get_state()
        self._rng_increment = (offset - self._rng_start) & _U64
        generator.set_state((seed, self._rng_start))
        self._graph.capture_end()

    def _abort_capture(self) -> None:
        """Discard a capture that failed midway (the stream stops capturing, the pool is let go)."""
        if not self._graph.capturing:
            return
        self._stop_observing()
        generator = _random.default_generator
        generator.set_state((generator.get_state()[0], self._rng_start))
        self._graph.abort_capture()

    def replay(self) -> None:
        """Launch the captured work on the current stream. Random ops draw the next numbers of the
        default generator, which advances by what the capture drew."""
        generator = _random.default_generator
        with generator._lock:
            seed, offset = generator._seed, generator._offset
            generator._offset = offset + self._rng_increment
        self._graph.replay(seed & _U64, (offset - self._rng_start) & _U64)

    def reset(self) -> None:
        """Free the graph; its private pool's memory returns to the cache once no graph uses it."""
        self._graph.reset()

    def pool(self) -> _PoolHandle:
        """This graph's private pool, to share with graphs captured after it."""
        if self._graph.pool == 0:
            raise GraphCaptureError("CUDAGraph.pool: the graph has no pool before capture_begin")
        return _PoolHandle(self._graph.pool)

    def update_from(self, other: CUDAGraph) -> bool:
        """Take the kernel arguments of ``other`` (captured from the same code on other tensors) with
        cudaGraphExecUpdate, keeping this graph's instantiation; False if the two differ in their nodes.
        ``other`` and its memory must stay alive while this graph replays."""
        if not isinstance(other, CUDAGraph):
            raise TypeError(f"CUDAGraph.update_from: expected a CUDAGraph, got {type(other).__name__}")
        updated = self._graph.update_from(other._graph)
        if updated:
            self._rng_start, self._rng_increment = other._rng_start, other._rng_increment
        return updated

    @property
    def num_nodes(self) -> int:
        """Nodes of the captured graph (kernels, copies, memsets; 0 before a capture)."""
        return self._graph.node_count

    def __del__(self) -> None:
        graph = getattr(self, "_graph", None)
        if graph is not None and graph.capturing:
            self._stop_observing()


class graph:
    """``with adcuda.cuda.graph(g, pool=None, stream=None):`` captures the block into ``g`` (PyTorch's
    ``torch.cuda.graph``). On entry the device is synchronised and the cache of unused memory is
    emptied, as PyTorch does; the block runs on ``stream`` if given, else the thread's current stream.
    If the block raises, the capture is discarded and the exception propagates."""

    def __init__(
        self,
        cuda_graph: CUDAGraph,
        pool: _PoolHandle | None = None,
        stream: Stream | None = None,
        capture_error_mode: str = "global",
    ) -> None:
        if not isinstance(cuda_graph, CUDAGraph):
            raise TypeError(f"graph: expected a CUDAGraph, got {type(cuda_graph).__name__}")
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode
        self._stream_context = StreamContext(stream)

    def __enter__(self) -> None:
        synchronize()
        gc.collect()
        _C().empty_cache()
        self._stream_context.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, capture_error_mode=self.capture_error_mode)
        except BaseException:
            self._stream_context.__exit__(None, None, None)
            raise

    def __exit__(self, exc_type, exc, traceback) -> bool:
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                self.cuda_graph._abort_capture()
        finally:
            self._stream_context.__exit__(exc_type, exc, traceback)
        return False


def _flatten_tensors(value, op_name):
    if isinstance(value, Tensor):
        return (value,), True
    if isinstance(value, (tuple, list)) and all(isinstance(v, Tensor) for v in value):
        return tuple(value), False
    raise TypeError(f"{op_name}: outputs must be a Tensor or a tuple of Tensors, got {type(value).__name__}")


def make_graphed_callables(
    callables: Any,
    sample_args: tuple,
    num_warmup_iters: int = 3,
    allow_unused_input: bool = False,
    pool: _PoolHandle | None = None,
) -> Any:
    """PyTorch's ``torch.cuda.make_graphed_callables``: each callable (a Module or a function) gets a
    forward graph and a backward graph, captured after ``num_warmup_iters`` eager iterations of
    forward and backward. The result is used like the original: its forward copies the inputs into
    the static ones and replays the forward graph; autograd's backward replays the backward graph and
    returns the gradients of the inputs and of the Module's parameters (accumulated into ``.grad`` as
    usual). A Module's ``forward`` is replaced, used while the Module is in the train/eval mode it was
    graphed in (the original forward otherwise). ``sample_args``: a tuple of tensors per callable
    (one tuple for a single callable). The callables may not take keyword arguments."""
    single = not isinstance(callables, (tuple, list))
    if single:
        callables, sample_args = (callables,), (sample_args,)
    if len(callables) != len(sample_args):
        raise ValueError(
            f"make_graphed_callables: {len(callables)} callables but {len(sample_args)} sample argument tuples"
        )
    _require_cuda("make_graphed_callables")
    mempool = pool if pool is not None else graph_pool_handle()
    results = []
    for func, args in zip(callables, sample_args):
        args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
        graphed = _graph_one(func, args, num_warmup_iters, allow_unused_input, mempool)
        if _is_module(func):
            results.append(_install_graphed_forward(func, graphed))
        else:
            results.append(graphed)
    return results[0] if single else tuple(results)


def _is_module(func):
    # an nn.Module (adcuda.cuda sits beside adcuda.nn and does not import it)
    return callable(getattr(func, "parameters", None)) and isinstance(getattr(func, "training", None), bool)


def _graph_one(func, args, num_warmup_iters, allow_unused_input, mempool):
    name = "make_graphed_callables"
    for a in args:
        if not isinstance(a, Tensor) or a.device.type != "cuda":
            raise TypeError(f"{name}: sample arguments must be CUDA tensors, got {a!r}")
    params = tuple(p for p in func.parameters() if p.requires_grad) if _is_module(func) else ()
    differentiable = tuple(a for a in args if a.requires_grad) + params
    static_inputs = args

    def backward_grads(outputs, grad_outputs):
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        if not pairs or not differentiable:
            return (None,) * len(differentiable)
        return grad(
            [o for o, _ in pairs],
            differentiable,
            grad_outputs=[g for _, g in pairs],
            allow_unused=allow_unused_input,
        )

    for _ in range(num_warmup_iters):
        outputs, _single = _flatten_tensors(func(*static_inputs), name)
        backward_grads(outputs, tuple(ones_like(o) for o in outputs))
    del outputs

    forward_graph = CUDAGraph()
    with graph(forward_graph, pool=mempool):
        static_outputs, single_output = _flatten_tensors(func(*static_inputs), name)

    static_grad_outputs = tuple(empty_like(o) if o.requires_grad else None for o in static_outputs)
    backward_graph = CUDAGraph()
    with graph(backward_graph, pool=mempool):
        static_grad_inputs = backward_grads(static_outputs, static_grad_outputs)
    if not allow_unused_input and any(g is None for g in static_grad_inputs) and differentiable:
        raise GraphCaptureError(
            f"{name}: an input or parameter that requires grad is not used by the callable "
            "(pass allow_unused_input=True to allow it)"
        )
    static_outputs_detached = tuple(o.detach() for o in static_outputs)
    n_args = len(static_inputs)

    class Graphed(Function):
        @staticmethod
        def forward(ctx, *inputs):
            for static, given in zip(static_inputs, inputs[:n_args]):
                if static.data_ptr() != given.data_ptr():
                    static.detach().copy_(given.detach())
            forward_graph.replay()
            return static_outputs_detached if not single_output else static_outputs_detached[0]

        @staticmethod
        def backward(ctx, *grads):
            for static, given in zip(static_grad_outputs, grads):
                if static is not None and given is not None and static.data_ptr() != given.data_ptr():
                    static.detach().copy_(given.detach())
            backward_graph.replay()
            grads_by_input = dict(zip(map(id, differentiable), static_grad_inputs))
            everything = tuple(static_inputs) + params
            return tuple(
                grads_by_input[id(t)].detach() if grads_by_input.get(id(t)) is not None else None for t in everything
            )

    def graphed_function(*inputs):
        if len(inputs) != n_args:
            raise TypeError(f"graphed callable: expected {n_args} positional arguments, got {len(inputs)}")
        return Graphed.apply(*(tuple(inputs) + params))

    graphed_function.forward_graph = forward_graph
    graphed_function.backward_graph = backward_graph
    return graphed_function


def _install_graphed_forward(module, graphed_function):
    training = module.training
    original_forward = module.forward

    def forward(*inputs):
        if module.training == training:
            return graphed_function(*inputs)
        return original_forward(*inputs)

    module.forward = forward
    module.forward_graph = graphed_function.forward_graph
    module.backward_graph = graphed_function.backward_graph
    return module
