"""Indexing: ``t[key]`` and ``t[key] = v`` (ints, slices with steps, None, Ellipsis, integer
tensors and boolean masks), gather, scatter_add, index_select, masked_fill, tril, triu, one_hot."""
import numbers

from .. import dtypes as dt
from ..errors import DTypeError, IndexOutOfRangeError, ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import (check_inplace_allowed, commit_inplace, make_view, method, needs_grad, record,
                    sum_to_shape, wrap, wrap_dim)


def _is_basic_item(k):
    return k is None or k is Ellipsis or isinstance(k, slice) or (
        isinstance(k, numbers.Integral) and not isinstance(k, bool))


def _convert_key(input, key, op):
    """The key as the backend takes it, and whether it is basic (gives a view)."""
    if not isinstance(key, tuple):
        key = (key,)
    out, basic = [], True
    for k in key:
        if isinstance(k, Tensor):
            if k._device != input._device:
                raise IndexOutOfRangeError(f"{op}: indices on {k._device} for a tensor on {input._device}")
            if k.dtype is not dt.bool_ and k.dtype.category != dt.INTEGER:
                raise IndexOutOfRangeError(f"{op}: tensors used as indices must be long, int or bool "
                                           f"tensors, got {k.dtype}")
            out.append(k._data)
            basic = False
        elif isinstance(k, slice):
            if k.step is not None and int(k.step) <= 0:
                raise ValueError(f"{op}: slice step must be greater than zero, got {k.step}")
            out.append(slice(*(int(v) if v is not None else None for v in (k.start, k.stop, k.step))))
        elif _is_basic_item(k):
            out.append(int(k) if isinstance(k, numbers.Integral) else k)
        elif isinstance(k, bool):
            out.append(k)
            basic = False
        elif isinstance(k, (list, tuple)) or hasattr(k, "__array__"):
            from ..factories import tensor
            idx = tensor(k, device=input._device)
            if idx.numel() == 0:
                idx = idx.to(dtype=dt.int64)
            return _convert_key(input, key[:len(out)] + (idx,) + key[len(out) + 1:], op)
        else:
            raise TypeError(f"{op}: unsupported index of type {type(k).__name__}")
    return tuple(out), basic


def _index_error(op, input, key, err):
    return IndexOutOfRangeError(f"{op}: index {_describe(key)} is out of range or invalid for a tensor "
                                f"of shape {fmt_shape(input.shape)} ({err})")


def _describe(key):
    items = key if isinstance(key, tuple) else (key,)
    return "[" + ", ".join(f"tensor of shape {fmt_shape(k.shape)}" if isinstance(k, Tensor) else repr(k)
                           for k in items) + "]"


def getitem(input, key):
    bkey, basic = _convert_key(input, key, "index")
    bk = input._backend
    try:
        data = bk.slice(input._data, bkey) if basic else bk.index(input._data, bkey)
    except IndexError as e:
        raise _index_error("index", input, key, e) from None
    in_shape = tuple(input.shape)
    if basic:
        return make_view(input, data, "SliceBackward0",
                         lambda node, g: _scatter_back(g, in_shape, bkey, False),
                         lambda t: t[key])
    out = wrap(data, input._device)
    if needs_grad(input):
        record("IndexBackward0", out, (input,), lambda node, g: _scatter_back(g, in_shape, bkey, True))
    return out


def _scatter_back(g, shape, bkey, accumulate):
    from ..factories import zeros
    return index_put(zeros(shape, dtype=g.dtype, device=g.device), bkey, g, accumulate, _raw_key=True)


def index_put(input, key, values, accumulate=False, *, _raw_key=False, _op="index_put"):
    """Out-of-place ``input[key] = values`` (``+=`` with duplicates summed when ``accumulate``).
    ``_op`` names the op in errors (``index_put_`` when it implements ``t[key] = v``)."""
    bkey = key if _raw_key else _convert_key(input, key, _op)[0]
    bk = input._backend
    if not isinstance(values, Tensor):
        from ..factories import tensor
        values = tensor(values, dtype=input.dtype, device=input._device)
    if values.dtype is not input.dtype:
        values = values.to(dtype=input.dtype)
    data = bk.astype(input._data, input.dtype)
    try:
        bk.index_put_(data, bkey, values._data, accumulate)
    except IndexError as e:
        raise _index_error(_op, input, key, e) from None
    except ValueError as e:
        raise ShapeError(f"{_op}: values of shape {fmt_shape(values.shape)} cannot be written to "
                         f"index {_describe(key)} of a tensor of shape {fmt_shape(input.shape)} ({e})") from None
    out = wrap(data, input._device)
    if needs_grad(input, values):
        v_shape = tuple(values.shape)
        want_in, want_v = input.requires_grad, values.requires_grad

        def backward(node, g):
            g_in = g_v = None
            if want_in:
                if accumulate:
                    g_in = g
                else:
                    from ..factories import zeros
                    g_in = index_put(g, bkey, zeros((), dtype=g.dtype, device=g.device), _raw_key=True)
            if want_v:
                picked = _take(g, bkey)
                g_v = sum_to_shape(picked, v_shape) if tuple(picked.shape) != v_shape else picked
            return g_in, g_v
        record("IndexPutBackward0", out, (input, values), backward)
    return out


def _take(g, bkey):
    """``g[bkey]`` for a key already in backend form (differentiable)."""
    bk = g._backend
    basic = all(_is_basic_item(k) for k in bkey)
    data = bk.contiguous(bk.slice(g._data, bkey)) if basic else bk.index(g._data, bkey)
    out = wrap(data, g._device)
    if needs_grad(g):
        shape = tuple(g.shape)
        record("IndexBackward0", out, (g,), lambda node, gg: _scatter_back(gg, shape, bkey, not basic))
    return out


def setitem(input, key, value):
    check_inplace_allowed(input, "index_put_")
    if isinstance(value, Tensor) and value._device != input._device:
        from ..errors import DeviceError
        raise DeviceError(f"index_put_: value on {value._device} for a tensor on {input._device}")
    bkey, basic = _convert_key(input, key, "index_put_")
    if needs_grad(input, value):
        if basic:
            _write_into_view(input, key, value)
        else:
            commit_inplace(input, index_put(input, key, value, _op="index_put_"), "index_put_")
        return
    bk = input._backend
    vdata = value._data if isinstance(value, Tensor) else value
    try:
        if basic:
            bk.copy_(bk.slice(input._data, bkey), vdata)
        else:
            bk.index_put_(input._data, bkey, vdata, False)
    except IndexError as e:
        raise _index_error("index_put_", input, key, e) from None
    except ValueError as e:
        vshape = fmt_shape(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ShapeError(f"index_put_: value of shape {vshape} cannot be written to index "
                         f"{_describe(key)} of a tensor of shape {fmt_shape(input.shape)} ({e})") from None
    input._version.value += 1


def _write_into_view(input, key, value):
    """``input[key] = value`` for a basic key while recording: an in-place write into the view,
    so only the view's elements are copied and the base's history becomes CopySlices."""
    target = getitem(input, key)
    if not isinstance(value, Tensor):
        from ..factories import full
        value = full((), value, dtype=input.dtype, device=input.device)
    elif value.dtype is not input.dtype:
        value = value.to(dtype=input.dtype)
    try:
        value = value.expand(tuple(target.shape))
    except ShapeError:
        raise ShapeError(f"index_put_: value of shape {fmt_shape(value.shape)} cannot be written to index "
                         f"{_describe(key)} of a tensor of shape {fmt_shape(input.shape)} (the indexed "
                         f"part has shape {fmt_shape(target.shape)})") from None
    commit_inplace(target, value, "index_put_")


def _check_index_tensor(op, input, dim, index, same_rank=True):
    if not isinstance(index, Tensor) or index.dtype.category != dt.INTEGER:
        raise DTypeError(f"{op}: index must be an int64 tensor, got "
                         f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    d = wrap_dim(dim, input.ndim, op)
    if same_rank and index.ndim != input.ndim and not (input.ndim == 0 and index.ndim <= 1):
        raise ShapeError(f"{op}: index tensor must have the same number of dimensions as the input "
                         f"tensor; got index {fmt_shape(index.shape)} and input {fmt_shape(input.shape)}")
    if index.numel():
        lo = int(index.min().item())
        hi = int(index.max().item())
        n = input.shape[d] if input.ndim else 1
        if lo < 0 or hi >= n:
            raise IndexOutOfRangeError(f"{op}: index {hi if hi >= n else lo} is out of bounds for "
                                       f"dimension {d} with size {n} (input shape {fmt_shape(input.shape)})")
    return d


def gather(input, dim, index):
    d = _check_index_tensor("gather", input, dim, index)
    for i, (a, b) in enumerate(zip(index.shape, input.shape)):
        if i != d and a > b:
            raise ShapeError(f"gather: index {fmt_shape(index.shape)} is larger than input "
                             f"{fmt_shape(input.shape)} in dimension {i}")
    out = wrap(input._backend.gather(input._data, d, index._data), input._device)
    if needs_grad(input):
        shape = tuple(input.shape)

        def backward(node, g):
            from ..factories import zeros
            return scatter_add(zeros(shape, dtype=g.dtype, device=g.device), d, index, g)
        record("GatherBackward0", out, (input,), backward)
    return out


def scatter_add(input, dim, index, src):
    d = _check_index_tensor("scatter_add", input, dim, index)
    if not isinstance(src, Tensor):
        raise DTypeError("scatter_add: src must be a Tensor")
    for i, a in enumerate(index.shape):
        if a > src.shape[i] or (i != d and a > input.shape[i]):
            raise ShapeError(f"scatter_add: index {fmt_shape(index.shape)} is larger than src "
                             f"{fmt_shape(src.shape)} or input {fmt_shape(input.shape)} in dimension {i}")
    if src.dtype is not input.dtype:
        src = src.to(dtype=input.dtype)
    out = wrap(input._backend.scatter_add(input._data, d, index._data, src._data), input._device)
    if needs_grad(input, src):
        want_in, want_src = input.requires_grad, src.requires_grad
        src_shape = tuple(src.shape)

        def backward(node, g):
            g_src = None
            if want_src:
                g_src = gather(g, d, index)
                if tuple(g_src.shape) != src_shape:
                    from ..factories import zeros
                    pad = zeros(src_shape, dtype=g.dtype, device=g.device)
                    g_src = index_put(pad, tuple(slice(0, n) for n in index.shape), g_src)
            return (g if want_in else None), g_src
        record("ScatterAddBackward0", out, (input, src), backward)
    return out


def index_select(input, dim, index):
    if not isinstance(index, Tensor) or index.ndim > 1:
        raise ShapeError("index_select: index must be a 1-D int64 tensor")
    d = _check_index_tensor("index_select", input, dim, index, same_rank=False)
    return getitem(input, (slice(None),) * d + (index.reshape(-1),))


def masked_fill(input, mask, value):
    from .elementwise import where
    if not isinstance(mask, Tensor) or mask.dtype is not dt.bool_:
        raise DTypeError(f"masked_fill: mask must be a bool tensor, got "
                         f"{mask.dtype if isinstance(mask, Tensor) else type(mask).__name__}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise ShapeError("masked_fill: only supports a 0-dimensional value tensor")
        value = value.to(dtype=input.dtype)
    try:
        out = where(mask, value, input)
    except ShapeError:
        out = None
    if out is None or tuple(out.shape) != tuple(input.shape):
        raise ShapeError(f"masked_fill: mask of shape {fmt_shape(mask.shape)} does not broadcast to the "
                         f"input's shape {fmt_shape(input.shape)}")
    return out if out.dtype is input.dtype else out.to(dtype=input.dtype)


def _triangle(op, input, diagonal):
    if input.ndim < 2:
        raise ShapeError(f"{op}: input tensor must have at least 2 dimensions, got shape {fmt_shape(input.shape)}")
    out = wrap(getattr(input._backend, op)(input._data, diagonal), input._device)
    if needs_grad(input):
        record(op.capitalize() + "Backward0", out, (input,), lambda node, g: _triangle(op, g, diagonal))
    return out


def tril(input, diagonal=0):
    return _triangle("tril", input, diagonal)


def triu(input, diagonal=0):
    return _triangle("triu", input, diagonal)


def one_hot(tensor, num_classes=-1):
    from ..factories import arange
    if tensor.dtype.category != dt.INTEGER:
        raise DTypeError(f"one_hot: is only applicable to index tensors, got {tensor.dtype}")
    if tensor.numel():
        lo, hi = int(tensor.min().item()), int(tensor.max().item())
        if lo < 0:
            raise IndexOutOfRangeError(f"one_hot: class values must be non-negative, got {lo}")
        if num_classes == -1:
            num_classes = hi + 1
        elif hi >= num_classes:
            raise IndexOutOfRangeError(f"one_hot: class value {hi} is out of range for num_classes={num_classes}")
    elif num_classes == -1:
        raise ShapeError("one_hot: can not infer the total number of classes from an empty tensor")
    classes = arange(num_classes, device=tensor.device)
    return (tensor.unsqueeze(-1) == classes).to(dtype=dt.int64)


def _inplace(name, fn):
    def method_(self, *args, **kwargs):
        check_inplace_allowed(self, name)
        return commit_inplace(self, fn(self, *args, **kwargs), name)
    method_.__name__ = name
    return method_


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
for _name in ("gather", "scatter_add", "index_select", "masked_fill", "tril", "triu"):
    method(_name)(globals()[_name])
Tensor.masked_fill_ = _inplace("masked_fill_", masked_fill)
Tensor.index_put = lambda self, indices, values, accumulate=False: index_put(self, tuple(indices), values, accumulate)
Tensor.index_put_ = _inplace("index_put_", lambda self, indices, values, accumulate=False:
                             index_put(self, tuple(indices), values, accumulate))
Tensor.scatter_add_ = _inplace("scatter_add_", scatter_add)
