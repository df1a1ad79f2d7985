"""`analysis.norm_whatif`: membound's norm kernels replayed into the recorded GPT-2 loops with
their measured cost, against what the fixes measured (truth.json of each fixture).

The costs are per fwd+bwd at GPT-2's norm shape, 12288 x 768 fp32 under bf16 autocast, H200:
- for the 2026-12-01 host (fixture h200_real_gpt2), whose costs were not measured, the ones
  probe_norm_host.py measured on 2026-12-02 at 15:01 UTC (benchmarks/gpu/session_dec02h.sh):
  ATen 154 us host / 155.8 us GPU, membound 411 / 86.0;
- the 2026-12-02 host (h200_real_gpt2_run3): ATen 250.7 / 155.8, membound 543.4 / 86.0
  (benchmarks/results/probe_norm_host_2026-12-02b.jsonl, autocast rows).
The residual-add variants were not measured there; written by hand: ATen's add costs one
add kernel each way (the forward residual add and the gradient sum, 3 x 37.7 MB at ~4.2 TB/s:
~27 us each) and ~10 us of host per op; membound's fused one the same as its plain norm (the
residual is one more pointer into the same kernels).
"""

from __future__ import annotations

import json

import pytest

from membound.analysis import analyze
from membound.analysis.pipeline import analyze_trace
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import read_meta, timeline_in
from membound.trace.load import load_trace
from support.paths import FIXTURES


def _cost(aten_host, aten_gpu, ours_host, ours_gpu):
    return {
        "aten": {"host_us": aten_host, "gpu_us": aten_gpu},
        "aten_add": {"host_us": aten_host + 20.0, "gpu_us": aten_gpu + 54.0},
        "membound": {"host_us": ours_host, "gpu_us": ours_gpu},
        "membound_add": {"host_us": ours_host, "gpu_us": ours_gpu},
        "shape": {"kind": "layer", "rows": 12288, "hidden": 768, "dtype": "float32"},
    }


HOST_12_01 = _cost(154.0, 155.8, 411.0, 86.0)
HOST_12_02 = _cost(250.7, 155.8, 543.4, 86.0)


@pytest.fixture(scope="module")
def ceilings():
    return Ceilings.load(FIXTURES / "h200_ceilings.json")


def _analyse(name, ceilings, cost):
    d = FIXTURES / name
    meta = read_meta(timeline_in(d))
    if cost is not None:
        meta = {**meta, "norm_host_cost": cost}
    trace, ops = load_trace(timeline_in(d)), load_trace(d / "trace.ops.json.xz")
    return analyze_trace(trace, ceilings, meta, ops, ceilings_origin="given")


def _measured(name, fix):
    truth = json.loads((FIXTURES / name / "truth.json").read_text())
    return truth["baseline_ms"] - truth["fixes"][fix]["truth"]["step_ms"]


def _whatif(analysis):
    found = [f.evidence["norm_whatif"] for f in analysis.findings if "norm_whatif" in f.evidence]
    assert found, "no norm finding carries the replay"
    assert all(w == found[0] for w in found)
    return found[0]


@pytest.mark.parametrize(
    "name, cost, fused, swap",
    [
        # the host only just keeps ahead: the fix saved 2.36 (fused) and 2.78 (swap)
        ("h200_real_gpt2", HOST_12_01, (1.5, 4.5), (0.3, 4.5)),
        # the slower host: FusedAddLayerNorm cost 19.93 ms/step, swap_norms 45.18
        ("h200_real_gpt2_run3", HOST_12_02, (-30.0, -15.0), (-30.0, -15.0)),
    ],
)
def test_the_replay_predicts_the_measured_fix(ceilings, name, cost, fused, swap):
    w = _whatif(_analyse(name, ceilings, cost))
    truth_fused = _measured(name, "fused-add-norm")
    assert fused[0] < w["fused_add_norm_ms_per_step"] < fused[1]
    assert swap[0] < w["swap_norms_ms_per_step"] < swap[1]
    # the sign of the measured fix, which the 10% overhead rule got right on neither host
    # for the reason it gives (issue 15)
    assert (w["fused_add_norm_ms_per_step"] > 0) == (truth_fused > 0)
    assert w["norm_launches_per_step"] == 200  # 25 LayerNorms x 4 micro-batches x fwd, bwd
    assert w["extra_host_us_per_call"] == pytest.approx(
        (cost["membound"]["host_us"] - cost["aten"]["host_us"]) / 2
    )


def test_the_replay_decides_host_limited(ceilings):
    for name, cost, limited in (
        ("h200_real_gpt2", HOST_12_01, False),
        ("h200_real_gpt2_run3", HOST_12_02, True),
    ):
        a = _analyse(name, ceilings, cost)
        chain = next(
            f for f in a.findings if "norm_whatif" in f.evidence and f.code == "unfused-chain"
        )
        assert chain.evidence["host_limited"] is limited
        assert ("replayed with their cost measured" in chain.fix) is limited
        assert any(
            n.startswith("membound's norms: +") and "replayed: swap_norms" in n for n in a.notes
        )


def test_more_host_time_per_call_predicts_less(ceilings):
    cheap = _whatif(_analyse("h200_real_gpt2", ceilings, _cost(154.0, 155.8, 254.0, 86.0)))
    dear = _whatif(_analyse("h200_real_gpt2", ceilings, HOST_12_01))
    assert cheap["swap_norms_ms_per_step"] > dear["swap_norms_ms_per_step"]


@pytest.mark.parametrize("name", ["h200_real_gpt2", "h200_real_gpt2_run3"])
def test_without_a_measurement_the_report_is_unchanged(ceilings, name):
    plain = analyze([timeline_in(FIXTURES / name)], ceilings)
    failed = _analyse(name, ceilings, {"error": "the probe took longer than 60 s"})
    for a in (plain, failed):
        assert not any("norm_whatif" in f.evidence for f in a.findings)
    key = [
        (f.code, f.time_lost_ms_per_step, f.fix, f.evidence.get("host_limited"))
        for f in plain.findings
    ]
    assert key == [(f.code, f.time_lost_ms_per_step, f.fix, f.evidence.get("host_limited"))
                   for f in failed.findings]  # fmt: skip
    assert plain.notes == failed.notes


def test_no_prediction_where_the_replay_cannot_be_trusted(ceilings, monkeypatch):
    from membound.analysis import norm_whatif

    # a replay that does not give the recorded step is not used
    monkeypatch.setattr(norm_whatif.Replay, "faithful", lambda self: False)
    a = _analyse("h200_real_gpt2", ceilings, HOST_12_01)
    assert not any("norm_whatif" in f.evidence for f in a.findings)
    assert norm_whatif.measured({"aten": {"host_us": 1.0}}) is None


def test_out_of_sample_run_with_the_cost_measured_by_diagnose(ceilings):
    """h200_real_gpt2_run7 (H200, 2026-12-02 16:24 UTC, benchmarks/gpu/session_dec02k.sh):
    `membound diagnose` measured the norm kernels' cost after the script (capture.json
    `norm_host_cost`: ATen 185 us host / 126 us GPU per fwd+bwd, membound 656 / 56; +235 us
    of host per call) and its report, made before the fixes were timed, predicted
    swap_norms -19.10 and fused_add_norm -2.23 ms/step, so it offered neither. Measured:
    -12.53 and -17.32. Both signs are right, so the decision was right, but neither magnitude
    is within issue 15's tolerance: fused_add_norm's is off by 15 ms. The probe's ATen add +
    norm variant took 468 us of host per fwd+bwd against 185 for the norm alone, which makes
    the fused kernel's extra host cost look small (132 us per call against swap's 235)."""
    name = "h200_real_gpt2_run7"
    a = analyze([timeline_in(FIXTURES / name)], ceilings)
    w = _whatif(a)
    assert w["swap_norms_ms_per_step"] == pytest.approx(-19.10, abs=0.5)
    assert w["fused_add_norm_ms_per_step"] == pytest.approx(-2.23, abs=0.5)
    swap, fused = _measured(name, "swap-norms"), _measured(name, "fused-add-norm")
    assert swap == pytest.approx(-12.53, abs=0.01) and fused == pytest.approx(-17.32, abs=0.01)
    assert w["swap_norms_ms_per_step"] < 0 and w["fused_add_norm_ms_per_step"] < 0
    # neither is offered: the predicted loss keeps membound's kernels out of the remedies
    from membound.analysis.remedies import remedies

    keys = {r.key for r in remedies(a.findings, a.reference_step_ms)}
    assert not keys & {"swap_norms", "fused_add_norm"}


def test_out_of_sample_run_with_the_gradients_returned(ceilings):
    """h200_real_gpt2_run8 (H200, 2026-12-03 08:42 UTC, benchmarks/gpu/session_dec03b.sh):
    the probe returns the gradients (`torch.autograd.grad`) instead of accumulating them into
    leaf inputs, so ATen's add + norm no longer pays a clone no loop pays (capture.json
    `norm_host_cost`: aten 140 us host, aten_add 262, membound 522, membound_add 597; run7's
    probe had aten_add at 468). The report, made before the fixes were timed, predicted
    swap_norms -23.15 and fused_add_norm -18.57 ms/step; measured -26.66 and -27.68 (this
    host was slower than run7's: the same fixes measured -12.53 and -17.32 there). swap_norms
    is within issue 15's tolerance (25% of 26.66), fused_add_norm is not (off by 9.1 ms,
    against 15 in run7): the replay still under-counts what the fused kernel's host time
    costs a loop whose host only just keeps ahead."""
    name = "h200_real_gpt2_run8"
    a = analyze([timeline_in(FIXTURES / name)], ceilings)
    w = _whatif(a)
    assert w["swap_norms_ms_per_step"] == pytest.approx(-23.15, abs=0.5)
    assert w["fused_add_norm_ms_per_step"] == pytest.approx(-18.57, abs=0.5)
    swap, fused = _measured(name, "swap-norms"), _measured(name, "fused-add-norm")
    assert swap == pytest.approx(-26.66, abs=0.02) and fused == pytest.approx(-27.68, abs=0.02)
    assert abs(w["swap_norms_ms_per_step"] - swap) <= 0.25 * abs(swap)
    assert abs(w["fused_add_norm_ms_per_step"] - fused) > 0.25 * abs(fused)
    cost = json.loads((FIXTURES / name / "capture.json").read_text())["norm_host_cost"]
    assert cost["aten_add"]["host_us"] < 2 * cost["aten"]["host_us"]  # no clone: 262 vs 140
    from membound.analysis.remedies import remedies

    keys = {r.key for r in remedies(a.findings, a.reference_step_ms)}
    assert not keys & {"swap_norms", "fused_add_norm"}
