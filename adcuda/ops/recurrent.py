"""Recurrent cell steps: the pointwise part of an LSTM or GRU time step, after its two matrix
products, as one op with its own backward (the backend's recurrent family: ``kernels/recurrent.cu``),
so that a layer records few nodes per step: the hidden product, this op and the views of its
result."""
from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import primitives
from .common import check_float, check_same_device, dense, wrap
from .elementwise import sigmoid, tanh
from .registry import op
from .shape import cat


def _check_step(name, gi, gh, state, n_gates):
    for what, t in (("the input projection", gi), ("the hidden projection", gh), ("the state", state)):
        check_float(name, what, t)
    if (state.ndim != 2 or gi.ndim != 2 or tuple(gi.shape) != tuple(gh.shape) or gi.shape[0] != state.shape[0]
            or gi.shape[1] != n_gates * state.shape[1]):
        raise ShapeError(f"{name}: expected projections of shape (B, {n_gates}H) and a state of shape (B, H), got "
                         f"{fmt_shape(gi.shape)}, {fmt_shape(gh.shape)} and {fmt_shape(state.shape)}")
    if not gi.dtype is gh.dtype is state.dtype:
        raise DTypeError(f"{name}: expected one dtype, got {gi.dtype}, {gh.dtype} and {state.dtype}")
    check_same_device(name, gi, gh, state)


# ------------------------------------------------------------------------------------------------
# LSTM: hc = stack(h', c'), c' = f * c + i * g, h' = o * tanh(c'), gates (i, f, g, o) = act(gi + gh)
def _lstm_grads(grad, gi, gh, c):
    i, f, g, o = (gi + gh).chunk(4, -1)
    i, f, g, o = sigmoid(i), sigmoid(f), tanh(g), sigmoid(o)
    tanh_c = tanh(f * c + i * g)
    d_c_new = grad[1] + grad[0] * o * (1 - tanh_c * tanh_c)
    d_gates = cat([d_c_new * g * i * (1 - i), d_c_new * c * f * (1 - f), d_c_new * i * (1 - g * g),
                   grad[0] * tanh_c * o * (1 - o)], -1)
    return d_gates, d_gates, d_c_new * f


def _lstm_fused_grads(grad, gi, gh, c, result):
    d_gates, d_c = primitives(grad).lstm_cell_backward(dense(grad), dense(gi), dense(gh), dense(c), result._data)
    d_gates = wrap(d_gates, grad._device)
    return d_gates, d_gates, wrap(d_c, grad._device)


@op("lstm_cell_pointwise", doc="One LSTM step after its products: gi, gh (B, 4H; gates i, f, g, o) and the cell "
    "state c (B, H) -> stack(h', c') (2, B, H).", node="LstmCellPointwiseBackward", autocast="promote",
    function=False, method=False,
    grads={("gi", "gh", "c"): _lstm_grads}, fused={("gi", "gh", "c"): _lstm_fused_grads})
def lstm_cell_pointwise(gi, gh, c):
    _check_step("lstm_cell_pointwise", gi, gh, c, 4)
    return wrap(primitives(gi).lstm_cell(dense(gi), dense(gh), dense(c)), gi._device)


# ------------------------------------------------------------------------------------------------
# GRU: h' = (1 - z) * n + z * h, n = tanh(gi_n + r * gh_n), (r, z) = sigmoid(gi + gh)
def _gru_grads(grad, gi, gh, h):
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = gh.chunk(3, -1)
    r = sigmoid(i_r + h_r)
    z = sigmoid(i_z + h_z)
    n = tanh(i_n + r * h_n)
    d_n = grad * (1 - z) * (1 - n * n)
    d_r = d_n * h_n * r * (1 - r)
    d_z = grad * (h - n) * z * (1 - z)
    return cat([d_r, d_z, d_n], -1), cat([d_r, d_z, d_n * r], -1), grad * z


def _gru_fused_grads(grad, gi, gh, h):
    d_gi, d_gh, d_h = primitives(grad).gru_cell_backward(dense(grad), dense(gi), dense(gh), dense(h))
    return wrap(d_gi, grad._device), wrap(d_gh, grad._device), wrap(d_h, grad._device)


@op("gru_cell_pointwise", doc="One GRU step after its products: gi, gh (B, 3H; gates r, z, n, biases included) "
    "and the state h (B, H) -> h' (B, H).", node="GruCellPointwiseBackward", autocast="promote",
    function=False, method=False,
    grads={("gi", "gh", "h"): _gru_grads}, fused={("gi", "gh", "h"): _gru_fused_grads})
def gru_cell_pointwise(gi, gh, h):
    _check_step("gru_cell_pointwise", gi, gh, h, 3)
    return wrap(primitives(gi).gru_cell(dense(gi), dense(gh), dense(h)), gi._device)
