"""Helpers shared by the distributions, as ``torch.distributions.utils``."""

import functools
from numbers import Number

from . import _torch as torch

__all__ = [
    "broadcast_all",
    "clamp_probs",
    "lazy_property",
    "logits_to_probs",
    "probs_to_logits",
    "tril_matrix_to_vec",
    "vec_to_tril_matrix",
]


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape; numbers become tensors of the first tensor's dtype
    and device (the default dtype without one)."""
    if not all(isinstance(v, (torch.Tensor, Number)) for v in values):
        raise ValueError(
            "Input arguments must all be instances of numbers.Number, torch.Tensor or objects implementing "
            "__torch_function__."
        )
    if not all(isinstance(v, torch.Tensor) for v in values):
        like = next((v for v in values if isinstance(v, torch.Tensor)), None)
        options = {"dtype": torch.get_default_dtype()} if like is None else {"dtype": like.dtype, "device": like.device}
        values = [v if isinstance(v, torch.Tensor) else torch.tensor(v, **options) for v in values]
    return torch.broadcast_tensors(*values)


def _standard_normal(shape, dtype, device):
    return torch.randn(shape, dtype=dtype, device=device)


def _sum_rightmost(value, dim):
    """``value`` summed over its ``dim`` rightmost dimensions."""
    if dim == 0:
        return value
    return value.reshape(*value.shape[: value.dim() - dim], -1).sum(-1)


def logits_to_probs(logits, is_binary=False):
    if is_binary:
        return torch.sigmoid(logits)
    return logits.softmax(-1)


def clamp_probs(probs):
    """Probabilities kept inside (0, 1) by the dtype's eps."""
    eps = torch.finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    clamped = clamp_probs(probs)
    if is_binary:
        return torch.log(clamped) - torch.log1p(-clamped)
    return torch.log(clamped)


class lazy_property:  # noqa: N801 (PyTorch's name)
    """A property computed on first use and then stored on the instance (logits from probs, ...)."""

    def __init__(self, wrapped):
        self.wrapped = wrapped
        functools.update_wrapper(self, wrapped)

    def __get__(self, instance, obj_type=None):
        if instance is None:
            return _lazy_property_and_property(self.wrapped)
        with torch.enable_grad():
            value = self.wrapped(instance)
        setattr(instance, self.wrapped.__name__, value)
        return value


class _lazy_property_and_property(lazy_property, property):  # noqa: N801
    """What the class sees of a lazy_property: a property (for documentation tools)."""

    def __init__(self, wrapped):
        property.__init__(self, wrapped)


def tril_matrix_to_vec(mat, diag=0):
    n = mat.shape[-1]
    rows = [mat[..., i, : i + 1 + diag] for i in range(n) if i + 1 + diag > 0]
    return torch.cat(rows, -1)


def vec_to_tril_matrix(vec, diag=0):
    n_float = (-(1 + 2 * diag) + ((1 + 2 * diag) ** 2 + 8 * vec.shape[-1] + 4 * abs(diag) * (diag + 1)) ** 0.5) / 2
    n = round(n_float)
    if n != n_float:
        raise ValueError(
            f"The size of last dimension is {vec.shape[-1]} which cannot be expressed as the lower triangular "
            "part of a square D x D matrix."
        )
    rows = []
    start = 0
    for i in range(n):
        length = max(0, min(n, i + 1 + diag))
        row = vec[..., start : start + length]
        start += length
        if length < n:
            row = torch.cat([row, torch.zeros_like(vec[..., : n - length])], -1)
        rows.append(row)
    return torch.stack(rows, -2)
