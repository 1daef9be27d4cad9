"""The shape rule of a 2-d convolution, shared by both backends' primitives and the ops' checks."""

from ..errors import ShapeError, fmt_shape


def conv2d_output_size(op, input_shape, weight_shape, stride, padding, dilation, groups):
    """(Ho, Wo) of a convolution, after checking the shapes fit; shared by the op and both backends."""
    if len(input_shape) != 4 or len(weight_shape) != 4:
        raise ShapeError(
            f"{op}: expected a 4-d input (N, C, H, W) and a 4-d weight (O, C/groups, kh, kw), got "
            f"input {fmt_shape(input_shape)} and weight {fmt_shape(weight_shape)}"
        )
    n, c, h, w = input_shape
    o, cg, kh, kw = weight_shape
    if groups < 1 or c % groups or o % groups or cg * groups != c:
        raise ShapeError(
            f"{op}: input {fmt_shape(input_shape)} with {c} channels and weight "
            f"{fmt_shape(weight_shape)} do not fit groups={groups} (expected weight dim 1 to be "
            f"C/groups and both C and O divisible by groups)"
        )
    if min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise ShapeError(
            f"{op}: stride {stride} and dilation {dilation} must be positive, padding {padding} non-negative"
        )
    sizes = []
    for size, k, s, p, d in ((h, kh, stride[0], padding[0], dilation[0]), (w, kw, stride[1], padding[1], dilation[1])):
        span = d * (k - 1) + 1
        if size + 2 * p < span:
            raise ShapeError(
                f"{op}: the kernel {(kh, kw)} (dilation {dilation}) is larger than the padded input "
                f"(input {fmt_shape(input_shape)}, padding {padding})"
            )
        sizes.append((size + 2 * p - span) // s + 1)
    return tuple(sizes)


def conv2d_gradient_size(op, g_shape, input_shape, weight_shape, stride, padding, dilation, groups):
    """``conv2d_output_size`` for a convolution's backward, after checking that the gradient (of
    ``g_shape``) has the output's shape (N, O, Ho, Wo); shared by both backends' backward primitives."""
    out = conv2d_output_size(op, input_shape, weight_shape, stride, padding, dilation, groups)
    expected = (input_shape[0], weight_shape[0]) + out
    if tuple(g_shape) != expected:
        raise ShapeError(
            f"{op}: grad of shape {fmt_shape(g_shape)} does not fit input {fmt_shape(input_shape)} and weight "
            f"{fmt_shape(weight_shape)} (expected {fmt_shape(expected)})"
        )
    return out
