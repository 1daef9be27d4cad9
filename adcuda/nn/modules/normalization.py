"""``LayerNorm`` and ``RMSNorm`` over the trailing ``normalized_shape`` dims; ``BatchNorm1d/2d/3d``,
``InstanceNorm1d/2d`` (per channel, with running statistics), ``GroupNorm`` and ``LocalResponseNorm``."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from ... import dtypes as dt
from ...errors import ShapeError, fmt_shape
from ...factories import empty, ones, tensor, zeros
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module

if TYPE_CHECKING:
    from ...types import Device, DType, Sequence, Tensor


class _TrailingNorm(Module):
    """What LayerNorm and RMSNorm share: statistics over the trailing ``normalized_shape``, an
    elementwise weight (where ``elementwise_affine``) and LayerNorm's bias (``bias`` None: none at all,
    as RMSNorm has none)."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None,
        elementwise_affine: bool,
        bias: bool | None,
        device: Device | str | None,
        dtype: DType | None,
    ) -> None:
        super().__init__()
        if isinstance(normalized_shape, numbers.Integral):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        if bias is not None:
            if elementwise_affine and bias:
                self.bias = Parameter(empty(self.normalized_shape, device=device, dtype=dtype))
            else:
                self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)
        if getattr(self, "bias", None) is not None:
            init.zeros_(self.bias)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class LayerNorm(_TrailingNorm):
    """PyTorch's LayerNorm: each sample normalised over its trailing ``normalized_shape`` dims, then
    scaled by ``weight`` and shifted by ``bias``."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, bias, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(_TrailingNorm):
    """PyTorch's RMSNorm: each sample divided by the root mean square of its trailing
    ``normalized_shape`` dims, then scaled by ``weight``."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int],
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, None, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)


def _register_affine(module, channels, affine, bias, device, dtype):
    """The per-channel weight and bias (None where affine is off, and the bias where bias=False, as
    PyTorch's ``bias`` keyword makes them)."""
    if affine:
        module.weight = Parameter(empty(channels, device=device, dtype=dtype))
    else:
        module.register_parameter("weight", None)
    if affine and bias:
        module.bias = Parameter(empty(channels, device=device, dtype=dtype))
    else:
        module.register_parameter("bias", None)


def _reset_affine(module):
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    """Per-channel affine parameters and running statistics, with PyTorch's names (running_mean,
    running_var, num_batches_tracked), so state dicts load both ways."""

    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = True,
        track_running_stats: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _register_affine(self, num_features, affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", tensor(0, dtype=dt.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)

    def _check_input_dim(self, input):
        if input.ndim not in self._input_dims:
            dims = " or ".join(f"{d}D" for d in self._input_dims)
            raise ShapeError(
                f"{type(self).__name__}: expected {dims} input, but got input of shape {fmt_shape(input.shape)}"
            )

    def _average_factor(self):
        """The momentum of this step's running-statistics update; with momentum=None a cumulative
        average (1 / batches seen), as PyTorch's. Counts the batch."""
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / float(self.num_batches_tracked.item())
        return factor

    def extra_repr(self):
        return (
            f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
            f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}"
        )


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        factor = self._average_factor()
        # batch statistics while training, or when there are no running ones to use
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep_running = not self.training or self.track_running_stats
        return F.batch_norm(
            input,
            self.running_mean if keep_running else None,
            self.running_var if keep_running else None,
            self.weight,
            self.bias,
            use_batch_stats,
            factor,
            self.eps,
        )


class BatchNorm1d(_BatchNorm):
    _input_dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    _input_dims = (4,)


class BatchNorm3d(_BatchNorm):
    _input_dims = (5,)


class _InstanceNorm(_NormBase):
    def __init__(
        self,
        num_features: int,
        eps: float = 1e-5,
        momentum: float | None = 0.1,
        affine: bool = False,
        track_running_stats: bool = False,
        device: Device | str | None = None,
        dtype: DType | None = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        self._check_input_dim(input)
        unbatched = input.ndim == self._input_dims[0]
        if unbatched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.num_features and self.affine:
            raise ShapeError(
                f"{type(self).__name__}: expected input with {self.num_features} channels (dim "
                f"{0 if unbatched else 1}), but got input of shape {fmt_shape(input.shape)}"
            )
        # num_batches_tracked stays as it is: PyTorch's instance norm keeps it only for state dicts
        out = F.instance_norm(
            input,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            self.training or not self.track_running_stats,
            self.momentum if self.momentum is not None else 0.0,
            self.eps,
        )
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _input_dims = (2, 3)


class InstanceNorm2d(_InstanceNorm):
    _input_dims = (3, 4)


class GroupNorm(Module):
    def __init__(
        self,
        num_groups: int,
        num_channels: int,
        eps: float = 1e-5,
        affine: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
        *,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _register_affine(self, num_channels, affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        _reset_affine(self)

    def forward(self, input: Tensor) -> Tensor:
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (
            f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
            f"bias={self.bias is not None}"
        )


class LocalResponseNorm(Module):
    """Each value divided by (k + alpha * the mean of the squares over ``size`` neighbouring
    channels) ** beta (AlexNet's normalisation)."""

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
