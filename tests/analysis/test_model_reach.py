"""The training loop's own work told apart from the model's (`analysis.model_reach`), and the
`unfused-chain` finding of the loop's chains (`rules.memory._loop_chains`), whose remedy is a
multi-tensor op, not torch.compile(model)."""

from __future__ import annotations

import numpy as np
import pytest

from membound.analysis import analyze
from membound.analysis.model_reach import outside_model
from membound.analysis.remedies import remedies_of
from membound.trace.capture_meta import timeline_in
from support import tracebuilder
from support.paths import FIXTURES
from support.truth import truth_tally

# ---- outside_model on columns ---------------------------------------------------------------


def test_the_loops_calls_after_backward_are_outside_and_the_models_are_not():
    # host order: forward (seq 1, 2), a no-grad mask between them (seq -1), backward of both,
    # the EMA (seq 7, 8: grad mode on, no node ever runs them), the next forward (seq 3)
    # and its backward
    seq = np.array([1, -1, 2, 2, 1, 7, 8, 3, 3])
    bwd = np.array([0, 0, 0, 1, 1, 0, 0, 0, 1], dtype=bool)
    ts = np.arange(len(seq), dtype=float)
    outside, passes = outside_model(seq, bwd, ts)
    assert outside.tolist() == [False, False, False, False, False, True, True, False, False]
    # backward passes begun at or before each call
    assert passes.tolist() == [0, 0, 0, 1, 1, 1, 1, 1, 2]


def test_calls_before_any_model_call_are_the_loops_and_host_order_decides():
    # the same calls given out of host order: input preparation first, then forward/backward
    seq = np.array([5, -1, 5, 9])
    bwd = np.array([1, 0, 0, 0], dtype=bool)
    ts = np.array([3.0, 0.0, 1.0, 4.0])  # -1 at 0 (before the model), 9 after backward
    outside, _ = outside_model(seq, bwd, ts)
    assert outside.tolist() == [False, True, False, True]


def test_no_backward_call_tells_nothing_apart():
    outside, passes = outside_model(np.array([1, 2, -1]), np.zeros(3, bool), np.arange(3.0))
    assert not outside.any() and not passes.any()


def test_the_loop_chains_remedy_is_foreach_not_compile():
    assert remedies_of("unfused-chain", {"outside_model": True}) == ("foreach",)
    assert remedies_of("unfused-chain", {"top_chain": "aten::mul → aten::add"}) == ("compile",)


# ---- the finding on a built trace (hand-computed numbers) -----------------------------------

N = 64 << 20  # elements of the EMA's largest fp32 tensor: 256 MiB, far past L2
#: the EMA's tensors (fractions of N: distinct sizes, so each is a chain of its own) and the
#: kernel time of its mul_ and add_ on the whole N
PARTS, MUL_US, ADD_US = (1, 1 / 2, 1 / 4, 1 / 8), 600.0, 900.0
#: each kernel of the batch's preparation (`_ema_loop(prep=True)`)
PREP_US = 300.0


def _ema_loop(steps: int = 2, prep: bool = False) -> tracebuilder.TraceBuilder:
    """Per 10 ms step: a forward mul on N/16 elements (seq 10 + step) and its backward node
    (a mul on N/32: no chain with it), then the loop's EMA over four fp32 tensors (`PARTS` of
    N), `mul_` then `add_` each (sequence numbers no backward call carries), kernels of
    MUL_US / ADD_US x the part. With `prep`, before the forward: the batch normalized on the
    GPU (`div_` then `sub_` on N/64 elements, no sequence number, PREP_US each), once a step."""
    b = tracebuilder.TraceBuilder()
    types = ["float", "float"]
    for s in range(steps):
        o = s * 10000.0
        b.step(s, o, 10000.0)
        if prep:
            m = N // 64
            b.op("aten::div_", o + 1, 2, [[m], []], ["float", "Scalar"], ["", "255"])
            b.launch("vectorized_elementwise_kernel", o + 2, o + 20, PREP_US)
            b.op(
                "aten::sub_", o + 4, 2, [[m], [m], []], ["float", "float", "Scalar"], ["", "", "1"]
            )
            b.launch("vectorized_elementwise_kernel", o + 5, o + 20 + PREP_US, PREP_US)
        b.op("aten::mul", o + 10, 20, [[N // 16], [N // 16]], types, seq=10 + s)
        b.launch("vectorized_elementwise_kernel", o + 15, o + 700, 300.0)
        b.op("autograd::engine::evaluate_function: MulBackward0", o + 500, 60)
        b.op("MulBackward0", o + 505, 50, seq=10 + s)
        b.op("aten::mul", o + 510, 20, [[N // 32], [N // 32]], types)
        b.launch("vectorized_elementwise_kernel", o + 515, o + 1010, 300.0)
        t, g = o + 1000.0, o + 1400.0
        for part in PARTS:
            n = int(N * part)
            b.op("aten::mul_", t, 20, [[n], []], ["float", "Scalar"], ["", "0.999"], seq=90 + s)
            b.launch("vectorized_elementwise_kernel", t + 5, g, MUL_US * part)
            g += MUL_US * part + 5
            b.op("aten::add_", t + 30, 20, [[n], [n], []], ["float", "float", "Scalar"],
                 ["", "", "0.001"], seq=90 + s)  # fmt: skip
            b.launch("vectorized_elementwise_kernel", t + 35, g, ADD_US * part)
            g += ADD_US * part + 5
            t += 60
    return b


def _analyze(tmp_path, b):
    folder = tmp_path / "trace"
    folder.mkdir()
    b.write(folder / "trace.json.gz")
    return analyze([timeline_in(folder)], tracebuilder.test_ceilings())


@pytest.fixture
def ema(tmp_path):
    return _analyze(tmp_path, _ema_loop())


def test_the_emas_chains_are_the_loops_own_finding_with_their_whole_time_beyond_one_pass(ema):
    chains = [f for f in ema.findings if f.code == "unfused-chain"]
    assert len(chains) == 1  # the forward's mul is no chain: only the EMA's are
    f = chains[0]
    assert f.evidence["outside_model"] is True and f.evidence["per_tensor"] is True
    assert f.evidence["top_chain"] == "aten::mul_ → aten::add_"
    assert f.evidence["chains_per_step"] == len(PARTS)
    # one lerp reads both tensors and writes one: 3 x 4n bytes at 1 TB/s, against the
    # mul_'s 2 x 4n and the add_'s 3 x 4n, whose intermediate (2 x 4n) a single pass drops
    elements = N * sum(PARTS)
    fused_ms = 3 * 4 * elements / 1e12 * 1e3
    assert f.evidence["fused_ms_per_step"] == pytest.approx(fused_ms)
    device_ms = (MUL_US + ADD_US) * sum(PARTS) / 1e3
    assert f.time_lost_ms_per_step == pytest.approx(device_ms - fused_ms)
    assert "_foreach_lerp_" in f.fix and "torch.compile(model)" in f.fix
    by_key = {r.key: r for r in ema.remedies}
    assert by_key["foreach"].saving_ms_per_step == pytest.approx(f.time_lost_ms_per_step)
    assert "unfused-chain" not in by_key["compile"].codes  # compile(model) has the launches


def test_a_chain_of_the_loops_own_code_is_compiled_where_it_is_not_looped(tmp_path):
    # the batch normalized on the GPU before the forward: outside the model, once a step
    a = _analyze(tmp_path, _ema_loop(prep=True))
    loop = {f.evidence["per_tensor"]: f for f in a.findings if f.evidence.get("outside_model")}
    assert set(loop) == {True, False}
    own = loop[False]
    assert own.evidence["top_chain"] == "aten::div_ → aten::sub_"
    assert own.evidence["chains_per_step"] == 1
    # 2 x PREP_US of kernels against one pass: 8 + 12 - 8 bytes an element at 1 TB/s
    m = N // 64
    assert own.time_lost_ms_per_step == pytest.approx(2 * PREP_US / 1e3 - 12 * m / 1e12 * 1e3)
    assert "torch.compile the function" in own.fix and "_foreach" not in own.fix
    assert remedies_of(own.code, own.evidence) == ("compile_loop",)
    assert loop[True].evidence["chains_per_step"] == len(PARTS)


def test_the_loops_calls_are_in_no_other_memory_finding(ema):
    # fp32-storage: autocast does not reach the EMA; memory-bound-op: its time is counted once
    others = [f for f in ema.findings if f.code in ("fp32-storage", "memory-bound-op")]
    for f in others:
        assert "aten::mul_" not in str(f.evidence) and "aten::add_" not in str(f.evidence)


def test_without_backward_the_same_chain_stays_the_models(tmp_path):
    b = _ema_loop()
    b.events = [e for e in b.events if "Backward" not in e["name"]]
    a = _analyze(tmp_path, b)
    (f,) = [f for f in a.findings if f.code == "unfused-chain"]
    assert "outside_model" not in f.evidence and remedies_of(f.code, f.evidence) == ("compile",)


# ---- recorded traces ------------------------------------------------------------------------


def _report(name: str) -> dict:
    folder = FIXTURES / name
    return truth_tally.report_of(folder, truth_tally.ceilings_of(folder, None))


def test_the_ddpm_emas_chains_are_the_loops_and_foreach_predicts_what_it_saved():
    """H100, 2026-12-06: improved-diffusion's per-parameter EMA (`targ.mul_(rate).add_(src,
    ...)` over 304 parameters after the optimizer step) was the top pattern of the chain
    finding whose remedy was torch.compile(model). It is now the loop's own: 163 `mul_ →
    add_` a step, 0.90 ms/step predicted for one `torch._foreach_lerp_`, which saved 0.82 in
    that call. The model's chains all run through a GroupNorm, whose round trips compile
    trades for a second read of its input (`rules.memory.STATS_NORMS`): no finding of the
    model's."""
    report = _report("h100_real_ddpm_unet_truth1")
    chains = [f for f in report["findings"] if f["code"] == "unfused-chain"]
    loop = [f for f in chains if f["evidence"].get("outside_model")]
    model = [f for f in chains if not f["evidence"].get("outside_model")]
    # the timestep embedding's chains (once a step, at the forward's start, no grad) are
    # outside by position too, and save nothing fused: no finding
    assert len(loop) == 1 and not model and loop[0]["evidence"]["per_tensor"]
    ev = loop[0]["evidence"]
    assert ev["top_chain"] == "aten::mul_ → aten::add_" and ev["top_chain_per_step"] == 163
    assert loop[0]["time_lost_ms_per_step"] == pytest.approx(0.90, abs=0.01)
    assert any(r["remedy"] == "foreach" for r in report["remedies"])


@pytest.mark.parametrize("name", ["h200_real_gpt2", "h200_real_dcgan_oos1"])
def test_no_loop_chain_where_the_loop_has_none(name):
    """Eager GPT-2's gradient accumulation adds (AccumulateGrad's `add_`, 75 a step, in an
    `evaluate_function` with no sequence number) are backward work; the DCGAN's last
    generator forward, whose backward ran after the trace ended, is outside by position
    after one pass only: neither is the loop's."""
    report = _report(name)
    assert not any(f["evidence"].get("outside_model") for f in report["findings"])
