"""The CPU backend's recurrent cell pointwise steps, forward and backward (kernels/recurrent.cu on
CUDA): what an LSTM or GRU computes per time step after its two matrix products, in one pass.

Gate order is PyTorch's: LSTM (i, f, g, o), GRU (r, z, n) along the last dim of the projections.
The LSTM layer's per-step pointwise work is the native module's where it is built
(kernels/host/recurrent.cpp: ``_NATIVE_STEP``, ``_NATIVE_STEP_BACKWARD``; None selects the NumPy loops,
the reference).
"""

from __future__ import annotations

import numpy as np

from ... import _native
from .._recurrent_shapes import check_cell, check_layer, check_saved, layer_dims
from . import threads
from ._common import BackendArray, _compute

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward", "lstm_layer", "lstm_layer_backward"]


# The native module's LSTM layer steps (kernels/host/recurrent.cpp; None: the NumPy loops, the
# reference): the forward's needs AVX2 (its tanh) and takes float32, the backward's (its steps and
# its factors) float32/float64.
_C = _native._C
_NATIVE_STEP = _C.cpu_lstm_step if _C is not None and hasattr(_C, "cpu_lstm_step") and _C.host_has_avx2() else None
_NATIVE_STEP_BACKWARD = getattr(_C, "cpu_lstm_step_backward", None)
_NATIVE_FACTORS = getattr(_C, "cpu_lstm_backward_factors", None)
_NATIVE_BACKWARD_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _sigmoid(x):
    """1 / (1 + exp(-x)) from exp(-|x|), which never overflows, in three passes over x."""
    e = np.exp(-np.abs(x))
    s = 1.0 / (1.0 + e)
    return np.where(x >= 0, s, e * s)


def _is_floating(a):
    return a.dtype.kind == "f"


def _lstm_activations(gi, gh):
    gates = _compute(gi) + _compute(gh)
    hidden = gates.shape[1] // 4
    act = _sigmoid(gates)  # i, f and o; the g quarter is replaced by its tanh
    act[:, 2 * hidden : 3 * hidden] = np.tanh(gates[:, 2 * hidden : 3 * hidden])
    return np.split(act, 4, axis=1)


def lstm_cell(gi: BackendArray, gh: BackendArray, c: BackendArray) -> BackendArray:
    """LSTM step from the input and hidden projections (B, 4H) and the cell state (B, H) ->
    hc (2, B, H): hc[0] = h' = o * tanh(c'), hc[1] = c' = f * c + i * g."""
    check_cell("lstm_cell", gi, c, 4, (gh,), _is_floating)
    i, f, g, o = _lstm_activations(gi, gh)
    c_new = f * _compute(c) + i * g
    return np.stack([o * np.tanh(c_new), c_new]).astype(c.dtype, copy=False)


def lstm_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, c: BackendArray, hc: BackendArray
) -> tuple[BackendArray, BackendArray]:
    """From the gradient of hc (2, B, H) -> (d_gates (B, 4H), d_c (B, H)); d_gates is the gradient
    of both projections (they are summed)."""
    check_cell("lstm_cell_backward", gi, c, 4, (gh,), _is_floating)
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
    check_cell("gru_cell", gi, h, 3, (gh,), _is_floating)
    _, z, n, _ = _gru_activations(gi, gh)
    return ((1.0 - z) * n + z * _compute(h)).astype(h.dtype, copy=False)


def gru_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, h: BackendArray
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """-> (d_gi, d_gh, d_h) from the gradient of h' (B, H)."""
    check_cell("gru_cell_backward", gi, h, 3, (gh,), _is_floating)
    r, z, n, h_n = _gru_activations(gi, gh)
    gg, hh = _compute(grad), _compute(h)
    d_n = gg * (1.0 - z) * (1.0 - n * n)
    d_r = d_n * h_n * r * (1.0 - r)
    d_z = gg * (hh - n) * z * (1.0 - z)
    d_gi = np.concatenate([d_r, d_z, d_n], axis=1).astype(gi.dtype, copy=False)
    d_gh = np.concatenate([d_r, d_z, d_n * r], axis=1).astype(gh.dtype, copy=False)
    return d_gi, d_gh, (gg * z).astype(h.dtype, copy=False)


# ------------------------------------------------------------------------------------------------
# whole LSTM layers: the recurrence over a sequence in one primitive each way. What does not depend on
# the previous step runs once over the whole sequence as one product or one pass: the input projection
# (bias included), the activations' derivatives, and in the backward the input's and all weights'
# gradients. What is left per step is one small product and a few in-place NumPy passes over
# preallocated buffers. Inside, sequences are time-major, (T * B, N) with step t in rows
# [t * B, (t + 1) * B): a step's rows are contiguous (batch-first steps would be B rows T rows apart,
# measured 20% slower on the forward); batch-first input and output are transposed once.
def _lstm_gate_affine(hidden, dtype):
    """(scale, offset) over the 4H gate columns: sigmoid(x) = 0.5 * tanh(0.5 * x) + 0.5 for i, f and
    o, tanh(x) for g, so one tanh pass activates all four gates (and tanh never overflows)."""
    scale = np.full(4 * hidden, 0.5, dtype)
    offset = np.full(4 * hidden, 0.5, dtype)
    scale[2 * hidden : 3 * hidden] = 1.0
    offset[2 * hidden : 3 * hidden] = 0.0
    return scale, offset


def _time_major(a, length, batch, batch_first):
    """A (T * B, N) time-major copy (or view) of a sequence array in the input's layout."""
    n = a.shape[-1]
    if batch_first:
        return np.ascontiguousarray(a.reshape(batch, length, n).transpose(1, 0, 2)).reshape(length * batch, n)
    return a.reshape(length * batch, n)


def _input_layout(a, length, batch, batch_first):
    """A (T * B, N) time-major array back in the input's layout: (T, B, N) or (B, T, N)."""
    a = a.reshape(length, batch, a.shape[-1])
    return np.ascontiguousarray(a.transpose(1, 0, 2)) if batch_first else a


def _visit(length, reverse):
    return range(length - 1, -1, -1) if reverse else range(length)


def lstm_layer(
    x: BackendArray,
    h0: BackendArray,
    c0: BackendArray,
    w_ih: BackendArray,
    w_hh: BackendArray,
    b_ih: BackendArray | None,
    b_hh: BackendArray | None,
    reverse: bool,
    batch_first: bool,
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """An LSTM layer over the input x (T, B, F), or (B, T, F) when ``batch_first``, from the states h0,
    c0 (B, H), visiting time backwards when ``reverse`` -> (out (T * B + 2B, H): every step's hidden
    state in x's row order, then the last hidden and cell states; gates (T * B, 4H): each step's
    activated gates (i, f, g, o); cells (2, T * B, H): each step's cell state and its tanh; the last
    two time-major and kept for the backward)."""
    check_layer("lstm_layer", x, h0, c0, w_ih, w_hh, (b_ih, b_hh), _is_floating)
    length, batch = layer_dims("lstm_layer", x, h0, batch_first)
    out_dtype = x.dtype
    xs, h, c, w_in, w = (_compute(a) for a in (x, h0, c0, w_ih, w_hh))
    dtype = xs.dtype
    hidden, rows = w.shape[1], length * batch
    scale, offset = _lstm_gate_affine(hidden, dtype)
    # the gates hold the tanh's argument z * scale until each step activates them in place: the
    # weights and bias are scaled alike (by 0.5 or 1: exact), so the projection is one product
    act = threads.matmul(_time_major(xs, length, batch, batch_first), (w_in * scale[:, None]).T)
    bias = None
    for b in (b_ih, b_hh):
        if b is not None:
            bias = _compute(b) if bias is None else bias + _compute(b)
    if bias is not None:
        act += bias * scale
    # row-major: OpenBLAS runs the step's small product 1.6x slower with the transposed view
    w_t = np.ascontiguousarray((w * scale[:, None]).T)
    out = np.empty((rows + 2 * batch, hidden), dtype)
    hs = np.empty((rows, hidden), dtype) if batch_first else out[:rows]
    cells = np.empty((2, rows, hidden), dtype)
    gh, work = np.empty((batch, 4 * hidden), dtype), np.empty((batch, hidden), dtype)
    # per-step views by an integer index (the cheapest), names bound locally: the loop is dispatch-bound
    by_step = act.reshape(length, batch, 4 * hidden)
    i, f, g, o = (by_step[:, :, k * hidden : (k + 1) * hidden] for k in range(4))
    h_steps, c_steps, tanh_c_steps = (a.reshape(length, batch, hidden) for a in (hs, cells[0], cells[1]))
    matmul, tanh, multiply = np.matmul, np.tanh, np.multiply
    # the native step: what follows each step's product in one call, where NumPy makes nine
    step = _NATIVE_STEP if dtype == np.float32 else None
    if step is not None:
        c = np.ascontiguousarray(c)
    for t in _visit(length, reverse):
        a_t, h_t, c_t, tanh_c = by_step[t], h_steps[t], c_steps[t], tanh_c_steps[t]
        matmul(h, w_t, out=gh)  # also from a zero h0: NaN and inf weights propagate as in PyTorch
        if step is not None:
            step(a_t, gh, c, scale, offset, c_t, tanh_c, h_t)
            h, c = h_t, c_t
            continue
        a_t += gh
        tanh(a_t, out=a_t)
        a_t *= scale
        a_t += offset
        multiply(f[t], c, out=c_t)
        multiply(i[t], g[t], out=work)
        c_t += work
        tanh(c_t, out=tanh_c)
        multiply(o[t], tanh_c, out=h_t)
        h, c = h_t, c_t
    if batch_first:
        out[:rows].reshape(batch, length, hidden)[...] = hs.reshape(length, batch, hidden).transpose(1, 0, 2)
    out[rows : rows + batch], out[rows + batch :] = h, c
    return out.astype(out_dtype, copy=False), act.astype(out_dtype, copy=False), cells.astype(out_dtype, copy=False)


def _previous(sequence, first, batch, reverse):
    """(T * B, N) time-major: the value each step started from (``first`` for the first step visited),
    from each step's result."""
    out = np.empty_like(sequence)
    if not len(sequence):
        return out
    if reverse:
        out[:-batch], out[-batch:] = sequence[batch:], first
    else:
        out[batch:], out[:batch] = sequence[:-batch], first
    return out


def _backward_factors(act, cs, tanh_cs, c0, batch, reverse):
    """lstm_layer_backward's factors from the activated gates act (rows, 4H), each step's cell state
    cs and its tanh (rows, H), time-major -> (d_z (rows, 4H): i (1 - i) g, f (1 - f) c_prev,
    (1 - g^2) i, o (1 - o) tanh_c; dh_to_dc (rows, H): (1 - tanh_c^2) o): in one native pass where
    the module is built (the same operations in the same order), else in NumPy's eleven."""
    rows, hidden = cs.shape[0], cs.shape[1]
    dtype = act.dtype
    if _NATIVE_FACTORS is not None and dtype in _NATIVE_BACKWARD_DTYPES:
        d_z, dh_to_dc = np.empty((rows, 4 * hidden), dtype), np.empty((rows, hidden), dtype)
        arrays = (np.ascontiguousarray(a, dtype) for a in (act, cs, tanh_cs, c0))
        _NATIVE_FACTORS(*arrays, reverse, d_z, dh_to_dc)
        return d_z, dh_to_dc
    by_gate = act.reshape(rows, 4, hidden)
    d_z = np.subtract(1, act)
    d_z *= act  # a (1 - a): the sigmoid gates' derivative; g's becomes 1 - g^2 next
    factors = d_z.reshape(rows, 4, hidden)
    np.multiply(by_gate[:, 2], by_gate[:, 2], out=factors[:, 2])
    np.subtract(1, factors[:, 2], out=factors[:, 2])
    np.multiply(factors[:, 0:3:2], by_gate[:, 2::-2], out=factors[:, 0:3:2])  # i's times g, g's times i
    if rows:  # f's times the previous cell state: the row block before (after, in reverse) or c0
        first_step, later_steps = (
            (slice(rows - batch, None), slice(None, rows - batch))
            if reverse
            else (slice(None, batch), slice(batch, None))
        )
        factors[later_steps, 1] *= cs[slice(batch, None) if reverse else slice(None, rows - batch)]
        factors[first_step, 1] *= c0
    factors[:, 3] *= tanh_cs
    dh_to_dc = np.multiply(tanh_cs, tanh_cs)
    np.subtract(1, dh_to_dc, out=dh_to_dc)
    dh_to_dc *= by_gate[:, 3]
    return d_z, dh_to_dc


def lstm_layer_backward(
    grad: BackendArray,
    x: BackendArray,
    h0: BackendArray,
    c0: BackendArray,
    w_ih: BackendArray,
    w_hh: BackendArray,
    out: BackendArray,
    gates: BackendArray,
    cells: BackendArray,
    reverse: bool,
    batch_first: bool,
    input_grad: bool,
    h0_grad: bool,
    bias_grad: bool,
) -> tuple[BackendArray | None, BackendArray | None, BackendArray, BackendArray, BackendArray, BackendArray | None]:
    """Backpropagation through time from the gradient of ``lstm_layer``'s ``out`` and its saved
    ``gates`` and ``cells`` -> (d_x (None unless ``input_grad``), d_h0 (None unless ``h0_grad``), d_c0,
    d_w_ih, d_w_hh, d_b: the gradient of each bias (None unless ``bias_grad``))."""
    check_layer("lstm_layer_backward", x, h0, c0, w_ih, w_hh, (), _is_floating)
    length, batch = layer_dims("lstm_layer_backward", x, h0, batch_first)
    hidden, rows = w_hh.shape[1], length * batch
    check_saved(x, hidden, rows, batch, grad, out, gates, cells)
    out_dtype = x.dtype
    g_out, xs, h0_, c0_, w_in, w, hs, act, (cs, tanh_cs) = (
        _compute(a) for a in (grad, x, h0, c0, w_ih, w_hh, out, gates, cells)
    )
    dtype = act.dtype
    # d_z = (d_c * (g i (1 - i), c_prev f (1 - f), i (1 - g^2)), d_h * tanh_c o (1 - o)) per step, with
    # d_c = d_c_next + d_h * o (1 - tanh_c^2): everything but d_c and d_h is known up front, so d_z
    # starts as those factors, made over the whole sequence in a few passes (gates as (rows, 4, H)),
    # and each step multiplies its rows in place
    f = act[:, hidden : 2 * hidden]
    d_z, dh_to_dc = _backward_factors(act, cs, tanh_cs, c0_, batch, reverse)
    g_hs = _time_major(g_out[:rows], length, batch, batch_first)
    d_h = np.array(g_out[rows : rows + batch], dtype)  # the last h's gradient, then the next step's
    d_c = np.array(g_out[rows + batch :], dtype)
    dh, work = np.empty((batch, hidden), dtype), np.empty((batch, hidden), dtype)
    first = length - 1 if reverse else 0  # the step the forward visits first: its d_h is d_h0's
    d_zs = d_z.reshape(length, batch, 4 * hidden)
    gates = d_zs.reshape(length, batch, 4, hidden)
    d_ifg, d_o = gates[:, :, 0:3], gates[:, :, 3]
    g_hs, dh_to_dc, fs = (a.reshape(length, batch, hidden) for a in (g_hs, dh_to_dc, f))
    d_c3 = d_c[:, None, :]
    matmul, multiply, add = np.matmul, np.multiply, np.add
    # the native step: the six passes below in one call (the same operations in the same order)
    step = _NATIVE_STEP_BACKWARD if dtype in _NATIVE_BACKWARD_DTYPES else None
    if step is not None:
        g_hs = np.ascontiguousarray(g_hs, dtype)
        act_steps = np.ascontiguousarray(act, dtype).reshape(length, batch, 4 * hidden)
    for t in _visit(length, not reverse):
        if step is not None:
            step(g_hs[t], d_h, dh_to_dc[t], act_steps[t], d_zs[t], d_c)
        else:
            add(g_hs[t], d_h, out=dh)
            multiply(dh, dh_to_dc[t], out=work)
            d_c += work
            multiply(d_ifg[t], d_c3, out=d_ifg[t])
            multiply(d_o[t], dh, out=d_o[t])
            d_c *= fs[t]
        if t != first or h0_grad:
            matmul(d_zs[t], w, out=d_h)
    x_rows = _time_major(xs, length, batch, batch_first)
    d_w_ih = threads.matmul(d_z.T, x_rows)
    d_w_hh = threads.matmul(d_z.T, _previous(_time_major(hs[:rows], length, batch, batch_first), h0_, batch, reverse))
    d_x = _input_layout(threads.matmul(d_z, w_in), length, batch, batch_first) if input_grad else None
    d_b = np.matmul(np.ones(rows, dtype), d_z) if bias_grad else None
    d_h0 = d_h if h0_grad else None
    d_c, d_w_ih, d_w_hh = (a.astype(out_dtype, copy=False) for a in (d_c, d_w_ih, d_w_hh))
    d_x, d_h0, d_b = (None if a is None else a.astype(out_dtype, copy=False) for a in (d_x, d_h0, d_b))
    return d_x, d_h0, d_c, d_w_ih, d_w_hh, d_b
