"""Pooling: max/avg pooling (1-d, 2-d, adaptive), lp pooling, max unpooling, local response norm.

Max pooling runs on the backend's pooling family (``kernels/pooling.cu``): the primitive gives the
values and PyTorch's flat indices; two linear ops carry the graph, ``max_pool2d_select`` (values at
the indices) and ``max_pool2d_backward`` (gradients added back at them), each the other's gradient.
Average pooling (fixed and adaptive windows, 1-d as 2-d with H = 1) runs on the same family: the
pair of linear ops ``avg_pool2d_windows`` / ``avg_pool2d_windows_backward`` (and the adaptive pair),
each the other's gradient. Interpolation is in resample.py.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING

import numpy as np

from ..autograd.graph import needs_grad
from ..backends.cpu.pooling import plain_pooling
from ..backends.memo import remember
from ..errors import IndexOutOfRangeError, ShapeError, fmt_shape
from ..tensor import Tensor, primitives
from .common import batched_input, check_tensor, dense, host_extremes, int_tuple, wrap
from .dtype_support import FLOATING, NUMBERS
from .index import _scatter_key
from .layout import pad as _pad
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import Sequence


def _viewed(t, shape):
    """``t.reshape(shape)``; outside autograd, the backend's view of its array without the view op's
    dispatch (used on the inputs a pooling primitive reads and on the primitive's fresh results, which
    no one else holds: there is no base or version counter to share)."""
    if needs_grad(t):
        return t.reshape(shape)
    return wrap(primitives(t).view(dense(t), shape), t._device)


def _array_2d(bk, input, shape4):
    """The array of ``input`` as the (N, C, H, W) ``shape4`` (None: as it is) that a 2-d pooling primitive
    reads, where nothing records."""
    return input._data if shape4 is None else bk.view(bk.contiguous(input._data), shape4)


def _shape_2d(x, spatial):
    """The (N, C, H, W) shape of x (N, C, *spatial): 1-d pooling is 2-d pooling over planes of one row."""
    shape = tuple(x.shape)
    return shape if spatial == 2 else shape[:2] + (1,) + shape[2:]


def _shapes(input, shape4, out_size, spatial):
    """(the (N, C, H, W) view the 2-d primitive reads, the layout of its (N, C, Ho, Wo) result in the
    input's: without 1-d pooling's one row and the batch dim ``batched_input`` adds to an unbatched
    input), each None where it is the array's own."""
    out_shape = tuple(shape4[:2]) + tuple(out_size)
    layout = out_shape if spatial == 2 else out_shape[:2] + out_shape[3:]
    if input.ndim == spatial + 1:  # unbatched
        layout = layout[1:]
    return (None if shape4 == tuple(input.shape) else shape4), (None if layout == out_shape else layout)


# Per-call plans: a pooling call's arguments checked and brought to the 2-d primitive's once per input
# shape and dtype and arguments (a training run, a benchmark, repeats a few), where the per-call checks
# and the views of 1-d pooling cost several times the pooling of a small batch.
_PLANS: dict = {}
_PLANS_KEPT = 1024  # (each of _PLANS and _DIRECT_PLANS)


def _plain(arguments):
    """Whether ``arguments`` may key a plan: ints, bools, None, tuples of ints (not floats, 2.0 == 2 in a
    dict where the checks refuse 2.0; not lists, which cannot key one)."""
    for a in arguments:
        cls = a.__class__
        if cls is tuple:
            for item in a:
                if item.__class__ is not int:
                    return False
        elif cls is not int and cls is not bool and a is not None:
            return False
    return True


def _plan(op, input, arguments, make, spatial):
    """``make(op, input, spatial, *arguments)`` (it checks them all, raising as the op does), remembered
    for the input's shape and dtype where ``arguments`` are plain."""
    if input.__class__ is not Tensor or not _plain(arguments):
        return make(op, input, spatial, *arguments)
    data = input._data
    key = (op, data.shape, data.dtype, arguments)
    plan = _PLANS.get(key)
    if plan is None:
        plan = remember(_PLANS, key, make(op, input, spatial, *arguments), _PLANS_KEPT)
    return plan


# The pooling ops' direct lanes (registry.py's ``direct=``): a CPU float32/float64 C-contiguous input that
# takes no part in a graph (not a view either), plain arguments, no hook attached: the host module's
# forward straight on the array, its plan (which host function, the 2-d shape, the arguments, the
# result's layout) made once per op, shape, dtype and arguments from the op's own plan, whose checks
# raise where the call is wrong (the lane then takes the path, which raises them named). The entry's
# NumPy error state switch, the forward's frames and the seam's checks were half of a small call.
_DIRECT_PLANS: dict = {}
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _direct(op, input, arguments, make, spatial, host_call, indices=False):
    """The pooled tensor of the direct lane (with ``indices``: and max pooling's indices), None where the
    call takes the path; ``make`` is the op's plan maker, ``host_call(plan, arguments)`` the (host
    function, its arguments after the array, whether it gives (values, indices)) of the op's plan, None
    where the host module does not take it."""
    if input.__class__ is not Tensor or input._requires_grad or input._grad_fn is not None or input._base is not None:
        return None
    data = input._data
    if data.__class__ is not np.ndarray or not data.flags.c_contiguous or not _plain(arguments):
        return None
    key = (op, data.shape, data.dtype, arguments)
    lane = _DIRECT_PLANS.get(key)
    if lane is None:
        plan = make(op, input, spatial, *arguments)
        lane = remember(_DIRECT_PLANS, key, _direct_plan(data, plan, host_call(plan, arguments)), _PLANS_KEPT)
    if lane is False:
        return None
    host, shape4, args, out_shape, pair = lane
    out = host(data if shape4 is None else data.reshape(shape4), *args)
    if pair:
        if indices:
            values, where = out if out_shape is None else (out[0].reshape(out_shape), out[1].reshape(out_shape))
            return wrap(values, input._device), wrap(where, input._device)
        out = out[0]
    return wrap(out if out_shape is None else out.reshape(out_shape), input._device)


def _direct_plan(data, plan, call):
    """(host function, the 2-d shape or None, its arguments, the result's layout or None, whether it gives
    (values, indices)) of the op's ``plan`` and its host ``call``; False where the lane does not take it."""
    shape4, out_shape = plan[0], plan[1]
    sizes = (shape4 or data.shape) + tuple(plan[-1])  # (every plan ends with the output size)
    if call is None or call[0] is None or data.dtype not in _FLOATS or not all(sizes):
        return False
    host, args, pair = call
    return host, shape4, args, out_shape, pair


def _max_host(plan, arguments):
    kernel, stride, padding, dilation, out_size = plan[2:]
    return plain_pooling("max_pool2d"), (kernel, stride, padding, dilation, out_size), True


def _max_direct(op, spatial):
    def direct(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices):
        arguments = (kernel_size, stride, padding, dilation, ceil_mode)
        return _direct(op, input, arguments, _max_pool_plan, spatial, _max_host, return_indices)

    return direct


def _avg_host(plan, arguments):
    kernel, stride, padding, out_size = plan[2:]
    count_include_pad, divisor_override = arguments[4:]
    if divisor_override is not None and divisor_override.__class__ is not int:
        return None
    override = 0 if divisor_override is None else divisor_override  # (the host module's 0: none)
    return plain_pooling("avg_pool2d"), (kernel, stride, padding, out_size, count_include_pad, override), False


def _avg_direct(op, spatial):
    def direct(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override=None):
        arguments = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return _direct(op, input, arguments, _avg_pool_plan, spatial, _avg_host)

    return direct


def _adaptive_avg_host(plan, arguments):
    return plain_pooling("adaptive_avg_pool2d"), (plan[2],), False


def _adaptive_max_host(plan, arguments):
    kernel, out_size = plan[2:]
    if kernel is None:
        return plain_pooling("adaptive_max_pool2d"), (out_size,), True
    return plain_pooling("max_pool2d"), (kernel, kernel, (0, 0), (1, 1), out_size), True


def _adaptive_direct(op, spatial, make, host_call):
    def direct(input, output_size, return_indices=False):
        return _direct(op, input, (output_size,), make, spatial, host_call, return_indices)

    return direct


def _window_args(op, kernel_size, stride, padding, spatial):
    """kernel, stride and padding as ``spatial`` ints each; no stride (None or empty) means the kernel's."""
    kernel = int_tuple(op, "kernel_size", kernel_size, spatial)
    stride = (
        kernel
        if stride is None or (not isinstance(stride, numbers.Integral) and len(stride) == 0)
        else int_tuple(op, "stride", stride, spatial)
    )
    return kernel, stride, int_tuple(op, "padding", padding, spatial)


def _pool_sizes(op, input_shape, kernel, stride, padding, dilation, ceil_mode):
    """PyTorch's pooling output sizes, after its checks (pad at most half the kernel, a window that fits)."""
    sizes = []
    for size, k, s, p, d in zip(input_shape[2:], kernel, stride, padding, dilation):
        if k < 1 or s < 1 or d < 1:
            raise ValueError(f"{op}: kernel_size {kernel}, stride {stride} and dilation {dilation} must be positive")
        if p < 0 or p > k // 2:
            raise ValueError(
                f"{op}: pad should be at most half of effective kernel size, but got pad={padding}, "
                f"kernel_size={kernel}"
            )
        span = d * (k - 1) + 1
        numerator = size + 2 * p - span
        out = (numerator + (s - 1 if ceil_mode else 0)) // s + 1
        if ceil_mode and (out - 1) * s >= size + p:  # the last window must start inside the input or its left pad
            out -= 1
        if out < 1 or numerator < 0:
            raise ShapeError(
                f"{op}: input {fmt_shape(input_shape)} is too small for kernel_size {kernel} "
                f"(dilation {dilation}, padding {padding}): output size would be {out}"
            )
        sizes.append(out)
    return tuple(sizes)


# ------------------------------------------------------------------------------------------------
# max pooling (as in PyTorch, the 2-d average and adaptive forms are only F.<name>, not adcuda.<name>)
@op(
    "max_pool2d_select",
    doc="input's values at flat (H*W) indices per (n, c) plane: max pooling's values (``values`` "
    "when the caller has them already).",
    node="MaxPool2DWithIndicesBackward0",
    function=False,
    method=False,
    grads={"input": lambda grad, indices, input_shape: max_pool2d_backward(grad, indices, input_shape)},
)
def max_pool2d_select(input: Tensor, indices: Tensor, values: Tensor | None = None) -> Tensor:
    if values is not None:  # the pooling primitive's own result: the same values, no second gather
        return values
    n, c, h, w = input.shape
    bk = primitives(input)
    plane = bk.view(dense(input), (n, c, h * w))
    taken = bk.gather(plane, 2, bk.view(dense(indices), (n, c, indices.shape[2] * indices.shape[3])))
    return wrap(bk.view(taken, tuple(indices.shape)), input._device)


@op(
    "max_pool2d_backward",
    doc="Gradients added at the positions max pooling took them from.",
    node="MaxPool2DWithIndicesBackwardBackward0",
    function=False,
    method=False,
    grads={"grad_output": lambda grad, indices: max_pool2d_select(grad, indices)},
)
def max_pool2d_backward(grad_output: Tensor, indices: Tensor, input_shape: Sequence[int]) -> Tensor:
    return wrap(
        primitives(grad_output).max_pool2d_backward(grad_output._data, indices._data, tuple(input_shape)),
        grad_output._device,
    )


def _pooled(input, values, indices):
    """The pooled tensor: the primitive's values, recorded through max_pool2d_select where a gradient
    is needed."""
    if needs_grad(input):
        return max_pool2d_select(input, indices, values)
    return values


def _max_pool(op, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, spatial):
    arguments = (kernel_size, stride, padding, dilation, ceil_mode)
    plan = _plan(op, input, arguments, _max_pool_plan, spatial)
    shape4, out_shape, kernel, stride, padding, dilation, out_size = plan
    if return_indices or needs_grad(input):
        x = input if shape4 is None else _viewed(input, shape4)
        bk = primitives(x)
        values, indices = bk.max_pool2d(x._data, kernel, stride, padding, dilation, out_size)
        return _max_result(x, bk, values, indices, out_shape, return_indices)
    bk = primitives(input)  # nothing records: the arrays alone
    values = bk.max_pool2d(_array_2d(bk, input, shape4), kernel, stride, padding, dilation, out_size)[0]
    return wrap(values if out_shape is None else bk.view(values, out_shape), input._device)


def _max_result(x, bk, values, indices, out_shape, return_indices):
    """The pooled values (and indices) of x (N, C, H, W) in the input's layout ``out_shape`` (None: as
    they are), recorded through max_pool2d_select where a gradient is needed."""
    if not (return_indices or needs_grad(x)):
        return wrap(values if out_shape is None else bk.view(values, out_shape), x._device)
    values, indices = wrap(values, x._device), wrap(indices, x._device)
    out = _pooled(x, values, indices)
    if out_shape is not None:
        out, indices = _viewed(out, out_shape), _viewed(indices, out_shape)
    return (out, indices) if return_indices else out


def _max_pool_plan(op, input, spatial, kernel_size, stride, padding, dilation, ceil_mode):
    x, _ = batched_input(op, input, spatial)
    kernel, stride, padding = _window_args(op, kernel_size, stride, padding, spatial)
    dilation = int_tuple(op, "dilation", dilation, spatial)
    lead = (1,) * (2 - spatial)  # 1-d: a kernel of one row, no padding along it
    kernel, stride, padding, dilation = lead + kernel, lead + stride, (0,) * (2 - spatial) + padding, lead + dilation
    shape4 = _shape_2d(x, spatial)
    out_size = _pool_sizes(op, shape4, kernel, stride, padding, dilation, ceil_mode)
    return _shapes(input, shape4, out_size, spatial) + (kernel, stride, padding, dilation, out_size)


@op(
    "max_pool2d",
    dtypes=NUMBERS,
    doc="Max over kernel_size windows of input (N, C, H, W) (stride, padding, dilation, ceil_mode).",
    composite=True,
    direct=_max_direct("max_pool2d", 2),
    function=True,
    method=False,
    functional=True,
)
def max_pool2d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2)


@op(
    "max_pool1d",
    dtypes=FLOATING,
    doc="Max over kernel_size windows of input (N, C, L) (stride, padding, dilation, ceil_mode).",
    composite=True,
    direct=_max_direct("max_pool1d", 1),
    function=True,
    method=False,
    functional=True,
)
def max_pool1d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    dilation: int | Sequence[int] = 1,
    ceil_mode: bool = False,
    return_indices: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1)


@op(
    "adaptive_max_pool2d",
    dtypes=FLOATING,
    doc="Max pooling to output_size (H, W) with PyTorch's adaptive windows.",
    composite=True,
    # (the plan makers are defined below: looked up when called)
    direct=_adaptive_direct("adaptive_max_pool2d", 2, lambda *a: _adaptive_max_plan(*a), _adaptive_max_host),
    function=False,
    method=False,
    functional=True,
)
def adaptive_max_pool2d(
    input: Tensor, output_size: int | None | Sequence[int | None], return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    return _adaptive_max("adaptive_max_pool2d", input, output_size, return_indices, 2)


def _adaptive_max(name, input, output_size, return_indices, spatial):
    shape4, out_shape, kernel, out_size = _plan(name, input, (output_size,), _adaptive_max_plan, spatial)
    x = input if shape4 is None else _viewed(input, shape4)
    bk = primitives(x)
    if kernel is not None:
        values, indices = bk.max_pool2d(x._data, kernel, kernel, (0, 0), (1, 1), out_size)
    else:
        values, indices = bk.adaptive_max_pool2d(x._data, out_size)
    return _max_result(x, bk, values, indices, out_shape, return_indices)


def _adaptive_max_plan(name, input, spatial, output_size):
    x, _ = batched_input(name, input, spatial)
    out_size = (1,) * (2 - spatial) + _adaptive_size(name, x, output_size, spatial)
    shape4 = _shape_2d(x, spatial)
    if shape4[2] == 0 or shape4[3] == 0:
        raise ShapeError(f"{name}: expected input with non-zero spatial sizes, got {fmt_shape(input.shape)}")
    (h, w), (ho, wo) = shape4[2:], out_size
    # equal windows (the common case: 8x8 to 4x4, any size to 1x1): PyTorch's adaptive bounds are then
    # the fixed windows of kernel = stride = size / output size, whose primitive takes the taps as
    # whole-array passes instead of one pass per output position (the same first-maximum and last-NaN
    # rules, the same flat indices)
    kernel = (h // ho, w // wo) if ho and wo and h % ho == 0 and w % wo == 0 else None
    return _shapes(input, shape4, out_size, spatial) + (kernel, out_size)


def _adaptive_size(op, x, output_size, spatial):
    if isinstance(output_size, numbers.Integral) or output_size is None:
        output_size = (output_size,) * spatial
    output_size = tuple(output_size)
    if len(output_size) != spatial:
        raise ShapeError(f"{op}: output_size must be an int or {spatial} values, got {output_size}")
    size = tuple(x.shape[2 + i] if s is None else int(s) for i, s in enumerate(output_size))
    if min(size) < 0:
        raise ShapeError(f"{op}: output_size {output_size} must be non-negative")
    return size


# ------------------------------------------------------------------------------------------------
# average pooling: the backend's window means (fixed windows: kernel, stride, padding and PyTorch's
# divisor rules; adaptive windows), whose gradients are the backend's gather-form backward
@op(
    "avg_pool2d_windows",
    doc="Means over the fixed windows of input (N, C, H, W) (out_size from ceil_mode; divisor rules).",
    node="AvgPool2DBackward0",
    function=False,
    method=False,
    grads={
        "input": lambda grad, input_shape, kernel, stride, padding, count_include_pad, divisor_override: (
            avg_pool2d_windows_backward(grad, input_shape, kernel, stride, padding, count_include_pad, divisor_override)
        )
    },
)
def avg_pool2d_windows(
    input: Tensor,
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    out_size: Sequence[int],
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    return wrap(
        primitives(input).avg_pool2d(
            dense(input),
            tuple(kernel),
            tuple(stride),
            tuple(padding),
            tuple(out_size),
            count_include_pad,
            divisor_override,
        ),
        input._device,
    )


@op(
    "avg_pool2d_windows_backward",
    doc="The gradient of avg_pool2d_windows: each input position gathers its windows' shares.",
    node="AvgPool2DBackwardBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, grad_output_shape, kernel, stride, padding, count_include_pad, divisor_override: (
            avg_pool2d_windows(
                grad, kernel, stride, padding, tuple(grad_output_shape[2:]), count_include_pad, divisor_override
            )
        )
    },
)
def avg_pool2d_windows_backward(
    grad_output: Tensor,
    input_shape: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    count_include_pad: bool,
    divisor_override: int | None,
) -> Tensor:
    return wrap(
        primitives(grad_output).avg_pool2d_backward(
            dense(grad_output),
            tuple(input_shape),
            tuple(kernel),
            tuple(stride),
            tuple(padding),
            count_include_pad,
            divisor_override,
        ),
        grad_output._device,
    )


@op(
    "adaptive_avg_pool2d_windows",
    doc="Means over PyTorch's adaptive windows of input (N, C, H, W).",
    node="AdaptiveAvgPool2DBackward0",
    function=False,
    method=False,
    grads={"input": lambda grad, input_shape: adaptive_avg_pool2d_windows_backward(grad, input_shape)},
)
def adaptive_avg_pool2d_windows(input: Tensor, out_size: Sequence[int]) -> Tensor:
    return wrap(primitives(input).adaptive_avg_pool2d(dense(input), tuple(out_size)), input._device)


@op(
    "adaptive_avg_pool2d_windows_backward",
    doc="The gradient of adaptive_avg_pool2d_windows.",
    node="AdaptiveAvgPool2DBackwardBackward0",
    function=False,
    method=False,
    grads={
        "grad_output": lambda grad, grad_output_shape: adaptive_avg_pool2d_windows(grad, tuple(grad_output_shape[2:]))
    },
)
def adaptive_avg_pool2d_windows_backward(grad_output: Tensor, input_shape: Sequence[int]) -> Tensor:
    return wrap(
        primitives(grad_output).adaptive_avg_pool2d_backward(dense(grad_output), tuple(input_shape)),
        grad_output._device,
    )


def _floating_batched(op, input, spatial):
    """``batched_input`` for average pooling, which takes floating point input only."""
    x, batched = batched_input(op, input, spatial)
    if not x.dtype.is_floating_point:
        raise ShapeError(f"{op}: expected a floating point input, got {x.dtype}")
    return x, batched


def _avg_pool(op, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, spatial):
    arguments = (kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
    shape4, out_shape, kernel, stride, padding, out_size = _plan(op, input, arguments, _avg_pool_plan, spatial)
    if needs_grad(input):
        x = input if shape4 is None else _viewed(input, shape4)
        out = avg_pool2d_windows(x, kernel, stride, padding, out_size, count_include_pad, divisor_override)
        return out if out_shape is None else _viewed(out, out_shape)
    bk = primitives(input)
    x = bk.contiguous(_array_2d(bk, input, shape4))
    out = bk.avg_pool2d(x, kernel, stride, padding, out_size, count_include_pad, divisor_override)
    return wrap(out if out_shape is None else bk.view(out, out_shape), input._device)


def _avg_pool_plan(op, input, spatial, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    x, _ = _floating_batched(op, input, spatial)
    kernel, stride, padding = _window_args(op, kernel_size, stride, padding, spatial)
    if divisor_override is not None and divisor_override == 0:
        raise ValueError(f"{op}: divisor must be not zero")
    out_size = _pool_sizes(op, tuple(x.shape), kernel, stride, padding, (1,) * spatial, ceil_mode)
    lead = (1,) * (2 - spatial)  # 1-d: a kernel of one row, no padding along it
    out_size = lead + out_size
    return _shapes(input, _shape_2d(x, spatial), out_size, spatial) + (
        lead + kernel,
        lead + stride,
        (0,) * (2 - spatial) + padding,
        out_size,
    )


@op(
    "avg_pool2d",
    doc="Mean over kernel_size windows of input (N, C, H, W) (count_include_pad, ceil_mode).",
    composite=True,
    direct=_avg_direct("avg_pool2d", 2),
    function=False,
    method=False,
    functional=True,
)
def avg_pool2d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> Tensor:
    return _avg_pool(
        "avg_pool2d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2
    )


@op(
    "avg_pool1d",
    doc="Mean over kernel_size windows of input (N, C, L) (count_include_pad, ceil_mode).",
    composite=True,
    direct=_avg_direct("avg_pool1d", 1),
    function=True,
    method=False,
    functional=True,
)
def avg_pool1d(
    input: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
) -> Tensor:
    return _avg_pool("avg_pool1d", input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1)


# ------------------------------------------------------------------------------------------------
# adaptive average pooling: the backend's windows (above)
def _adaptive_avg(op, input, output_size, spatial):
    shape4, out_shape, out_size = _plan(op, input, (output_size,), _adaptive_avg_plan, spatial)
    if needs_grad(input):
        x = input if shape4 is None else _viewed(input, shape4)
        out = adaptive_avg_pool2d_windows(x, out_size)
        return out if out_shape is None else _viewed(out, out_shape)
    bk = primitives(input)
    out = bk.adaptive_avg_pool2d(bk.contiguous(_array_2d(bk, input, shape4)), out_size)
    return wrap(out if out_shape is None else bk.view(out, out_shape), input._device)


def _adaptive_avg_plan(op, input, spatial, output_size):
    x, _ = _floating_batched(op, input, spatial)
    out_size = _adaptive_size(op, x, output_size, spatial)
    if any(s == 0 for s in x.shape[2:]) and x.numel():
        raise ShapeError(f"{op}: expected input with non-zero spatial sizes, got {fmt_shape(input.shape)}")
    out_size = (1,) * (2 - spatial) + out_size
    return _shapes(input, _shape_2d(x, spatial), out_size, spatial) + (out_size,)


@op(
    "adaptive_avg_pool2d",
    doc="Average pooling to output_size (H, W) with PyTorch's adaptive windows.",
    composite=True,
    direct=_adaptive_direct("adaptive_avg_pool2d", 2, lambda *a: _adaptive_avg_plan(*a), _adaptive_avg_host),
    function=False,
    method=False,
    functional=True,
)
def adaptive_avg_pool2d(input: Tensor, output_size: int | None | Sequence[int | None]) -> Tensor:
    return _adaptive_avg("adaptive_avg_pool2d", input, output_size, 2)


@op(
    "adaptive_avg_pool1d",
    doc="Average pooling to output_size (L) with PyTorch's adaptive windows.",
    composite=True,
    direct=_adaptive_direct("adaptive_avg_pool1d", 1, lambda *a: _adaptive_avg_plan(*a), _adaptive_avg_host),
    function=True,
    method=False,
    functional=True,
)
def adaptive_avg_pool1d(input: Tensor, output_size: int | Sequence[int]) -> Tensor:
    return _adaptive_avg("adaptive_avg_pool1d", input, output_size, 1)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's pooling names (issue 15)
def _adaptive_max_pool1d_functional(
    input: Tensor, output_size: int | tuple[int] | list[int], return_indices: bool = False
) -> Tensor | tuple[Tensor, Tensor]:
    pooled = adaptive_max_pool1d(input, output_size)
    return pooled if return_indices else pooled[0]


def _adaptive_max_pool1d_direct(input, output_size):
    """adaptive_max_pool1d's direct lane: (values, indices) (the path's checks of rank and output size first)."""
    if input.__class__ is not Tensor or input._data.ndim not in (2, 3):
        return None
    if output_size.__class__ is tuple:
        if len(output_size) != 1:
            return None
        output_size = output_size[0]
    return _direct("adaptive_max_pool1d", input, (output_size,), _adaptive_max_plan, 1, _adaptive_max_host, True)


@op(
    "adaptive_max_pool1d",
    dtypes=FLOATING,
    doc="Max pooling to output_size (L) with PyTorch's adaptive windows: (values, indices); "
    "F.adaptive_max_pool1d gives the values unless return_indices.",
    composite=True,
    direct=lambda input, output_size: _adaptive_max_pool1d_direct(input, output_size),
    function=True,
    method=False,
    functional=_adaptive_max_pool1d_functional,
)
def adaptive_max_pool1d(input: Tensor, output_size: int | tuple[int] | list[int]) -> tuple[Tensor, Tensor]:
    name = "adaptive_max_pool1d"
    check_tensor(name, "input", input)
    if input.ndim not in (2, 3):
        raise ShapeError(f"{name}: expected a 2-d (C, L) or 3-d (N, C, L) input, got {fmt_shape(input.shape)}")
    size = output_size[0] if isinstance(output_size, (tuple, list)) else output_size
    # the 1-d windows are the 2-d ones of a plane of height 1
    return _adaptive_max(name, input, size, True, 1)


@op(
    "local_response_norm",
    doc="input / (k + alpha * mean of squares over size neighbouring channels) ** beta.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> Tensor:
    name = "local_response_norm"
    check_tensor(name, "input", input)
    if input.ndim < 3:
        raise ShapeError(f"{name}: expected a 3-d or higher input (N, C, ...), got {fmt_shape(input.shape)}")
    if input.numel() == 0:
        return input
    n, c = input.shape[:2]
    # the squares as one plane (C, rest) per sample; the window runs along C, zero padded as PyTorch's
    squares = (input * input).reshape(n, 1, c, -1)
    squares = _pad(squares, (0, 0, size // 2, (size - 1) // 2))
    window = avg_pool2d(squares, (size, 1), stride=1).reshape(input.shape)
    return input / (window * alpha + k) ** beta


def _lp_pool(name, input, norm_type, kernel_size, stride, ceil_mode, spatial):
    check_tensor(name, "input", input)
    if norm_type <= 0:
        raise ValueError(f"{name}: norm_type must be positive, got {norm_type}")
    kernel = int_tuple(name, "kernel_size", kernel_size, spatial)
    pooled = (avg_pool1d if spatial == 1 else avg_pool2d)(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    window = 1
    for k in kernel:
        window *= k
    if not needs_grad(pooled):
        # sign(m) * relu(|m|) is m itself but for its gradient (and -0): nothing to record, so the sum and
        # its root over the primitives, two calls where the form below dispatches five ops
        bk, d = primitives(pooled), pooled.dtype
        return wrap(
            bk.binary("pow", bk.binary("mul", pooled._data, float(window), d), 1.0 / norm_type, d), pooled._device
        )
    # PyTorch's form: the window's mean back to its sum, negative rounding noise clipped to 0
    return (pooled.sign() * pooled.abs().relu() * window).pow(1.0 / norm_type)


@op(
    "lp_pool1d",
    doc="The p-norm of each window of input (N, C, L): (sum of x**p) ** (1/p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def lp_pool1d(
    input: Tensor,
    norm_type: float,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    ceil_mode: bool = False,
) -> Tensor:
    return _lp_pool("lp_pool1d", input, norm_type, kernel_size, stride, ceil_mode, 1)


@op(
    "lp_pool2d",
    doc="The p-norm of each window of input (N, C, H, W): (sum of x**p) ** (1/p).",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def lp_pool2d(
    input: Tensor,
    norm_type: float,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    ceil_mode: bool = False,
) -> Tensor:
    return _lp_pool("lp_pool2d", input, norm_type, kernel_size, stride, ceil_mode, 2)


def _max_unpool(name, input, indices, kernel_size, stride, padding, output_size, spatial):
    check_tensor(name, "input", input)
    if not isinstance(indices, Tensor) or tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(
            f"{name}: indices {fmt_shape(indices.shape) if isinstance(indices, Tensor) else None} must have "
            f"input {fmt_shape(input.shape)}'s shape (max_pool's return_indices)"
        )
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ShapeError(f"{name}: expected a {spatial + 1}-d or {spatial + 2}-d input, got {fmt_shape(input.shape)}")
    kernel = int_tuple(name, "kernel_size", kernel_size, spatial)
    stride = kernel if stride is None else int_tuple(name, "stride", stride, spatial)
    padding = int_tuple(name, "padding", padding, spatial)
    size = [(n - 1) * s - 2 * p + k for n, s, p, k in zip(input.shape[-spatial:], stride, padding, kernel)]
    if output_size is not None:
        size = [int(v) for v in tuple(output_size)[-spatial:]]
    lead = tuple(input.shape[:-spatial])
    plane = math.prod(size)
    flat = lead + (math.prod(input.shape[-spatial:]),)  # (no -1: a batch of zero samples is still a shape)
    if indices.numel():
        lowest, largest = host_extremes(indices)
        if lowest < 0 or largest >= plane:
            raise IndexOutOfRangeError(
                f"{name}: an index is out of the output's {plane} positions (output size {size})"
            )
    if needs_grad(input):
        out = input.new_zeros(lead + (plane,)).scatter(len(lead), indices.reshape(flat), input.reshape(flat))
        return out.reshape(lead + tuple(size))
    # nothing to record: scatter's write over the primitives (zeros, the views and the scatter cost five
    # dispatches where one write of the values does)
    bk = primitives(input)
    out = bk.full(lead + (plane,), 0, input.dtype)
    key = _scatter_key(wrap(bk.view(dense(indices), flat), indices._device), len(lead))
    bk.index_put_(out, key, bk.view(dense(input), flat), False)
    return wrap(bk.view(out, lead + tuple(size)), input._device)


@op(
    "max_unpool1d",
    dtypes=FLOATING,
    doc="max_pool1d undone: input's values put back at indices, zeros elsewhere.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def max_unpool1d(
    input: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    return _max_unpool("max_unpool1d", input, indices, kernel_size, stride, padding, output_size, 1)


@op(
    "max_unpool2d",
    dtypes=FLOATING,
    doc="max_pool2d undone: input's values put back at indices, zeros elsewhere.",
    composite=True,
    function=False,
    method=False,
    functional=True,
)
def max_unpool2d(
    input: Tensor,
    indices: Tensor,
    kernel_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
    output_size: Sequence[int] | None = None,
) -> Tensor:
    return _max_unpool("max_unpool2d", input, indices, kernel_size, stride, padding, output_size, 2)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering(
    "max_pool2d",
    onnx=lambda w, node, **params: w.max_pool2d(node, **params),
    c=lambda lower, node: lower.max_pool2d(node),
)
lowering(
    "avg_pool2d",
    onnx=lambda w, node, **params: w.avg_pool2d(node, **params),
    c=lambda lower, node: lower.avg_pool2d(node),
)
lowering(
    "adaptive_avg_pool2d",
    onnx=lambda w, node, **params: w.adaptive_avg_pool2d(node, **params),
    c=lambda lower, node: lower.adaptive_avg_pool2d(node),
)
lowering("adaptive_max_pool2d", onnx=lambda w, node, **params: w.adaptive_max_pool2d(node, **params))
