"""What every op definition uses: operand coercion, result wrapping, graph recording, views and
in-place updates.

An op is one function: it computes its forward with backend primitives and, when a gradient is
needed, records a node whose backward rule is written with differentiable ops (so
``create_graph=True`` gives higher-order gradients), or with a fused backward primitive that has
its own backward rule.
"""
from .. import dtypes as dt
from ..autograd.grad_mode import is_grad_enabled
from ..autograd.graph import Node
from ..device import CPU
from ..errors import AutogradError, DeviceError, DTypeError, ShapeError, fmt_shape
from ..tensor import Tensor, _wrap_dim

wrap_dim = _wrap_dim


def wrap(data, device):
    """A new tensor over a backend array computed by a primitive."""
    return Tensor._make(data, device)


def needs_grad(*tensors):
    if not is_grad_enabled():
        return False
    for t in tensors:
        if t.__class__ is Tensor and (t._requires_grad or t.grad_fn is not None):
            return True
    return False


def edge(t):
    if t.__class__ is not Tensor or not (t._requires_grad or t.grad_fn is not None):
        return None
    node, nr = t._edge()
    return (node, nr)


def record(name, out, inputs, backward, saved=(), outputs=None):
    """Make ``out`` (a tensor or a tuple of tensors) the result of a node called ``name``.

    ``backward(node, *grads)`` returns one gradient per entry of ``inputs`` (``None`` where there is
    none); it reads its saved tensors from ``node.saved_tensors``.
    """
    outs = outputs if outputs is not None else (out,)
    node = Node(name, tuple(edge(t) for t in inputs), backward, len(outs))
    if saved:
        node.save(saved, outs)
    for i, o in enumerate(outs):
        o.grad_fn = node
        o._output_nr = i
    return node


def check_same_device(op, *tensors):
    dev = None
    for t in tensors:
        if t.__class__ is Tensor:
            if dev is None:
                dev = t._device
            elif t._device != dev:
                raise DeviceError(f"{op}: expected all tensors to be on the same device, but found at "
                                  f"least two devices, {dev} and {t._device}")
    return dev


def result_type(*operands):
    """PyTorch's type promotion over tensors and Python scalars."""
    dim_dt = zero_dt = None
    scalar_cat = -1
    for o in operands:
        if o.__class__ is Tensor:
            d = o.dtype
            if o._data.ndim:
                dim_dt = d if dim_dt is None else dt.promote(dim_dt, d)
            else:
                zero_dt = d if zero_dt is None else dt.promote(zero_dt, d)
        elif o is not None:
            scalar_cat = max(scalar_cat, dt.scalar_category(o))
    result = dim_dt
    if zero_dt is not None and (result is None or zero_dt.category > result.category):
        result = zero_dt
    if scalar_cat >= 0 and (result is None or scalar_cat > result.category):
        result = dt.default_for_category(scalar_cat)
    return result


def as_tensor_operand(x, op, like=None):
    """A Python scalar or NumPy value as a 0-d tensor on ``like``'s device (used where an op needs
    a tensor rather than a scalar)."""
    if x.__class__ is Tensor:
        return x
    from ..factories import tensor
    if isinstance(x, (bool, int, float)):
        d = result_type(x) if like is None else result_type(like, x)
        return tensor(x, dtype=d, device=like.device if like is not None else None)
    try:
        return tensor(x, device=like.device if like is not None else None)
    except Exception as e:
        raise DTypeError(f"{op}: unsupported operand of type {type(x).__name__}") from e


def broadcast_shapes(op, *shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n == out[i] or n == 1:
                continue
            if out[i] == 1:
                out[i] = n
            else:
                raise ShapeError(f"{op}: shapes " + " and ".join(fmt_shape(x) for x in shapes)
                                 + " cannot be broadcast")
    return tuple(out)


def sum_to_shape(g, shape):
    """Undo broadcasting: sum ``g`` over the dims that were broadcast to reach its shape."""
    gshape = g.shape
    if tuple(gshape) == tuple(shape):
        return g
    lead = len(gshape) - len(shape)
    if lead < 0 or any(n != 1 and n != m for n, m in zip(shape, gshape[lead:])):
        raise ShapeError(f"sum_to_shape: a gradient of shape {fmt_shape(gshape)} cannot be summed to "
                         f"shape {fmt_shape(shape)}, which does not broadcast to it")
    axes = tuple(range(lead)) + tuple(i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1)
    from .reduction import sum as _sum
    r = _sum(g, axes, keepdim=True) if axes else g
    if lead:
        r = r.reshape(shape)
    return r


# ----------------------------------------------------------------------------------------------
# views
class ViewChain:
    """How a view is rebuilt from its root base: the chain of view steps, applied in a loop (a view
    of a view of ... stays shallow to call and to free, however long the chain)."""
    __slots__ = ("parent", "step")

    def __init__(self, parent, step):
        self.parent = parent
        self.step = step

    def __call__(self, t):
        steps = []
        link = self
        while link is not None:
            steps.append(link.step)
            link = link.parent
        for step in reversed(steps):
            t = step(t)
        return t


def make_view(base, data, name, backward, view_fn):
    """A tensor sharing ``base``'s memory and version counter. ``view_fn`` rebuilds the same view
    from another tensor of the base's shape; in-place writes through the view use it to update the
    base's history."""
    out = Tensor._make(data, base._device)
    out._version = base._version
    if base._base is not None and base._view_fn is not None:
        out._base = base._base
        out._view_fn = ViewChain(base._view_fn, view_fn)
    else:
        out._base = base
        out._view_fn = ViewChain(None, view_fn)
    if is_grad_enabled():
        # recorded views re-read their history when the base is later written in place
        out._view_version = base._version.value
    if needs_grad(base):
        record(name, out, (base,), backward)
    return out


# ----------------------------------------------------------------------------------------------
# in-place updates
def check_inplace_allowed(t, op):
    if any(st == 0 and n > 1 for st, n in zip(t.stride(), t._data.shape)):
        raise ShapeError(
            f"{op}: unsupported operation: more than one element of the written-to tensor refers to a "
            f"single memory location (shape {fmt_shape(t.shape)}, stride {t.stride()}: an expanded "
            "tensor). Please clone() the tensor before performing the operation.")
    if is_grad_enabled():
        leaf = t if t._base is None else t._base
        if leaf.grad_fn is None and leaf._requires_grad:
            what = "a view of a leaf Variable" if t._base is not None else "a leaf Variable"
            raise AutogradError(f"{op}: {what} that requires grad is being used in an in-place operation.")
        if t._view_fn is not None and t._view_version is None and t._base.requires_grad:
            raise AutogradError(
                f"{op}: a view was created in no_grad mode and is being modified inplace with grad mode "
                "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. You "
                "can clarify your code by moving both the view and the inplace either both inside the "
                "no_grad block (if you don't want the inplace to be tracked) or both outside (if you "
                "want the inplace to be tracked).")


def commit_inplace(t, result, op):
    """Write ``result`` (a tensor of ``t``'s shape, possibly carrying history) into ``t``'s memory,
    bump the version counter and, when recording, make ``t`` (and its base, for a view) carry the
    new history."""
    bk = t._backend
    if tuple(result.shape) != tuple(t.shape):
        raise ShapeError(f"{op}: output with shape {fmt_shape(t.shape)} doesn't match the broadcast "
                         f"shape {fmt_shape(result.shape)}")
    try:
        bk.copy_(t._data, result._data)
    except ValueError as e:
        raise ShapeError(f"{op}: cannot write into this tensor in place ({e}); it is probably an "
                         "expanded view whose elements share memory; clone() it first") from None
    t._version.value += 1
    if not is_grad_enabled():
        return t
    is_view = t._base is not None and t._view_fn is not None
    old_node, old_nr = t.grad_fn, t._output_nr
    if not result.requires_grad and not (t._base if is_view else t).requires_grad:
        return t
    if is_view:
        _rebase_view_history(t, result)
    elif not result.requires_grad:
        _overwritten_by_constant(t, op)
    else:
        if result.grad_fn is None:  # a leaf: ``t`` now holds its value
            result = _alias_of_leaf(result)
        t.grad_fn, t._output_nr = result.grad_fn, result._output_nr
    if t._retains_grad and old_node is not None:
        old_node.retain_hooks.pop(old_nr, None)
        t._attach_retain_hook(t.grad_fn)
    return t


def _alias_of_leaf(leaf):
    out = Tensor._make(leaf._data, leaf._device)
    record("AliasBackward0", out, (leaf,), lambda node, g: g)
    return out


def _overwritten_by_constant(t, op):
    """``t`` (with history) now holds a constant: it still requires grad, as in PyTorch, and its
    old history receives zeros."""
    from ..factories import zeros_like
    placeholder = Tensor._make(t._data, t._device)
    old = t.detach()
    old.grad_fn, old._output_nr = t.grad_fn, t._output_nr
    name = op.strip("_").replace("_", " ").title().replace(" ", "") + "Backward0"
    record(name, placeholder, (old,), lambda node, g: zeros_like(g))
    t.grad_fn, t._output_nr = placeholder.grad_fn, 0


def _rebase_view_history(view, result):
    """``base[view] = result`` as a graph node (PyTorch's CopySlices), so gradients reach both the
    base's previous history and ``result``."""
    base = view._base
    view_fn = view._view_fn
    bk = base._backend

    def mask_outside_view(g):
        mask = Tensor._make(bk.full(tuple(g.shape), 1, g.dtype), g._device)
        inner = view_fn(mask)
        bk.copy_(inner._data, 0)
        return mask

    def backward(node, g):
        inner = view_fn(g)
        return g * mask_outside_view(g), inner

    old_base = base.detach()
    old_base.grad_fn, old_base._output_nr = base.grad_fn, base._output_nr
    old_base._requires_grad = base._requires_grad
    placeholder = Tensor._make(base._data, base._device)
    placeholder._version = base._version
    node = record("CopySlices", placeholder, (old_base, result), backward)
    base.grad_fn, base._output_nr = node, 0
    # the view now reads from the base's new history
    fresh = view_fn(base)
    view.grad_fn, view._output_nr = fresh.grad_fn, fresh._output_nr


def method(*names):
    """Attach the decorated function to ``Tensor`` under ``names`` (defaults to its own name)."""
    def deco(fn):
        for n in names or (fn.__name__,):
            setattr(Tensor, n, fn)
        return fn
    return deco
