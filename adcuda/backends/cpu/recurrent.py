"""The CPU backend's recurrent cell pointwise steps, forward and backward (kernels/recurrent.cu on
CUDA): what an LSTM or GRU computes per time step after its two matrix products, in one pass.

Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n) along the last dim of the projections.
"""

import numpy as np

from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import _compute

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward", "lstm_layer", "lstm_layer_backward"]


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


# ------------------------------------------------------------------------------------------------
# whole LSTM layers: the recurrence over a sequence in one primitive, so that each time step costs
# one small GEMM and a handful of in-place NumPy passes over preallocated buffers, and everything
# that does not depend on the previous step (the bias, the activations' derivatives, the hidden
# weights' gradient) runs once over the whole sequence.
def _lstm_gate_affine(hidden, dtype):
    """(scale, offset) over the 4H gate columns: sigmoid(x) = 0.5 * tanh(0.5 * x) + 0.5 for i, f and
    o, tanh(x) for g, so one tanh pass activates all four gates (and tanh never overflows)."""
    scale = np.full(4 * hidden, 0.5, dtype)
    offset = np.full(4 * hidden, 0.5, dtype)
    scale[2 * hidden : 3 * hidden] = 1.0
    offset[2 * hidden : 3 * hidden] = 0.0
    return scale, offset


def _lstm_activate(z, scale, offset, out):
    np.multiply(z, scale, out=out)
    np.tanh(out, out=out)
    out *= scale
    out += offset
    return out


def _check_layer(op, projected, w_hh, *states):
    for a in (projected, w_hh) + states:
        if a.dtype.kind != "f":
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype}")
    hidden = w_hh.shape[1] if w_hh.ndim == 2 else -1
    if (
        projected.ndim != 3
        or w_hh.shape != (4 * hidden, hidden)
        or projected.shape[2] != 4 * hidden
        or any(s.shape != (projected.shape[1], hidden) for s in states)
    ):
        raise ShapeError(
            f"{op}: expected projected (T, B, 4H), w_hh (4H, H) and states (B, H), got projected "
            f"{fmt_shape(projected.shape)}, w_hh {fmt_shape(w_hh.shape)} and states "
            + ", ".join(fmt_shape(s.shape) for s in states)
        )
    if len({a.dtype for a in (projected, w_hh) + states}) != 1:
        raise DTypeError(
            f"{op}: expected arrays of one dtype, got " + ", ".join(str(a.dtype) for a in (projected, w_hh) + states)
        )


def lstm_layer(
    projected: BackendArray,
    h0: BackendArray,
    c0: BackendArray,
    w_hh: BackendArray,
    b_hh: BackendArray | None,
    reverse: bool,
) -> tuple[BackendArray, BackendArray]:
    """An LSTM layer's recurrence from its input projection (T, B, 4H) and initial states (B, H) ->
    (states (2, T, B, H): stack(hs, cs) in time order, gates (T, B, 4H): each step's pre-activation
    gate sums projected + h @ w_hh.T + b_hh, kept for the backward)."""
    _check_layer("lstm_layer", projected, w_hh, h0, c0)
    out_dtype = projected.dtype
    proj, w, h, c = (_compute(a) for a in (projected, w_hh, h0, c0))
    dtype = proj.dtype
    length, batch, gates = proj.shape
    hidden = gates // 4
    scale, offset = _lstm_gate_affine(hidden, dtype)
    # the loop works on z * scale (the tanh's argument) with the hidden weights scaled alike: scaling
    # by 0.5 or 1 is exact, so dividing it out at the end gives z bit for bit, and each step saves a pass
    z = np.empty((length, batch, gates), dtype)
    if b_hh is None:
        np.multiply(proj, scale, out=z)
    else:
        np.add(proj, _compute(b_hh), out=z)
        z *= scale
    w_t = w.T * scale
    states = np.empty((2, length, batch, hidden), dtype)
    gh, act, work = np.empty((batch, gates), dtype), np.empty((batch, gates), dtype), np.empty((batch, hidden), dtype)
    i, f, g, o = (act[:, k * hidden : (k + 1) * hidden] for k in range(4))
    for t in range(length - 1, -1, -1) if reverse else range(length):
        z_t, h_new, c_new = z[t], states[0, t], states[1, t]
        np.matmul(h, w_t, out=gh)
        z_t += gh
        np.tanh(z_t, out=act)
        act *= scale
        act += offset
        np.multiply(f, c, out=c_new)
        np.multiply(i, g, out=work)
        c_new += work
        np.tanh(c_new, out=h_new)
        h_new *= o
        h, c = h_new, c_new
    z /= scale
    return states.astype(out_dtype, copy=False), z.astype(out_dtype, copy=False)


def _previous(sequence, initial, reverse):
    """(T, B, H): the state each step started from (``initial`` for the first step visited)."""
    out = np.empty_like(sequence)
    if not len(sequence):
        return out
    if reverse:
        out[:-1] = sequence[1:]
        out[-1] = initial
    else:
        out[1:] = sequence[:-1]
        out[0] = initial
    return out


def lstm_layer_backward(
    grad: BackendArray,
    gates: BackendArray,
    states: BackendArray,
    h0: BackendArray,
    c0: BackendArray,
    w_hh: BackendArray,
    reverse: bool,
) -> tuple[BackendArray, BackendArray, BackendArray, BackendArray]:
    """Backpropagation through time from the gradient of ``lstm_layer``'s states (2, T, B, H) and its
    gates -> (d_gates (T, B, 4H): the gradient of the projection and, summed over (T, B), of b_hh;
    d_h0, d_c0 (B, H); d_w_hh (4H, H))."""
    _check_layer("lstm_layer_backward", gates, w_hh, h0, c0)
    length, batch, n_gates = gates.shape
    hidden = n_gates // 4
    if grad.shape != (2, length, batch, hidden) or states.shape != grad.shape:
        raise ShapeError(
            f"lstm_layer_backward: expected grad and states of shape {(2, length, batch, hidden)}, got "
            f"{fmt_shape(grad.shape)} and {fmt_shape(states.shape)}"
        )
    out_dtype = gates.dtype
    z, w, gg, hc = (_compute(a) for a in (gates, w_hh, grad, states))
    dtype = z.dtype
    scale, offset = _lstm_gate_affine(hidden, dtype)
    act = _lstm_activate(z, scale, offset, np.empty_like(z))
    i, f, g, o = (act[..., k * hidden : (k + 1) * hidden] for k in range(4))
    c_prev = _previous(hc[1], _compute(c0), reverse)
    tanh_c = np.tanh(hc[1])
    # per step, with dc the gradient of the step's new cell state:
    #   d(i, f, g) = dc * (g i (1 - i), c_prev f (1 - f), i (1 - g^2)),  d_o = dh * tanh_c o (1 - o),
    #   dc = grad_c + d_c_next + dh * o (1 - tanh_c^2);  everything but dc and dh is known up front
    factors = np.empty((length, batch, 3, hidden), dtype)
    np.multiply(g, i * (1 - i), out=factors[:, :, 0])
    np.multiply(c_prev, f * (1 - f), out=factors[:, :, 1])
    np.multiply(i, 1 - g * g, out=factors[:, :, 2])
    dh_to_dc = o * (1 - tanh_c * tanh_c)
    dh_to_do = tanh_c * (o * (1 - o))
    d_z = np.empty((length, batch, n_gates), dtype)
    d_h, d_c = np.zeros((batch, hidden), dtype), np.zeros((batch, hidden), dtype)
    dh, dc = np.empty((batch, hidden), dtype), np.empty((batch, hidden), dtype)
    for t in range(length) if reverse else range(length - 1, -1, -1):
        d_z_t = d_z[t]
        by_gate = d_z_t.reshape(batch, 4, hidden)
        np.add(gg[0, t], d_h, out=dh)
        np.multiply(dh, dh_to_dc[t], out=dc)
        dc += gg[1, t]
        dc += d_c
        np.multiply(factors[t], dc[:, None, :], out=by_gate[:, :3])
        np.multiply(dh, dh_to_do[t], out=by_gate[:, 3])
        np.multiply(dc, f[t], out=d_c)
        np.matmul(d_z_t, w, out=d_h)
    rows = length * batch
    h_prev = _previous(hc[0], _compute(h0), reverse)
    d_w = d_z.reshape(rows, n_gates).T @ h_prev.reshape(rows, hidden)
    return tuple(a.astype(out_dtype, copy=False) for a in (d_z, d_h, d_c, d_w))
