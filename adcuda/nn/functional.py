"""``adcuda.nn.functional`` (``import adcuda.nn.functional as F``): PyTorch's functional NN API.

The ops with their own backward rules live in ``adcuda.ops`` (``nn_ops``, ``elementwise``,
``indexing``); this module re-exports them under PyTorch's names and signatures and adds the thin
compositions (``linear``, ``pad``, ``normalize``, the ``inplace=`` activation variants).
"""
from ..amp.autocast import autocast_inputs
from ..errors import DTypeError, ShapeError, fmt_shape
from ..ops import elementwise as _ew
from ..ops.indexing import one_hot
from ..ops.linalg import linear_2d as _linear_2d, matmul as _matmul
from ..ops import nn_ops as _nn
from ..ops.nn_ops import (apply_inplace as _apply_inplace, binary_cross_entropy_with_logits, cross_entropy,
                          dropout, embedding, l1_loss, layer_norm, logsigmoid, mse_loss, nll_loss,
                          scaled_dot_product_attention, softplus)
from ..tensor import Tensor

__all__ = [
    "binary_cross_entropy_with_logits", "cross_entropy", "dropout", "embedding", "gelu", "l1_loss",
    "layer_norm", "leaky_relu", "leaky_relu_", "linear", "log_softmax", "logsigmoid", "mse_loss",
    "nll_loss", "normalize", "one_hot", "pad", "relu", "relu_", "scaled_dot_product_attention", "sigmoid",
    "silu", "softmax", "softplus", "tanh",
]

tanh = _ew.tanh
sigmoid = _ew.sigmoid


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _nn.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _nn.log_softmax(input, dim, dtype)


def gelu(input, approximate="none"):
    return _ew.gelu(input, approximate)


def relu(input, inplace=False):
    return relu_(input) if inplace else _ew.relu(input)


def relu_(input):
    return _apply_inplace(input, _ew.relu, "relu_")


def silu(input, inplace=False):
    return _apply_inplace(input, _ew.silu, "silu_") if inplace else _ew.silu(input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    if inplace:
        return leaky_relu_(input, negative_slope)
    return _ew.leaky_relu(input, negative_slope)


def leaky_relu_(input, negative_slope=0.01):
    return _apply_inplace(input, lambda x: _ew.leaky_relu(x, negative_slope), "leaky_relu_")


def linear(input, weight, bias=None):
    """``input @ weight.T + bias``; ``input`` (*, in_features), ``weight`` (out_features, in_features)."""
    for name, t in (("input", input), ("weight", weight)):
        if not isinstance(t, Tensor):
            raise DTypeError(f"linear: {name} must be a Tensor, got {type(t).__name__}")
    input, weight, bias = autocast_inputs("linear", input, weight, bias)
    if weight.ndim not in (1, 2) or input.ndim == 0:
        raise ShapeError(f"linear: expected weight of shape (out_features, in_features) and input of shape "
                         f"(*, in_features), got weight {fmt_shape(weight.shape)} and input {fmt_shape(input.shape)}")
    in_features = weight.shape[-1]
    if input.shape[-1] != in_features:
        out_desc = f"out_features={weight.shape[0]}, " if weight.ndim == 2 else ""
        raise ShapeError(f"linear: input has {input.shape[-1]} features (shape {fmt_shape(input.shape)}) but weight "
                         f"of shape {fmt_shape(weight.shape)} expects {out_desc}in_features={in_features}")
    if weight.ndim == 2 and input.ndim >= 2 and input.dtype is weight.dtype and input.device == weight.device and (
            bias is None or (isinstance(bias, Tensor) and tuple(bias.shape) == (weight.shape[0],)
                             and bias.dtype is input.dtype and bias.device == input.device)):
        if input.ndim == 2:
            return _linear_2d(input, weight, bias)
        lead = tuple(input.shape[:-1])
        return _linear_2d(input.reshape(-1, in_features), weight, bias).reshape(lead + (weight.shape[0],))
    w_t = weight.t() if weight.ndim == 2 else weight
    if input.ndim > 2:
        # one 2-D product instead of a batched one: the weight gradient is then a single matmul
        lead = tuple(input.shape[:-1])
        out = _matmul(input.reshape(-1, in_features), w_t).reshape(lead + tuple(w_t.shape[1:]))
    else:
        out = _matmul(input, w_t)
    if bias is not None:
        if not isinstance(bias, Tensor):
            raise DTypeError(f"linear: bias must be a Tensor, got {type(bias).__name__}")
        out_features = tuple(w_t.shape[1:])
        if tuple(bias.shape) not in (out_features, (1,) * len(bias.shape)) or bias.ndim > 1:
            raise ShapeError(f"linear: bias of shape {fmt_shape(bias.shape)} does not match out_features "
                             f"{out_features[0] if out_features else 'of a 1-D weight'} (weight shape "
                             f"{fmt_shape(weight.shape)})")
        out = out + bias
    return out


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``input / max(||input||_p, eps)`` along ``dim``."""
    if out is not None:
        raise TypeError("normalize: out= is not supported; assign the result instead")
    norm = input.norm(p, dim, keepdim=True).clamp(min=eps)
    return input / norm


_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(input, pad, mode="constant", value=None):  # noqa: A002 (PyTorch's names)
    """Pad (or, with negative amounts, crop) the last ``len(pad) // 2`` dims; ``pad`` lists
    (before, after) pairs starting from the last dim, as in PyTorch."""
    if not isinstance(input, Tensor):
        raise DTypeError(f"pad: input must be a Tensor, got {type(input).__name__}")
    pad = tuple(int(p) for p in pad)
    if len(pad) % 2:
        raise ShapeError(f"pad: padding length must be divisible by 2, got {len(pad)} values {pad}")
    if len(pad) // 2 > input.ndim:
        raise ShapeError(f"pad: padding {pad} covers {len(pad) // 2} dims but the input has shape "
                         f"{fmt_shape(input.shape)}")
    if mode not in _PAD_MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_PAD_MODES)}, got {mode!r}")
    if mode != "constant" and value not in (None, 0):
        raise ValueError(f"pad: padding mode {mode!r} doesn't take in value argument")
    amounts = {input.ndim - 1 - i: (pad[2 * i], pad[2 * i + 1]) for i in range(len(pad) // 2)}
    for d, (before, after) in amounts.items():
        if input.shape[d] + before + after < 0:
            raise ShapeError(f"pad: padding {(before, after)} of dim {d} leaves a negative size for input of "
                             f"shape {fmt_shape(input.shape)}")
    if mode == "constant":
        return _pad_constant(input, amounts, 0 if value is None else value)
    out = input
    for d, (before, after) in amounts.items():
        out = _pad_by_index(out, d, before, after, mode)
    return out


def _pad_constant(input, amounts, value):
    from ..factories import full
    from ..ops.indexing import index_put
    cropped = input[tuple(slice(max(-amounts[d][0], 0), input.shape[d] - max(-amounts[d][1], 0))
                          if d in amounts else slice(None) for d in range(input.ndim))]
    if all(before <= 0 and after <= 0 for before, after in amounts.values()):
        return cropped.clone()
    shape = tuple(n + sum(amounts[d]) if d in amounts else n for d, n in enumerate(input.shape))
    window = tuple(slice(max(amounts[d][0], 0), max(amounts[d][0], 0) + cropped.shape[d]) if d in amounts
                   else slice(None) for d in range(input.ndim))
    base = full(shape, value, dtype=input.dtype, device=input.device)
    return index_put(base, window, cropped)


def _pad_by_index(input, dim, before, after, mode):
    """reflect / replicate / circular padding of one dim as a gather of source positions."""
    from ..factories import tensor
    n = input.shape[dim]
    if mode == "reflect" and (before >= n or after >= n):
        raise ShapeError(f"pad: padding size should be less than the corresponding input dimension for "
                         f"reflect mode, but got padding {(before, after)} at dimension {dim} of input "
                         f"{fmt_shape(input.shape)}")
    if mode == "circular" and (before > n or after > n):
        raise ShapeError(f"pad: padding {(before, after)} at dimension {dim} of input {fmt_shape(input.shape)} "
                         "would wrap around more than once in circular mode")
    if n == 0:
        raise ShapeError(f"pad: cannot {mode}-pad an empty dimension {dim} of input {fmt_shape(input.shape)}")
    positions = []
    for i in range(-before, n + after):
        if mode == "replicate":
            positions.append(min(max(i, 0), n - 1))
        elif mode == "circular":
            positions.append(i % n)
        else:  # reflect about the first and last elements, which are not repeated
            positions.append(-i if i < 0 else 2 * (n - 1) - i if i >= n else i)
    return input.index_select(dim, tensor(positions, device=input.device))

