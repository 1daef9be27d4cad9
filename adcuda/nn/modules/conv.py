"""``Conv1d``, ``Conv2d``, ``ConvTranspose1d`` and ``ConvTranspose2d``: PyTorch's parameter names, shapes
and initialisation, so state dicts load both ways; padding modes other than zeros pad with ``F.pad`` first,
as PyTorch's."""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from ...factories import empty
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .linear import _register_bias
from .module import Module

if TYPE_CHECKING:
    from ...types import Device, DType, Sequence, Tensor

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value, n):
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    return tuple(int(v) for v in value)


class _ConvNd(Module):
    # What the three modules share. Its constructor has Conv1d's and Conv2d's PyTorch signature, which
    # they inherit; ConvTranspose2d (PyTorch orders its arguments differently) sets output_padding after it.
    _spatial = 2
    transposed = False

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] | str = 0,
        dilation: int | tuple[int, ...] = 1,
        groups: int = 1,
        bias: bool = True,
        padding_mode: str = "zeros",
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        n = self._spatial
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups or out_channels % groups:
            raise ValueError(
                f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must both be "
                f"divisible by groups ({groups})"
            )
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {_PADDING_MODES}, got {padding_mode!r}")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{name}: invalid padding string {padding!r}, should be one of 'valid', 'same'")
            if padding == "same" and any(s != 1 for s in _tuple(stride, n)):
                raise ValueError(f"{name}: padding='same' is not supported for strided convolutions")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _tuple(kernel_size, n)
        self.stride = _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation = _tuple(dilation, n)
        self.output_padding = (0,) * n
        self.groups = groups
        self.padding_mode = padding_mode
        if self.transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(empty(shape, device=device, dtype=dtype))
        _register_bias(self, bias, out_channels, device, dtype)
        self.reset_parameters()

    def reset_parameters(self):
        init._layer_default_(self.weight, self.bias)

    def _padded(self, input):
        """The input padded by padding_mode (not zeros) and the padding left for the convolution."""
        if self.padding_mode == "zeros":
            return input, self.padding
        if isinstance(self.padding, str):
            if self.padding == "valid":
                return input, 0
            pairs = [
                (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(self.kernel_size, self.dilation)
            ]
        else:
            pairs = [(p, p) for p in self.padding]
        amounts = tuple(v for pair in reversed(pairs) for v in pair)
        return F.pad(input, amounts, mode=self.padding_mode), 0

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._spatial:
            s += f", padding={self.padding!r}" if isinstance(self.padding, str) else f", padding={self.padding}"
        if self.dilation != (1,) * self._spatial:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._spatial:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class Conv1d(_ConvNd):
    _spatial = 1

    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv1d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    def forward(self, input: Tensor) -> Tensor:
        x, padding = self._padded(input)
        return F.conv2d(x, self.weight, self.bias, self.stride, padding, self.dilation, self.groups)


class ConvTranspose2d(_ConvNd):
    transposed = True

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | tuple[int, ...],
        stride: int | tuple[int, ...] = 1,
        padding: int | tuple[int, ...] = 0,
        output_padding: int | tuple[int, ...] = 0,
        groups: int = 1,
        bias: bool = True,
        dilation: int | tuple[int, ...] = 1,
        padding_mode: str = "zeros",
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        name = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f'{name}: only "zeros" padding mode is supported, got {padding_mode!r}')
        if isinstance(padding, str):
            raise ValueError(f"{name}: padding must be an int or a tuple of ints, got {padding!r}")
        super().__init__(
            in_channels,
            out_channels,
            kernel_size,
            stride,
            padding,
            dilation,
            groups,
            bias,
            padding_mode,
            device=device,
            dtype=dtype,
        )
        self.output_padding = _tuple(output_padding, self._spatial)

    def _output_padding(self, input, output_size):
        """output_padding that gives ``output_size`` (the trailing spatial sizes), PyTorch's rule."""
        if output_size is None:
            return self.output_padding
        n = self._spatial
        output_size = tuple(int(s) for s in output_size)[-n:]
        result = []
        for i, want in enumerate(output_size):
            smallest = (
                (input.shape[-n + i] - 1) * self.stride[i]
                - 2 * self.padding[i]
                + self.dilation[i] * (self.kernel_size[i] - 1)
                + 1
            )
            if not smallest <= want < smallest + max(self.stride[i], self.dilation[i]):
                raise ValueError(
                    f"{type(self).__name__}: requested an output size of {output_size}, but valid sizes "
                    f"for input {tuple(input.shape)} range from {smallest} to "
                    f"{smallest + max(self.stride[i], self.dilation[i]) - 1} in dim {i}"
                )
            result.append(want - smallest)
        return tuple(result)

    def forward(self, input: Tensor, output_size: Sequence[int] | None = None) -> Tensor:
        conv_transpose = F.conv_transpose1d if self._spatial == 1 else F.conv_transpose2d
        return conv_transpose(
            input,
            self.weight,
            self.bias,
            self.stride,
            self.padding,
            self._output_padding(input, output_size),
            self.groups,
            self.dilation,
        )


class ConvTranspose1d(ConvTranspose2d):
    _spatial = 1
