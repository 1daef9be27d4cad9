"""The argument rules of the recurrent primitives (cells and the LSTM layer), shared by both backends
(their arrays differ, their rules and errors must not). ``is_floating`` is the backend's own test."""

from ..errors import DTypeError, ShapeError, fmt_shape


def check_cell(op, gates, state, n_gates, others, is_floating):
    """Raise unless gates (B, n_gates*H), the state (B, H) and ``others`` (arrays of the gates' shape)
    are floating arrays of one dtype."""
    arrays = (gates, state) + others
    for a in arrays:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
    if (
        len(state.shape) != 2
        or len(gates.shape) != 2
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
    if len({a.dtype for a in arrays}) != 1:  # not dtype.name: NumPy makes each name in about 4 us
        raise DTypeError(f"{op}: expected arrays of one dtype, got " + ", ".join(a.dtype.name for a in arrays))


def check_layer(op, x, h0, c0, w_ih, w_hh, biases, is_floating):
    """Raise unless every array is floating, of one dtype, and the input, weights, biases and states fit
    one another."""
    arrays = (x, h0, c0, w_ih, w_hh) + tuple(b for b in biases if b is not None)
    for a in arrays:
        if not is_floating(a):
            raise DTypeError(f"{op}: expected floating point arrays, got {a.dtype.name}")
    hidden = w_hh.shape[1] if len(w_hh.shape) == 2 else -1
    if (
        len(x.shape) != 3
        or tuple(w_hh.shape) != (4 * hidden, hidden)
        or tuple(w_ih.shape) != (4 * hidden, x.shape[-1])
        or tuple(h0.shape) != tuple(c0.shape)
        or tuple(h0.shape[-1:]) != (hidden,)
        or any(b is not None and tuple(b.shape) != (4 * hidden,) for b in biases)
    ):
        raise ShapeError(
            f"{op}: expected input (T, B, F) or (B, T, F), w_ih (4H, F), w_hh (4H, H), biases (4H,) and "
            f"states (B, H), got input {fmt_shape(x.shape)}, w_ih {fmt_shape(w_ih.shape)}, w_hh "
            f"{fmt_shape(w_hh.shape)}, states {fmt_shape(h0.shape)} and {fmt_shape(c0.shape)}"
            + "".join(f", bias {fmt_shape(b.shape)}" for b in biases if b is not None)
        )
    if len({a.dtype for a in arrays}) != 1:  # not dtype.name: NumPy makes each name in about 4 us
        raise DTypeError(f"{op}: expected arrays of one dtype, got " + ", ".join(a.dtype.name for a in arrays))


def layer_dims(op, x, h0, batch_first):
    """(T, B) of the input in its layout, checked against the states' batch."""
    length, batch = (x.shape[1], x.shape[0]) if batch_first else (x.shape[0], x.shape[1])
    if h0.shape[0] != batch:
        raise ShapeError(
            f"{op}: expected states of shape (B, H) with B = {batch} for input {fmt_shape(x.shape)} "
            f"(batch_first={batch_first}), got {fmt_shape(h0.shape)}"
        )
    return length, batch


def check_saved(x, hidden, rows, batch, grad, out, gates, cells):
    """Raise unless ``lstm_layer_backward``'s gradient and saved arrays have the shapes ``lstm_layer``
    gives for this input: out and its gradient (T*B + 2B, H), gates (T*B, 4H), cells (2, T*B, H)."""
    expected = {"grad": (rows + 2 * batch, hidden), "out": (rows + 2 * batch, hidden), "gates": (rows, 4 * hidden)}
    expected["cells"] = (2, rows, hidden)
    for what, a in (("grad", grad), ("out", out), ("gates", gates), ("cells", cells)):
        if tuple(a.shape) != expected[what]:
            raise ShapeError(
                f"lstm_layer_backward: expected {what} of shape {expected[what]} for input "
                f"{fmt_shape(x.shape)} and H = {hidden}, got {fmt_shape(a.shape)}"
            )
