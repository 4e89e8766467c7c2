"""Recurrent layers: RNN, LSTM, GRU (multi-layer, bidirectional, batch_first, dropout between layers, LSTM's
proj_size) and the cells RNNCell, LSTMCell, GRUCell.

Parameters have PyTorch's names, shapes, order and initialisation (every weight and bias drawn from
U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))), so state dicts move between the two. Gates are stacked
in PyTorch's order: (i, f, g, o) for LSTM, (r, z, n) for GRU. Each layer projects the whole input
sequence at once (one GEMM), then runs the recurrence: LSTM's (without proj_size) as one op,
lstm_sequence, that runs a GEMM and a fused cell kernel per step and has its own backward; the
others, one step of linear and pointwise ops per time step, autograd differentiating through them.
A PackedSequence (nn.utils.rnn) runs as one padded batch per distinct sequence length.
"""

import math
import numbers
import warnings

from .. import _C, _creation
from . import functional as F
from . import init
from .module import Module, _changed_settings
from .parameter import Parameter, _add_parameters
from .utils.rnn import PackedSequence, _inverse, pad_packed_sequence

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr):
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
    h = F.sigmoid(o) * F.tanh(c)
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi, h, w_hh, b_hh):
    i_r, i_z, i_n = gi.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = F.sigmoid(i_r + h_r)
    z = F.sigmoid(i_z + h_z)
    n = F.tanh(i_n + r * h_n)
    return n + z * (h - n)  # (1 - z) n + z h


def _rnn_step(gi, h, w_hh, b_hh, relu):
    pre = gi + F.linear(h, w_hh, b_hh)
    return F.relu(pre) if relu else F.tanh(pre)


def _check_input(module, input, ranks, rank_tail, size_message):
    """torch's errors for an input whose rank is not one of the two `ranks`, or whose features are not
    module.input_size; the layers and the cells word them differently (`rank_tail`, `size_message`)."""
    if input.dim() not in ranks:
        raise _C.InvalidArgumentError(f"{type(module).__name__}: Expected input to be {ranks[0]}D or {ranks[1]}D, got "
                                      f"{input.dim()}D {rank_tail}")
    if input.shape[-1] != module.input_size:
        raise _C.InvalidArgumentError(size_message.format(expected=module.input_size, got=input.shape[-1]))


class RNNBase(Module):
    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise _C.InvalidArgumentError("dropout should be a number in range [0, 1] representing the probability of "
                                          "an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}",
                          stacklevel=2)
        if not isinstance(hidden_size, int):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise _C.InvalidArgumentError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise _C.InvalidArgumentError("num_layers must be greater than zero")
        if proj_size < 0:
            raise _C.InvalidArgumentError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise _C.InvalidArgumentError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise _C.InvalidArgumentError(f"Unrecognized RNN mode: {mode}")
        if proj_size and mode != "LSTM":
            raise _C.InvalidArgumentError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            for direction in range(2 if bidirectional else 1):
                layer_input = input_size if layer == 0 else real_hidden * (2 if bidirectional else 1)
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(_creation.empty(*shape, dtype=dtype, device=device)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Kept for PyTorch code: the weights are used as they are (there is no fused cuDNN layout)."""

    @property
    def _flat_weights(self):
        return [getattr(self, n) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        w = self._flat_weights
        return [w[i:i + per] for i in range(0, len(w), per)]

    def _hidden_shape(self, batch):
        d = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (self.num_layers * d,) + ((batch,) if batch is not None else ()) + (size,)

    def _check_hidden(self, hx, expected, what):
        if tuple(hx.shape) != expected:
            raise _C.InvalidArgumentError(f"Expected {what} size {expected}, got {list(hx.shape)}")

    def _layer_params(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _prepare(self, input, hx):
        if not isinstance(input, _C.Tensor):
            raise TypeError(f"{type(self).__name__}: input must be a Tensor or a PackedSequence, got "
                            f"{type(input).__name__}")
        _check_input(self, input, (2, 3), "input instead",
                     "input.size(-1) must be equal to input_size. Expected {expected}, got {got}")
        batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first:
            input = input.transpose(0, 1)
        return input, batched

    def _run(self, x, states):
        """Runs every layer and direction over x (L, N, features). `states` holds one state tuple per
        (layer, direction), whose [0] is the output."""
        d = 2 if self.bidirectional else 1
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for direction in range(d):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_params(layer, direction)
                out, state = self._layer(F.linear(x, w_ih, b_ih), states[layer * d + direction], (w_hh, b_hh, w_hr),
                                         direction == 1)
                finals.append(state)
                outs.append(out)
            x = outs[0] if d == 1 else _C.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        return x, finals

    def _layer(self, gi, state, params, reverse):
        """One layer and direction over the projected input gi (L, N, gates): (its outputs, the final
        state), one `_step` per time step."""
        seq = [None] * gi.shape[0]
        for t in (range(gi.shape[0] - 1, -1, -1) if reverse else range(gi.shape[0])):
            state = self._step(gi[t], state, params)
            seq[t] = state[0]
        return (_C.stack(seq) if seq else gi[:, :, :0]), state

    def _forward_packed(self, packed, hx):
        """A PackedSequence: the sequences of each length run as a padded batch of their own, so that every
        final state is its sequence's last element's; the output is packed as the input was. hx and the
        final states are in the batch's own order, as torch's."""
        padded, lengths = pad_packed_sequence(packed)  # (T, B, features), the batch's own order
        lengths = lengths.tolist()
        steps = padded.shape[0]
        outs, finals, order = [], [], []
        pick = lambda t, rows: t.index_select(1, rows)  # noqa: E731  (a state's batch dim)
        for n in sorted(set(lengths), reverse=True):
            members = [i for i, m in enumerate(lengths) if m == n]
            rows = _creation.tensor(members, device=padded.device)
            x = padded[:n].index_select(1, rows)
            h = None if hx is None else (tuple(pick(t, rows) for t in hx) if isinstance(hx, (tuple, list))
                                         else pick(hx, rows))
            out, final = self.forward(x.transpose(0, 1) if self.batch_first else x, h)
            out = out.transpose(0, 1) if self.batch_first else out
            if n < steps:
                out = _C.cat([out, _creation.zeros(steps - n, *out.shape[1:], dtype=out.dtype, device=out.device)])
            outs.append(out)
            finals.append(final)
            order += members
        back = _inverse(_creation.tensor(order, device=padded.device))
        out = _C.cat(outs, 1).index_select(1, back)
        if isinstance(finals[0], tuple):
            final = tuple(_C.cat(parts, 1).index_select(1, back) for parts in zip(*finals))
        else:
            final = _C.cat(finals, 1).index_select(1, back)
        if packed.sorted_indices is not None:
            out = out.index_select(1, packed.sorted_indices)
        data = _C.cat([out[t, :b] for t, b in enumerate(packed.batch_sizes.tolist())])
        return PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices), final

    def _finish(self, out, batched):
        if not batched:
            return out.squeeze(1)
        return out.transpose(0, 1) if self.batch_first else out

    def extra_repr(self):
        return ", ".join([str(self.input_size), str(self.hidden_size),
                          *_changed_settings(self, proj_size=0, num_layers=1, bias=True, batch_first=False,
                                             dropout=0, bidirectional=False)])


class _SingleStateRNN(RNNBase):
    """RNN and GRU: one hidden state tensor."""

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched = self._prepare(input, hx)
        expected = self._hidden_shape(x.shape[1])
        if hx is None:
            hx = _creation.zeros(*expected, dtype=x.dtype, device=x)
        else:
            if not batched:
                if hx.dim() != 2:
                    raise _C.InvalidArgumentError("For unbatched 2-D input, hx should also be 2-D but got "
                                                  f"{hx.dim()}-D tensor")
                hx = hx.unsqueeze(1)
            elif hx.dim() != 3:
                raise _C.InvalidArgumentError(f"For batched 3-D input, hx should also be 3-D but got {hx.dim()}-D "
                                              "tensor")
            self._check_hidden(hx, expected, "hidden")
        out, finals = self._run(x, [(hx[i],) for i in range(expected[0])])
        h_n = _C.stack([s[0] for s in finals])
        return self._finish(out, batched), (h_n if batched else h_n.squeeze(1))


class RNN(_SingleStateRNN):
    """Elman RNN: h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh) (or relu)."""

    def __init__(self, *args, nonlinearity="tanh", **kwargs):
        if "proj_size" in kwargs:
            raise _C.InvalidArgumentError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise _C.InvalidArgumentError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, *args, **kwargs)

    def _step(self, gi, state, params):
        return (_rnn_step(gi, state[0], params[0], params[1], self.mode == "RNN_RELU"),)


class GRU(_SingleStateRNN):
    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise _C.InvalidArgumentError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def _step(self, gi, state, params):
        return (_gru_step(gi, state[0], params[0], params[1]),)


class LSTM(RNNBase):
    """forward(input, (h_0, c_0)=None) -> output, (h_n, c_n); with proj_size > 0 the hidden state is
    projected by weight_hr_l{k} to proj_size (the cell state keeps hidden_size)."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def _step(self, gi, state, params):
        return _lstm_step(gi, state[0], state[1], params[0], params[1], params[2])

    def _layer(self, gi, state, params, reverse):
        # The recurrence as one op (a GEMM and a fused cell kernel per step); projections step in Python.
        w_hh, b_hh, w_hr = params
        if w_hr is not None or gi.shape[0] == 0:
            return super()._layer(gi, state, params, reverse)
        out, cells = _C.lstm_sequence(gi, state[0], state[1], w_hh, b_hh, reverse)
        last = 0 if reverse else -1
        return out, (out[last], cells[last])

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        x, batched = self._prepare(input, hx)
        batch = x.shape[1]
        h_shape = self._hidden_shape(batch)
        c_shape = h_shape[:-1] + (self.hidden_size,)
        if hx is None:
            h0 = _creation.zeros(*h_shape, dtype=x.dtype, device=x)
            c0 = _creation.zeros(*c_shape, dtype=x.dtype, device=x)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx
            want = 3 if batched else 2
            if h0.dim() != want or c0.dim() != want:
                raise _C.InvalidArgumentError(f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx and cx "
                                              f"should also be {want}-D but got ({h0.dim()}-D, {c0.dim()}-D) tensors")
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_hidden(h0, h_shape, "hidden[0]")
            self._check_hidden(c0, c_shape, "hidden[1]")
        out, finals = self._run(x, [(h0[i], c0[i]) for i in range(h_shape[0])])
        h_n = _C.stack([s[0] for s in finals])
        c_n = _C.stack([s[1] for s in finals])
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish(out, batched), (h_n, c_n)


# ---------------------------------------------------------------- cells

class RNNCellBase(Module):
    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        gates = num_chunks * hidden_size
        _add_parameters(self, dtype, device, weight_ih=(gates, input_size), weight_hh=(gates, hidden_size),
                        bias_ih=(gates,) if bias else None, bias_hh=(gates,) if bias else None)
        self.reset_parameters()

    reset_parameters = RNNBase.reset_parameters

    def _prepare(self, input, hx):
        _check_input(self, input, (1, 2), "instead",
                     "input has inconsistent input_size: got {got} expected {expected}")
        if hx is not None and hx.dim() != input.dim():
            raise _C.InvalidArgumentError(f"{type(self).__name__}: Expected hidden to be {input.dim()}D, got "
                                          f"{hx.dim()}D instead")
        batched = input.dim() == 2
        return (input if batched else input.unsqueeze(0)), batched

    def _state(self, x, hx, size):
        if hx is None:
            return _creation.zeros(x.shape[0], size, dtype=x.dtype, device=x)
        hx = hx if hx.dim() == 2 else hx.unsqueeze(0)
        if tuple(hx.shape) != (x.shape[0], size):
            raise _C.InvalidArgumentError(f"Expected hidden size {(x.shape[0], size)}, got {list(hx.shape)}")
        return hx

    def extra_repr(self):
        return ", ".join([str(self.input_size), str(self.hidden_size),
                          *_changed_settings(self, bias=True, nonlinearity="tanh")])


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise _C.InvalidArgumentError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, hx)
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), self._state(x, hx, self.hidden_size),
                      self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, hx)
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), self._state(x, hx, self.hidden_size),
                      self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """forward(input, (h, c)=None) -> (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        x, batched = self._prepare(input, None if hx is None else hx[0])
        h0 = self._state(x, None if hx is None else hx[0], self.hidden_size)
        c0 = self._state(x, None if hx is None else hx[1], self.hidden_size)
        gi = F.linear(x, self.weight_ih, self.bias_ih).unsqueeze(0)
        h, c = _C.lstm_sequence(gi, h0, c0, self.weight_hh, self.bias_hh)
        return (h[0], c[0]) if batched else (h[0, 0], c[0, 0])
