"""Recurrent cell steps: the pointwise part of an LSTM or GRU time step, after its two matrix
products, as one op with its own backward (the backend's recurrent family: ``kernels/recurrent.cu``),
so that a layer records few nodes per step: the hidden product, this op and the views of its
result."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import DTypeError, ShapeError, fmt_shape
from ..tensor import primitives
from .common import check_float, check_same_device, dense, wrap
from .elementwise import sigmoid, tanh
from .layout import cat, stack
from .registry import lowering, op

if TYPE_CHECKING:
    from ..types import Tensor


def _check_step(name, gi, gh, state, n_gates):
    for what, t in (("the input projection", gi), ("the hidden projection", gh), ("the state", state)):
        check_float(name, what, t)
    if (
        state.ndim != 2
        or gi.ndim != 2
        or tuple(gi.shape) != tuple(gh.shape)
        or gi.shape[0] != state.shape[0]
        or gi.shape[1] != n_gates * state.shape[1]
    ):
        raise ShapeError(
            f"{name}: expected projections of shape (B, {n_gates}H) and a state of shape (B, H), got "
            f"{fmt_shape(gi.shape)}, {fmt_shape(gh.shape)} and {fmt_shape(state.shape)}"
        )
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
    d_gates = cat(
        [
            d_c_new * g * i * (1 - i),
            d_c_new * c * f * (1 - f),
            d_c_new * i * (1 - g * g),
            grad[0] * tanh_c * o * (1 - o),
        ],
        -1,
    )
    return d_gates, d_gates, d_c_new * f


def _lstm_fused_grads(grad, gi, gh, c, result):
    d_gates, d_c = primitives(grad).lstm_cell_backward(dense(grad), dense(gi), dense(gh), dense(c), result._data)
    d_gates = wrap(d_gates, grad._device)
    return d_gates, d_gates, wrap(d_c, grad._device)


@op(
    "lstm_cell_pointwise",
    doc="One LSTM step after its products: gi, gh (B, 4H; gates i, f, g, o) and the cell "
    "state c (B, H) -> stack(h', c') (2, B, H).",
    node="LstmCellPointwiseBackward",
    autocast="promote",
    function=False,
    method=False,
    grads={("gi", "gh", "c"): _lstm_grads},
    fused={("gi", "gh", "c"): _lstm_fused_grads},
)
def lstm_cell_pointwise(gi: Tensor, gh: Tensor, c: Tensor) -> Tensor:
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


@op(
    "gru_cell_pointwise",
    doc="One GRU step after its products: gi, gh (B, 3H; gates r, z, n, biases included) "
    "and the state h (B, H) -> h' (B, H).",
    node="GruCellPointwiseBackward",
    autocast="promote",
    function=False,
    method=False,
    grads={("gi", "gh", "h"): _gru_grads},
    fused={("gi", "gh", "h"): _gru_fused_grads},
)
def gru_cell_pointwise(gi: Tensor, gh: Tensor, h: Tensor) -> Tensor:
    _check_step("gru_cell_pointwise", gi, gh, h, 3)
    return wrap(primitives(gi).gru_cell(dense(gi), dense(gh), dense(h)), gi._device)


# ------------------------------------------------------------------------------------------------
# whole layers: the recurrence over a sequence as one op per layer and direction, so the per-step
# slices cost nothing in backward (the views of a per-step loop would each bring back a gradient of
# the whole sequence's size). The GRU takes the input projection of every step (one matrix product,
# the caller's); per step its forward runs the hidden product and the cell kernel, and its fused
# backward runs backpropagation through time with the cell's backward kernel and makes the hidden
# weights' gradient with one product over all steps. The LSTM is a whole layer from its input, one
# backend primitive each way (``lstm_layer``/``lstm_layer_backward``): the input projection of every
# step is one product inside it, its forward keeps every step's activated gates and cell states (the
# extra outputs), so the backward redoes no product and no activation, and the input's and weights'
# gradients are one product each over the whole sequence.
def _steps(length, reverse):
    """The time indices in the order the recurrence visits them."""
    return list(range(length - 1, -1, -1)) if reverse else list(range(length))


def _check_layer(name, projected, states, w_hh, b_hh, n_gates):
    check_float(name, "projected", projected)
    for what, t in states + (("w_hh", w_hh),):
        check_float(name, what, t)
    hidden = w_hh.shape[1] if w_hh.ndim == 2 else -1
    if (
        projected.ndim != 3
        or w_hh.ndim != 2
        or tuple(w_hh.shape) != (n_gates * hidden, hidden)
        or projected.shape[2] != n_gates * hidden
        or any(tuple(t.shape) != (projected.shape[1], hidden) for _, t in states)
        or (b_hh is not None and tuple(b_hh.shape) != (n_gates * hidden,))
    ):
        raise ShapeError(
            f"{name}: expected projected (T, B, {n_gates}H), states (B, H), w_hh ({n_gates}H, H) and "
            f"b_hh ({n_gates}H,), got projected {fmt_shape(projected.shape)}, "
            + ", ".join(f"{what} {fmt_shape(t.shape)}" for what, t in states)
            + f", w_hh {fmt_shape(w_hh.shape)}"
            + ("" if b_hh is None else f", b_hh {fmt_shape(b_hh.shape)}")
        )
    dtypes = {t.dtype for t in (projected, w_hh, b_hh) + tuple(t for _, t in states) if t is not None}
    if len(dtypes) != 1:
        raise DTypeError(f"{name}: expected one dtype, got {sorted(str(d) for d in dtypes)}")
    check_same_device(name, projected, w_hh, b_hh, *(t for _, t in states))


def _weights(bk, w_hh, b_hh):
    return bk.permute(dense(w_hh), (1, 0)), None if b_hh is None else dense(b_hh)


def _check_lstm_layer(input, h0, c0, w_ih, w_hh, b_ih, b_hh, batch_first):
    name = "lstm_layer"
    tensors = (("input", input), ("h0", h0), ("c0", c0), ("w_ih", w_ih), ("w_hh", w_hh), ("b_ih", b_ih))
    tensors = tuple((what, t) for what, t in tensors + (("b_hh", b_hh),) if t is not None)
    for what, t in tensors:
        check_float(name, what, t)
    hidden = w_hh.shape[1] if w_hh.ndim == 2 else -1
    batch = input.shape[0 if batch_first else 1] if input.ndim == 3 else -1
    if (
        input.ndim != 3
        or tuple(w_hh.shape) != (4 * hidden, hidden)
        or tuple(w_ih.shape) != (4 * hidden, input.shape[2])
        or any(tuple(s.shape) != (batch, hidden) for s in (h0, c0))
        or any(b is not None and tuple(b.shape) != (4 * hidden,) for b in (b_ih, b_hh))
    ):
        raise ShapeError(
            f"{name}: expected input ({'B, T' if batch_first else 'T, B'}, F), states (B, H), w_ih (4H, F), "
            "w_hh (4H, H) and biases (4H,), got " + ", ".join(f"{what} {fmt_shape(t.shape)}" for what, t in tensors)
        )
    if len({t.dtype for _, t in tensors}) != 1:
        raise DTypeError(f"{name}: expected one dtype, got " + ", ".join(f"{w} {t.dtype}" for w, t in tensors))
    check_same_device(name, *(t for _, t in tensors))


def _lstm_layer_grads(grad, input, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, batch_first):
    """The layer's gradients written with differentiable ops (for higher orders): the states are
    recomputed step by step, then backpropagated through time with the cell's formula."""
    x = input.transpose(0, 1) if batch_first else input
    length, batch = x.shape[0], x.shape[1]
    hidden, rows = h0.shape[1], x.shape[0] * x.shape[1]
    g_hs = grad[:rows].reshape((batch, length, hidden) if batch_first else (length, batch, hidden))
    g_hs, d_h, d_c = (g_hs.transpose(0, 1) if batch_first else g_hs), grad[rows : rows + batch], grad[rows + batch :]
    projected = x.matmul(w_ih.t()) if b_ih is None else x.matmul(w_ih.t()) + b_ih
    steps = _steps(length, reverse)
    previous, hidden_parts, h, c = [None] * length, [None] * length, h0, c0
    for t in steps:
        gh = h.matmul(w_hh.t()) if b_hh is None else h.matmul(w_hh.t()) + b_hh
        previous[t], hidden_parts[t] = (h, c), gh
        hc = lstm_cell_pointwise(projected[t], gh, c)
        h, c = hc[0], hc[1]
    d_projected = [None] * length
    for t in reversed(steps):
        d_projected[t], _, d_c = _lstm_grads(stack([g_hs[t] + d_h, d_c]), projected[t], hidden_parts[t], previous[t][1])
        d_h = d_projected[t].matmul(w_hh)
    if not length:
        d_projected = projected * 0
        h_prev = x[:, :, :1].expand(0, batch, hidden) * 0
    else:
        d_projected, h_prev = stack(d_projected), stack([p[0] for p in previous])
    d_rows = d_projected.reshape(rows, 4 * hidden)
    d_x = d_projected.matmul(w_ih)
    return (
        d_x.transpose(0, 1) if batch_first else d_x,
        d_h,
        d_c,
        d_rows.t().matmul(x.reshape(rows, x.shape[2])),
        d_rows.t().matmul(h_prev.reshape(rows, hidden)),
        None if b_ih is None else d_rows.sum(0),
        None if b_hh is None else d_rows.sum(0),  # a tensor of its own: each bias accumulates alone
    )


def _lstm_layer_fused_grads(
    grad, input, h0, c0, w_ih, w_hh, b_ih_shape, b_hh_shape, reverse, batch_first, gates, cells, result
):
    bk, device = primitives(grad), grad._device
    d_x, d_h, d_c, d_w_ih, d_w_hh, d_b = bk.lstm_layer_backward(
        dense(grad),
        dense(input),
        dense(h0),
        dense(c0),
        dense(w_ih),
        dense(w_hh),
        result._data,
        gates._data,
        cells._data,
        reverse,
        batch_first,
        input.requires_grad,
        h0.requires_grad,
        b_ih_shape is not None or b_hh_shape is not None,
    )
    d_b_ih = None if b_ih_shape is None else wrap(d_b, device)
    if b_hh_shape is not None and b_ih_shape is not None:
        d_b_hh = wrap(bk.astype(d_b, bk.dtype_of(d_b)), device)  # its own array: each bias accumulates alone
    else:
        d_b_hh = None if b_hh_shape is None else wrap(d_b, device)
    return (
        None if d_x is None else wrap(d_x, device),
        None if d_h is None else wrap(d_h, device),
        wrap(d_c, device),
        wrap(d_w_ih, device),
        wrap(d_w_hh, device),
        d_b_ih,
        d_b_hh,
    )


@op(
    "lstm_layer",
    doc="An LSTM layer over input (T, B, F), or (B, T, F) when batch_first, from states (B, H) -> "
    "(T * B + 2B, H): each step's h in the input's row order, then the last h and c.",
    node="LstmLayerBackward",
    autocast="promote",
    function=False,
    method=False,
    extra_outputs=("gates", "cells"),
    grads={("input", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"): _lstm_layer_grads},
    fused={("input", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"): _lstm_layer_fused_grads},
)
def lstm_layer(
    input: Tensor,
    h0: Tensor,
    c0: Tensor,
    w_ih: Tensor,
    w_hh: Tensor,
    b_ih: Tensor | None = None,
    b_hh: Tensor | None = None,
    reverse: bool = False,
    batch_first: bool = False,
) -> tuple[Tensor, Tensor, Tensor]:
    _check_lstm_layer(input, h0, c0, w_ih, w_hh, b_ih, b_hh, batch_first)
    out, gates, cells = primitives(input).lstm_layer(
        dense(input),
        dense(h0),
        dense(c0),
        dense(w_ih),
        dense(w_hh),
        None if b_ih is None else dense(b_ih),
        None if b_hh is None else dense(b_hh),
        bool(reverse),
        bool(batch_first),
    )
    device = input._device
    return wrap(out, device), wrap(gates, device), wrap(cells, device)


def _gru_layer_grads(grad, projected, h0, w_hh, b_hh, reverse, result):
    length, batch, gates = projected.shape
    hidden = gates // 3
    if length == 0:
        return projected * 0, h0 * 0, w_hh * 0, None if b_hh is None else b_hh * 0
    steps = _steps(length, reverse)
    d_h = h0 * 0
    d_projected, d_hidden, previous = [None] * length, [None] * length, [None] * length
    for k in range(length - 1, -1, -1):
        t = steps[k]
        h = h0 if k == 0 else result[steps[k - 1]]
        gh = h.matmul(w_hh.t()) if b_hh is None else h.matmul(w_hh.t()) + b_hh
        d_gi, d_gh, d_direct = _gru_grads(grad[t] + d_h, projected[t], gh, h)
        d_projected[t], d_hidden[t], previous[t] = d_gi, d_gh, h
        d_h = d_direct + d_gh.matmul(w_hh)
    d_hidden = stack(d_hidden)
    d_w = d_hidden.reshape(length * batch, gates).t().matmul(stack(previous).reshape(length * batch, hidden))
    return stack(d_projected), d_h, d_w, None if b_hh is None else d_hidden.sum((0, 1))


def _gru_layer_fused_grads(grad, projected, h0, w_hh, b_hh, reverse, result):
    bk, device = primitives(grad), grad._device
    g, proj, hs = dense(grad), dense(projected), result._data
    length, batch, gates = bk.shape_of(proj)
    hidden = gates // 3
    dtype = bk.dtype_of(proj)
    w = dense(w_hh)
    w_t, bias = _weights(bk, w_hh, b_hh)
    d_proj = bk.empty((length, batch, gates), dtype)
    d_hidden = bk.empty((length, batch, gates), dtype)
    previous = bk.empty((length, batch, hidden), dtype)
    d_h = bk.full((batch, hidden), 0, dtype)
    steps = _steps(length, reverse)
    for k in range(length - 1, -1, -1):
        t = steps[k]
        h = dense(h0) if k == 0 else bk.slice(hs, (steps[k - 1],))
        bk.copy_(bk.slice(previous, (t,)), h)
        g_t = bk.binary("add", bk.slice(g, (t,)), d_h, dtype)
        d_gi, d_gh, d_direct = bk.gru_cell_backward(g_t, bk.slice(proj, (t,)), bk.matmul(h, w_t, bias), h)
        bk.copy_(bk.slice(d_proj, (t,)), d_gi)
        bk.copy_(bk.slice(d_hidden, (t,)), d_gh)
        d_h = bk.binary("add", d_direct, bk.matmul(d_gh, w), dtype)
    rows = length * batch
    d_w = bk.matmul(bk.permute(bk.view(d_hidden, (rows, gates)), (1, 0)), bk.view(previous, (rows, hidden)))
    d_b = None if b_hh is None else bk.reduce("sum", d_hidden, (0, 1), False)
    return (wrap(d_proj, device), wrap(d_h, device), wrap(d_w, device), None if d_b is None else wrap(d_b, device))


@op(
    "gru_layer",
    doc="A GRU layer's recurrence over a sequence from its input projection (T, B, 3H), biases "
    "b_ih included, and the initial state (B, H) -> hs (T, B, H) in time order.",
    node="GruLayerBackward",
    autocast="promote",
    function=False,
    method=False,
    grads={("projected", "h0", "w_hh", "b_hh"): _gru_layer_grads},
    fused={("projected", "h0", "w_hh", "b_hh"): _gru_layer_fused_grads},
)
def gru_layer(projected: Tensor, h0: Tensor, w_hh: Tensor, b_hh: Tensor | None = None, reverse: bool = False) -> Tensor:
    _check_layer("gru_layer", projected, (("h0", h0),), w_hh, b_hh, 3)
    bk = primitives(projected)
    proj = dense(projected)
    length, batch, gates = bk.shape_of(proj)
    w_t, bias = _weights(bk, w_hh, b_hh)
    hs = bk.empty((length, batch, gates // 3), bk.dtype_of(proj))
    h = dense(h0)
    for t in _steps(length, reverse):
        h = bk.gru_cell(bk.slice(proj, (t,)), bk.matmul(h, w_t, bias), h)
        bk.copy_(bk.slice(hs, (t,)), h)
    return wrap(hs, projected._device)


# what the exporters know of the primitives this family's ops call (``Lowering`` in registry.py)
lowering("lstm_cell", onnx=lambda w, node, **params: w.lstm_cell(node, **params))
lowering("lstm_layer", onnx=lambda w, node, **params: w.lstm_layer(node, **params))
lowering("gru_cell", onnx=lambda w, node, **params: w.gru_cell(node, **params))
