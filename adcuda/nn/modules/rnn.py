"""Recurrent layers with PyTorch's names, parameter shapes and gate order, so state dicts load both
ways: ``RNN`` (tanh or relu), ``LSTM`` (gates i, f, g, o), ``GRU`` (gates r, z, n, with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``) and their one-step cells.

An LSTM layer and direction is one op, ``lstm_layer``, from the input itself (batch-first input taken
as it is): the input projection of the whole sequence is one product inside it, then per step the
hidden product and the fused cell step; its output holds every step's h, then the last h and c, so
the final states are views. The other layers project the whole input sequence with one matrix
product per direction; GRU then runs the recurrence as one op (``gru_layer``), RNN and LSTM with
``proj_size`` (``weight_hr_l{k}``: h = W_hr (o * tanh(c))) per step with ops. Backpropagation
through time is each layer op's fused backward. The cells run one step through
``lstm_cell_pointwise``/``gru_cell_pointwise``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ...errors import DTypeError, ShapeError, fmt_shape
from ...factories import empty, zeros
from ...ops.layout import cat, stack
from ...ops.recurrent import gru_cell_pointwise, gru_layer, lstm_cell_pointwise, lstm_layer
from .. import functional as F
from .. import init
from ..parameter import Parameter
from .module import Module, constructor_arguments

if TYPE_CHECKING:
    from ...types import Device, DType, Tensor

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(mode, gi, h, w_hh, b_hh):
    """h' from the input projection gi (B, G), including b_ih, and the state h (tuple (h, c) for LSTM)."""
    if mode == "LSTM":
        h, c = h
        hc = lstm_cell_pointwise(gi, F.linear(h, w_hh, b_hh), c)
        return hc[0], (hc[0], hc[1])
    if mode == "GRU":
        h_new = gru_cell_pointwise(gi, F.linear(h, w_hh, b_hh), h)
        return h_new, h_new
    pre = gi + F.linear(h, w_hh, b_hh)
    h_new = pre.tanh() if mode == "RNN_TANH" else pre.relu()
    return h_new, h_new


def _stacked(states):
    """The final states of every layer and direction as one (L * D, B, H) tensor (a view for one)."""
    return states[0].unsqueeze(0) if len(states) == 1 else stack(states)


def _check_features(name, input, size):
    if input.shape[-1] != size:
        raise ShapeError(
            f"{name}: input.size(-1) must be equal to input_size. Expected {size}, got input of shape "
            f"{fmt_shape(input.shape)}"
        )


class RNNBase(Module):
    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__()
        name = type(self).__name__
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(proj_size, int) or isinstance(proj_size, bool) or proj_size < 0:
            raise ValueError(
                f"{name}: proj_size should be a positive integer or zero to disable projections, got {proj_size!r}"
            )
        if proj_size >= hidden_size:
            raise ValueError(
                f"{name}: proj_size has to be smaller than hidden_size (got proj_size={proj_size}, "
                f"hidden_size={hidden_size})"
            )
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive integer, got {num_layers!r}")
        if not 0.0 <= float(dropout) <= 1.0 or isinstance(dropout, bool):
            raise ValueError(
                f"{name}: dropout should be a number in range [0, 1] representing the probability "
                f"of an element being zeroed, got {dropout!r}"
            )
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        output_size = proj_size or hidden_size  # of h: projected from the cell's output when proj_size
        # registered in PyTorch's order (per layer, per direction: w_ih, w_hh, b_ih, b_hh, w_hr), so that
        # parameters() lines up with an optimizer's state made from a PyTorch model
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else output_size * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, output_size))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size:
                    shapes += [("weight_hr", (proj_size, hidden_size))]
                for kind, shape in shapes:
                    setattr(self, kind + suffix, Parameter(empty(shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(kind + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def flatten_parameters(self):
        """PyTorch packs the weights into one cuDNN buffer here; adcuda's kernels take the parameters as
        they are, so scripts that call it run unchanged and nothing needs doing."""

    @property
    def all_weights(self):
        """The parameters per layer and direction: [[w_ih, w_hh, b_ih, b_hh(, w_hr)], ...], as PyTorch's."""
        per = (4 if self.bias else 2) + (1 if self.proj_size else 0)
        names = self._flat_weights_names
        return [[getattr(self, n) for n in names[i : i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda kind: getattr(self, kind + suffix)  # noqa: E731
        return (
            get("weight_ih"),
            get("weight_hh"),
            get("bias_ih") if self.bias else None,
            get("bias_hh") if self.bias else None,
            get("weight_hr") if self.proj_size else None,
        )

    def _initial_state(self, name, hx, input, batch, unbatched, size):
        """The given state (L * D, B, size), its batch dim added for unbatched input, or zeros, as a list
        of (B, size) states per layer and direction."""
        expected = (self.num_layers * (2 if self.bidirectional else 1), batch, size)
        if hx is None:  # one zero state serves every layer: the ops never write to their inputs
            return [zeros((batch, size), dtype=input.dtype, device=input.device)] * expected[0]
        if hx.__class__ is not input.__class__:
            raise DTypeError(f"{name}: expected the initial state to be a Tensor, got {type(hx).__name__}")
        if unbatched:
            if hx.ndim != 2:
                raise ShapeError(
                    f"{name}: for unbatched 2-D input, hx should also be 2-D but got a "
                    f"{hx.ndim}-D tensor of shape {fmt_shape(hx.shape)}"
                )
            hx = hx.unsqueeze(1)
        if tuple(hx.shape) != expected:
            raise ShapeError(
                f"{name}: expected hidden size {expected}, got {fmt_shape(hx.shape)} (input of shape "
                f"{fmt_shape(input.shape)})"
            )
        return list(hx.unbind(0))

    def _direction(self, x, state, layer, direction, batch_first):
        """One layer in one direction over x (T, B, F), or (B, T, F) when ``batch_first`` (the LSTM
        only), from state (h, or (h, c)) -> (hs in x's layout and time order, final state)."""
        w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
        if self.mode == "LSTM" and w_hr is None:  # the whole layer is one op, its projection included
            out = lstm_layer(x, state[0], state[1], w_ih, w_hh, b_ih, b_hh, bool(direction), batch_first)
            rows, batch = x.shape[0] * x.shape[1], x.shape[0 if batch_first else 1]
            hs = out[:rows].view(*x.shape[:2], self.hidden_size)
            return hs, (out[rows : rows + batch], out[rows + batch :])
        projected = F.linear(x, w_ih, b_ih)  # the whole sequence at once
        steps = x.shape[0]
        last = 0 if direction else steps - 1
        if w_hr is not None:
            return self._projected_lstm(projected, state, w_hh, b_hh, w_hr, direction)
        if self.mode == "GRU":
            hs = gru_layer(projected, state, w_hh, b_hh, bool(direction))
            return hs, (hs[last] if steps else state)
        hs = [None] * steps
        for t in range(steps - 1, -1, -1) if direction else range(steps):
            hs[t], state = _rnn_step(self.mode, projected[t], state, w_hh, b_hh)
        if not steps:
            return zeros((0, x.shape[1], self.hidden_size), dtype=x.dtype, device=x.device), state
        return stack(hs), state

    def _projected_lstm(self, projected, state, w_hh, b_hh, w_hr, direction):
        """An LSTM with proj_size: h = w_hr @ (o * tanh(c)) per step, so the state the recurrence
        multiplies is the projected one; written per step with ops (the lstm_layer primitive takes
        an unprojected state)."""
        steps = projected.shape[0]
        h, c = state
        hs = [None] * steps
        for t in range(steps - 1, -1, -1) if direction else range(steps):
            hc = lstm_cell_pointwise(projected[t], F.linear(h, w_hh, b_hh), c)
            h, c = F.linear(hc[0], w_hr), hc[1]
            hs[t] = h
        if not steps:
            return zeros((0, projected.shape[1], self.proj_size), dtype=h.dtype, device=h.device), state
        return stack(hs), (h, c)

    def _layers(self, x, states, batch_first):
        """Runs every layer and direction over x (T, B, F), or (B, T, F) when ``batch_first``, from
        states (per layer * direction: h or (h, c)) -> (output in x's layout, (.., D * H), final
        states in the same order)."""
        directions = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                hs, final = self._direction(x, states[layer * directions + direction], layer, direction, batch_first)
                outputs.append(hs)
                finals.append(final)
            x = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, finals

    def forward(
        self, input: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, Tensor | tuple[Tensor, Tensor]]:
        name = type(self).__name__
        if input.__class__.__name__ != "Tensor":
            raise DTypeError(f"{name}: expected input to be a Tensor, got {type(input).__name__}")
        if input.ndim not in (2, 3):
            raise ShapeError(
                f"{name}: expected input to be 2-D or 3-D but received a {input.ndim}-D tensor of "
                f"shape {fmt_shape(input.shape)}"
            )
        if not input.dtype.is_floating_point:
            raise DTypeError(f"{name}: expected a floating point input, got {input.dtype}")
        _check_features(name, input, self.input_size)
        unbatched = input.ndim == 2
        # the LSTM layer op takes batch-first input as it is; the other layers run time-major
        batch_first = self.batch_first and not unbatched and self.mode == "LSTM" and not self.proj_size
        if unbatched:
            x = input.unsqueeze(1)
        else:
            x = input.transpose(0, 1) if self.batch_first and not batch_first else input
        batch = x.shape[0] if batch_first else x.shape[1]
        if self.mode == "LSTM":
            if hx is not None and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise DTypeError(f"{name}: expected hx to be a tuple (h_0, c_0), got {type(hx).__name__}")
            h0, c0 = (None, None) if hx is None else hx
            h0 = self._initial_state(name, h0, x, batch, unbatched, self.proj_size or self.hidden_size)
            c0 = self._initial_state(name, c0, x, batch, unbatched, self.hidden_size)
            states = list(zip(h0, c0))
        else:
            if isinstance(hx, (tuple, list)):
                raise DTypeError(f"{name}: expected hx to be a Tensor, got a {type(hx).__name__}")
            states = self._initial_state(name, hx, x, batch, unbatched, self.hidden_size)
        output, finals = self._layers(x, states, batch_first)
        if self.mode == "LSTM":
            h_n, c_n = _stacked([h for h, _ in finals]), _stacked([c for _, c in finals])
        else:
            h_n = _stacked(finals)
        if unbatched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            if self.mode == "LSTM":
                c_n = c_n.squeeze(1)
        elif self.batch_first and not batch_first:
            output = output.transpose(0, 1)
        return output, ((h_n, c_n) if self.mode == "LSTM" else h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(RNNBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        arguments = constructor_arguments(locals(), "nonlinearity")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNN: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", **arguments)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__("LSTM", **constructor_arguments(locals()))


class GRU(RNNBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__("GRU", **constructor_arguments(locals()))


# ------------------------------------------------------------------------------------------------
# cells: one step, parameters weight_ih, weight_hh, bias_ih, bias_hh
class RNNCellBase(Module):
    def __init__(
        self, mode: str, input_size: int, hidden_size: int, bias: bool, device: Device | str | None, dtype: DType | None
    ) -> None:
        super().__init__()
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gate_size = _GATES[mode] * hidden_size
        self.weight_ih = Parameter(empty((gate_size, input_size), device=device, dtype=dtype))
        self.weight_hh = Parameter(empty((gate_size, hidden_size), device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(empty(gate_size, device=device, dtype=dtype))
            self.bias_hh = Parameter(empty(gate_size, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            init.uniform_(p, -bound, bound)

    def _state(self, name, hx, input, unbatched):
        batch = 1 if unbatched else input.shape[0]
        if hx is None:
            return zeros((batch, self.hidden_size), dtype=input.dtype, device=input.device)
        if hx.ndim != input.ndim or tuple(hx.shape[-1:]) != (self.hidden_size,):
            raise ShapeError(
                f"{name}: expected a hidden state of shape {(batch, self.hidden_size)} for input of "
                f"shape {fmt_shape(input.shape)}, got {fmt_shape(hx.shape)}"
            )
        hx = hx.unsqueeze(0) if unbatched else hx
        if hx.shape[0] != batch:
            raise ShapeError(
                f"{name}: input batch size {batch} doesn't match hidden batch size {hx.shape[0]} "
                f"(input {fmt_shape(input.shape)}, hidden {fmt_shape(hx.shape)})"
            )
        return hx

    def forward(
        self, input: Tensor, hx: Tensor | tuple[Tensor, Tensor] | None = None
    ) -> Tensor | tuple[Tensor, Tensor]:
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ShapeError(
                f"{name}: expected input to be 1-D or 2-D but received a {input.ndim}-D tensor of "
                f"shape {fmt_shape(input.shape)}"
            )
        _check_features(name, input, self.input_size)
        unbatched = input.ndim == 1
        x = input.unsqueeze(0) if unbatched else input
        if self.mode == "LSTM":
            if hx is None:
                state = (self._state(name, None, input, unbatched),) * 2
            else:
                state = (self._state(name, hx[0], input, unbatched), self._state(name, hx[1], input, unbatched))
        else:
            state = self._state(name, hx, input, unbatched)
        _, state = _rnn_step(self.mode, F.linear(x, self.weight_ih, self.bias_ih), state, self.weight_hh, self.bias_hh)
        if unbatched:
            state = tuple(s.squeeze(0) for s in state) if self.mode == "LSTM" else state.squeeze(0)
        return state

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            s += ", bias=False"
        return s


class RNNCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"RNNCell: unknown nonlinearity {nonlinearity!r}; expected 'tanh' or 'relu'")
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size, hidden_size, bias, device, dtype
        )
        self.nonlinearity = nonlinearity


class LSTMCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)


class GRUCell(RNNCellBase):
    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Device | str | None = None,
        dtype: DType | None = None,
    ) -> None:
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)
