"""The CUDA backend's recurrent cell steps, forward and backward (kernels/recurrent.cu), with the CPU
backend's signatures, checks and dtype rules. Half types are computed in fp32.
"""

from __future__ import annotations

from ... import _native
from .._recurrent_shapes import check_cell, check_layer, check_saved, layer_dims
from ..seam import Shape
from ._common import BackendArray, dense, is_floating
from .elementwise import binary, unary
from .gemm import matmul
from .reduce import reduce
from .storage import contiguous, copy_, dtype_of, empty, full, permute, view
from .storage import slice as basic_view

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward", "lstm_layer", "lstm_layer_backward"]


def lstm_cell(gi: BackendArray, gh: BackendArray, c: BackendArray) -> BackendArray:
    """LSTM step from the input and hidden projections (B, 4H) and the cell state (B, H) ->
    hc (2, B, H): hc[0] = h' = o * tanh(c'), hc[1] = c' = f * c + i * g."""
    check_cell("lstm_cell", gi, c, 4, (gh,), is_floating)
    return _native._C.lstm_cell(dense(gi), dense(gh), dense(c))


def lstm_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, c: BackendArray, hc: BackendArray
) -> tuple[BackendArray, BackendArray]:
    """From the gradient of hc (2, B, H) -> (d_gates (B, 4H), d_c (B, H)); d_gates is the gradient
    of both projections (they are summed)."""
    check_cell("lstm_cell_backward", gi, c, 4, (gh,), is_floating)
    return tuple(_native._C.lstm_cell_backward(dense(grad), dense(gi), dense(gh), dense(c), dense(hc)))


def gru_cell(gi: BackendArray, gh: BackendArray, h: BackendArray) -> BackendArray:
    """GRU step from the input and hidden projections (B, 3H), biases included, and the state (B, H)
    -> h' = (1 - z) * n + z * h with n = tanh(i_n + r * h_n), PyTorch's form."""
    check_cell("gru_cell", gi, h, 3, (gh,), is_floating)
    return _native._C.gru_cell(dense(gi), dense(gh), dense(h))


def gru_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, h: BackendArray
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """-> (d_gi, d_gh, d_h) from the gradient of h' (B, H)."""
    check_cell("gru_cell_backward", gi, h, 3, (gh,), is_floating)
    return tuple(_native._C.gru_cell_backward(dense(grad), dense(gi), dense(gh), dense(h)))


# ------------------------------------------------------------------------------------------------
# whole LSTM layers, composed of the step kernels above and cuBLAS products: the input projection of
# the whole sequence is one product; per step the hidden product and the fused cell kernel. The gates
# are kept pre-activation (the CPU backend keeps them activated), so the backward runs the cell's
# fused backward kernel on them per step without redoing the hidden product; the input's and weights'
# gradients are one product each over the whole sequence. Sequences are time-major inside, as on the
# CPU: step t is rows [t * B, (t + 1) * B).
def _visit(length, reverse):
    return range(length - 1, -1, -1) if reverse else range(length)


def _dense_view(a: BackendArray, shape: Shape) -> BackendArray:
    """``a`` (a contiguous copy of it where it is not contiguous) viewed as ``shape``."""
    viewed = view(dense(a), shape)
    assert viewed is not None  # a contiguous array is viewable as any shape of its size
    return viewed


def _time_major(a, length, batch, batch_first):
    """A (T * B, N) time-major copy (or view) of a sequence array in the input's layout."""
    n = a.shape[-1]
    if batch_first:
        return _dense_view(permute(_dense_view(a, (batch, length, n)), (1, 0, 2)), (length * batch, n))
    return _dense_view(a, (length * batch, n))


def _step(a, t, batch):
    return basic_view(a, (slice(t * batch, (t + 1) * batch),))


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
    state in x's row order, then the last hidden and cell states; gates (T * B, 4H): each step's gates,
    pre-activation here; cells (2, T * B, H): each step's cell state and its tanh; the last two
    time-major and kept for the backward)."""
    check_layer("lstm_layer", x, h0, c0, w_ih, w_hh, (b_ih, b_hh), is_floating)
    length, batch = layer_dims("lstm_layer", x, h0, batch_first)
    dtype = dtype_of(x)
    hidden, rows = w_hh.shape[1], length * batch
    bias = b_ih if b_hh is None else (b_hh if b_ih is None else binary("add", dense(b_ih), dense(b_hh), dtype))
    x_rows = _time_major(x, length, batch, batch_first)
    projected = matmul(x_rows, permute(dense(w_ih), (1, 0)), None if bias is None else dense(bias))
    w_t = permute(dense(w_hh), (1, 0))
    out = empty((rows + 2 * batch, hidden), dtype)
    hs = empty((rows, hidden), dtype) if batch_first else basic_view(out, (slice(0, rows),))
    gates = empty((rows, 4 * hidden), dtype)
    cells = empty((2, rows, hidden), dtype)
    h, c = dense(h0), dense(c0)
    for t in _visit(length, reverse):
        gi, gh = _step(projected, t, batch), matmul(h, w_t)
        hc = lstm_cell(gi, gh, c)
        copy_(_step(gates, t, batch), binary("add", gi, gh, dtype))
        h, c = _step(hs, t, batch), _step(basic_view(cells, (0,)), t, batch)
        copy_(h, basic_view(hc, (0,)))
        copy_(c, basic_view(hc, (1,)))
    if rows:
        copy_(basic_view(cells, (1,)), unary("tanh", basic_view(cells, (0,))))
    if batch_first:
        copy_(
            _dense_view(basic_view(out, (slice(0, rows),)), (batch, length, hidden)),
            permute(_dense_view(hs, (length, batch, hidden)), (1, 0, 2)),
        )
    copy_(basic_view(out, (slice(rows, rows + batch),)), h)
    copy_(basic_view(out, (slice(rows + batch, None),)), c)
    return out, gates, cells


def _previous(sequence, first, batch, reverse):
    """(T * B, N) time-major: the value each step started from (``first`` for the first step visited)."""
    rows = sequence.shape[0]
    out = empty(tuple(sequence.shape), dtype_of(sequence))
    if not rows:
        return out
    if reverse:
        copy_(basic_view(out, (slice(0, rows - batch),)), basic_view(sequence, (slice(batch, None),)))
        copy_(basic_view(out, (slice(rows - batch, None),)), first)
    else:
        copy_(basic_view(out, (slice(batch, None),)), basic_view(sequence, (slice(0, rows - batch),)))
        copy_(basic_view(out, (slice(0, batch),)), first)
    return out


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
    check_layer("lstm_layer_backward", x, h0, c0, w_ih, w_hh, (), is_floating)
    length, batch = layer_dims("lstm_layer_backward", x, h0, batch_first)
    hidden, rows = w_hh.shape[1], length * batch
    check_saved(x, hidden, rows, batch, grad, out, gates, cells)
    dtype = dtype_of(x)
    g, w, cs = dense(grad), dense(w_hh), basic_view(cells, (0,))
    g_hs = _time_major(basic_view(g, (slice(0, rows),)), length, batch, batch_first)
    hs = _time_major(basic_view(out, (slice(0, rows),)), length, batch, batch_first)
    no_hidden_part = full((batch, 4 * hidden), 0, dtype)  # the gates already hold both projections' sum
    d_z = empty((rows, 4 * hidden), dtype)
    d_h = contiguous(basic_view(g, (slice(rows, rows + batch),)))
    d_c = contiguous(basic_view(g, (slice(rows + batch, None),)))
    first = length - 1 if reverse else 0
    for t in _visit(length, not reverse):
        c = dense(c0) if t == first else _step(cs, t + 1 if reverse else t - 1, batch)  # the step's starting c
        g_hc = empty((2, batch, hidden), dtype)
        copy_(basic_view(g_hc, (0,)), binary("add", _step(g_hs, t, batch), d_h, dtype))
        copy_(basic_view(g_hc, (1,)), d_c)
        hc = empty((2, batch, hidden), dtype)
        copy_(basic_view(hc, (0,)), _step(hs, t, batch))
        copy_(basic_view(hc, (1,)), _step(cs, t, batch))
        d_gates, d_c = lstm_cell_backward(g_hc, _step(gates, t, batch), no_hidden_part, c, hc)
        copy_(_step(d_z, t, batch), d_gates)
        if t != first or h0_grad:
            d_h = matmul(d_gates, w)
    d_z_t = permute(d_z, (1, 0))
    d_w_ih = matmul(d_z_t, _time_major(x, length, batch, batch_first))
    d_w_hh = matmul(d_z_t, _previous(hs, dense(h0), batch, reverse))
    d_x = None
    if input_grad:
        d_x = matmul(d_z, dense(w_ih))
        if batch_first:
            d_x = contiguous(permute(_dense_view(d_x, (length, batch, x.shape[2])), (1, 0, 2)))
        else:
            d_x = _dense_view(d_x, tuple(x.shape))
    d_b = reduce("sum", d_z, (0,), False) if bias_grad else None
    return d_x, d_h if h0_grad else None, d_c, d_w_ih, d_w_hh, d_b
