"""cuDNN's fused recurrent layers (`nn.LSTM`, `nn.GRU`, `nn.RNN` on CUDA): `aten::_cudnn_rnn`
and `aten::_cudnn_rnn_backward`, one call for every layer and time step of the module.

Arguments (schema order), forward: input, weight[], weight_stride0, weight_buf?, hx, cx?,
mode, hidden_size, proj_size, num_layers, batch_first, dropout, train, bidirectional,
batch_sizes[], dropout_state?. Backward: input, weight[], weight_stride0, weight_buf, hx,
cx?, output, grad_output?, grad_hy?, grad_cy?, mode, hidden_size, proj_size, num_layers,
batch_first, dropout, train, bidirectional, batch_sizes[], dropout_state?, reserve,
output_mask[4] (grad_input, grad_hx, grad_cx, grad_weights).

- FLOPs: the gate products, 2 per multiply-add. A layer of G gates (cuDNN's mode: 0 and 1
  plain RNN 1, 2 LSTM 4, 3 GRU 3) and hidden size H does, per time step and direction,
  2·B·G·H·(I + R): its input (I: the input's features in layer 0, D·R after it) and its
  recurrent state (R: proj_size, or H) through the gate weights; a projection adds 2·B·H·R.
  The gates' own elementwise work (a few FLOPs per gate element) is left out: the
  products hold ~99% of the FLOPs at any useful size. The backward does the products again
  for the data gradient and once more for the weights' (`output_mask`), as a matmul's does.
- Bytes (minimal): the input, the flat weight buffer (`weight_buf`, which the weight list's
  tensors are views of: counted once; the list's sizes where no buffer was given, at the
  input's dtype), the initial states, the output and final states written; in training
  the forward also writes, and the backward reads, the activations it keeps (cuDNN's
  `reserve`: its recorded size in the backward, T·B·D·L·G·H elements in the forward). The
  backward reads the forward's output and the gradients and writes the gradients asked for.
- Dtype: the input's; the products run on its tensor-core key (`compute_key`).
- `batch_sizes` (a packed sequence): T·B is the number of rows, the sum of batch_sizes.
"""

from __future__ import annotations

from membound.cost.call import OpCall, TensorMeta, numel
from membound.cost.registry import Cost, fallback, register
from membound.dtypes import compute_key

#: cuDNN RNN mode -> gates per layer
GATES = {0: 1, 1: 1, 2: 4, 3: 3}
#: argument positions (mode, hidden_size, proj_size, num_layers, batch_first, train,
#: bidirectional, batch_sizes)
_FWD = (6, 7, 8, 9, 10, 12, 13, 14)
_BWD = (10, 11, 12, 13, 14, 16, 17, 18)


def _int(v, default: int = 0) -> int:
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else default


def _layout(call: OpCall, pos: tuple[int, ...]):
    """(T·B rows, input features, G, H, R, L, D, train) of the call, or None where an
    argument the cost needs is missing."""
    x = call.tensor(0)
    mode, h, proj, layers, batch_first, train, bidir, sizes = (call.arg(i) for i in pos)
    gates = GATES.get(_int(mode, -1))
    h, layers = _int(h), _int(layers)
    if x is None or gates is None or h <= 0 or layers <= 0 or x.ndim not in (2, 3):
        return None
    r = _int(proj) or h
    d = 2 if bidir is True else 1
    batch = call.int_list(pos[-1]) if isinstance(sizes, list) and sizes else None
    rows = sum(batch) if batch else (x.shape[0] * x.shape[1] if x.ndim == 3 else x.shape[0])
    return rows, x.shape[-1], gates, h, r, layers, d, train is not False


def _flops(rows: int, features: int, gates: int, h: int, r: int, layers: int, d: int) -> float:
    total = 0.0
    for layer in range(layers):
        i = features if layer == 0 else d * r
        total += 2.0 * rows * gates * h * (i + r) * d
        if r != h:
            total += 2.0 * rows * h * r * d
    return total


def _weights(call: OpCall, x: TensorMeta) -> int:
    """Bytes of the weights: the flat buffer, else the list's sizes at the input's dtype."""
    buf = call.tensor(3)
    if buf is not None:
        return buf.nbytes
    listed = call.arg(1)
    if isinstance(listed, list):
        return sum(numel(t.shape) for t in listed if isinstance(t, TensorMeta)) * x.itemsize
    return 0


def _nbytes(call: OpCall, *positions: int) -> int:
    return sum(t.nbytes for t in (call.tensor(i) for i in positions) if t is not None)


@register("aten::_cudnn_rnn", family="rnn")
def _cudnn_rnn(call: OpCall) -> Cost:
    shape = _layout(call, _FWD)
    if shape is None:
        return fallback(call)
    rows, features, gates, h, r, layers, d, train = shape
    x = call.tensor(0)
    flops = _flops(rows, features, gates, h, r, layers, d)
    states = _nbytes(call, 4, 5)  # hx, cx read; hy, cy (their shapes) written
    reads = x.nbytes + _weights(call, x) + states
    out = rows * d * r * x.itemsize
    reserve = rows * d * layers * gates * h * x.itemsize if train else 0
    writes = out + states + reserve
    return Cost(flops, reads + writes, compute_key(x.dtype), family="rnn", read_bytes=reads)


@register("aten::_cudnn_rnn_backward", family="rnn")
def _cudnn_rnn_backward(call: OpCall) -> Cost:
    shape = _layout(call, _BWD)
    if shape is None:
        return fallback(call)
    rows, features, gates, h, r, layers, d, _ = shape
    x = call.tensor(0)
    mask = call.arg(21)
    mask = mask if isinstance(mask, list) and len(mask) == 4 else [True, True, True, True]
    forward = _flops(rows, features, gates, h, r, layers, d)
    flops = forward * ((1 if any(mask[:3]) else 0) + (1 if mask[3] else 0))
    weights = _weights(call, x)
    # input, weights, hx, cx, output, grad_output, grad_hy, grad_cy, reserve
    reads = x.nbytes + weights + _nbytes(call, 4, 5, 6, 7, 8, 9, 20)
    writes = (
        (x.nbytes if mask[0] else 0)
        + (_nbytes(call, 4) if mask[1] else 0)
        + (_nbytes(call, 5) if mask[2] else 0)
        + (weights if mask[3] else 0)
    )
    return Cost(flops, reads + writes, compute_key(x.dtype), family="rnn", read_bytes=reads)
