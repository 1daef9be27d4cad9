"""``adcuda.utils``: helpers on top of tensors and autograd (``adcuda.utils.data``)."""

from . import data

__all__ = ["data"]
