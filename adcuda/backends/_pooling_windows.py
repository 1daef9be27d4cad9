"""The argument rule of an average-pooling window, shared by both backends' primitives."""

from ..errors import ShapeError


def check_avg_window(op, kernel, stride, padding, divisor_override):
    """Raise ShapeError naming ``op`` unless the window is positive, its padding at most half the kernel
    and ``divisor_override`` (if given) positive."""
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, padding
    if min(kh, kw, sh, sw) < 1 or min(ph, pw) < 0 or 2 * ph > kh or 2 * pw > kw:
        raise ShapeError(
            f"{op}: kernel {tuple(kernel)} and stride {tuple(stride)} must be positive, padding {tuple(padding)} "
            "at most half the kernel"
        )
    if divisor_override is not None and divisor_override <= 0:
        raise ShapeError(f"{op}: divisor_override must be positive, got {divisor_override}")
