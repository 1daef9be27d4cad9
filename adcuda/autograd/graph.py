"""Graph nodes: one per recorded op (or per custom ``Function`` call), plus ``AccumulateGrad`` for
leaves. A node keeps its backward rule, the edges to the nodes of its inputs, and the values saved
for backward, checked against the tensors' version counters when they are unpacked.

Also here: what recording needs from a tensor (``needs_grad``, ``edge_of``), and ``record`` for the
few nodes that are not registry ops (custom Functions, in-place bookkeeping such as CopySlices).
"""

from __future__ import annotations

import itertools
import sys
import weakref
from typing import TYPE_CHECKING

from ..errors import AutogradError, ShapeError, fmt_shape
from ..hooks import RemovableHandle
from ..tensor import NodeName, Tensor, version_counter, version_of  # noqa: F401 (version_counter: for autograd and ops)
from . import anomaly
from .grad_mode import is_grad_enabled

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

    # Node is what tensor.py's GradFn protocol describes (Tensor.grad_fn's type): declared so, mypy checks
    # that it keeps to it; at run time a node has no base class (recording makes one per op call)
    from ..tensor import GradFn as _GradFn
else:
    _GradFn = object

_sequence = itertools.count()

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward."
)

# Set by the profiler while it links backward ranges to forward ops: called with every new node.
_node_observer = None


def set_node_observer(observer):
    """Install ``observer(node)`` (or None); returns the previous one."""
    global _node_observer
    previous, _node_observer = _node_observer, observer
    return previous


_NODE_NAMES: dict[str, NodeName] = {}


def node_name(name: str) -> NodeName:
    """The one NodeName of ``name`` (recording a node pays a dict lookup, not a new string)."""
    return _NODE_NAMES.get(name) or _NODE_NAMES.setdefault(name, NodeName(name))


class Node(_GradFn):
    """A recorded op. ``backward_fn(node, *grads)`` returns one gradient (or None) per entry of
    ``next_edges``. Rarely set fields (hooks, the anomaly trace, a Function's ctx) are class-level
    defaults, so recording a node writes only what it must."""

    _saved = None
    _released = False
    # output index -> (handle id -> hook), and output index -> retain_grad's hook; made on first hook
    pre_hooks: dict[int, dict[int, Callable[[Tensor], Tensor | None]]] | None = None
    retain_hooks: dict[int, Callable[[Tensor], Tensor | None]] | None = None
    ctx: Any = None  # a custom Function's FunctionCtx (autograd/function.py, which imports this module)
    trace = None

    def __init__(
        self,
        name: str,
        next_edges: Sequence[tuple[Node, int] | None],
        backward_fn: Callable[..., Any] | None,
        num_outputs: int = 1,
    ) -> None:
        self.name = node_name(name)
        self.next_edges = next_edges
        self.backward_fn = backward_fn
        self.num_outputs = num_outputs
        self.seq = next(_sequence)
        if anomaly.enabled_somewhere and anomaly.is_anomaly_enabled():
            self.trace = anomaly.forward_trace()
        if _node_observer is not None:
            _node_observer(self)

    def __repr__(self):
        return f"<{self.name} object>"

    @property
    def next_functions(self) -> tuple[tuple[Node | None, int], ...]:
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.next_edges)

    # ------------------------------------------------------------------ saved values
    def save(self, tensors: Sequence[Tensor | None], outputs: Sequence[Tensor] = ()) -> None:
        """Keep ``tensors`` for backward (see ``pack``)."""
        self._saved = [pack(t, outputs) for t in tensors]

    @property
    def saved_tensors(self) -> tuple[Tensor | None, ...]:
        if self._released:
            raise AutogradError(FREED_MESSAGE)
        if self._saved is None:
            return ()
        return tuple(unpack(item, self) for item in self._saved)

    def release(self) -> None:
        if self._saved is not None:
            self._saved = None
            self._released = True

    # ------------------------------------------------------------------ hooks
    def add_pre_hook(self, output_nr: int, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, {})
        return RemovableHandle(hooks, hook)

    def set_retain_hook(self, output_nr: int, hook: Callable[[Tensor], Tensor | None]) -> None:
        """``retain_grad``'s hook: kept apart so it runs after every other hook on that output."""
        if self.retain_hooks is None:
            self.retain_hooks = {}
        self.retain_hooks[output_nr] = hook


class AccumulateGrad(Node):
    """The sink of a leaf tensor: sums the gradients that reach it into ``.grad``. The leaf owns it
    (``Tensor._accumulator``) and it refers to the leaf weakly, so it lives as long as the leaf and
    no graph has to make it again; it keeps no leaf alive."""

    name = node_name("AccumulateGrad")
    next_edges = ()
    backward_fn = None
    num_outputs = 1
    seq = -1  # no sequence number, as PyTorch's: it links no forward op to a backward range

    def __init__(self, variable):
        self._variable = weakref.ref(variable)
        if anomaly.enabled_somewhere and anomaly.is_anomaly_enabled():
            self.trace = anomaly.forward_trace()
        if _node_observer is not None:
            _node_observer(self)

    @property
    def variable(self):
        """The leaf, or None once it is gone."""
        return self._variable()


# ----------------------------------------------------------------------------------------------
# saved values
def pack(t, outputs=()):
    """A value kept for backward. A tensor records its version counter's value now (unpacking
    checks it); an op's own output is kept as its data and counter, not as the Tensor, which would
    make a reference cycle through its grad_fn, and is rebuilt on unpack. Other values (Python
    scalars, None) are kept as they are."""
    if t.__class__ is not Tensor:
        return (None, t)
    vc = version_counter(t)
    for o in outputs:
        if t is o:
            return (vc, vc.value, None, t._data, t._device, t._output_nr)
    return (vc, vc.value, t)


def unpack(item, node):
    vc = item[0]
    if vc is None:
        return item[1]
    if vc.value != item[1]:
        tensor = item[2]
        shape = tensor.shape if tensor is not None else item[3].shape
        raise AutogradError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{'output' if tensor is None else 'input'} of shape "
            f"{fmt_shape(shape)}], which is saved by {node.name}, is at version "
            f"{vc.value}; expected version {item[1]} instead. Hint: enable anomaly "
            "detection to find the forward call that produced it, or clone() the value "
            "before changing it in place."
        )
    tensor = item[2]
    if tensor is None:
        tensor = Tensor._make(item[3], item[4])
        tensor._vc = vc
        tensor._grad_fn = node
        tensor._output_nr = item[5]
    return tensor


# ----------------------------------------------------------------------------------------------
# recording
def requires_grad(t):
    """Whether ``t`` (a Tensor) takes part in the graph: a leaf that requires grad, or a computed
    value (a view whose base gained history since it was made counts too)."""
    return t._requires_grad or t._grad_fn is not None or (t._base is not None and t.grad_fn is not None)


def needs_grad(*tensors):
    """Whether an op on ``tensors`` (any values; non-tensors ignored) must record a node."""
    if not is_grad_enabled():
        return False
    for t in tensors:
        if t.__class__ is Tensor and (
            t._requires_grad or t._grad_fn is not None or (t._base is not None and t.grad_fn is not None)
        ):
            return True
    return False


def edge_of(t):
    """(node, output index) that gradients for ``t`` flow into, or None where it takes none."""
    if t.__class__ is not Tensor:
        return None
    node = t.grad_fn if t._base is not None else t._grad_fn
    if node is not None:
        return (node, t._output_nr)
    if t._requires_grad:
        acc = t._accumulator
        if acc is None:
            acc = t._accumulator = AccumulateGrad(t)
        return (acc, 0)
    return None


def set_history(out, node, output_nr=0):
    out._grad_fn = node
    out._output_nr = output_nr
    if out._view_version is not None:
        out._view_version = version_of(out)


def record(name, out, inputs, backward, saved=(), outputs=None):
    """Make ``out`` (or each of ``outputs``) the result of a node called ``name`` whose backward is
    ``backward(node, *grads)``, returning one gradient per entry of ``inputs``; it reads what it
    saved from ``node.saved_tensors``. For the nodes that are not registry ops."""
    outs = outputs if outputs is not None else (out,)
    node = Node(name, tuple(edge_of(t) for t in inputs), backward, len(outs))
    if saved:
        node.save(saved, outs)
    for i, o in enumerate(outs):
        set_history(o, node, i)
    return node


def sum_to_shape(g, shape):
    """Undo broadcasting: sum ``g`` over the dims that were broadcast to reach ``shape``."""
    gshape = g._data.shape
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, gshape[lead:])):
        raise ShapeError(
            f"sum_to_shape: a gradient of shape {fmt_shape(gshape)} cannot be summed to "
            f"shape {fmt_shape(shape)}, which does not broadcast to it"
        )
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    r = g.sum(axes, keepdim=True) if axes else g
    if lead:
        r = r.reshape(shape)
    return r


# ----------------------------------------------------------------------------------------------
# whether a gradient reaching a leaf may become its .grad without a copy
def _take_last(grads):
    g = grads.pop()
    return g, sys.getrefcount(g), sys.getrefcount(g._data)


# How many references an exclusively owned gradient (and its array) has inside ``_take_last``;
# measured, not assumed, since it differs between Python versions.
class _Probe:
    __slots__ = ("_data",)


def _probe():
    probe = _Probe()
    probe._data = object()
    return probe


EXCLUSIVE_REFCOUNT, EXCLUSIVE_DATA_REFCOUNT = _take_last([_probe()])[1:]


def take_grad_for_leaf(grads):
    """Pop the gradient for a leaf; tell whether nobody else can see it (so it may become .grad).

    Exclusive means: no other reference to the tensor, no other tensor or array view on its array
    (they would hold a reference to it), and the array owns its memory rather than viewing another
    one (backend arrays follow NumPy's convention: ``.base`` is None when they own their memory;
    an array without ``.base`` is never taken as exclusive)."""
    g, refs, data_refs = _take_last(grads)
    exclusive = (
        refs <= EXCLUSIVE_REFCOUNT
        and data_refs <= EXCLUSIVE_DATA_REFCOUNT
        and g._base is None
        and getattr(g._data, "base", False) is None
    )
    return g, exclusive
