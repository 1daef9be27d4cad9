"""The CUDA backend's recurrent cell steps, forward and backward (kernels/recurrent.cu), with the CPU
backend's signatures, checks and dtype rules. Half types are computed in fp32.
"""

from ... import _native
from ...errors import DTypeError, ShapeError, fmt_shape
from ..seam import BackendArray
from ._common import dense, is_floating

__all__ = ["lstm_cell", "lstm_cell_backward", "gru_cell", "gru_cell_backward"]


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
