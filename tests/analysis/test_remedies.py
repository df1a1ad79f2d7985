"""Fixes ranked by what they save (analysis/remedies.py), held against what the fixes saved
when applied on the H200 (the truth.json beside each real fixture: the script timed alone by
a plain step timer, and with each fix, in the same device call)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from membound.analysis import analyze, compile_whatif
from membound.analysis.remedies import (
    GRAPH_RUNTIME_MS,
    REMEDIES,
    combined,
    finding_saving,
    remedies,
    remedies_of,
)
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support.paths import FIXTURES

#: bench_truth's interventions -> the remedies they apply
APPLIES = {
    "amp": ["bf16"],
    "channels-last": ["channels_last"],
    "tf32": ["tf32"],
    "log-every-100": ["sync_less"],
    "amp+channels-last": ["bf16", "channels_last"],
    "pin-memory": ["pin_memory"],
    "membound-prefetch": ["prefetch"],
    "bf16-mixed": ["bf16"],
    "pin-mem": ["pin_memory"],
    "torch-compile": ["compile"],
    "no-nan-inf-filter": ["sync_less"],
    "logging-steps-1000": ["sync_less"],
    "refresh-rate-100": ["sync_less"],
    "swap-norms-adaptive": ["swap_norms"],
    "compile": ["compile"],
    "reduce-overhead": ["cuda_graphs"],
    "swap-norms": ["swap_norms"],
    "fused-add-norm": ["fused_add_norm"],
    "swap-norms-kernels": ["swap_norms"],  # the 2026-12-01 run's name (adaptive was default)
    "bf16-weights": ["bf16_storage"],
}


def _f(code, saving, **evidence):
    return SimpleNamespace(code=code, time_lost_ms_per_step=saving, evidence=evidence)


@pytest.mark.parametrize(
    ("code", "evidence", "want"),
    [
        ("memory-bound-op", {"op": "aten::cudnn_batch_norm_backward"}, ("channels_last", "compile")),
        ("memory-bound-op", {"op": "aten::cudnn_convolution"}, ("channels_last",)),
        ("memory-bound-op", {"op": "aten::native_layer_norm"}, ("swap_norms", "compile")),
        ("memory-bound-op", {"op": "aten::_fused_rms_norm_backward"}, ("swap_norms", "compile")),
        ("memory-bound-op", {"op": "aten::_foreach_add_"}, ("fused_optimizer",)),
        ("memory-bound-op", {"op": "aten::mm"}, ()),
        ("memory-bound-op", {"op": "aten::gelu_backward"}, ("compile",)),
        ("memory-bound-op", {"op": "triton_red_fused_native_layer_norm_0"}, ("max_autotune",)),
        ("unfused-chain", {"top_chain": "aten::add → aten::native_layer_norm"}, ("compile", "fused_add_norm")),
        ("unfused-chain", {"norm_written_out": "rms_norm", "top_chain": "aten::pow → aten::mean"}, ("swap_norms", "fused_add_norm", "compile")),
        ("unfused-chain", {"top_chain": "aten::cudnn_batch_norm → aten::clamp_min_"}, ("compile",)),
        ("fp32-storage", {}, ("bf16",)),
        ("fp32-storage", {"autocast_on": True}, ("bf16_storage",)),
        ("memory-bound-op", {"ops_below_roof": {"aten::sum": 3.8}}, ("compile",)),
        ("launch-bound", {}, ("compile", "cuda_graphs", "graph_step")),
        ("launch-bound", {"mid_step_syncs_per_step": 2.0}, ("compile", "cuda_graphs")),
        ("launch-bound", {"compiled": True}, ("cuda_graphs", "graph_step")),
        ("host-bound", {"mid_step_syncs_per_step": 0.0}, ("graph_step",)),
        ("host-bound", {"mid_step_syncs_per_step": 5.0}, ()),
        ("pageable-copy", {}, ("pin_memory", "prefetch")),
        ("straggler-rank", {}, ()),
    ],
)  # fmt: skip
def test_remedies_of(code, evidence, want):
    assert remedies_of(code, evidence) == want
    assert all(k in REMEDIES for k in want)


def test_ranked_sums_once_and_caps_at_the_step():
    fs = [
        _f("memory-bound-op", 10.0, op="aten::cudnn_batch_norm_backward"),
        _f("memory-bound-op", 4.0, op="aten::cudnn_batch_norm"),
        _f("fp32-storage", 5.0),
        _f("launch-bound", float("nan")),  # a broken figure never adds
    ]
    rs = remedies(fs, step_ms=60.0)
    assert [(r.key, r.saving_ms_per_step, r.findings) for r in rs] == [
        ("channels_last", 14.0, [0, 1]),
        ("compile", 14.0, [0, 1]),
        ("bf16", 5.0, [2]),
    ]
    assert rs[0].share_of_step == pytest.approx(14 / 60)
    assert rs[0].expected_step_ms_after_fix == pytest.approx(46.0)
    assert rs[0].to_dict()["codes"] == ["memory-bound-op"]
    assert combined(fs, ["channels_last", "compile", "bf16"], 60.0) == 19.0  # each finding once
    assert remedies([_f("host-sync", 90.0)], step_ms=50.0)[0].saving_ms_per_step == 50.0


def test_a_part_saved_per_remedy_counts_for_that_remedy_alone():
    """launch-bound's gaps inside a library call's launches (cuDNN's LSTM) are CUDA graphs',
    not compile's: compile is given the stated part, cuda_graphs the whole less the compiled
    runtime its mode='reduce-overhead' pays each step (`GRAPH_RUNTIME_MS`), and a set holding
    both the whole, once, the runtime paid by compile's part."""
    lb = _f("launch-bound", 2.5, saving_by_remedy={"compile": 0.75}, mid_step_syncs_per_step=1)
    chain = _f("memory-bound-op", 0.15, ops_below_roof={"aten::add_": 0.15})
    rs = {r.key: r.saving_ms_per_step for r in remedies([lb, chain], step_ms=7.6)}
    assert rs == pytest.approx({"cuda_graphs": 2.5 - GRAPH_RUNTIME_MS, "compile": 0.9})
    assert GRAPH_RUNTIME_MS == compile_whatif.FIXED_MS == 1.1
    assert [r.key for r in remedies([lb, chain], step_ms=7.6)][0] == "cuda_graphs"
    assert combined([lb, chain], ["compile"], 7.6) == pytest.approx(0.9)
    assert combined([lb, chain], ["compile", "cuda_graphs"], 7.6) == pytest.approx(2.65)
    assert finding_saving(lb, None) == 2.5 and finding_saving(lb, {"sync_less"}) == 2.5
    # a stated part never exceeds the finding's whole saving
    big = _f("launch-bound", 1.0, saving_by_remedy={"compile": 3.0})
    assert finding_saving(big, {"compile"}) == 1.0


def _truth_check(name):
    a = analyze(
        [timeline_in(FIXTURES / f"h200_real_{name}")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    truth = json.loads((FIXTURES / f"h200_real_{name}" / "truth.json").read_text())
    out = {}
    for fix, run in truth["fixes"].items():
        if not run.get("truth"):  # not run (the call's budget skipped it)
            continue
        measured = truth["baseline_ms"] - run["truth"]["step_ms"]
        out[fix] = (measured, combined(a.findings, APPLIES[fix], a.reference_step_ms))
    return out


def test_resnet50_fp32_every_fix_within_issue_15s_tolerance():
    """Issue 15's target: |predicted - measured| <= max(25% of measured, 2 ms) for every fix.
    Measured on the H200 (ms/step saved): amp 4.84, channels_last 17.36, tf32 0.25, logging
    less 0.10, amp + channels_last 25.96. The largest single finding (BatchNorm backward,
    10.66) missed channels_last by 39%; its remedy, both BatchNorm findings, predicts 15.06."""
    got = _truth_check("resnet50_fp32")
    for fix, (measured, predicted) in got.items():
        assert abs(predicted - measured) <= max(0.25 * abs(measured), 2.0), (fix, got[fix])
    assert got["channels-last"][1] == pytest.approx(15.0614, rel=1e-3)
    assert got["amp"][1] == pytest.approx(4.8125, rel=1e-3)


def test_lightning_fit_pinning_within_tolerance_prefetch_under_predicted():
    """pin_memory=True saved 9.87 ms/step, predicted 8.04 (within 25%). membound.data.prefetch
    saved 13.63 and is predicted 8.94: it also takes the pinning and collation off the loop's
    thread, which the capture does not attribute to the copy (the two baselines of that run
    differed by 11%). bf16-mixed measured -1.04 (slower), predicted 0.61: within 2 ms."""
    got = _truth_check("lightning_fit")
    assert abs(got["pin-memory"][1] - got["pin-memory"][0]) <= 0.25 * got["pin-memory"][0]
    assert got["membound-prefetch"][1] == pytest.approx(8.93, abs=0.01)
    assert got["membound-prefetch"][1] < 0.75 * got["membound-prefetch"][0]  # the known miss
    assert abs(got["bf16-mixed"][1] - got["bf16-mixed"][0]) <= 2.0


def test_report_json_and_terminal_carry_the_remedies():
    """The JSON lists every remedy with the findings it recovers (indexes into `findings`);
    the plain report prints the section because one fix recovers two findings."""
    import io

    from rich.console import Console

    from membound.analysis.sanity import check_report
    from membound.report.json_report import to_dict
    from membound.report.terminal import render_list

    a = analyze(
        [timeline_in(FIXTURES / "h200_real_resnet50_fp32")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    doc = to_dict(a)
    assert check_report(doc) == []
    by = {r["remedy"]: r for r in doc["remedies"]}
    cl = by["channels_last"]
    assert [doc["findings"][i]["evidence"]["op"] for i in cl["findings"]] == [
        "aten::cudnn_batch_norm_backward",
        "aten::cudnn_batch_norm",
    ]
    assert cl["saving_ms_per_step"] == pytest.approx(15.0594, rel=1e-3)
    assert cl["expected_step_ms_after_fix"] == pytest.approx(
        a.reference_step_ms - 15.0594, rel=1e-3
    )
    out = io.StringIO()
    opts = SimpleNamespace(top_findings=5, top_ops=3, step_bars=2)
    render_list(a, Console(file=out, width=100), opts)
    text = out.getvalue()
    assert "fixes ranked by what they save" in text
    assert "channels_last  15.059 ms/step" in text and "memory-bound-op x2 (1, 3)" in text


def truth_baseline(name) -> float:
    return json.loads((FIXTURES / f"h200_real_{name}" / "truth.json").read_text())["baseline_ms"]


def _within(measured, predicted):
    return abs(predicted - measured) <= max(0.25 * abs(measured), 2.0)


def test_gpt2_compile_predicted_by_the_ops_below_their_roof():
    """Eager GPT-2 124M under bf16 autocast (H200, 2026-12-01, benchmarks/gpu/truth.sh gpt2):
    torch.compile saved 27.17 ms/step of 136.93. Before the summed `memory-bound-op` finding
    membound predicted 6.98 for it (the chains' intermediates and the launch gaps): no single
    memory-bound op took 10% of GPU time. The 13 ops below their roof (LayerNorm backward at
    29% of it, the bias-gradient sums at 34%, autocast's casts at 63%, the embedding's gather
    at 76% since its expanded index is costed at its real extent, ...) spend 25.84 ms/step
    above it; compile's remedy, 29.51 (those and the unfused chains), is within issue 15's
    tolerance (6.79). It was 32.82 while the GPU's own turnaround between queued kernels
    counted as launch gaps (3.31 ms/step of launch-bound, now `queued` idle: no finding).
    bf16 storage, 31.56 applied alone, ranks above it: on runs 5 and 6 it measured 27.78 and
    28.86 against compile's 30.41, the two within 10% of each other there too."""
    a = analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    top = a.findings[0]
    assert top.code == "memory-bound-op" and "ops_below_roof" in top.evidence
    assert top.time_lost_ms_per_step == pytest.approx(25.84, rel=1e-3)
    assert top.evidence["op_count"] == 13  # with aten::cat, at 94% of its roof
    assert list(top.evidence["ops_below_roof"])[:2] == [
        "aten::copy_",
        "aten::native_layer_norm_backward",
    ]
    assert "torch.compile" in top.fix
    rs = remedies(a.findings, a.reference_step_ms)
    assert [r.key for r in rs[:2]] == ["bf16_storage", "compile"]
    assert rs[1].saving_ms_per_step == pytest.approx(29.51, rel=1e-3)
    assert not any(f.code == "launch-bound" for f in a.findings)
    # autocast is on (bf16 matmuls): the fp32 bytes left are storage, not a missing autocast
    fp32 = next(f for f in a.findings if f.code == "fp32-storage")
    assert fp32.evidence["autocast_on"] is True and "already on" in fp32.fix
    assert remedies_of(fp32.code, fp32.evidence) == ("bf16_storage",)
    got = _truth_check("gpt2")
    for fix in ("compile", "fused-add-norm", "log-every-100"):
        assert _within(*got[fix]), (fix, got[fix])
    # swap_norms alone fuses nothing on GPT-2: its LayerNorm is one ATen kernel, and the
    # residual add that the unfused chain holds stays outside a swapped module (FusedAdd* in
    # the block takes it: fused-add-norm). No finding stands for it, so no saving is claimed.
    # Measured, it was noise or a loss: +2.78 ms/step with the adaptive dispatch (then the
    # default) and -12.21 with the kernels forced in this run; -6.0, -12.2, -17.9 in three
    # calls of benchmarks/results/gpt2_norm_dispatch_2026-12-01.txt (the kernels' host cost
    # on a host only just ahead of its GPU).
    assert got["swap-norms"][1] == 0.0 and got["swap-norms-kernels"][1] == 0.0
    assert got["swap-norms-kernels"][0] < 0
    assert abs(got["swap-norms"][0]) < 0.05 * truth_baseline("gpt2")


def test_resnet50_fp32_second_run_compile_within_tolerance():
    """The fp32 ResNet-50 again (2026-12-01), now with torch.compile measured: 20.75 ms/step
    saved, predicted 23.21; every other fix within tolerance too. 15.99 since the chains
    through BatchNorm are not counted (`rules.memory.STATS_NORMS`): still within; this H200
    capture timed no convolution in channels_last, so inductor's layout part (9.03 ms/step
    on the H100, `test_compiled_resnet50.py`) is not in it."""
    got = _truth_check("resnet50_fp32_run2")
    assert set(got) >= {"compile", "amp", "channels-last", "amp+channels-last"}
    for fix, pair in got.items():
        assert _within(*pair), (fix, pair)
    assert got["compile"][1] == pytest.approx(15.99, rel=1e-3)


def test_resnet50_pageable_prefetcher_every_fix_within_tolerance():
    """ResNet-50 with AMP and a uint8 side-stream prefetcher reading pageable memory:
    pinning saved 14.71 ms/step, membound.data.prefetch 13.63 (both predicted 15.43),
    channels_last 51.72 (predicted 52.63)."""
    got = _truth_check("resnet50_prefetch")
    for fix in ("pin-mem", "membound-prefetch", "channels-last"):
        assert _within(*got[fix]), (fix, got[fix])


def test_hf_trainer_llama_written_out_rmsnorm_predicts_swap_norms_and_compile():
    """HF Trainer on a small Llama (H200, 2026-12-02 00:16 UTC; baselines 40.33 and 45.84,
    12.8% apart). HF writes RMSNorm out (pow, mean, add, rsqrt, mul, mul forward; 13-14 ops in
    autograd's backward), so no op of the trace is a norm: the written-out norm finding
    (rules/norm_written.py) recognises the 17 per step by what they compute and joins their
    backward ops by autograd sequence number. Its saving is membound.swap_norms' prediction:
    4.82 ms/step of GPU time (their 5.49 ms of kernels against one fused kernel each way at
    the roof, 0.67), plus the idle between the kernels fusing removes (20.5% of the op
    kernels): 0.41 of the step's 2.00 ms of launch idle, taken out of launch-bound, and 0.35
    of its 1.73 ms of `queued` idle (the GPU's own turnaround between queued kernels: a kernel
    that is gone takes its boundary with it): 5.59. swap_norms saved 7.35 (4.59 against the
    first baseline alone, 10.10 against the second): within issue 15's 2 ms. Before the
    queued gaps were told from launch gaps, all 3.34 ms were launch idle (0.68 of it the
    norms'), and the prediction 5.51. Before the norm finding, swap_norms had no prediction
    (0) and compile's was 12.43; with the norms' whole time in, compile's is 13.42 against
    17.26 measured: within tolerance; 13.38 since the launch gaps inside one library call (a
    cuDNN attention's, 0.04) are left to CUDA graphs."""
    a = analyze(
        [timeline_in(FIXTURES / "h200_real_hf_trainer_llama")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    norm = next(f for f in a.findings if f.evidence.get("norm_written_out"))
    assert norm.code == "unfused-chain" and norm.evidence["norm_written_out"] == "rms_norm"
    assert norm.evidence["norms_per_step"] == pytest.approx(17)
    assert norm.evidence["backward_found"] is True
    assert norm.evidence["top_chain"].startswith("aten::pow → aten::mean → aten::add → aten::rsqrt")
    assert norm.evidence["gpu_ms_per_step"] == pytest.approx(4.82, abs=0.01)
    assert norm.evidence["launch_gaps_ms_per_step"] == pytest.approx(0.41, abs=0.01)
    assert norm.evidence["turnaround_ms_per_step"] == pytest.approx(0.35, abs=0.01)
    assert norm.time_lost_ms_per_step == pytest.approx(5.59, abs=0.01)
    assert "membound.swap_norms" in norm.fix and "LlamaRMSNorm" in norm.fix
    launch = next(f for f in a.findings if f.code == "launch-bound")  # the rest of the gaps
    assert launch.time_lost_ms_per_step == pytest.approx(2.00 - 0.41, abs=0.01)
    rs = {r.key: r for r in remedies(a.findings, a.reference_step_ms)}
    assert rs["swap_norms"].saving_ms_per_step == pytest.approx(5.59, abs=0.01)
    got = _truth_check("hf_trainer_llama")
    for fix in ("no-nan-inf-filter", "logging-steps-1000", "torch-compile", "swap-norms"):
        assert _within(*got[fix]), (fix, got[fix])
    # each instant once; 13.38 until the step that logs was aligned with the ops pass's
    # (`analysis.kernel_map`): its gaps inside cuDNN's attention call, left to CUDA graphs
    assert got["torch-compile"][1] == pytest.approx(13.36, abs=0.01)
    measured, predicted = got["swap-norms"]
    assert predicted == pytest.approx(5.59, abs=0.01) and measured == pytest.approx(7.35, abs=0.01)
    truth = json.loads((FIXTURES / "h200_real_hf_trainer_llama" / "truth.json").read_text())
    runs = sorted(b["step_ms"] for b in truth["baselines"])
    swapped = truth["fixes"]["swap-norms"]["truth"]["step_ms"]
    assert runs[0] - swapped < predicted < runs[-1] - swapped  # inside the baselines' spread


def test_lightning_fit_second_run_prefetch_within_pinning_under_predicted():
    """The Lightning fit again (2026-12-02; baselines 34.25 and 36.60): membound.data.prefetch
    saved 11.67 ms/step, predicted 8.81 (within); pin_memory=True saved 12.13, predicted 7.55
    (a miss, where the first run's 9.87 vs 8.04 was within): pinning also speeds the loader's
    own copy-out, which the capture does not attribute to the copy. Both fixes come within
    0.5 ms of each other, so membound's prefetcher matches the framework's switch."""
    got = _truth_check("lightning_fit_run2")
    assert _within(*got["membound-prefetch"]) and _within(*got["bf16-mixed"])
    assert got["pin-memory"][1] == pytest.approx(7.55, abs=0.01)
    assert got["pin-memory"][1] < 0.75 * got["pin-memory"][0]  # the known miss
    assert abs(got["membound-prefetch"][0] - got["pin-memory"][0]) < 0.5


def test_third_run_on_a_slower_host_norm_kernels_not_offered_where_the_host_has_no_headroom():
    """Eager GPT-2 and the HF Llama again (H200, 2026-12-02 02:44 UTC, a machine whose host
    was slower: the timeline pass added 18.5% and 19.8% to the step, against 2% and 4% on
    2026-12-01; benchmarks/results/truth_2026-12-02c.log, three baselines each).
    - GPT-2: compile saved 28.96 ms/step, predicted 29.57 (within; 33.49 while the GPU's
      turnaround between queued kernels counted as launch gaps). bf16 storage (31.56 alone)
      ranks above it. membound's own norm
      kernels lost: FusedAddLayerNorm -19.93, swap_norms -45.18 (adaptive dispatch -6.27),
      where on 2026-12-01 (capture +2%) FusedAddLayerNorm saved 2.36. Their GPU saving is
      real; their host cost per call is ~3x ATen's, and this host had no headroom. So where
      the capture's overhead shows a host with none (>= 10%), membound's norm kernels are
      not offered for ATen's one-kernel norms: no remedy claims their saving, and the text
      says why. Their measured loss is still not predicted (the host cost is not modelled).
    - HF: swap_norms saved 6.02 (the written-out RMSNorm; predicted 6.55: 4.82 of GPU time
      and 1.76 of the idle between the kernels it removes, this slower host's launch idle
      being 7.71 ms/step); compile 21.38 vs 18.97 (within). The first baseline (51.51
      against 43.63 and 44.23) inflates every saving by ~2.5 ms."""
    gpt2 = analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2_run3")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    assert gpt2.timing.overhead_fraction == pytest.approx(0.1847, abs=1e-3)
    keys = [r.key for r in remedies(gpt2.findings, gpt2.reference_step_ms)]
    assert keys[:2] == ["bf16_storage", "compile"]
    assert "fused_add_norm" not in keys and "swap_norms" not in keys
    chain = next(f for f in gpt2.findings if f.code == "unfused-chain")
    assert chain.evidence["host_limited"] is True
    assert chain.fix.startswith("Let torch.compile fuse") and "no headroom" in chain.fix
    got = _truth_check("gpt2_run3")
    assert _within(*got["compile"]) and got["compile"][1] == pytest.approx(29.57, abs=0.01)
    assert got["fused-add-norm"] == (pytest.approx(-19.93, abs=0.01), 0.0)
    assert got["swap-norms"][0] < -40 and got["swap-norms"][1] == 0.0
    # the first run, whose host had headroom, keeps its FusedAddLayerNorm remedy
    first = analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    assert "fused_add_norm" in [r.key for r in remedies(first.findings, first.reference_step_ms)]
    hf = _truth_check("hf_trainer_llama_run3")
    for fix in ("swap-norms", "torch-compile", "logging-steps-1000"):
        assert _within(*hf[fix]), (fix, hf[fix])
    assert hf["swap-norms"][1] == pytest.approx(6.58, abs=0.01)
    assert hf["no-nan-inf-filter"] == (pytest.approx(2.42, abs=0.01), 0.0)  # a miss: no finding


def test_fourth_run_lightning_and_fp32_resnet_within_tolerance_where_measured():
    """Lightning fit and the fp32 ResNet-50 again (H200, 2026-12-02 03:10 UTC, three baselines
    each; benchmarks/results/truth_2026-12-02d.log).
    - Lightning (baselines 30.87, 34.62, 31.74: 11.6% apart): pin_memory saved 8.97 ms/step,
      predicted 7.82; membound.data.prefetch 9.90, predicted 9.23: both within, and
      membound's prefetcher does at least as well as the framework's switch. bf16-mixed saved
      3.46 against 0.61 predicted (a miss: its fp32-storage finding is small here) and the
      progress bar's refresh rate -1.76 against 0.70 (a miss by 0.46 beyond 2 ms, inside the
      baselines' spread).
    - ResNet-50 fp32: every measured fix within (amp 5.07 vs 4.81, channels_last 15.50 vs
      15.06, amp + channels_last 17.81 vs 19.87); compile did not fit the call's budget."""
    got = _truth_check("lightning_fit_run3")
    for fix in ("pin-memory", "membound-prefetch"):
        assert _within(*got[fix]), (fix, got[fix])
    assert got["membound-prefetch"][0] >= got["pin-memory"][0]
    assert got["pin-memory"][1] == pytest.approx(7.82, abs=0.01)
    assert not _within(*got["bf16-mixed"]) and not _within(*got["refresh-rate-100"])
    got = _truth_check("resnet50_fp32_run3")
    assert set(got) == {"amp", "channels-last", "tf32", "log-every-100", "amp+channels-last"}
    for fix, pair in got.items():
        assert _within(*pair), (fix, pair)


def test_compiled_gpt2_truth_small_fixes_and_no_large_finding():
    """The compiled GPT-2 (H200, 2026-12-02 02:31 UTC; baselines 110.11 and 109.13): every fix
    saves < 5% of the step, and no finding reaches 10% of it (issue 15's rule for such a
    script). CUDA graphs (mode='reduce-overhead') saved 0.80 ms/step. launch-bound predicted
    3.12 for them (a miss) while the GPU's turnaround between kernels it already had counted
    as launch gaps; those 3.3 ms/step are `queued` idle now, what is left of the launch idle
    (1.0 ms/step) is below the 1% of a step a finding needs, and no finding predicts 0
    (within). Logging every 100 steps saved 2.09, predicted 3.68 by the sync replay
    (within); swap_norms before compiling cost 46.4, with the custom
    op traced (now the plain ops are: 109.62 vs 109.46 in a later call)."""
    a = analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2_compiled")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    assert all(f.share_of_step < 0.10 for f in a.findings)
    got = _truth_check("gpt2_compiled")
    assert all(abs(m) < 0.05 * truth_baseline("gpt2_compiled") for m, _ in
               (got["reduce-overhead"], got["log-every-100"]))  # fmt: skip
    assert got["reduce-overhead"] == (pytest.approx(0.80, abs=0.01), 0.0)
    assert not any(f.code == "launch-bound" for f in a.findings)
    assert a.idle_breakdown["queued"] == pytest.approx(3.29, abs=0.01)
    assert got["swap-norms"] == (pytest.approx(-46.40, abs=0.01), 0.0)


def test_resnet50_fp32_compile_measured_on_a_fresh_run():
    """Run 3's call had no budget left for compile; run 4 (2026-12-02 05:55 UTC) measured it:
    22.06 ms/step saved (62.12 -> 40.06), predicted 23.23 (23.91 before queued gaps were
    told from launch gaps) by the compile remedy (the memory-
    bound ops, the unfused chains, fp32 storage and the launch gaps, each kernel once), the
    top remedy. 16.00 since the chains through BatchNorm are not counted
    (`rules.memory.STATS_NORMS`): out by 0.5 ms, the layout part this H200 capture could not
    time (inductor lays the convolutions out channels_last: 9.8 ms/step on the H100,
    `test_compiled_resnet50.py`) missing."""
    got = _truth_check("resnet50_fp32_run4")
    measured, predicted = got["compile"]
    assert measured == pytest.approx(22.06, abs=0.01)
    assert not _within(measured, predicted) and predicted == pytest.approx(16.00, abs=0.05)
    a = analyze(
        [timeline_in(FIXTURES / "h200_real_resnet50_fp32_run4")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    assert remedies(a.findings, a.reference_step_ms)[0].key == "compile"


def test_bf16_storage_predicts_what_bf16_weights_save():
    """examples/real/gpt2.py --bf16-weights (bf16 model, no autocast, fp32 master weights in
    AdamW), H200 2026-12-02. Eager GPT-2 saved 27.78 (run 5) and 28.86 ms/step (run 6), about
    as much as torch.compile (30.41 in run 5): the fp32-storage finding's own, non-overlapping
    share (6.8-7.6: half the fp32 bytes at the roof, left after memory-bound-op and
    unfused-chain) under-predicted it 4x. The remedy's figure is what bf16 storage saves applied
    alone: half the fp32 memory-bound ops' device time and all of autocast's casts (19.6 ms/step
    of copy_ between fp32 and bf16). Run 6's report gave 31.93 before the fix was timed.
    Compiled GPT-2 (run 3): 5.62 saved, 7.37 predicted (inductor fused the casts away)."""
    for name, measured, predicted in (
        ("gpt2_run5", 27.78, 31.96),
        ("gpt2_run6", 28.86, 31.93),
        ("gpt2_compiled_run3", 5.62, 7.37),
    ):
        got = _truth_check(name)
        m, p = got["bf16-weights"]
        assert m == pytest.approx(measured, abs=0.01), name
        assert p == pytest.approx(predicted, abs=0.3), name
        assert _within(m, p), name
    # the finding itself keeps its non-overlapping share (one kernel's time in one finding)
    a = analyze(
        [timeline_in(FIXTURES / "h200_real_gpt2_run5")],
        Ceilings.load(FIXTURES / "h200_ceilings.json"),
    )
    f = next(f for f in a.findings if f.code == "fp32-storage")
    assert f.time_lost_ms_per_step < 10 < f.evidence["saving_alone_ms_per_step"]
    # compile, measured 30.41 in the same call, stays within tolerance (30.15). It was on top
    # (35.35) while the GPU's turnaround between queued kernels counted as launch gaps; now
    # bf16 storage (31.96) ranks above it, the reverse of the measured order (27.78 against
    # 30.41): two fixes predicted and measured within 10% of each other, ranked by noise
    m, p = _truth_check("gpt2_run5")["compile"]
    assert m == pytest.approx(30.41, abs=0.01) and _within(m, p)
    assert p == pytest.approx(30.15, abs=0.01)
    assert [r.key for r in remedies(a.findings, a.reference_step_ms)][:2] == [
        "bf16_storage",
        "compile",
    ]


def test_cuda_graphs_pays_the_compiled_runtime_unless_compile_does():
    """torch.compile(mode='reduce-overhead'), the first way the cuda_graphs remedy names, runs
    the compiled runtime every step: the launch-bound idle alone over-predicted every
    reduce-overhead run timed (the DCGAN on two H100 hosts, the compiled GPT-2 on the H200).
    A set with compile pays it once, through compile's own figure."""
    lb = _f("launch-bound", 3.0)
    assert combined([lb], ["cuda_graphs"], 12.0) == pytest.approx(3.0 - GRAPH_RUNTIME_MS)
    assert combined([lb], ["compile", "cuda_graphs"], 12.0) == pytest.approx(3.0)
    ranked = {r.key: r.saving_ms_per_step for r in remedies([lb], step_ms=12.0)}
    assert ranked["cuda_graphs"] == pytest.approx(3.0 - GRAPH_RUNTIME_MS)
    assert ranked["compile"] == pytest.approx(3.0)
    # a launch-bound loop whose idle is less than the runtime: graphs are predicted to lose
    small = {r.key: r.saving_ms_per_step for r in remedies([_f("launch-bound", 0.5)], 12.0)}
    assert small["cuda_graphs"] == pytest.approx(0.5 - GRAPH_RUNTIME_MS)
