"""Strided-layout arithmetic for the CUDA backend's views: how reshape, permute, broadcast, basic
indexing and flips change a (shape, strides, offset) triple, with NumPy's rules and error messages.

Pure Python over tuples (strides and offsets in elements), so it is tested against NumPy on any
machine; ``adcuda.backends.cuda`` applies the results with ``DeviceArray.as_strided``.
"""

import operator

from ..errors import IndexOutOfRangeError, ShapeError

__all__ = [
    "contiguous_strides",
    "is_contiguous",
    "reshape_strides",
    "permute",
    "broadcast_strides",
    "basic_index",
    "flip",
    "check_as_strided",
]


def contiguous_strides(shape):
    strides = [0] * len(shape)
    stride = 1
    for dim in range(len(shape) - 1, -1, -1):
        strides[dim] = stride
        stride *= max(shape[dim], 1)
    return tuple(strides)


def is_contiguous(shape, strides):
    """Row-major with no gaps; dims of size 1 may have any stride (NumPy's C_CONTIGUOUS)."""
    if 0 in shape:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _numel(shape):
    n = 1
    for size in shape:
        n *= size
    return n


def resolve_shape(numel, new_shape):
    """``new_shape`` for ``numel`` elements, its one ``-1`` (if any) replaced by the size that keeps them
    (NumPy's rule); ShapeError where it cannot hold exactly ``numel`` elements."""
    new_shape = tuple(new_shape)
    if -1 in new_shape:
        if new_shape.count(-1) > 1:
            raise ShapeError(f"can only specify one unknown dimension, got shape {new_shape}")
        known = _numel(size for size in new_shape if size != -1)
        if known and numel % known == 0:
            return tuple(numel // known if size == -1 else size for size in new_shape)
    elif _numel(new_shape) == numel:
        return new_shape
    raise ShapeError(f"cannot reshape array of size {numel} into shape {new_shape}")


def reshape_strides(shape, strides, new_shape):
    """Strides that show the same elements in ``new_shape`` (where one size may be -1, as in NumPy)
    without moving them, or None when the layout does not allow it (NumPy's no-copy reshape)."""
    numel = _numel(shape)
    new_shape = resolve_shape(numel, new_shape)
    if numel == 0:
        return contiguous_strides(new_shape)
    old = [(size, stride) for size, stride in zip(shape, strides) if size != 1]
    old_sizes = [size for size, _ in old]
    old_strides = [stride for _, stride in old]
    new_strides = [0] * len(new_shape)
    oi, oj, ni, nj = 0, 1, 0, 1
    while ni < len(new_shape) and oi < len(old_sizes):
        new_count, old_count = new_shape[ni], old_sizes[oi]
        while new_count != old_count:
            if new_count < old_count:
                new_count *= new_shape[nj]
                nj += 1
            else:
                old_count *= old_sizes[oj]
                oj += 1
        # the old dims merged into this group must be contiguous with each other
        for k in range(oi, oj - 1):
            if old_strides[k] != old_sizes[k + 1] * old_strides[k + 1]:
                return None
        new_strides[nj - 1] = old_strides[oj - 1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        ni, nj = nj, nj + 1
        oi, oj = oj, oj + 1
    last = new_strides[ni - 1] if ni >= 1 else 1
    for k in range(ni, len(new_shape)):
        new_strides[k] = last
    return tuple(new_strides)


def _dims(ndim, axes):
    """``axes`` with negative ones counted from the end, as NumPy counts them (out-of-range ones kept)."""
    return tuple(a + ndim if -ndim <= a < 0 else a for a in axes)


def permute(shape, strides, axes):
    """The layout with dims reordered as ``axes`` (a permutation of range(ndim), negative axes counted
    from the end)."""
    dims = _dims(len(shape), axes)
    if sorted(dims) != list(range(len(shape))):
        raise ShapeError(f"axes {tuple(axes)} don't match array of {len(shape)} dims")
    return tuple(shape[a] for a in dims), tuple(strides[a] for a in dims)


def broadcast_strides(shape, strides, target):
    """Strides that show ``shape`` broadcast to ``target`` (0 along the broadcast dims)."""
    target = tuple(target)
    lead = len(target) - len(shape)
    if lead < 0 or any(size != 1 and size != want for size, want in zip(shape, target[lead:])):
        raise ShapeError(f"cannot broadcast shape {tuple(shape)} to {target}")
    return (0,) * lead + tuple(
        stride if size == want else 0 for size, stride, want in zip(shape, strides, target[lead:])
    )


def basic_index(shape, strides, offset, key):
    """The view ``a[key]`` for a key of ints, slices, None and Ellipsis: (shape, strides, offset)."""
    consumed = sum(1 for item in key if item is not None and item is not Ellipsis)
    if sum(1 for item in key if item is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    ndim = len(shape)
    if consumed > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed")
    out_shape, out_strides = [], []
    dim = 0
    for item in key:
        if item is None:
            out_shape.append(1)
            out_strides.append(0)
        elif item is Ellipsis:
            for _ in range(ndim - consumed):
                out_shape.append(shape[dim])
                out_strides.append(strides[dim])
                dim += 1
        elif isinstance(item, slice):
            start, stop, step = item.indices(shape[dim])
            length = len(range(start, stop, step))
            if length:
                offset += start * strides[dim]
            out_shape.append(length)
            out_strides.append(strides[dim] * step)
            dim += 1
        else:
            index = operator.index(item)
            size = shape[dim]
            if not -size <= index < size:
                raise IndexOutOfRangeError(f"index {index} is out of bounds for axis {dim} with size {size}")
            offset += (index + size if index < 0 else index) * strides[dim]
            dim += 1
    out_shape.extend(shape[dim:])
    out_strides.extend(strides[dim:])
    return tuple(out_shape), tuple(out_strides), offset


def flip(shape, strides, offset, axes):
    """The layout reversed along ``axes`` (negative ones counted from the end; None: every dim):
    (strides, offset)."""
    ndim = len(shape)
    dims = tuple(range(ndim)) if axes is None else _dims(ndim, axes)
    for axis, dim in zip(axes or (), dims):
        if not 0 <= dim < ndim:
            raise IndexOutOfRangeError(f"flip: axis {axis} is out of bounds for array of dimension {ndim}")
    if len(set(dims)) != len(dims):
        raise ShapeError(f"flip: repeated axis in {tuple(axes)}")
    strides = list(strides)
    for axis in dims:
        if shape[axis] > 0:
            offset += (shape[axis] - 1) * strides[axis]
        strides[axis] = -strides[axis]
    return tuple(strides), offset


def check_as_strided(shape, strides, offset, capacity):
    """(shape, strides) as tuples of ints for a view of ``capacity`` elements of storage from element
    ``offset`` (PyTorch's as_strided): ShapeError where it would reach outside the storage or has a
    negative size, stride or offset."""
    if shape.__class__ is tuple and strides.__class__ is tuple and len(shape) == len(strides) and offset >= 0:
        # the common case in one pass: plain non-negative ints that stay inside the storage
        last = offset
        for n, s in zip(shape, strides):
            if n.__class__ is not int or s.__class__ is not int or n <= 0 or s < 0:
                break
            last += (n - 1) * s
        else:
            if last < capacity:
                return shape, strides
    shape = tuple(operator.index(n) for n in shape)
    strides = tuple(operator.index(s) for s in strides)
    offset = operator.index(offset)
    if len(shape) != len(strides):
        raise ShapeError(f"as_strided: mismatch in length of strides ({len(strides)}) and shape ({len(shape)})")
    if any(n < 0 for n in shape) or any(s < 0 for s in strides) or offset < 0:
        raise ShapeError(
            f"as_strided: sizes {list(shape)}, strides {list(strides)} and storage offset {offset} must not be negative"
        )
    needed = 0 if 0 in shape else offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1
    if needed > capacity:
        raise ShapeError(
            f"as_strided: sizes {list(shape)}, strides {list(strides)} and storage offset {offset} need a storage of "
            f"{needed} elements, out of bounds for the storage of {capacity}"
        )
    return shape, strides
