"""The analysis of real training code captured on the H200 by membound's two-pass capture
(examples/real, run by benchmarks/bench_truth.py on 2026-12-01: the GPU-only timeline with
membound's marks, the ops pass, capture.json with membound's step timer, and truth.json with
the same script timed alone by a plain step timer and with each fix applied).

Expected numbers are deterministic given the files; the claims about the truth (what the
fixes measured) are in `truth.json` and benchmarks/results/truth.csv."""

from __future__ import annotations

import json

import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES


def _analysis(name):
    ceilings = Ceilings.load(FIXTURES / "h200_ceilings.json")
    return analyze([timeline_in(FIXTURES / f"h200_real_{name}")], ceilings)


def _truth(name):
    return json.loads((FIXTURES / f"h200_real_{name}" / "truth.json").read_text())


def test_resnet50_fp32_batchnorm_on_top_with_the_batchnorm_fix():
    a = _analysis("resnet50_fp32")
    assert len(a.steps) == 5
    assert a.unprofiled_step_ms == pytest.approx(62.8378, rel=1e-6)
    assert a.profiled_step_ms == pytest.approx(63.1627, rel=1e-6)
    # the GPU-only timeline pass cost this program 0.5% of its step
    assert a.profiler_overhead_fraction == pytest.approx(0.00517, abs=1e-5)
    # membound's own unprofiled step agrees with the plain timer of the script run alone
    assert a.unprofiled_step_ms == pytest.approx(_truth("resnet50_fp32")["baseline_ms"], rel=0.01)
    top = a.findings[0]
    assert (top.code, top.evidence["op"]) == ("memory-bound-op", "aten::cudnn_batch_norm_backward")
    assert top.time_lost_ms_per_step == pytest.approx(10.66455, rel=1e-4)
    assert top.expected_step_ms_after_fix == pytest.approx(62.8378 - 10.66455, rel=1e-4)
    # what helped on the H200 was bf16 + channels_last (-26.0 ms), channels_last alone -17.4:
    # the fix names them, and no LayerNorm module
    assert "channels_last" in top.fix and "autocast" in top.fix and "LayerNorm" not in top.fix
    # no unfused-chain: its chains run through BatchNorm (`rules.memory.STATS_NORMS`)
    assert [f.code for f in a.findings[1:3]] == ["fp32-storage", "memory-bound-op"]
    assert any("ops pass (3 step(s)" in n for n in a.notes)
    assert any("host ran up to" in n for n in a.notes)  # a GPU-bound loop: the GPU's clock


def test_lightning_fit_pageable_copy_on_top_with_lightnings_switch():
    a = _analysis("lightning_fit")
    assert len(a.steps) == 5
    assert a.unprofiled_step_ms == pytest.approx(31.2631, rel=1e-6)
    assert a.profiled_step_ms == pytest.approx(41.8065, rel=1e-6)
    top = a.findings[0]
    assert top.code == "pageable-copy"
    assert top.time_lost_ms_per_step == pytest.approx(7.33735, rel=1e-4)
    # the capture saw Lightning imported: the fix names its DataLoader switch; on the H200
    # pin_memory=True saved 9.9 ms and membound.data.prefetch 13.6 ms of 34.0
    assert "LightningModule" in top.fix and "membound.data.prefetch" in top.fix
    codes = [f.code for f in a.findings]
    # launch-bound third: of its idle, the gaps before work the GPU already had are `queued`
    assert codes[:3] == ["pageable-copy", "memory-bound-op", "launch-bound"]
    # the idle only the profiler added is its own cause, and the causes add up to at most
    # the unprofiled step minus GPU busy
    assert a.idle_breakdown["profiler"] == pytest.approx(10.0029, rel=1e-4)
    for s in a.steps:
        real = sum(v for c, v in s.idle_by_cause.items() if c != "profiler")
        assert real <= max(a.unprofiled_step_ms - s.busy_ms, 0.0) + 1e-6


def test_gpt2_with_membounds_fused_add_norm_costs_its_own_kernels():
    """GPT-2 with FusedAddLayerNorm, kernels forced (H200, 2026-12-01): the ops pass records
    membound's custom ops with their arguments, so the 300 forward and 300 backward calls of
    3 steps are costed exactly (100.0% of GPU op time costed in all, fused AdamW and the
    gradient clipping's foreach ops included: 99.6% before the clipping's were costed from
    the parameters, 2026-12-04), and placed: the backward at
    50% of its memory roof, the forward at 89% (torch's LayerNorm in h200_real_gpt2: 29% and
    48%)."""
    from membound.report.json_report import to_dict

    a = _analysis("gpt2_fused_add_norm")
    assert to_dict(a)["ops_costed_fraction"] == pytest.approx(0.99997, abs=1e-4)
    rows = {r.name: r for r in a.ops if r.name.startswith("membound::")}
    assert set(rows) == {"membound::add_norm_fwd", "membound::add_norm_bwd"}
    assert all(r.exact_cost and r.calls == 300 and r.bound == "memory" for r in rows.values())
    assert rows["membound::add_norm_bwd"].fraction_of_attainable == pytest.approx(0.4975, rel=1e-3)
    assert rows["membound::add_norm_fwd"].fraction_of_attainable == pytest.approx(0.8913, rel=1e-3)
    # its own kernels are never told to be swapped for themselves, nor summed for compile
    summed = [f for f in a.findings if "ops_below_roof" in f.evidence]
    assert all(not n.startswith("membound::") for f in summed for n in f.evidence["ops_below_roof"])


@pytest.mark.parametrize(
    ("name", "params_m", "costed"),
    [("hf_trainer_llama", 168.31, 0.9998), ("gpt2", 124.48, 0.99998)],
)
def test_fused_adamw_costed_from_the_parameters_accumulate_grad_counts(name, params_m, costed):
    """The profiler records no shapes for fused AdamW's TensorLists; the parameters' own
    AccumulateGrad events give them (analysis/optimizer_ops.py `cost_fused_adam`): the gcd of the
    per-shape counts is steps x micro-batches (3 x 1 for the HF Trainer, 3 x 4 for GPT-2's
    grad accumulation), and the elements over it are the parameters: the counts the scripts
    printed themselves (truth.json, `params_m`). Each step moves 7 passes over them in fp32.
    The HF Llama's costed share was 94.3% without it, short of issue 16's 98%; with the
    gradient clipping's `_foreach_norm` and `_foreach_mul_` costed from the same parameters
    (`cost_foreach_lists`) it went from 98.3% to 99.98%, GPT-2's from 99.66% to 99.998%:
    what is left is fused AdamW's `_foreach_add_` of its step counters."""
    from membound.report.json_report import to_dict

    truth = json.loads((FIXTURES / f"h200_real_{name}" / "truth.json").read_text())
    assert truth["baselines"][0]["extra"]["params_m"] == params_m
    a = _analysis(name)
    (row,) = [r for r in a.ops if r.name == "aten::_fused_adamw_"]
    assert row.exact_cost and row.bound == "memory"
    steps = len(a.steps)
    assert row.bytes / steps == pytest.approx(params_m * 1e6 * 7 * 4, rel=1e-4)
    assert 0.7 < row.fraction_of_attainable < 1.0
    assert to_dict(a)["ops_costed_fraction"] == pytest.approx(costed, abs=1e-3)
