"""The CUDA backend's view arithmetic (adcuda/backends/_strided.py) against NumPy's views of the same
layouts: runs on any machine, no GPU needed."""

import itertools

import numpy as np
import pytest

from adcuda.backends import _strided
from adcuda.errors import IndexOutOfRangeError, ShapeError


def layout(view, base):
    """(shape, element strides, element offset from base's first element) of a NumPy view."""
    size = view.itemsize
    offset = (view.__array_interface__["data"][0] - base.__array_interface__["data"][0]) // size
    return view.shape, tuple(s // size for s in view.strides), offset


def significant(shape, strides):
    """Strides of the dims that have more than one element (the others are arbitrary)."""
    return tuple(stride for size, stride in zip(shape, strides) if size != 1)


def layouts():
    """Views of one buffer with gaps, permutations, broadcasts, negative strides and size-1 dims."""
    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    yield base, base
    yield base, base[:, 1:5, ::2]
    yield base, base.transpose(2, 0, 1)
    yield base, base[::-1, :, 1:2]
    yield base, base[1:3, None, ::3, :]
    yield base, base[..., 3]
    yield base, np.broadcast_to(base[:, :1, :], (4, 6, 5))
    yield base, base.reshape(24, 5)[::5]
    flat = np.arange(12, dtype=np.int64)
    yield flat, flat
    yield flat, flat[::-2]
    yield flat, flat[3:3]


@pytest.mark.parametrize("index", range(11))
def test_is_contiguous_matches_numpy(index):
    base, view = list(layouts())[index]
    shape, strides, _ = layout(view, base)
    assert _strided.is_contiguous(shape, strides) == view.flags.c_contiguous


@pytest.mark.parametrize("index", range(11))
def test_reshape_without_copy_matches_numpy(index):
    base, view = list(layouts())[index]
    shape, strides, offset = layout(view, base)
    n = view.size
    candidates = {(n,), (1, n), (n, 1)}
    for a in range(1, n + 1):
        if n % a == 0:
            candidates.add((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    candidates.add((a, b, n // a // b))
    candidates.add(view.shape)
    candidates.add(tuple(reversed(view.shape)) if view.size else view.shape)
    checked = 0
    for new_shape in candidates:
        if int(np.prod(new_shape)) != n:
            continue
        try:
            expected = np.reshape(view, new_shape, copy=False)
        except ValueError:
            assert _strided.reshape_strides(shape, strides, new_shape) is None, new_shape
            continue
        got = _strided.reshape_strides(shape, strides, new_shape)
        assert got is not None, new_shape
        if n:
            expected_shape, expected_strides, expected_offset = layout(expected, base)
            assert significant(new_shape, got) == significant(expected_shape, expected_strides), new_shape
            assert offset == expected_offset
        checked += 1
    assert checked > 0


def test_reshape_of_the_wrong_size_is_a_shape_error():
    with pytest.raises(ShapeError, match=r"cannot reshape array of size 6 into shape \(4,\)"):
        _strided.reshape_strides((2, 3), (3, 1), (4,))


@pytest.mark.parametrize("index", range(11))
def test_permute_and_flip_match_numpy(index):
    base, view = list(layouts())[index]
    shape, strides, offset = layout(view, base)
    for axes in itertools.permutations(range(view.ndim)):
        new_shape, new_strides = _strided.permute(shape, strides, axes)
        assert (new_shape, new_strides, offset) == layout(view.transpose(axes), base)
    for count in range(view.ndim + 1):
        for axes in itertools.combinations(range(view.ndim), count):
            new_strides, new_offset = _strided.flip(shape, strides, offset, axes)
            expected = np.flip(view, axes)
            if view.size:
                assert (shape, new_strides, new_offset) == layout(expected, base)


def test_permute_needs_a_permutation():
    with pytest.raises(ShapeError):
        _strided.permute((2, 3), (3, 1), (0, 0))


@pytest.mark.parametrize(
    "shape, target",
    [((3,), (2, 3)), ((1, 3), (4, 3)), ((2, 1), (2, 5)), ((), (2, 2)), ((2, 1, 3), (5, 2, 4, 3)), ((3,), (3,))],
)
def test_broadcast_matches_numpy(shape, target):
    base = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    strides = tuple(s // 8 for s in base.strides)
    got = _strided.broadcast_strides(shape, strides, target)
    assert (tuple(target), got, 0) == layout(np.broadcast_to(base, target), base)


@pytest.mark.parametrize("shape, target", [((3,), (2, 4)), ((2, 3), (3,)), ((2,), (2, 0, 3))])
def test_impossible_broadcast_is_a_shape_error(shape, target):
    with pytest.raises(ShapeError, match="cannot broadcast"):
        _strided.broadcast_strides(shape, (1,) * len(shape), target)


KEYS = [
    (0,),
    (-1,),
    (slice(None),),
    (slice(1, 3),),
    (slice(None, None, -1),),
    (slice(5, 0, -2),),
    (slice(4, 2),),
    (None,),
    (Ellipsis,),
    (Ellipsis, 0),
    (0, Ellipsis, None),
    (slice(None), None, 1),
    (1, 2, 3),
    (None, None),
    (slice(-2, None), Ellipsis, slice(None, None, 2)),
    (np.int64(2),),
    (slice(10, 20),),
    (3, slice(None, None, -3)),
]


@pytest.mark.parametrize("key", KEYS, ids=[str(k) for k in KEYS])
def test_basic_index_matches_numpy(key):
    base = np.arange(4 * 6 * 5, dtype=np.float32).reshape(4, 6, 5)
    for source in (base, base.transpose(1, 2, 0)[::-1]):
        shape, strides, offset = layout(source, base)
        got = _strided.basic_index(shape, strides, offset, key)
        expected = source[key + (Ellipsis,) if Ellipsis not in key else key]
        if expected.size:
            assert got == layout(expected, base)
        else:
            assert got[0] == expected.shape


def test_basic_index_errors_match_numpy():
    with pytest.raises(IndexOutOfRangeError, match="index 4 is out of bounds for axis 0 with size 4"):
        _strided.basic_index((4, 6), (6, 1), 0, (4,))
    with pytest.raises(IndexError, match="index -7 is out of bounds for axis 1 with size 6"):
        _strided.basic_index((4, 6), (6, 1), 0, (0, -7))
    with pytest.raises(IndexError, match="too many indices for array: array is 2-dimensional, but 3 were indexed"):
        _strided.basic_index((4, 6), (6, 1), 0, (0, 0, 0))
    with pytest.raises(IndexError, match="single ellipsis"):
        _strided.basic_index((4, 6), (6, 1), 0, (Ellipsis, Ellipsis))
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        _strided.basic_index((4, 6), (6, 1), 0, (slice(None, None, 0),))
