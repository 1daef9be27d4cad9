"""``adcuda.nn.init``: in-place initialisers with PyTorch's names, formulas and defaults.

Each runs under ``no_grad`` and draws from adcuda's generator (``manual_seed`` makes it
reproducible); random values are drawn in fp32 (fp64 for fp64 tensors) and written into the tensor's
own dtype and device.
"""

import math
import warnings

import numpy as np

from .. import dtypes as dt
from ..autograd.grad_mode import no_grad
from ..factories import eye, from_numpy, rand, randn


def calculate_gain(nonlinearity, param=None):
    """The recommended gain for ``nonlinearity`` (PyTorch's table)."""
    linear_fns = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_fns or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            negative_slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            negative_slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + negative_slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.dim() < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
            f"(got shape {tuple(tensor.shape)})"
        )
    receptive_field_size = 1
    for s in tensor.shape[2:]:
        receptive_field_size *= s
    fan_in = tensor.size(1) * receptive_field_size
    fan_out = tensor.size(0) * receptive_field_size
    return fan_in, fan_out


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of ['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _draw_dtype(tensor):
    if not tensor.dtype.is_floating_point:
        raise TypeError(f"nn.init: expected a floating point tensor, got {tensor.dtype}")
    return dt.float64 if tensor.dtype is dt.float64 else dt.float32


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fill ``tensor`` with values drawn from U(a, b)."""
    with no_grad():
        u = rand(tuple(tensor.shape), generator=generator, dtype=_draw_dtype(tensor), device=tensor.device)
        return tensor.copy_(u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fill ``tensor`` with values drawn from N(mean, std**2)."""
    with no_grad():
        z = randn(tuple(tensor.shape), generator=generator, dtype=_draw_dtype(tensor), device=tensor.device)
        return tensor.copy_(z * std + mean)


def constant_(tensor, val):
    with no_grad():
        return tensor.fill_(val)


def ones_(tensor):
    return constant_(tensor, 1.0)


def zeros_(tensor):
    with no_grad():
        return tensor.zero_()


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Glorot uniform: U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """Glorot normal: N(0, std**2) with std = gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He uniform: U(-b, b) with b = gain * sqrt(3 / fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def _layer_default_(weight, bias):
    """PyTorch's initialisation of Linear and the convolutions: ``kaiming_uniform_(a=sqrt(5))``, which
    is U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and the bias (where there is one) from the same bound."""
    kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        fan_in, _ = _calculate_fan_in_and_fan_out(weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        uniform_(bias, -bound, bound)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """He normal: N(0, std**2) with std = gain / sqrt(fan)."""
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=2)
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


# ------------------------------------------------------------------------------------------------
# More of PyTorch's initialisers (issue 15)
def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fill ``tensor`` with N(mean, std**2) values truncated to [a, b]: values outside are drawn again
    (rejection sampling, an exact draw of the truncated distribution)."""
    if not a < b:
        raise ValueError(f"trunc_normal_: expected a < b, got a={a}, b={b}")

    def cdf(x):
        return 0.5 * (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))) if std > 0 else float(x >= mean)

    mass = cdf(b) - cdf(a)
    if mass < 1e-4:  # each draw would land in [a, b] less than once in 10,000 tries
        raise ValueError(f"trunc_normal_: [{a}, {b}] holds {mass:.2g} of N({mean}, {std}**2): too little to draw from")
    shape, dtype = tuple(tensor.shape), _draw_dtype(tensor)
    with no_grad():
        values = randn(shape, generator=generator, dtype=dtype, device=tensor.device) * std + mean
        outside = (values < a) | (values > b)
        while bool(outside.any()):
            again = randn(shape, generator=generator, dtype=dtype, device=tensor.device) * std + mean
            values = values.where(~outside, again)
            outside = (values < a) | (values > b)
        return tensor.copy_(values)


def orthogonal_(tensor, gain=1.0, generator=None):
    """Fill ``tensor`` (at least 2-d, viewed as rows x the rest) with a (semi-)orthogonal matrix: the Q
    of the QR factorisation of a normal draw, signs fixed by R's diagonal, times gain."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got {tensor.ndim}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    draw = randn((rows, cols), generator=generator, dtype=dt.float64)
    flat = draw.numpy() if rows >= cols else draw.numpy().T
    # the factorisation runs on the host: initialisation is once per weight, not per step
    q, r = np.linalg.qr(flat)
    q = q * np.sign(np.diag(r))
    if rows < cols:
        q = q.T
    with no_grad():
        return tensor.copy_(from_numpy(np.ascontiguousarray(q * gain).reshape(tuple(tensor.shape))))


def eye_(tensor):
    """Fill a 2-d ``tensor`` with the identity matrix (ones on the main diagonal)."""
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-d tensors are supported, got shape {tuple(tensor.shape)}")
    with no_grad():
        return tensor.copy_(eye(tensor.shape[0], tensor.shape[1], dtype=tensor.dtype, device=tensor.device))


def dirac_(tensor, groups=1):
    """Fill a 3-, 4- or 5-d convolution weight with the Dirac delta: each of the first input channels
    of every group passes through unchanged."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError(f"dirac_: only 3, 4 and 5-d tensors are supported, got shape {tuple(tensor.shape)}")
    out_per_group = tensor.shape[0] // groups
    if tensor.shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups ({groups})")
    centre = tuple(k // 2 for k in tensor.shape[2:])
    with no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(out_per_group, tensor.shape[1])):
                tensor[(g * out_per_group + d, d) + centre] = 1
    return tensor
