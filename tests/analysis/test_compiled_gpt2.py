"""A roofline that sees every kernel (issue 16): a torch.compile'd GPT-2-124M training loop
recorded on the H200 (tests/fixtures/h200_real_gpt2_compiled: the GPU-only timeline pass and
the ops pass whose inductor kernel ranges carry each kernel's tensor arguments and sizes).

Every inductor kernel is costed from its recorded arguments, each read or written once in its
storage dtype, and an argument larger than the kernel's launch space (xnumel x r0_numel) costs
the points it visits: the embedding table the forward gathers 12288 rows of, the logits the
loss picks one element per row of, the gradient the embedding backward scatters into. Counted
at their full size they put three kernels at 106-3139% of the memory roof."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

#: batch 12 x 1024 tokens, GPT-2's vocabulary (padded) and width
ROWS, VOCAB, WIDTH = 12 * 1024, 50304, 768
#: 3 recorded steps of 4 micro-batches (grad_accum 4): each per-micro-batch kernel ran 12 times
CALLS = 12


@pytest.fixture(scope="module")
def analysis():
    return analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2_compiled")],
        Ceilings.load(FIXTURES / "h200_ceilings_l2.json"),
    )


def _row(a, name):
    (row,) = [r for r in a.ops if r.name == name]
    return row


def test_every_inductor_kernel_is_costed_and_placed(analysis):
    """100.0% of GPU op time costed: all 41 inductor kernels, the GEMMs, attention, the
    fused AdamW and the gradient clipping's _foreach_norm and _foreach_mul_ (both from the
    parameters' AccumulateGrad shapes: the profiler records no shapes for their TensorLists;
    99.6% before the clipping's were costed, 2026-12-04). What is left is fused AdamW's
    _foreach_add_ of its step counters: one block per counter, a count a list of vectors
    would give too."""
    assert analysis.ops_costed_fraction >= 0.99
    triton = [r for r in analysis.ops if r.name.startswith("triton_")]
    assert len(triton) == 41
    assert all(r.exact_cost and r.bound == "memory" for r in triton)
    uncosted = {r.name for r in analysis.ops if not r.exact_cost}
    assert uncosted == {"aten::_foreach_add_"}
    params = 124.48e6  # the script's own count (truth.json), 3 steps, fp32 gradients
    norm, mul = _row(analysis, "aten::_foreach_norm"), _row(analysis, "aten::_foreach_mul_")
    assert norm.bytes / norm.calls == pytest.approx(params * 4, rel=1e-3)  # read once
    assert mul.bytes / mul.calls == pytest.approx(params * 4 * 2, rel=1e-3)  # read, written
    assert 0.5 < norm.fraction_of_attainable < 1.0 and 0.5 < mul.fraction_of_attainable < 1.0


def test_the_loss_kernel_reads_one_logit_per_row(analysis):
    """nll_loss forward (grid 2, xnumel 2 x r0_numel 6144 = 12288 points) records the whole
    [12288, 50304] bf16 logits, of which it loads the target's logit per row. Per call: the
    targets [12, 1024] int64, 12288 logits bf16, the row max and log-sum-exp [12288, 1] fp32,
    and its two partial sums [2] int64 and [2] fp32: 221,208 bytes, not the 1.24 GB of the
    full logits (which put it at 3139% of the memory roof, 826% of fp32 vector FLOP/s)."""
    row = _row(
        analysis,
        "triton_red_fused__log_softmax__to_copy__unsafe_view_nll_loss_forward_sub_view_19",
    )
    per_call = ROWS * 8 + ROWS * 2 + 2 * ROWS * 4 + 2 * 8 + 2 * 4
    assert per_call == 221_208
    assert row.calls == CALLS and row.bytes == CALLS * per_call
    assert row.flops == CALLS * ROWS * (6 + 1 + 1)  # log_softmax, nll_loss_forward, sub
    assert row.achieved_bandwidth_fraction < 0.01  # 9 us for 0.2 MB: a latency, not a roof


def test_the_embedding_kernel_reads_the_rows_it_gathers(analysis):
    """Token + position embedding and the first LayerNorm in one persistent reduction
    (12288 rows x 768): of the [50304, 768] fp32 token table it reads the 12288 rows the
    tokens name. Per call: the LayerNorm mean [12, 1024, 1] fp32, the tokens [12, 1024] int64,
    12288 x 768 table elements fp32, the position table [1024, 768] fp32, the LayerNorm weight
    and bias [768] fp32, the embedding sum [12, 1024, 768] fp32, rstd [12, 1024, 1] fp32 and
    the normalized [12, 1024, 768] bf16: 97,720,320 bytes (the whole table made it 214 MB,
    202% of the memory roof)."""
    row = _row(analysis, "triton_per_fused__to_copy_add_embedding_native_layer_norm_3")
    per_call = (
        ROWS * 4 + ROWS * 8 + ROWS * WIDTH * 4 + 1024 * WIDTH * 4 + 2 * WIDTH * 4
        + ROWS * WIDTH * 4 + ROWS * 4 + ROWS * WIDTH * 2
    )  # fmt: skip
    assert per_call == 97_720_320
    assert row.calls == CALLS and row.bytes == CALLS * per_call
    assert 0.9 < row.achieved_bandwidth_fraction < 1.0


def test_the_embedding_backward_fill_is_held_to_the_write_roof(analysis):
    """Inductor zeroes the [50304, 768] fp32 table gradient (a kernel with that one argument,
    named after embedding_dense_backward) before scattering into it: a pure write, 154.5 MB
    in 34 us, 97% of the measured fill rate (4.67 TB/s), 106% of the copy rate."""
    row = _row(analysis, "triton_poi_fused_embedding_dense_backward_15")
    assert row.bytes == CALLS * VOCAB * WIDTH * 4 and row.flops == 0
    assert row.memory_roof == "write" and 0.95 < row.achieved_bandwidth_fraction < 1.0


def test_what_stays_above_the_memory_roof_moves_exactly_its_tensors(analysis):
    """Three kernels run above the HBM copy rate (4.28 TB/s), by at most 5%, with bytes that
    are exactly their dense tensors, each element once, nothing left to take off:
    - _to_copy_t_16: the fp32 token table [50304, 768] read, its bf16 transpose written
      (231.8 MB per call in 51.6 us: 4.49 TB/s, 94% of the 4.8 TB/s datasheet rate);
    - _to_copy_add_19: the tied weight's gradient, bf16 lm_head grad + fp32 embedding grad ->
      fp32 (386 MB per call in 87.1 us: 4.44 TB/s);
    - cat_transpose_view_11: q, k, v grads [12, 12, 1024, 64] bf16 -> [12, 1024, 2304]
      (113 MB per call in 26.3 us: 4.31 TB/s, 100.55%); its 56.6 MB of inputs, written by the
      attention backward just before, fit in the 60 MiB L2, though the call's 113 MB do not,
      so it is held to HBM's rate.
    These are the ceiling's limits, not the cost's: the copy kernel that measured 4.28 TB/s
    is not the fastest mix of reads and writes HBM allows (the other H200 traces show the same
    within 5%: ReLU and GELU backward), and inputs written just before can be partly served
    from L2. The compute-bound aten::mm at 100.5% of its FLOP/s is not a memory-roof row."""
    above = {
        r.name: r.achieved_bandwidth_fraction
        for r in analysis.ops
        if r.bound == "memory" and r.achieved_bandwidth_fraction > 1.0
    }
    assert set(above) == {
        "triton_poi_fused__to_copy_t_16",
        "triton_poi_fused__to_copy_add_19",
        "triton_poi_fused_cat_transpose_view_11",
    }
    assert all(f < 1.05 for f in above.values())
    dense = {  # per call: every element of every tensor argument once
        "triton_poi_fused__to_copy_t_16": VOCAB * WIDTH * (4 + 2),
        "triton_poi_fused__to_copy_add_19": VOCAB * WIDTH * (2 + 4 + 4),
        "triton_poi_fused_cat_transpose_view_11": (3 * ROWS * WIDTH + ROWS * 3 * WIDTH) * 2,
    }
    for name, per_call in dense.items():
        row = _row(analysis, name)
        assert row.bytes == row.calls * per_call
