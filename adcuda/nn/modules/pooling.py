"""Pooling layers and ``Upsample``: thin modules over ``adcuda.nn.functional``, PyTorch's arguments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import functional as F
from .module import Module

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...types import Sequence, Tensor


def _described(module, *names):
    """``name=value, ...`` of ``module``'s attributes ``names``: its extra_repr."""
    return ", ".join(f"{name}={getattr(module, name)}" for name in names)


class _MaxPoolNd(Module):
    _pool: Callable[..., Tensor | tuple[Tensor, Tensor]]  # the functional form (1d or 2d)

    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        dilation: int | tuple[int, ...] = 1,
        return_indices: bool = False,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.dilation = dilation
        self.return_indices = return_indices
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return self._pool(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.dilation,
            ceil_mode=self.ceil_mode,
            return_indices=self.return_indices,
        )

    def extra_repr(self):
        return _described(self, "kernel_size", "stride", "padding", "dilation", "ceil_mode")


class MaxPool1d(_MaxPoolNd):
    _pool = staticmethod(F.max_pool1d)


class MaxPool2d(_MaxPoolNd):
    _pool = staticmethod(F.max_pool2d)


class _AvgPoolNd(Module):
    # AvgPool1d's PyTorch signature, which it inherits; AvgPool2d adds divisor_override
    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
    ) -> None:
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self.ceil_mode = ceil_mode
        self.count_include_pad = count_include_pad

    def extra_repr(self):
        return _described(self, "kernel_size", "stride", "padding")


class AvgPool1d(_AvgPoolNd):
    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)


class AvgPool2d(_AvgPoolNd):
    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: int | None = None,
    ) -> None:
        super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
        self.divisor_override = divisor_override

    def forward(self, input: Tensor) -> Tensor:
        return F.avg_pool2d(
            input,
            self.kernel_size,
            self.stride,
            self.padding,
            self.ceil_mode,
            self.count_include_pad,
            self.divisor_override,
        )


class _AdaptivePool(Module):
    def __init__(self, output_size: int | None | tuple[int | None, ...]) -> None:
        super().__init__()
        self.output_size = output_size

    def extra_repr(self):
        return f"output_size={self.output_size}"


class _AdaptiveAvgPool(_AdaptivePool):
    _pool: Callable[..., Tensor]  # the functional form (1d or 2d)

    def forward(self, input: Tensor) -> Tensor:
        return self._pool(input, self.output_size)


class AdaptiveAvgPool1d(_AdaptiveAvgPool):
    _pool = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptiveAvgPool):
    _pool = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveMaxPool2d(_AdaptivePool):
    def __init__(self, output_size: int | None | tuple[int | None, ...], return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return F.adaptive_max_pool2d(input, self.output_size, self.return_indices)


class Upsample(Module):
    def __init__(
        self,
        size: int | tuple[int, ...] | None = None,
        scale_factor: float | tuple[float, ...] | None = None,
        mode: str = "nearest",
        align_corners: bool | None = None,
        recompute_scale_factor: bool | None = None,
    ) -> None:
        super().__init__()
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) else scale_factor
        self.mode = mode
        self.align_corners = align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input: Tensor) -> Tensor:
        return F.interpolate(
            input,
            self.size,
            self.scale_factor,
            self.mode,
            self.align_corners,
            recompute_scale_factor=self.recompute_scale_factor,
        )

    def extra_repr(self):
        what = f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}"
        return f"{what}, mode={self.mode!r}"


# ------------------------------------------------------------------------------------------------
# More of PyTorch's pooling and upsampling modules (issue 15)
class AdaptiveMaxPool1d(_AdaptivePool):
    def __init__(self, output_size: int, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices

    def forward(self, input: Tensor) -> Tensor | tuple[Tensor, Tensor]:
        return F.adaptive_max_pool1d(input, self.output_size, self.return_indices)


class UpsamplingNearest2d(Upsample):
    def __init__(
        self, size: int | tuple[int, ...] | None = None, scale_factor: float | tuple[float, ...] | None = None
    ) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """Bilinear upsampling with align_corners=True, as PyTorch's."""

    def __init__(
        self, size: int | tuple[int, ...] | None = None, scale_factor: float | tuple[float, ...] | None = None
    ) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class _LPPoolNd(Module):
    _pool: Callable[..., Tensor]  # the functional form (1d or 2d)

    def __init__(
        self,
        norm_type: float,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        ceil_mode: bool = False,
    ) -> None:
        super().__init__()
        self.norm_type = norm_type
        self.kernel_size = kernel_size
        self.stride = stride
        self.ceil_mode = ceil_mode

    def forward(self, input: Tensor) -> Tensor:
        return self._pool(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self):
        return _described(self, "norm_type", "kernel_size", "stride", "ceil_mode")


class LPPool1d(_LPPoolNd):
    _pool = staticmethod(F.lp_pool1d)


class LPPool2d(_LPPoolNd):
    _pool = staticmethod(F.lp_pool2d)


class _MaxUnpoolNd(Module):
    _spatial = 2

    def __init__(
        self,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] | None = None,
        padding: int | tuple[int, ...] = 0,
    ) -> None:
        super().__init__()
        n = self._spatial
        self.kernel_size = (kernel_size,) * n if isinstance(kernel_size, int) else tuple(kernel_size)
        stride = kernel_size if stride is None else stride
        self.stride = (stride,) * n if isinstance(stride, int) else tuple(stride)
        self.padding = (padding,) * n if isinstance(padding, int) else tuple(padding)

    def extra_repr(self):
        return _described(self, "kernel_size", "stride", "padding")


class MaxUnpool1d(_MaxUnpoolNd):
    _spatial = 1

    def forward(self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        return F.max_unpool1d(input, indices, self.kernel_size, self.stride, self.padding, output_size)


class MaxUnpool2d(_MaxUnpoolNd):
    def forward(self, input: Tensor, indices: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        return F.max_unpool2d(input, indices, self.kernel_size, self.stride, self.padding, output_size)
