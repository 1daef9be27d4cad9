"""The CUDA backend's recurrent cell steps, forward and backward (kernels/recurrent.cu), with the CPU
backend's signatures, checks and dtype rules. Half types are computed in fp32.
"""

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import dense, is_floating
from .elementwise import binary
from .gemm import matmul
from .storage import contiguous, copy_, dtype_of, empty, full, permute, view
from .storage import slice as basic_view

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward", "lstm_layer", "lstm_layer_backward"]


def _check_cell(op, gates, state, n_gates, *others):
    # the CPU backend's checks and errors, before the kernel's own
    for a in (gates, state) + others:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
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
        if tuple(a.shape) != tuple(gates.shape):
            raise ShapeError(
                f"{op}: expected the hidden projection of the gates' shape {fmt_shape(gates.shape)}, "
                f"got {fmt_shape(a.shape)}"
            )
    if len({a.dtype.name for a in (gates, state) + others}) != 1:
        raise DTypeError(
            f"{op}: expected arrays of one dtype, got " + ", ".join(a.dtype.name for a in (gates, state) + others)
        )


def lstm_cell(gi: BackendArray, gh: BackendArray, c: BackendArray) -> BackendArray:
    """LSTM step from the input and hidden projections (B, 4H) and the cell state (B, H) ->
    hc (2, B, H): hc[0] = h' = o * tanh(c'), hc[1] = c' = f * c + i * g."""
    _check_cell("lstm_cell", gi, c, 4, gh)
    return _native._C.lstm_cell(dense(gi), dense(gh), dense(c))


def lstm_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, c: BackendArray, hc: BackendArray
) -> tuple[BackendArray, BackendArray]:
    """From the gradient of hc (2, B, H) -> (d_gates (B, 4H), d_c (B, H)); d_gates is the gradient
    of both projections (they are summed)."""
    _check_cell("lstm_cell_backward", gi, c, 4, gh)
    return tuple(_native._C.lstm_cell_backward(dense(grad), dense(gi), dense(gh), dense(c), dense(hc)))


def gru_cell(gi: BackendArray, gh: BackendArray, h: BackendArray) -> BackendArray:
    """GRU step from the input and hidden projections (B, 3H), biases included, and the state (B, H)
    -> h' = (1 - z) * n + z * h with n = tanh(i_n + r * h_n), PyTorch's form."""
    _check_cell("gru_cell", gi, h, 3, gh)
    return _native._C.gru_cell(dense(gi), dense(gh), dense(h))


def gru_cell_backward(
    grad: BackendArray, gi: BackendArray, gh: BackendArray, h: BackendArray
) -> tuple[BackendArray, BackendArray, BackendArray]:
    """-> (d_gi, d_gh, d_h) from the gradient of h' (B, H)."""
    _check_cell("gru_cell_backward", gi, h, 3, gh)
    return tuple(_native._C.gru_cell_backward(dense(grad), dense(gi), dense(gh), dense(h)))


# ------------------------------------------------------------------------------------------------
# whole LSTM layers, composed of the step kernels above and cuBLAS products: per step the hidden
# product and the fused cell kernel; the pre-activation gate sums are kept, so the backward runs the
# cell's backward kernel on them without redoing the hidden product.
def _check_layer(op, projected, w_hh, *states):
    for a in (projected, w_hh) + states:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
    hidden = w_hh.shape[1] if w_hh.ndim == 2 else -1
    if (
        projected.ndim != 3
        or tuple(w_hh.shape) != (4 * hidden, hidden)
        or projected.shape[2] != 4 * hidden
        or any(tuple(s.shape) != (projected.shape[1], hidden) for s in states)
    ):
        raise ShapeError(
            f"{op}: expected projected (T, B, 4H), w_hh (4H, H) and states (B, H), got projected "
            f"{fmt_shape(projected.shape)}, w_hh {fmt_shape(w_hh.shape)} and states "
            + ", ".join(fmt_shape(s.shape) for s in states)
        )
    if len({a.dtype.name for a in (projected, w_hh) + states}) != 1:
        raise DTypeError(
            f"{op}: expected arrays of one dtype, got " + ", ".join(a.dtype.name for a in (projected, w_hh) + states)
        )


def _visit(length, reverse):
    return range(length - 1, -1, -1) if reverse else range(length)


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
    proj = dense(projected)
    length, batch, gates = proj.shape
    dtype = dtype_of(proj)
    w_t = permute(dense(w_hh), (1, 0))
    bias = None if b_hh is None else dense(b_hh)
    states = empty((2, length, batch, gates // 4), dtype)
    z = empty((length, batch, gates), dtype)
    h, c = dense(h0), dense(c0)
    for t in _visit(length, reverse):
        gi, gh = basic_view(proj, (t,)), matmul(h, w_t, bias)
        hc = lstm_cell(gi, gh, c)
        copy_(basic_view(z, (t,)), binary("add", gi, gh, dtype))
        copy_(basic_view(states, (slice(None), t)), hc)
        h, c = basic_view(hc, (0,)), basic_view(hc, (1,))
    return states, z


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
    if tuple(grad.shape) != (2, length, batch, hidden) or tuple(states.shape) != tuple(grad.shape):
        raise ShapeError(
            f"lstm_layer_backward: expected grad and states of shape {(2, length, batch, hidden)}, got "
            f"{fmt_shape(grad.shape)} and {fmt_shape(states.shape)}"
        )
    dtype = dtype_of(gates)
    g, z, w = dense(grad), dense(gates), dense(w_hh)
    no_hidden_part = full((batch, n_gates), 0, dtype)  # z already holds both projections' sum
    d_z = empty((length, batch, n_gates), dtype)
    h_prev = empty((length, batch, hidden), dtype)
    d_h, d_c = full((batch, hidden), 0, dtype), full((batch, hidden), 0, dtype)
    order = list(_visit(length, reverse))
    everything = slice(None)
    for k in range(length - 1, -1, -1):
        t = order[k]
        if k == 0:
            h, c = dense(h0), dense(c0)
        else:
            h, c = basic_view(states, (0, order[k - 1])), basic_view(states, (1, order[k - 1]))
        copy_(basic_view(h_prev, (t,)), h)
        g_hc = empty((2, batch, hidden), dtype)
        copy_(basic_view(g_hc, (0,)), binary("add", basic_view(g, (0, t)), d_h, dtype))
        copy_(basic_view(g_hc, (1,)), binary("add", basic_view(g, (1, t)), d_c, dtype))
        d_gates, d_c = lstm_cell_backward(
            g_hc, basic_view(z, (t,)), no_hidden_part, c, contiguous(basic_view(states, (everything, t)))
        )
        copy_(basic_view(d_z, (t,)), d_gates)
        d_h = matmul(d_gates, w)
    rows = length * batch
    d_w = matmul(permute(view(d_z, (rows, n_gates)), (1, 0)), view(h_prev, (rows, hidden)))
    return d_z, d_h, d_c, d_w
