"""Turning a list of samples into a batch (``default_collate``) and single samples into tensors
(``default_convert``), with PyTorch's rules: tensors are stacked, NumPy arrays and Python numbers become
tensors, strings stay as they are, and dicts, namedtuples, tuples and lists are collated field by field."""

from __future__ import annotations

import collections.abc
import re
from typing import TYPE_CHECKING

import numpy as np

from ... import dtypes
from ...device import CPU
from ...factories import as_tensor, from_numpy, tensor
from ...ops.layout import stack
from ...tensor import Tensor

if TYPE_CHECKING:
    from ...types import Any, Sequence

__all__ = ["default_collate", "default_convert"]

# NumPy dtypes that hold strings or Python objects cannot become tensors
_NON_NUMERIC_NUMPY = re.compile(r"[SaUO]")

_COLLATE_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _is_numpy_value(elem):
    return isinstance(elem, (np.ndarray, np.generic)) and not isinstance(elem, (np.str_, np.bytes_))


def _is_namedtuple(elem):
    return isinstance(elem, tuple) and hasattr(elem, "_fields")


def _rebuild_mapping(elem, values):
    try:
        return type(elem)(values)
    except TypeError:
        # a Mapping type whose constructor does not take a dict
        return values


def _rebuild_sequence(elem, values):
    try:
        return type(elem)(values)
    except TypeError:
        # a Sequence type whose constructor does not take an iterable (e.g. ``range``)
        return values


def _host_stackable(tensors):
    """CPU tensors of one shape and NumPy-backed dtype, none of which records gradients."""
    first = tensors[0]
    if first.dtype.numpy is None:
        return False
    return all(
        t.device == CPU and not t.requires_grad and t.shape == first.shape and t.dtype is first.dtype for t in tensors
    )


def default_convert(data: Any) -> Any:
    """Convert NumPy arrays and scalars inside ``data`` to tensors, keeping the container structure
    (used when ``batch_size=None`` turns automatic batching off)."""
    if isinstance(data, Tensor):
        return data
    if _is_numpy_value(data):
        if isinstance(data, np.ndarray) and _NON_NUMERIC_NUMPY.search(data.dtype.str) is not None:
            return data
        return as_tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return _rebuild_mapping(data, {key: default_convert(data[key]) for key in data})
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return _rebuild_sequence(data, [default_convert(d) for d in data])
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch (a leading dimension of ``len(batch)``)."""
    elem = batch[0]
    if isinstance(elem, Tensor):
        if _host_stackable(batch):
            # plain CPU samples (the usual case in a loader): one host copy instead of an op per sample
            return from_numpy(np.stack([t.numpy() for t in batch]))
        return stack(batch, 0)
    if _is_numpy_value(elem):
        if isinstance(elem, np.ndarray):
            if _NON_NUMERIC_NUMPY.search(elem.dtype.str) is not None:
                raise TypeError(_COLLATE_ERROR.format(elem.dtype))
            return default_collate([as_tensor(b) for b in batch])
        return as_tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=dtypes.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        return _rebuild_mapping(elem, {key: default_collate([d[key] for d in batch]) for key in elem})
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(sample) != size for sample in batch):
            raise RuntimeError("default_collate: each element in list of batch should be of equal size")
        transposed = list(zip(*batch))
        if isinstance(elem, tuple):
            # PyTorch returns a list for tuples (kept for compatibility)
            return [default_collate(samples) for samples in transposed]
        return _rebuild_sequence(elem, [default_collate(samples) for samples in transposed])
    raise TypeError(_COLLATE_ERROR.format(type(elem)))
