"""The CPU backend's recurrent cell pointwise steps, forward and backward (kernels/recurrent.cu on
CUDA): what an LSTM or GRU computes per time step after its two matrix products, in one pass.

Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n) along the last dim of the projections.
"""

import numpy as np

from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward"]


def _sigmoid(x):
    """1 / (1 + exp(-x)) from exp(-|x|), which never overflows, in three passes over x."""
    e = np.exp(-np.abs(x))
    s = 1.0 / (1.0 + e)
    return np.where(x >= 0, s, e * s)


def _check_cell(op, gates, state, n_gates, *others):
    for a in (gates, state) + others:
        if a.dtype.kind != "f":
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype}")
    if (
        state.ndim != 2
        or gates.ndim != 2
        or gates.shape[0] != state.shape[0]
        or gates.shape[1] != n_gates * state.shape[1]
    ):
        raise ShapeError(
            f"{op}: expected gates (B, {n_gates}H) and a state (B, H), got gates of shape "
            f"{fmt_shape(gates.shape)} and a state of shape {fmt_shape(state.shape)}"
        )
    for a in others:
        if a.shape != gates.shape:
            raise ShapeError(
                f"{op}: expected the hidden projection of the gates' shape {fmt_shape(gates.shape)}, "
                f"got {fmt_shape(a.shape)}"
            )
    if len({a.dtype for a in (gates, state) + others}) != 1:
        raise DTypeError(
            f"{op}: expected arrays of one dtype, got " + ", ".join(str(a.dtype) for a in (gates, state) + others)
        )


def _lstm_activations(gi, gh):
    gates = _compute(gi) + _compute(gh)
    hidden = gates.shape[1] // 4
    act = _sigmoid(gates)  # i, f and o; the g quarter is replaced by its tanh
    act[:, 2 * hidden : 3 * hidden] = np.tanh(gates[:, 2 * hidden : 3 * hidden])
    return np.split(act, 4, axis=1)


def lstm_cell(gi: BackendArray, gh: BackendArray, c: BackendArray) -> BackendArray:
    """LSTM step from the input and hidden projections (B, 4H) and the cell state (B, H) ->
    hc (2, B, H): hc[0] = h' = o * tanh(c'), hc[1] = c' = f * c + i * g."""
    _check_cell("lstm_cell", gi, c, 4, gh)
    i, f, g, o = _lstm_activations(gi, gh)
    c_new = f * _compute(c) + i * g
    return np.stack([o * np.tanh(c_new), c_new]).astype(c.dtype, copy=False)


def lstm_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, c: BackendArray, hc: BackendArray
) -> tuple[BackendArray, BackendArray]:
    """From the gradient of hc (2, B, H) -> (d_gates (B, 4H), d_c (B, H)); d_gates is the gradient
    of both projections (they are summed)."""
    _check_cell("lstm_cell_backward", gi, c, 4, gh)
    i, f, g, o = _lstm_activations(gi, gh)
    gg = _compute(grad)
    tanh_c = np.tanh(_compute(hc[1]))
    d_c_new = gg[1] + gg[0] * o * (1.0 - tanh_c * tanh_c)
    d_gates = np.concatenate(
        [
            d_c_new * g * i * (1.0 - i),
            d_c_new * _compute(c) * f * (1.0 - f),
            d_c_new * i * (1.0 - g * g),
            gg[0] * tanh_c * o * (1.0 - o),
        ],
        axis=1,
    )
    return d_gates.astype(gi.dtype, copy=False), (d_c_new * f).astype(c.dtype, copy=False)


def _gru_activations(gi, gh):
    i_r, i_z, i_n = np.split(_compute(gi), 3, axis=1)
    h_r, h_z, h_n = np.split(_compute(gh), 3, axis=1)
    r = _sigmoid(i_r + h_r)
    z = _sigmoid(i_z + h_z)
    return r, z, np.tanh(i_n + r * h_n), h_n


def gru_cell(gi: BackendArray, gh: BackendArray, h: BackendArray) -> BackendArray:
    """GRU step from the input and hidden projections (B, 3H), biases included, and the state (B, H)
    -> h' = (1 - z) * n + z * h with n = tanh(i_n + r * h_n), PyTorch's form."""
    _check_cell("gru_cell", gi, h, 3, gh)
    _, z, n, _ = _gru_activations(gi, gh)
    return ((1.0 - z) * n + z * _compute(h)).astype(h.dtype, copy=False)


def gru_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, h: BackendArray
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """-> (d_gi, d_gh, d_h) from the gradient of h' (B, H)."""
    _check_cell("gru_cell_backward", gi, h, 3, gh)
    r, z, n, h_n = _gru_activations(gi, gh)
    gg, hh = _compute(grad), _compute(h)
    d_n = gg * (1.0 - z) * (1.0 - n * n)
    d_r = d_n * h_n * r * (1.0 - r)
    d_z = gg * (hh - n) * z * (1.0 - z)
    d_gi = np.concatenate([d_r, d_z, d_n], axis=1).astype(gi.dtype, copy=False)
    d_gh = np.concatenate([d_r, d_z, d_n * r], axis=1).astype(gh.dtype, copy=False)
    return d_gi, d_gh, (gg * z).astype(h.dtype, copy=False)
