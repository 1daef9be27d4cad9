"""Shape ops: views (reshape view flatten unflatten squeeze unsqueeze transpose permute expand
broadcast_to narrow split chunk unbind select movedim T mT), and copies (flip cat stack repeat
contiguous clone; reshape where the strides leave no choice)."""
import operator

from ..errors import ShapeError, fmt_shape
from ..tensor import Tensor
from ._core import broadcast_shapes, check_same_device, make_view, method, needs_grad, record, result_type, wrap, wrap_dim


def _infer_shape(op, shape, numel):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be a sequence of ints, got {shape!r}") from None
    if shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be inferred, got shape {fmt_shape(shape)}")
    for s in shape:
        if s < -1:
            raise ShapeError(f"{op}: invalid shape dimension {s} in {fmt_shape(shape)}")
    if -1 in shape:
        known = 1
        for s in shape:
            if s != -1:
                known *= s
        if known == 0 or numel % known:
            raise ShapeError(f"{op}: shape {fmt_shape(shape)} is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    n = 1
    for s in shape:
        n *= s
    if n != numel:
        raise ShapeError(f"{op}: shape {fmt_shape(shape)} is invalid for input of size {numel}")
    return shape


def view(input, *shape):
    shape = _infer_shape("view", shape, input.numel())
    data = input._backend.view(input._data, shape)
    if data is None:
        raise ShapeError(
            f"view: view size {fmt_shape(shape)} is not compatible with input tensor's size "
            f"{fmt_shape(input.shape)} and stride {input.stride()} (at least one dimension spans "
            "across two contiguous subspaces). Use .reshape(...) instead.")
    return _reshaped_view(input, data, shape, "ViewBackward0")


def _reshaped_view(input, data, shape, name):
    in_shape = tuple(input.shape)
    return make_view(input, data, name, lambda node, g: g.reshape(in_shape),
                     lambda t: t.reshape(shape))


def reshape(input, *shape):
    shape = _infer_shape("reshape", shape, input.numel())
    data = input._backend.view(input._data, shape)
    if data is not None:
        return _reshaped_view(input, data, shape, "ViewBackward0")
    return view(contiguous(input), shape)


def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, 1)
    s = wrap_dim(start_dim, input.ndim, "flatten")
    e = wrap_dim(end_dim, input.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim ({start_dim}) cannot come after end_dim ({end_dim})")
    shape = tuple(input.shape)
    return reshape(input, shape[:s] + (-1,) + shape[e + 1:])


def unflatten(input, dim, sizes):
    d = wrap_dim(dim, input.ndim, "unflatten")
    shape = tuple(input.shape)
    inner = _infer_shape("unflatten", tuple(sizes), shape[d])
    return reshape(input, shape[:d] + inner + shape[d + 1:])


def squeeze(input, dim=None):
    shape = tuple(input.shape)
    if dim is None:
        axes = {i for i, n in enumerate(shape) if n == 1}
    else:
        dims = (dim,) if isinstance(dim, int) else tuple(dim)
        axes = {wrap_dim(d, input.ndim, "squeeze") for d in dims} if input.ndim else set()
        axes = {a for a in axes if shape[a] == 1}
    return reshape(input, tuple(n for i, n in enumerate(shape) if i not in axes))


def unsqueeze(input, dim):
    d = wrap_dim(dim, input.ndim + 1, "unsqueeze")
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + (1,) + shape[d:])


def permute(input, *dims):
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = tuple(dims[0])
    if len(dims) != input.ndim:
        raise ShapeError(f"permute: number of dims {len(dims)} doesn't match the tensor's {input.ndim} "
                         f"dims (shape {fmt_shape(input.shape)})")
    axes = tuple(wrap_dim(d, input.ndim, "permute") for d in dims) if input.ndim else ()
    if sorted(axes) != list(range(input.ndim)):
        raise ShapeError(f"permute: dims {dims} are not a permutation of {input.ndim} dims")
    inverse = tuple(sorted(range(len(axes)), key=axes.__getitem__))
    data = input._backend.permute(input._data, axes)
    return make_view(input, data, "PermuteBackward0", lambda node, g: permute(g, inverse),
                     lambda t: permute(t, axes))


def transpose(input, dim0, dim1):
    if input.ndim == 0:
        wrap_dim(dim0, 0, "transpose"), wrap_dim(dim1, 0, "transpose")
        return permute(input)
    a = wrap_dim(dim0, input.ndim, "transpose")
    b = wrap_dim(dim1, input.ndim, "transpose")
    axes = list(range(input.ndim))
    axes[a], axes[b] = axes[b], axes[a]
    return permute(input, axes)


def t(input):
    if input.ndim > 2:
        raise ShapeError(f"t: expects a tensor with <= 2 dimensions, but got shape {fmt_shape(input.shape)}")
    return transpose(input, 0, 1) if input.ndim == 2 else input


def expand(input, *sizes):
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        sizes = tuple(sizes[0])
    in_shape = tuple(input.shape)
    if len(sizes) < len(in_shape):
        raise ShapeError(f"expand: the number of sizes provided ({len(sizes)}) must be greater or equal "
                         f"to the number of dimensions in the tensor ({len(in_shape)})")
    lead = len(sizes) - len(in_shape)
    target = []
    for i, s in enumerate(sizes):
        n = in_shape[i - lead] if i >= lead else None
        if s == -1:
            if n is None:
                raise ShapeError(f"expand: -1 not allowed in a new leading dimension (sizes {tuple(sizes)})")
            s = n
        if n is not None and n != 1 and n != s:
            raise ShapeError(f"expand: the expanded size of the tensor ({s}) must match the existing size "
                             f"({n}) at non-singleton dimension {i}. Target sizes: {tuple(sizes)}. "
                             f"Tensor sizes: {fmt_shape(in_shape)}")
        target.append(int(s))
    target = tuple(target)
    if target == in_shape:
        return input
    data = input._backend.expand(input._data, target)
    from ._core import sum_to_shape
    return make_view(input, data, "ExpandBackward0", lambda node, g: sum_to_shape(g, in_shape),
                     lambda t: expand(t, target))


def expand_as(input, other):
    return expand(input, tuple(other.shape))


def broadcast_to(input, shape):
    return expand(input, tuple(shape))


def broadcast_tensors(*tensors):
    shape = broadcast_shapes("broadcast_tensors", *(tuple(t.shape) for t in tensors))
    return tuple(expand(t, shape) for t in tensors)


def flip(input, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    axes = tuple(wrap_dim(d, input.ndim, "flip") for d in dims) if input.ndim else ()
    data = input._backend.contiguous(input._backend.flip(input._data, axes))
    out = wrap(data, input._device)
    if needs_grad(input):
        record("FlipBackward0", out, (input,), lambda node, g: flip(g, axes))
    return out


def narrow(input, dim, start, length):
    d = wrap_dim(dim, input.ndim, "narrow")
    size = input.shape[d]
    if start < 0:
        start += size
    if start < 0 or length < 0 or start + length > size:
        raise ShapeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({size}) "
                         f"of shape {fmt_shape(input.shape)}")
    key = (slice(None),) * d + (slice(start, start + length),)
    return input[key]


def contiguous(input):
    data = input._backend.contiguous(input._data)
    if data is input._data:
        return input
    out = wrap(data, input._device)
    if needs_grad(input):
        record("CloneBackward0", out, (input,), lambda node, g: g)
    return out


def clone(input):
    bk = input._backend
    data = bk.contiguous(input._data)
    if data is input._data:
        data = bk.astype(data, input.dtype)
    out = wrap(data, input._device)
    if needs_grad(input):
        record("CloneBackward0", out, (input,), lambda node, g: g)
    return out


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("cat: expected a non-empty list of Tensors")
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"cat: expected a sequence of Tensors, but element {i} is {type(t).__name__}")
    dev = check_same_device("cat", *tensors)
    # PyTorch skips legacy empty 1-d tensors of shape (0,)
    parts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    ref = parts[0]
    if ref.ndim == 0:
        raise ShapeError("cat: zero-dimensional tensor cannot be concatenated")
    d = wrap_dim(dim, ref.ndim, "cat")
    for t in parts:
        if t.ndim != ref.ndim or any(a != b for i, (a, b) in enumerate(zip(t.shape, ref.shape)) if i != d):
            raise ShapeError(f"cat: sizes of tensors must match except in dimension {d}; got shapes "
                             + ", ".join(fmt_shape(x.shape) for x in parts))
    dtype = result_type(*parts) if len({p.dtype for p in parts}) > 1 else ref.dtype
    parts = [p if p.dtype is dtype else p.to(dtype=dtype) for p in parts]
    out = wrap(ref._backend.cat([p._data for p in parts], d), dev)
    if needs_grad(*parts):
        sizes = [p.shape[d] for p in parts]
        wants = [p.requires_grad for p in parts]

        def backward(node, g):
            grads, start = [], 0
            for n, want in zip(sizes, wants):
                grads.append(narrow(g, d, start, n) if want else None)
                start += n
            return tuple(grads)
        record("CatBackward0", out, tuple(parts), backward)
    return out


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack: expected a non-empty list of Tensors")
    shapes = {tuple(t.shape) for t in tensors}
    if len(shapes) > 1:
        raise ShapeError("stack: expects each tensor to be equal size, but got "
                         + ", ".join(fmt_shape(t.shape) for t in tensors))
    d = wrap_dim(dim, tensors[0].ndim + 1, "stack")
    return cat([unsqueeze(t, d) for t in tensors], d)


def split(input, split_size_or_sections, dim=0):
    d = wrap_dim(dim, input.ndim, "split")
    size = input.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step <= 0 and size:
            raise ValueError(f"split: split_size must be positive, got {step}")
        sections = [min(step, size - s) for s in range(0, size, step)] if size else [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size:
            raise ShapeError(f"split: split sizes {sections} don't sum to dimension {d}'s size {size}")
    out, start = [], 0
    for n in sections:
        out.append(narrow(input, d, start, n))
        start += n
    return tuple(out)


def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    d = wrap_dim(dim, input.ndim, "chunk")
    size = input.shape[d]
    if size == 0:  # PyTorch gives ``chunks`` empty pieces here
        return tuple(narrow(input, d, 0, 0) for _ in range(chunks))
    step = max(-(-size // chunks), 1)
    return split(input, step, d)


def unbind(input, dim=0):
    d = wrap_dim(dim, input.ndim, "unbind")
    return tuple(select(input, d, i) for i in range(input.shape[d]))


def select(input, dim, index):
    d = wrap_dim(dim, input.ndim, "select")
    return input[(slice(None),) * d + (index,)]


def repeat(input, *repeats):
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    if len(repeats) < input.ndim:
        raise ShapeError(f"repeat: number of repeat dims ({len(repeats)}) can not be smaller than the "
                         f"number of tensor dims ({input.ndim})")
    shape = (1,) * (len(repeats) - input.ndim) + tuple(input.shape)
    x = reshape(input, shape)
    interleaved, expanded, final = [], [], []
    for r, n in zip(repeats, shape):
        interleaved += [1, n]
        expanded += [r, n]
        final.append(r * n)
    # a copy, as in PyTorch, even where the strides would allow a view (repeats of 1, or of a
    # size-1 dim): the result must be writable and must not alias the input
    tiled = expand(reshape(x, tuple(interleaved)), tuple(expanded))
    return reshape(clone(tiled), tuple(final))


def movedim(input, source, destination):
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    src = [wrap_dim(s, input.ndim, "movedim") for s in src]
    dst = [wrap_dim(s, input.ndim, "movedim") for s in dst]
    order = [i for i in range(input.ndim) if i not in src]
    for s, d in sorted(zip(dst, src)):
        order.insert(s, d)
    return permute(input, order)


def _T(self):
    return permute(self, tuple(reversed(range(self.ndim))))


def _mT(self):
    if self.ndim < 2:
        raise ShapeError(f"mT: tensor.mT is only supported on matrices or batches of matrices, got a "
                         f"{self.ndim}-D tensor of shape {fmt_shape(self.shape)}")
    return transpose(self, -2, -1)


for _name in ("view", "reshape", "flatten", "unflatten", "squeeze", "unsqueeze", "permute", "transpose",
              "t", "expand", "expand_as", "broadcast_to", "flip", "narrow", "contiguous", "clone", "split",
              "chunk", "unbind", "select", "repeat", "movedim"):
    method(_name)(globals()[_name])
Tensor.T = property(_T)
Tensor.mT = property(_mT)
Tensor.swapaxes = Tensor.swapdims = Tensor.transpose
Tensor.view_as = lambda self, other: view(self, tuple(other.shape))
Tensor.reshape_as = lambda self, other: reshape(self, tuple(other.shape))
