"""cuDNN's recurrent layers (`aten::_cudnn_rnn` and its backward, `cost.formulas.rnn`): FLOPs
against torch's own count of the same layer run on the CPU's unfused path, on random sizes,
modes, depths, directions and projections; bytes by hand; the LSTM of examples/real as an
H100 trace recorded it."""

from __future__ import annotations

import random

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from membound.analysis.fixes import op_family
from membound.analysis.remedies import remedies_of
from membound.cost import cost_of

MODES = {"RNN": 1, "LSTM": 2, "GRU": 3}
# torch's CPU path warns about oneDNN's TF32 when its flags are set
pytestmark = pytest.mark.filterwarnings("ignore:TF32 acceleration:UserWarning")


def _args(t, b, i, h, layers, mode, bidir, proj=0, train=True, batch_first=False):
    """`aten::_cudnn_rnn`'s Input Dims / Input type / Concrete Inputs, as a trace records
    them (the LSTM of examples/real: [[35, 20, 200], [8 weights], [], [643200], [2, 20, 200],
    [2, 20, 200], ...])."""
    d = 2 if bidir else 1
    r = proj or h
    gates = {1: 1, 2: 4, 3: 3}[mode]
    weights, total = [], 0
    for layer in range(layers):
        inp = i if layer == 0 else d * r
        for _ in range(d):
            shapes = [[gates * h, inp], [gates * h, r], [gates * h], [gates * h]]
            if proj:
                shapes.append([r, h])
            weights += shapes
            total += sum(torch.Size(s).numel() for s in shapes)
    x = [b, t, i] if batch_first else [t, b, i]
    state = [layers * d, b, r]
    cell = [layers * d, b, h] if mode == 2 else []
    dims = [x, weights, [], [total], state, cell] + [[]] * 9 + [[1024]]
    types = ["float", "TensorList", "Scalar", "float", "float", "float" if cell else ""]
    types += ["Scalar"] * 8 + ["ScalarList", "unsigned char"]
    concrete = ["", "", "4", "", "", "", str(mode), str(h), str(proj), str(layers),
                str(batch_first), "0.0", str(train), str(bidir), "[]", ""]  # fmt: skip
    return dims, types, concrete, total


@pytest.mark.parametrize("seed", range(10))
def test_forward_flops_match_torchs_count(seed):
    rng = random.Random(seed)
    kind = rng.choice(sorted(MODES))
    t, b, i, h = rng.randint(1, 6), rng.randint(1, 4), rng.randint(1, 9), rng.randint(1, 8)
    layers, bidir = rng.randint(1, 3), rng.random() < 0.5
    proj = rng.randint(1, h - 1) if kind == "LSTM" and h > 1 and rng.random() < 0.5 else 0
    kw = {"proj_size": proj} if proj else {}
    module = getattr(torch.nn, kind)(i, h, num_layers=layers, bidirectional=bidir, **kw)
    with torch.backends.mkldnn.flags(enabled=False), FlopCounterMode(display=False) as fc:
        module(torch.randn(t, b, i))
    dims, types, concrete, _ = _args(t, b, i, h, layers, MODES[kind], bidir, proj)
    cost = cost_of("aten::_cudnn_rnn", dims, types, concrete)
    assert cost.family == "rnn" and cost.exact
    assert cost.flops == fc.get_total_flops()


def test_examples_lstm_as_recorded():
    """The word-level LSTM (2 layers of 200, 35 steps of 20, training): 896 MFLOP forward,
    twice that backward (data and weight gradients); bytes by hand."""
    dims, types, concrete, total = _args(35, 20, 200, 200, 2, 2, False)
    assert total == 643200  # the recorded weight buffer
    cost = cost_of("aten::_cudnn_rnn", dims, types, concrete)
    assert cost.flops == 2 * 700 * 4 * 200 * 400 * 2 == 896_000_000
    x, w, state = 700 * 200 * 4, 643200 * 4, 2 * 20 * 200 * 4
    reads = x + w + 2 * state
    writes = 700 * 200 * 4 + 2 * state + 700 * 2 * 4 * 200 * 4  # output, hy and cy, reserve
    assert cost.read_bytes == reads and cost.bytes == reads + writes
    assert cost.compute == "fp32"
    # eval: no activations kept
    dims, types, concrete, _ = _args(35, 20, 200, 200, 2, 2, False, train=False)
    assert cost_of("aten::_cudnn_rnn", dims, types, concrete).bytes == reads + writes - (
        700 * 2 * 4 * 200 * 4
    )


def test_backward_by_output_mask():
    dims, types, concrete, total = _args(35, 20, 200, 200, 2, 2, False)
    reserve = 6177760
    # backward: input, weight[], stride0, weight_buf, hx, cx, output, grad_output, grad_hy,
    # grad_cy, mode, hidden, proj, layers, batch_first, dropout, train, bidir, batch_sizes,
    # dropout_state, reserve, output_mask
    bdims = dims[:6] + [[35, 20, 200], [35, 20, 200], [], []] + [[]] * 9 + [[1024], [reserve]]
    btypes = types[:6] + ["float", "float", "", ""] + ["Scalar"] * 8
    btypes += ["ScalarList", "unsigned char", "unsigned char", "ScalarList"]
    bconc = concrete[:6] + ["", "", "", ""] + concrete[6:14] + ["[]", "", ""]

    def cost(mask):
        return cost_of("aten::_cudnn_rnn_backward", bdims + [[]], btypes,
                       bconc + [str(mask)])  # fmt: skip

    full = cost([True, False, False, True])
    assert full.flops == 2 * 896_000_000
    assert cost([True, False, False, False]).flops == 896_000_000
    x, w, state, out = 700 * 200 * 4, 643200 * 4, 2 * 20 * 200 * 4, 700 * 200 * 4
    reads = x + w + 2 * state + 2 * out + reserve
    assert full.read_bytes == reads and full.bytes == reads + x + w


def test_family_and_remedies():
    """A library kernel whose time steps run in sequence: no remedy of membound's moves its
    bytes faster, and compile does not fuse it."""
    assert op_family("aten::_cudnn_rnn") == op_family("aten::_cudnn_rnn_backward") == "rnn"
    assert remedies_of("memory-bound-op", {"op": "aten::_cudnn_rnn_backward"}) == ()


def test_lstm_trace_fully_costed_and_no_finding_on_the_recurrence():
    """The H100 trace of examples/real/lstm_lm.py: 46% of its GPU op time was uncosted (the
    cuDNN RNN) and is now all costed; the RNN runs at 0-1% of its roof (its time steps in
    sequence) and gets no memory-bound-op finding, whose remedy would have been compile
    (which lost 0.65 ms/step there)."""
    from membound.analysis import analyze
    from membound.device.ceilings import Ceilings
    from membound.trace.capture_meta import timeline_in
    from support.paths import FIXTURES

    folder = FIXTURES / "h100_real_lstm_lm_truth1"
    a = analyze([timeline_in(folder)], Ceilings.load(folder / "ceilings.json"))
    assert a.ops_costed_fraction >= 0.98
    rnn = [r for r in a.ops if op_family(r.name) == "rnn"]
    assert {r.name for r in rnn} == {"aten::_cudnn_rnn", "aten::_cudnn_rnn_backward"}
    assert all(r.exact_cost and r.fraction_of_attainable < 0.05 for r in rnn)
    ops = {(f.evidence or {}).get("op") for f in a.findings if f.code == "memory-bound-op"}
    assert not ops & {r.name for r in rnn}
    # 2.643 until the launch gaps inside the cuDNN RNN calls (1.75 ms/step) were left to CUDA
    # graphs: compile keeps those calls (test_truth_2026_12_06b_h100.py)
    assert next(r for r in a.remedies if r.key == "compile").saving_ms_per_step == pytest.approx(
        0.891, abs=1e-3
    )
