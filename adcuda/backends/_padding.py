"""The argument rule of padding, shared by both backends' pad primitives: which dims, the output shape and
PyTorch's limits per mode."""

from ..errors import ShapeError, fmt_shape

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad_plan(op, shape, pads, mode):
    """([(dim, size, before, after)] of the padded dims, the output shape), or ShapeError / ValueError naming
    ``op`` where ``pads`` do not fit ``shape`` or ``mode``: at most 3 dims, reflect pads below the size, circular
    ones at most the size left after cropping, no negative size, no empty dim padded except with a constant."""
    if mode not in PAD_MODES:
        raise ValueError(f"{op}: mode must be one of {', '.join(PAD_MODES)}, got {mode!r}")
    pads = tuple(int(p) for p in pads)
    k = len(pads) // 2
    if len(pads) % 2 or k > 3 or k > len(shape):
        raise ShapeError(
            f"{op}: expected (before, after) pairs for at most 3 of the last dims of shape {fmt_shape(shape)}, "
            f"got {len(pads)} values"
        )
    plan, out_shape = [], list(shape)
    for p in range(k):
        dim = len(shape) - k + p
        n, before, after = shape[dim], pads[2 * p], pads[2 * p + 1]
        if n + before + after < 0:
            raise ShapeError(f"{op}: padding leaves a negative size for shape {fmt_shape(shape)}")
        if mode == "reflect" and (before >= n or after >= n):
            raise ShapeError(
                f"{op}: reflect padding must be less than the dim's size, got ({before}, {after}) for size {n} "
                f"of shape {fmt_shape(shape)}"
            )
        if mode == "circular" and max(before, after) > circular_period(n, before, after):
            raise ShapeError(
                f"{op}: circular padding must be at most the dim's size left after cropping, got ({before}, "
                f"{after}) for size {n} of shape {fmt_shape(shape)}"
            )
        if mode != "constant" and n == 0 and (before > 0 or after > 0):
            raise ShapeError(f"{op}: cannot pad an empty dim in this mode, shape {fmt_shape(shape)}")
        out_shape[dim] = n + before + after
        plan.append((dim, n, before, after))
    return plan, tuple(out_shape)


def circular_period(n, before, after):
    """What circular padding wraps around: the n elements less those negative pads crop (PyTorch's rule)."""
    return n - max(-before, 0) - max(-after, 0)
