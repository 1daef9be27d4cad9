"""Graph nodes: one per recorded op (or per custom ``Function`` call), plus ``AccumulateGrad`` for
leaves. A node keeps its backward rule, the edges to the nodes of its inputs, and the values saved
for backward, checked against the tensors' version counters when they are unpacked."""
import itertools
import sys

from ..errors import AutogradError, fmt_shape
from . import anomaly

_sequence = itertools.count()

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you call "
    ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the "
    "graph a second time or if you need to access saved tensors after calling backward.")


class Node:
    __slots__ = ("name", "next_edges", "backward_fn", "num_outputs", "seq", "trace", "_saved",
                 "_released", "pre_hooks", "retain_hooks", "ctx", "__weakref__")

    def __init__(self, name, next_edges, backward_fn, num_outputs=1):
        self.name = name
        self.next_edges = next_edges
        self.backward_fn = backward_fn
        self.num_outputs = num_outputs
        self.seq = next(_sequence)
        self.trace = anomaly.forward_trace() if anomaly.is_anomaly_enabled() else None
        self._saved = None
        self._released = False
        self.pre_hooks = None
        self.retain_hooks = None
        self.ctx = None

    def __repr__(self):
        return f"<{self.name} object>"

    @property
    def next_functions(self):
        return tuple((e[0], e[1]) if e is not None else (None, 0) for e in self.next_edges)

    # ------------------------------------------------------------------ saved values
    def save(self, tensors, outputs=()):
        """Keep ``tensors`` for backward. An op's own output is kept as its data and version counter
        (not the Tensor, which would make a reference cycle) and rebuilt on unpack."""
        saved = []
        for t in tensors:
            if t is None:
                saved.append(None)
            elif any(t is o for o in outputs):
                saved.append((None, t._data, t._version, t._version.value, t._device, t._output_nr))
            else:
                saved.append((t, None, t._version, t._version.value, None, 0))
        self._saved = saved

    @property
    def saved_tensors(self):
        if self._released:
            raise AutogradError(FREED_MESSAGE)
        if self._saved is None:
            return ()
        from ..tensor import Tensor
        out = []
        for item in self._saved:
            if item is None:
                out.append(None)
                continue
            tensor, data, version, expected, device, output_nr = item
            if version.value != expected:
                shape = tensor.shape if tensor is not None else data.shape
                raise AutogradError(
                    "one of the variables needed for gradient computation has been modified by an "
                    f"inplace operation: [{'output' if tensor is None else 'input'} of shape "
                    f"{fmt_shape(shape)}], which is saved by {self.name}, is at version "
                    f"{version.value}; expected version {expected} instead. Hint: enable anomaly "
                    "detection to find the forward call that produced it, or clone() the value "
                    "before changing it in place.")
            if tensor is None:
                tensor = Tensor._make(data, device)
                tensor._version = version
                tensor.grad_fn = self
                tensor._output_nr = output_nr
            out.append(tensor)
        return tuple(out)

    def release(self):
        if self._saved is not None:
            self._saved = None
            self._released = True

    # ------------------------------------------------------------------ hooks
    def add_pre_hook(self, output_nr, hook):
        if self.pre_hooks is None:
            self.pre_hooks = {}
        hooks = self.pre_hooks.setdefault(output_nr, {})
        return RemovableHandle(hooks, hook)

    def set_retain_hook(self, output_nr, hook):
        """``retain_grad``'s hook: kept apart so it runs after every other hook on that output."""
        if self.retain_hooks is None:
            self.retain_hooks = {}
        self.retain_hooks[output_nr] = hook


class AccumulateGrad(Node):
    """The sink of a leaf tensor: sums the gradients that reach it into ``.grad``."""
    __slots__ = ("variable",)

    def __init__(self, variable):
        super().__init__("AccumulateGrad", (), None)
        self.variable = variable


class RemovableHandle:
    _ids = itertools.count()

    def __init__(self, hooks_dict, hook):
        self.id = next(self._ids)
        self._hooks = hooks_dict
        hooks_dict[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


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
    exclusive = (refs <= EXCLUSIVE_REFCOUNT and data_refs <= EXCLUSIVE_DATA_REFCOUNT and g._base is None
                 and getattr(g._data, "base", False) is None)
    return g, exclusive
