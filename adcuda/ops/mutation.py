"""Views and in-place writes: the bookkeeping behind version counters.

A view shares its base's memory and version counter and knows how to rebuild itself from the base
(``Tensor._view_fn``, replayed by ``replay_view``; the dispatch point links each view op's output to
its base), so an in-place write through a view can give the
base a new history (PyTorch's CopySlices) and a view of a base written in place can read its
history again. An in-place write checks that it may happen, writes, bumps the version counter that
saved values are checked against, and moves the tensor's history to the new value.
"""

from ..autograd.grad_mode import state as grad_state
from ..autograd.graph import record, requires_grad, set_history, version_counter
from ..autograd.tensor_methods import attach_retain_hook
from ..errors import AutogradError, ShapeError, fmt_shape
from ..tensor import Tensor, primitives, replay_view


def check_inplace_allowed(t, op):
    data = t._data
    if 0 in data.strides and 0 not in data.shape and any(st == 0 and n > 1 for st, n in zip(data.strides, data.shape)):
        raise ShapeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor refers to a "
            f"single memory location (shape {fmt_shape(t.shape)}, stride {t.stride()}: an expanded "
            "tensor). Please clone() the tensor before performing the operation."
        )
    if grad_state.enabled:
        leaf = t if t._base is None else t._base
        if leaf._requires_grad and leaf.grad_fn is None:
            what = "a view of a leaf Variable" if t._base is not None else "a leaf Variable"
            raise AutogradError(f"{op}: {what} that requires grad is being used in an in-place operation.")
        if t._view_fn is not None and t._view_version is None and t._base.requires_grad:
            raise AutogradError(
                f"{op}: a view was created in no_grad mode and is being modified inplace with grad mode "
                "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both inside the "
                "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
                "want the inplace to be tracked)."
            )
        if t._view_fn is not None and t._base.requires_grad:
            _read_from_base_memory(t)


def apply_inplace(t, fn, op):
    """``fn(t)`` written back into ``t``'s memory. When a graph is recorded ``fn`` runs on a clone,
    so a backward rule that saved its input still finds the old value."""
    check_inplace_allowed(t, op)
    source = t.clone() if grad_state.enabled and (requires_grad(t)) else t
    return commit_inplace(t, fn(source), op)


def write_untracked(t, data, op):
    """Write ``data`` (a backend array or a scalar, broadcast) into ``t`` with nothing to record."""
    try:
        primitives(t).copy_(t._data, data)
    except ValueError as e:
        raise ShapeError(f"{op}: cannot write into this tensor of shape {fmt_shape(t.shape)} in place ({e})") from None
    version_counter(t).value += 1
    return t


def commit_inplace(t, result, op):
    """Write ``result`` (a tensor of ``t``'s shape, possibly carrying history) into ``t``'s memory,
    bump the version counter and, when recording, make ``t`` (and its base, for a view) carry the
    new history."""
    if result._data.shape != t._data.shape:  # (both backends' arrays give tuples: no Size made per call)
        raise ShapeError(
            f"{op}: output with shape {fmt_shape(t.shape)} doesn't match the broadcast shape {fmt_shape(result.shape)}"
        )
    try:
        primitives(t).copy_(t._data, result._data)
    except ValueError as e:
        raise ShapeError(
            f"{op}: cannot write into this tensor in place ({e}); it is probably an "
            "expanded view whose elements share memory; clone() it first"
        ) from None
    version_counter(t).value += 1
    if not grad_state.enabled:
        return t
    is_view = t._base is not None and t._view_fn is not None
    if not requires_grad(result) and not requires_grad(t._base if is_view else t):
        return t
    # (the history the write replaces: a view's grad_fn read now, after the version bump, would be a
    # new replay from the base, without the hook retain_grad put on the old one)
    old_node, old_nr = t._grad_fn, t._output_nr
    if is_view:
        _rebase_view_history(t, result)
    elif not requires_grad(result):
        _overwritten_by_constant(t, op)
    else:
        if result.grad_fn is None:  # a leaf: ``t`` now holds its value
            result = _alias_of_leaf(result)
        set_history(t, result.grad_fn, result._output_nr)
    if t._retains_grad and old_node is not None:
        if old_node.retain_hooks:
            old_node.retain_hooks.pop(old_nr, None)
        attach_retain_hook(t, t.grad_fn)
    return t


def _alias_of_leaf(leaf):
    out = Tensor._make(leaf._data, leaf._device)
    record("AliasBackward0", out, (leaf,), lambda node, g: g)
    return out


def _zeros_like(t):
    return Tensor._make(primitives(t).full(tuple(t._data.shape), 0, t.dtype), t._device)


def _overwritten_by_constant(t, op):
    """``t`` (with history) now holds a constant: it still requires grad, as in PyTorch, and its
    old history receives zeros."""
    placeholder = Tensor._make(t._data, t._device)
    old = Tensor._make(t._data, t._device)
    old._vc = version_counter(t)
    old._grad_fn, old._output_nr = t.grad_fn, t._output_nr
    name = op.strip("_").replace("_", " ").title().replace(" ", "") + "Backward0"
    record(name, placeholder, (old,), lambda node, g: _zeros_like(g))
    set_history(t, placeholder._grad_fn, 0)


def _rebase_view_history(view, result):
    """``base[view] = result`` as a graph node (PyTorch's CopySlices), so gradients reach both the
    base's previous history and ``result``."""
    base = view._base
    view_fn = view._view_fn
    strided = _reads_memory_positions(view_fn)

    def mask_outside_view(g):
        bk = primitives(g)
        mask = Tensor._make(bk.full(tuple(g.shape), 1, g.dtype), g._device)
        if strided:
            mask = _laid_out_as(old_base, mask)
        inner = replay_view(view_fn, mask)
        bk.copy_(inner._data, 0)
        return mask

    def backward(node, g):
        if strided:
            g = _laid_out_as(old_base, g)
        inner = replay_view(view_fn, g)
        return g * mask_outside_view(g), inner

    old_base = Tensor._make(base._data, base._device)
    old_base._vc = version_counter(base)
    old_base._grad_fn, old_base._output_nr = base.grad_fn, base._output_nr
    old_base._requires_grad = base._requires_grad
    placeholder = Tensor._make(base._data, base._device)
    placeholder._vc = version_counter(base)
    node = record("CopySlices", placeholder, (old_base, result), backward)
    set_history(base, node, 0)
    # the view now reads from the base's new history
    fresh = replay_view(view_fn, base)
    set_history(view, fresh._grad_fn, fresh._output_nr)


def _read_from_base_memory(view):
    """Where a step of ``view``'s chain is an as_strided of a view, ``view``'s history read straight from
    its base's memory (an as_strided of the base at the view's own sizes, strides and storage offset),
    before a write in place computes from it. Such a step may read memory outside its input's elements,
    and its gradient reaches only its input's elements (PyTorch's rule, kept for reads): the write's
    gradient for the view's old values would lose the others. PyTorch's CopySlices hands that gradient
    to the base whole; a history of the base's memory hands it the same."""
    chain = view._view_fn
    while chain is not None:
        if chain[1].op.name == "as_strided" and chain[0] is not None:
            base = view._base
            fresh = chain[1](base, tuple(view._data.shape), view.stride(), view.storage_offset())
            old_node, old_nr = view._grad_fn, view._output_nr
            set_history(view, fresh._grad_fn, fresh._output_nr)
            if view._retains_grad and old_node is not None and old_node.retain_hooks:
                old_node.retain_hooks.pop(old_nr, None)  # (the write's commit hooks its new history)
            return
        chain = chain[0]


def _reads_memory_positions(chain):
    """Whether a chain of view steps (``Tensor._view_fn``) has an as_strided step, whose sizes, strides
    and storage offset name positions in memory rather than in the tensor it is applied to."""
    while chain is not None:
        if chain[1].op.name == "as_strided":  # (a step's entry carries its op's declaration)
            return True
        chain = chain[0]
    return False


def _laid_out_as(base, g):
    """``g``'s values (``base``'s shape) in memory of its own laid out as ``base``'s is (its strides and
    storage offset), for the replay of an as_strided view over a gradient to read the positions it
    read from ``base`` (PyTorch's CopySlices lays the gradient out so too). A copy, recorded when a
    graph of the backward is being built."""
    bk = primitives(g)
    shape, strides, offset = tuple(base._data.shape), base.stride(), base.storage_offset()
    extent = 0 if 0 in shape else offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    memory = bk.full((extent,), 0, g.dtype)
    out = Tensor._make(bk.as_strided(memory, shape, strides, offset), g._device)
    return out.copy_(g)
