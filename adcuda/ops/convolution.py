"""Convolution: conv1d, conv2d and conv_transpose2d (the backend's convolution family:
``kernels/convolution.cu``).

Three ops carry the graph: ``convolution`` (conv2d without bias) and its two gradients,
``convolution_backward_input`` and ``convolution_backward_weight``. All three are linear in each
argument, and each one's gradients are the other two, so ``create_graph=True`` gives every higher
order. conv1d is conv2d over a height of 1; conv_transpose2d is the gradient with respect to the input
of the convolution it transposes; padding modes other than zeros and asymmetric 'same' padding go
through ``F.pad`` first.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

from ..backends._convolution_shapes import conv2d_output_size
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import primitives
from .common import batched_input, check_float, check_same_device, dense, int_tuple, wrap
from .layout import pad as _pad
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import Sequence, Tensor


def _check_operands(op, input, weight):
    check_float(op, "input", input)
    check_float(op, "weight", weight)
    check_same_device(op, input, weight)
    if input.dtype is not weight.dtype:
        raise DTypeError(f"{op}: input type ({input.dtype}) and weight type ({weight.dtype}) should be the same")


@op(
    "convolution",
    doc="conv2d without bias: zero padding, NCHW (the op its gradients are written with).",
    node="ConvolutionBackward0",
    function=False,
    method=False,
    grads={
        "input": lambda grad, weight, input_shape, stride, padding, dilation, groups: convolution_backward_input(
            grad, weight, input_shape, stride, padding, dilation, groups
        ),
        "weight": lambda grad, input, weight_shape, stride, padding, dilation, groups: convolution_backward_weight(
            grad, input, weight_shape, stride, padding, dilation, groups
        ),
    },
)
def convolution(
    input: Tensor,
    weight: Tensor,
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
) -> Tensor:
    _check_operands("conv2d", input, weight)
    return wrap(primitives(input).conv2d(input._data, weight._data, stride, padding, dilation, groups), input._device)


@op(
    "convolution_backward_input",
    doc="The gradient of convolution w.r.t. its input (a transposed convolution).",
    node="ConvolutionBackwardInputBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, weight, stride, padding, dilation, groups: convolution(
            grad, weight, stride, padding, dilation, groups
        ),
        "weight": lambda grad, grad_output, weight_shape, stride, padding, dilation, groups: (
            convolution_backward_weight(grad_output, grad, weight_shape, stride, padding, dilation, groups)
        ),
    },
)
def convolution_backward_input(
    grad_output: Tensor,
    weight: Tensor,
    input_shape: Sequence[int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
) -> Tensor:
    _check_operands("conv_transpose2d", grad_output, weight)
    return wrap(
        primitives(grad_output).conv2d_backward_input(
            grad_output._data, weight._data, tuple(input_shape), stride, padding, dilation, groups
        ),
        grad_output._device,
    )


@op(
    "convolution_backward_weight",
    doc="The gradient of convolution w.r.t. its weight.",
    node="ConvolutionBackwardWeightBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, input, stride, padding, dilation, groups: convolution(
            input, grad, stride, padding, dilation, groups
        ),
        "input": lambda grad, grad_output, input_shape, stride, padding, dilation, groups: convolution_backward_input(
            grad_output, grad, input_shape, stride, padding, dilation, groups
        ),
    },
)
def convolution_backward_weight(
    grad_output: Tensor,
    input: Tensor,
    weight_shape: Sequence[int],
    stride: tuple[int, int],
    padding: tuple[int, int],
    dilation: tuple[int, int],
    groups: int,
) -> Tensor:
    _check_operands("conv2d_backward_weight", input, grad_output)
    return wrap(
        primitives(input).conv2d_backward_weight(
            dense(grad_output), dense(input), tuple(weight_shape), stride, padding, dilation, groups
        ),
        input._device,
    )


def _same_padding(op, input_spatial, kernel, stride, dilation):
    """'same' as (before, after) per spatial dim: the extra pad goes after, as PyTorch's."""
    if any(s != 1 for s in stride):
        raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride})")
    return [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation)]


def _padding(op, padding, input_spatial, kernel, stride, dilation):
    """(symmetric padding per dim, extra (before, after) pairs for F.pad or None)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return (0,) * n, None
        if padding != "same":
            raise ValueError(f"{op}: padding must be 'valid', 'same', an int or a tuple of ints, got {padding!r}")
        pairs = _same_padding(op, input_spatial, kernel, stride, dilation)
        if all(b == a for b, a in pairs):
            return tuple(b for b, _ in pairs), None
        return (0,) * n, pairs
    return int_tuple(op, "padding", padding, n), None


def _conv(op, input, weight, bias, stride, padding, dilation, groups, spatial):
    check_float(op, "input", input)
    check_float(op, "weight", weight)
    x, batched = batched_input(op, input, spatial)
    if weight.ndim != spatial + 2:
        raise ShapeError(
            f"{op}: expected a {spatial + 2}-d weight (out_channels, in_channels/groups, "
            f"{'kL' if spatial == 1 else 'kH, kW'}), got weight of shape {fmt_shape(weight.shape)}"
        )
    if bias is not None:
        check_float(op, "bias", bias)
        if bias.ndim != 1 or bias.shape[0] != weight.shape[0]:
            raise ShapeError(
                f"{op}: expected bias of shape ({weight.shape[0]},) for weight "
                f"{fmt_shape(weight.shape)}, got {fmt_shape(bias.shape)}"
            )
    check_same_device(op, input, weight, bias)
    kernel = tuple(weight.shape[2:])
    stride, dilation = int_tuple(op, "stride", stride, spatial), int_tuple(op, "dilation", dilation, spatial)
    symmetric, extra = _padding(op, padding, tuple(x.shape[2:]), kernel, stride, dilation)
    if extra is not None:
        x = _pad(x, tuple(v for pair in reversed(extra) for v in pair))
    w = weight
    if spatial == 1:  # conv1d is conv2d over a height of 1
        x, w = x.unsqueeze(2), weight.unsqueeze(2)
        stride, symmetric, dilation = (1,) + stride, (0,) + symmetric, (1,) + dilation
    _check_shapes(op, x.shape, w.shape, stride, symmetric, dilation, groups, input.shape)
    out = convolution(x, w, stride, symmetric, dilation, groups)
    if spatial == 1:
        out = out.squeeze(2)
    if bias is not None:
        out = out + bias.view((1, -1) + (1,) * spatial)
    return out if batched else out.squeeze(0)


def _check_shapes(op, x_shape, w_shape, stride, padding, dilation, groups, original_shape):
    """The backends' shape check, up front, naming the shapes the user passed."""
    if not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
    try:
        conv2d_output_size(op, tuple(x_shape), tuple(w_shape), stride, padding, dilation, int(groups))
    except ShapeError as e:
        raise ShapeError(f"{e} (input {fmt_shape(original_shape)}, weight {fmt_shape(w_shape)})") from None


@op(
    "conv2d",
    doc="2-d cross-correlation of input (N, C, H, W) with weight (O, C/groups, kH, kW), plus bias.",
    composite=True,
    autocast="lower",
    function=True,
    method=False,
    functional=True,
)
def conv2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    return _conv("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


@op(
    "conv1d",
    doc="1-d cross-correlation of input (N, C, L) with weight (O, C/groups, kL), plus bias.",
    composite=True,
    autocast="lower",
    function=True,
    method=False,
    functional=True,
)
def conv1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: str | int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> Tensor:
    return _conv("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


def conv_transpose_output_size(op, input_shape, weight_shape, stride, padding, output_padding, dilation):
    """(Hout, Wout) of a transposed convolution: (H - 1) * s - 2p + d (k - 1) + output_padding + 1."""
    sizes = []
    for size, k, s, p, op_, d in zip(input_shape[2:], weight_shape[2:], stride, padding, output_padding, dilation):
        if op_ < 0 or op_ >= max(s, d):
            raise ValueError(
                f"{op}: output_padding {output_padding} must be smaller than either stride {stride} "
                f"or dilation {dilation}"
            )
        sizes.append((size - 1) * s - 2 * p + d * (k - 1) + op_ + 1)
    if min(sizes) < 0:
        raise ShapeError(
            f"{op}: input {fmt_shape(input_shape)} with weight {fmt_shape(weight_shape)}, stride "
            f"{stride}, padding {padding} gives a negative output size {tuple(sizes)}"
        )
    return tuple(sizes)


@op(
    "conv_transpose2d",
    doc="The transposed 2-d convolution of input (N, C, H, W), weight (C, O/groups, kH, kW).",
    composite=True,
    autocast="lower",
    function=True,
    method=False,
    functional=True,
)
def conv_transpose2d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    name = "conv_transpose2d"
    check_float(name, "input", input)
    check_float(name, "weight", weight)
    x, batched = batched_input(name, input, 2)
    if weight.ndim != 4:
        raise ShapeError(
            f"{name}: expected a 4-d weight (in_channels, out_channels/groups, kH, kW), got {fmt_shape(weight.shape)}"
        )
    if not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"{name}: groups must be a positive integer, got {groups!r}")
    if x.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ShapeError(
            f"{name}: input {fmt_shape(input.shape)} has {x.shape[1]} channels but weight "
            f"{fmt_shape(weight.shape)} expects {weight.shape[0]} (divisible by groups={groups})"
        )
    out_channels = weight.shape[1] * groups
    if bias is not None:
        check_float(name, "bias", bias)
        if bias.ndim != 1 or bias.shape[0] != out_channels:
            raise ShapeError(f"{name}: expected bias of shape ({out_channels},), got {fmt_shape(bias.shape)}")
    check_same_device(name, input, weight, bias)
    stride, padding = int_tuple(name, "stride", stride, 2), int_tuple(name, "padding", padding, 2)
    output_padding = int_tuple(name, "output_padding", output_padding, 2)
    dilation = int_tuple(name, "dilation", dilation, 2)
    hw = conv_transpose_output_size(
        name, tuple(x.shape), tuple(weight.shape), stride, padding, output_padding, dilation
    )
    out_shape = (x.shape[0], out_channels) + hw
    _check_shapes(name, out_shape, weight.shape, stride, padding, dilation, groups, input.shape)
    out = convolution_backward_input(x, weight, out_shape, stride, padding, dilation, int(groups))
    if bias is not None:
        out = out + bias.view(1, -1, 1, 1)
    return out if batched else out.squeeze(0)


@op(
    "conv_transpose1d",
    doc="The transposed 1-d convolution of input (N, C, L), weight (C, O/groups, kL).",
    composite=True,
    autocast="lower",
    function=True,
    method=False,
    functional=True,
)
def conv_transpose1d(
    input: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] = 0,
    output_padding: int | Sequence[int] = 0,
    groups: int = 1,
    dilation: int | Sequence[int] = 1,
) -> Tensor:
    name = "conv_transpose1d"
    check_float(name, "input", input)
    check_float(name, "weight", weight)
    if input.ndim not in (2, 3) or weight.ndim != 3:
        raise ShapeError(
            f"{name}: expected input (N, C, L) or (C, L) and weight (C, O/groups, kL), got "
            f"{fmt_shape(input.shape)} and {fmt_shape(weight.shape)}"
        )
    # a plane of height 1: the 2-d transposed convolution with the 1-d settings on its width
    stride, padding = int_tuple(name, "stride", stride, 1), int_tuple(name, "padding", padding, 1)
    output_padding = int_tuple(name, "output_padding", output_padding, 1)
    dilation = int_tuple(name, "dilation", dilation, 1)
    out = conv_transpose2d(
        input.unsqueeze(-2),
        weight.unsqueeze(-2),
        bias,
        (1,) + stride,
        (0,) + padding,
        (0,) + output_padding,
        groups,
        (1,) + dilation,
    )
    return out.squeeze(-2)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("conv2d", onnx=lambda w, node, **params: w.conv2d(node, **params), c=lambda lower, node: lower.conv2d(node))
lowering("conv2d_backward_input", onnx=lambda w, node, **params: w.conv2d_backward_input(node, **params))
