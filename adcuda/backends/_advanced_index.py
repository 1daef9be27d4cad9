"""NumPy's advanced-indexing rules as geometry, for the CUDA backend's ``index`` and ``index_put_``.

``plan(shape, strides, offset, items)`` turns an indexing key into what one gather/scatter kernel
needs (kernels/index.h): the basic parts (slices, ints, ``None``, ``Ellipsis``) become a strided view
of the array, and each index array addresses one dim of that view; the result's dims are the view's
remaining dims with the broadcast shape of the index arrays placed where NumPy places it (where the
first advanced index stood when all advanced indices, ints included, are adjacent in the key, else
first). Boolean masks arrive already converted to their nonzero coordinate arrays.

Pure Python over shapes and strides (the index arrays are opaque handles carried through), so it is
tested against NumPy on any machine.
"""

import collections

from ..errors import IndexOutOfRangeError

# One item of a key, after the backend has converted what needs the device:
#   ("slice", slice) ("int", i) ("none",) ("ellipsis",)
#   ("bool", (handle, shape, strides)): a 0-d boolean index, as a new dim of size 1 indexed by the
#       int64 array `handle` ([0] for True, of shape (1,); empty, of shape (0,), for False)
#   ("arrays", [(handle, shape, strides), ...], mask_shape): an integer array (one entry, mask_shape
#       None; strides in elements) or a
#       boolean mask's coordinate arrays (one per mask dim, each of shape (count,)); consumes one dim
#       per entry, and a mask's shape must match those dims

IndexArray = collections.namedtuple("IndexArray", "handle size stride result_strides")
Plan = collections.namedtuple("Plan", "view_shape view_strides view_offset shape strides arrays")
Plan.__doc__ = """view_*: the view of the array the geometry reads; shape: the result's shape; strides: the
view's stride for each result dim (0 on the index arrays' dims); arrays: IndexArray per index array, with
the size and stride of the view dim it addresses and its strides over the result's dims."""


def _broadcast(shapes):
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s, ndim - len(s)):
            if n == out[i] or n == 1:
                continue
            if out[i] != 1:
                raise IndexOutOfRangeError(
                    "shape mismatch: indexing arrays could not be broadcast together with "
                    "shapes " + " ".join(str(tuple(x)) for x in shapes)
                )
            out[i] = n
    return tuple(out)


def _consumed(item):
    kind = item[0]
    if kind in ("slice", "int"):
        return 1
    if kind == "arrays":
        return len(item[1])
    return 0


def plan(shape, strides, offset, items):
    """The geometry of ``array[key]`` for an array with ``shape``, element ``strides`` and ``offset``."""
    ndim = len(shape)
    ellipses = sum(1 for item in items if item[0] == "ellipsis")
    if ellipses > 1:
        raise IndexOutOfRangeError("an index can only have a single ellipsis ('...')")
    consumed = sum(_consumed(item) for item in items)
    if consumed > ndim:
        raise IndexOutOfRangeError(
            f"too many indices for array: array is {ndim}-dimensional, but {consumed} were indexed"
        )
    if not ellipses:
        items = list(items) + [("ellipsis",)]
    has_arrays = any(item[0] in ("arrays", "bool") for item in items)

    # advanced items (ints count once arrays are present) must be consecutive in the key, an
    # Ellipsis (even an empty one) or None between them separates them
    advanced = [i for i, item in enumerate(items) if item[0] in ("arrays", "bool") or (has_arrays and item[0] == "int")]
    adjacent = bool(advanced) and advanced[-1] - advanced[0] + 1 == len(advanced)

    view_shape, view_strides = [], []
    indexed = []  # (view dim, handle, shape) per index array
    first_advanced = None  # count of non-indexed view dims before the first advanced item
    d = 0
    for item in items:
        kind = item[0]
        if has_arrays and first_advanced is None and (kind in ("arrays", "bool", "int")):
            first_advanced = len(view_shape) - len(indexed)
        if kind == "slice":
            start, stop, step = item[1].indices(shape[d])
            view_shape.append(len(range(start, stop, step)))
            view_strides.append(strides[d] * step)
            offset += start * strides[d]
            d += 1
        elif kind == "int":
            i, size = item[1], shape[d]
            if not -size <= i < size:
                raise IndexOutOfRangeError(f"index {i} is out of bounds for axis {d} with size {size}")
            offset += (i + size if i < 0 else i) * strides[d]
            d += 1
        elif kind == "none":
            view_shape.append(1)
            view_strides.append(0)
        elif kind == "bool":
            # a 0-d boolean index: a new dim of size 1, indexed by [0] (True) or by nothing (False)
            indexed.append((len(view_shape),) + tuple(item[1]))
            view_shape.append(1)
            view_strides.append(0)
        elif kind == "ellipsis":
            for _ in range(ndim - consumed):
                view_shape.append(shape[d])
                view_strides.append(strides[d])
                d += 1
        else:  # arrays
            arrays, mask_shape = item[1], item[2]
            if mask_shape is not None:
                for j, n in enumerate(mask_shape):
                    if n != shape[d + j]:
                        raise IndexOutOfRangeError(
                            f"boolean index did not match indexed array along axis {d + j}; size of axis is "
                            f"{shape[d + j]} but size of corresponding boolean axis is {n}"
                        )
            for handle, array_shape, array_strides in arrays:
                indexed.append((len(view_shape), handle, tuple(array_shape), tuple(array_strides)))
                view_shape.append(shape[d])
                view_strides.append(strides[d])
                d += 1

    if not indexed:
        return Plan(tuple(view_shape), tuple(view_strides), offset, tuple(view_shape), tuple(view_strides), ())

    broadcast = _broadcast([s for _, _, s, _ in indexed])
    indexed_dims = {v for v, _, _, _ in indexed}
    rest = [v for v in range(len(view_shape)) if v not in indexed_dims]
    at = first_advanced if adjacent else 0
    result_dims = (
        [("view", v) for v in rest[:at]]
        + [("index", j) for j in range(len(broadcast))]
        + [("view", v) for v in rest[at:]]
    )
    result_shape = tuple(view_shape[v] if kind == "view" else broadcast[v] for kind, v in result_dims)
    result_strides = tuple(view_strides[v] if kind == "view" else 0 for kind, v in result_dims)
    arrays = []
    for v, handle, array_shape, array_strides in indexed:
        lead = len(broadcast) - len(array_shape)
        own = [0 if n == 1 else st for n, st in zip(array_shape, array_strides)]  # 0 where broadcast
        per_result = tuple(own[j - lead] if kind == "index" and j >= lead else 0 for kind, j in result_dims)
        arrays.append(IndexArray(handle, view_shape[v], view_strides[v], per_result))
    return Plan(tuple(view_shape), tuple(view_strides), offset, result_shape, result_strides, tuple(arrays))


def value_strides(value_shape, value_strides_, result_shape):
    """Strides that broadcast a value of ``value_shape`` to ``result_shape`` (NumPy's assignment rule:
    leading size-1 dims may be dropped); ValueError where it does not broadcast."""
    shape, strides = list(value_shape), list(value_strides_)
    while len(shape) > len(result_shape) and shape[0] == 1:
        shape.pop(0)
        strides.pop(0)
    lead = len(result_shape) - len(shape)
    if lead < 0 or any(n not in (1, m) for n, m in zip(shape, result_shape[lead:])):
        raise ValueError(
            f"shape mismatch: value array of shape {tuple(value_shape)} could not be broadcast to "
            f"indexing result of shape {tuple(result_shape)}"
        )
    return tuple([0] * lead + [s if n != 1 else 0 for n, s in zip(shape, strides)])
