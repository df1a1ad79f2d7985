"""Truth by intervention, 2026-12-03 (fourth session): three H200 calls, every script of
examples/real measured by its plain step timer in the same call as its diagnose run
(`benchmarks/gpu/session_dec03{l,m,n}.sh`), after the timeline began telling `queued` gaps
(before work the GPU already had) from launch gaps. The fixtures are those calls' traces,
with their truth.json; predictions are what `bench_truth.predict` makes of today's report
(`benchmarks/truth_tally.py`), measured savings are the device's.

Expected numbers are deterministic given the files; what each fix measured is in truth.json
and benchmarks/results/truth.csv."""

from __future__ import annotations

import json

import pytest

from membound.device.ceilings import Ceilings
from support.paths import H200_CEILINGS
from support.truth import analysis as _analysis
from support.truth import rows as _rows
from support.truth import truth_tally


@pytest.fixture(scope="module")
def ceilings():
    return Ceilings.load(H200_CEILINGS)


def test_compiled_gpt2_cuda_graphs_predicted_small_and_measured_slower(ceilings):
    """Compiled GPT-2, call 1 (baselines 110.43 and 110.28): CUDA graphs made the step 0.70
    ms slower. 4.21 ms/step of its idle is `queued` (3000 kernels a step, ~1.3 us between
    them); launch-bound keeps 1.36, what the host's launches left: a miss by 0.06 ms beyond
    the 2 ms tolerance, where the same loop's launch-bound said 4.43 in the previous
    session's call (0.62 measured) and 3.12 on the 2026-12-02 fixture (0.80). Since the
    twenty-fourth session the cuda_graphs remedy pays the compiled runtime that
    mode='reduce-overhead' runs each step (`remedies.GRAPH_RUNTIME_MS`, 1.1 ms): 0.26
    predicted, within."""
    a = _analysis("gpt2_compiled_run5", ceilings)
    assert a.unprofiled_step_ms == pytest.approx(108.9636, abs=1e-3)
    assert a.idle_breakdown["queued"] == pytest.approx(4.211, abs=1e-3)
    launch = next(f for f in a.findings if f.code == "launch-bound")
    assert launch.time_lost_ms_per_step == pytest.approx(1.358, abs=1e-3)
    assert launch.evidence["queued_idle_ms_per_step"] == pytest.approx(4.211, abs=1e-3)
    assert all(f.share_of_step < 0.10 for f in a.findings)  # every fix saves < 5% here
    row = _rows("gpt2_compiled_run5", ceilings)["reduce-overhead"]
    assert row["measured_ms"] == pytest.approx(-0.70, abs=0.01)
    assert row["predicted_ms"] == pytest.approx(1.358 - 1.1, abs=0.01)
    assert row["within"]


def test_hf_llama_swap_norms_within_and_the_unprofiled_step_too_long(ceilings):
    """HF Trainer Llama, call 1 (baselines 45.94 and 44.84): membound.swap_norms swapped all
    17 RMSNorms and saved 8.08 ms/step, predicted 7.75 (within). membound's own unprofiled
    step was 57.14 ms, 26% above the plain timer: its budget of idle, and so launch-bound's
    10.76 on top, are inflated by that much, and torch.compile is over-predicted (24.76
    against 18.60 measured). Call 2 ran the script under membound's hooks with a capture that
    never starts (`benchmarks/probe_wait_overhead.py`): 39.96 ms against 41.26 and 40.83
    alone, so the hooks are not the cause. The NaN filter's syncs saved 5.22 with no
    finding (0.70, 2.42 and -0.76 in earlier calls)."""
    a = _analysis("hf_trainer_llama_run5", ceilings)
    assert a.unprofiled_step_ms == pytest.approx(57.1366, abs=1e-3)
    assert a.findings[0].code == "launch-bound"
    rows = _rows("hf_trainer_llama_run5", ceilings)
    assert rows["swap-norms"]["within"]
    assert rows["swap-norms"]["predicted_ms"] == pytest.approx(7.75, abs=0.01)
    # 24.76 before the launch gaps inside one library call were left to CUDA graphs (twelfth
    # session, `rules.launch_bound.inside_library_ms`); 24.58 then; 26.77 since compile is
    # read from its own replay (fourteenth session, `analysis.compile_whatif`), which takes
    # this inflated unprofiled step as it comes; 26.95 since the replay no longer takes
    # async device-to-device and pinned copies for waits (fifteenth session)
    assert rows["torch-compile"]["predicted_ms"] == pytest.approx(26.95, abs=0.01)
    assert not rows["torch-compile"]["within"] and not rows["no-nan-inf-filter"]["within"]
    # the best measured fix is compile, which the top finding's remedies include
    assert max(rows, key=lambda k: rows[k]["measured_ms"]) == "torch-compile"


def test_lightning_prefetch_within_and_as_good_as_pin_memory(ceilings):
    """Lightning fit, call 2 (baselines 28.18 and 31.74, 11.9% apart): pageable-copy on top;
    membound.data.prefetch saved 9.78 ms/step (predicted 8.15, within), pin_memory=True 9.71
    (predicted 6.81: a miss, as on run 2). Pinned, the step (20.25) came within 4% of the GPU
    busy time the trace shows (19.44, which counts the pageable copies' own 6.5 ms)."""
    a = _analysis("lightning_fit_run5", ceilings)
    assert a.findings[0].code == "pageable-copy"
    rows = _rows("lightning_fit_run5", ceilings)
    assert rows["membound-prefetch"]["within"] and not rows["pin-memory"]["within"]
    assert rows["membound-prefetch"]["measured_ms"] >= rows["pin-memory"]["measured_ms"]
    assert rows["membound-prefetch"]["predicted_ms"] == pytest.approx(8.15, abs=0.01)


def test_eager_gpt2_compile_within_and_no_sync_finding(ceilings):
    """Eager GPT-2, call 2 (baselines 136.46 and 135.32): compile saved 28.82 ms/step,
    predicted 30.15 (within); logging every 100 steps saved 0.83, and no host-sync finding
    predicts it (0, within). 4.44 ms/step of idle is queued; no launch-bound finding."""
    a = _analysis("gpt2_run9", ceilings)
    assert a.idle_breakdown["queued"] == pytest.approx(4.442, abs=1e-3)
    assert not any(f.code in ("launch-bound", "host-sync") for f in a.findings)
    rows = _rows("gpt2_run9", ceilings)
    assert rows["compile"]["within"] and rows["log-every-100"]["within"]
    # 30.15 as the findings' sum; 29.27 from compile's replay (`analysis.compile_whatif`)
    assert rows["compile"]["predicted_ms"] == pytest.approx(29.27, abs=0.01)


def test_side_stream_prefetcher_syncs_are_not_replayed(ceilings):
    """ResNet-50 with a side-stream prefetcher from pageable memory, call 3: the sync replay
    said 17.27 ms/step for its syncs (14% of the step, the third finding), where the idle
    after them is 0.21: without the syncs the replay let the next step's side-stream copies
    run beside compute, which the prefetcher's event forbids and the replay does not model.
    With two busy streams the replay is not used now. Pinning saved 15.98 and membound's
    prefetch 14.69 (both predicted 15.20), channels_last 51.82 (52.62): all within."""
    a = _analysis("resnet50_prefetch_run2", ceilings)
    assert not any(f.code == "host-sync" for f in a.findings)
    rows = _rows("resnet50_prefetch_run2", ceilings)
    assert all(r["within"] for r in rows.values()), rows
    assert a.findings[0].code == "memory-bound-op"  # BatchNorm: channels_last, the best fix


def test_fp32_resnet_compile_missed_on_a_slow_compile_run(ceilings):
    """fp32 ResNet-50, call 3 (baselines 62.87 and 63.09): autocast 5.52 (4.81) and
    channels_last 17.39 (14.73) within; compile saved 12.94 against 23.26, where the same
    script's compile saved 22.06 on 2026-12-02 (run 4, predicted 23.23): its compiled step
    took 50.04 ms here against 40.06 there. Since the twenty-fourth session the chains
    through BatchNorm are not counted (`rules.memory.STATS_NORMS`): 13.20 predicted, within;
    the top remedy is channels_last now (17.39 saved, compile 12.94)."""
    rows = _rows("resnet50_fp32_run5", ceilings)
    assert rows["amp"]["within"] and rows["channels-last"]["within"]
    assert rows["compile"]["within"]
    # 23.26 as the findings' sum; 18.61 from compile's replay (`analysis.compile_whatif`:
    # the host is near the GPU here, so the BatchNorm time fused away is not all saved);
    # 13.20 without the chains through BatchNorm
    assert rows["compile"]["predicted_ms"] == pytest.approx(13.20, abs=0.01)
    assert rows["compile"]["top_remedy"] == "channels_last"


def test_tally_over_every_recorded_truth_fixture(ceilings):
    """Every recorded intervention, re-predicted by today's code: 72 of 100 within issue 15's
    tolerance (the previous session's count, by the tests' own accounting, was 50 of 65; on
    2026-12-03, 60 of 79). 2026-12-04 added 16 out-of-sample interventions (three new
    scripts, tests/analysis/test_truth_2026_12_04.py): 5 within by the code of that morning,
    9 after its GPU what-if and the workers remedy; no earlier row changed its verdict; then
    BERT's third run, 1 of 2, and the tabular MLP's second, 1 of 3; then the per-row
    collate's remedy (whole-batch indexing), 1 of its 2 rows. That evening's 12 rows
    (DeepLabV3 out of sample, twice; Lightning and the ViT pinned again, with the release
    probe: tests/analysis/test_truth_2026_12_04b.py) are 5 within: 77 of 112. 2026-12-05's
    four calls (the DCGAN and the T5 out of sample, DeepLabV3's third, the prefetch-loader
    ResNet-50's compile), predicted by the code they ran: 7 of 15 within: 84 of 127. That
    day's second session timed the ViT's pinning split (pin_memory, the prefetcher staging
    itself, the loader pinning and the prefetcher copying): 2 of 3 within: 86 of 130. The
    seventh session's autocast host cost (`gpu_whatif.autocast_cap`) brought BERT's third
    bf16 row within (25.61 predicted, 21.15 measured; 28.01 before): 87 of 130. The ninth
    session's (2026-12-06) T5 torch-compile row is compile and TF32 together (HF's flag turns
    TF32 on), each part as applied alone (32.29 predicted, 32.06 measured): 88 of 130.
    The fourteenth session reads compile from its own replay (`analysis.compile_whatif`):
    the DCGAN's and the tabular MLP's compile come within (-0.08 and -0.35 predicted, -1.77
    and -2.11 measured), the HF Llama's fifth run leaves (26.77 against 18.60): 90 of 130.
    The twenty-fourth session's cuda_graphs pays the compiled runtime (the compiled GPT-2's
    reduce-overhead, 0.26 predicted, -0.70 measured): 91 of 130.
    A change to the analysis that loses one fails here."""
    rows = [r for f in truth_tally.fixtures() for r in truth_tally.rows_of(f, ceilings)]
    assert len(rows) == 130
    assert sum(r["within"] for r in rows) >= 91
    # the nineteenth session (2026-12-07): where the call's two baselines ran further apart
    # than the saving's tolerance, the measurement cannot judge the prediction; 65 of the 81
    # rows whose baselines agreed are within, 25 of the 49 whose did not (66 of 81 with the
    # twenty-fourth session's reduce-overhead row)
    calm = [r for r in rows if truth_tally.steady_baselines(r)]
    assert (len(calm), sum(r["within"] for r in calm)) == (81, 66)
    # issue 15's first target, fixture by fixture: the report's top remedy against the fix
    # that measured the largest saving in that call. 18 of 38 agree or tie; 16 could not
    # be judged (the call did not time the top remedy's fix); the 4 that disagree are two
    # where membound.data.prefetch (top) trailed pin_memory, one compile over-predicted on
    # a host-paced ViT, and ResNet-50's fifth run, whose compile measured 12.9 against
    # 20.8 and 22.1 in the calls before it.
    # per script, each fix's saving its mean over the calls that timed it: 9 of 10 agree or
    # tie; ResNet-50 with the prefetch loader puts compile first, which no call has timed
    # 2026-12-05: the prefetch-loader ResNet-50's compile, its top remedy, measured at last
    # (66.1 ms/step, channels_last 49.9): that script agrees; the T5 agrees (compile); the
    # DCGAN does not (compile, predicted 4.2, slowed it by 1.8; pin_memory saved 1.1): 11 of
    # 12 scripts, 21 of 42 calls; the ViT's third call (prefetch on top; the loader pinning
    # with the prefetcher's side-stream copy, what membound.data.prefetch now does with a
    # worker DataLoader, saved most): 22 of 43
    # fourteenth session, compile read from its replay: the DCGAN's top remedy is CUDA graphs
    # (no H200 call timed them: unmeasured), compile predicted to lose 0.08 (it lost 1.77);
    # twenty-fourth session, CUDA graphs paying the compiled runtime: the DCGAN's top remedy
    # is prefetch (1.04 saved), tied with its best fix, pin_memory (1.10): 12 of 12, 23 of 43
    per = {t["script"]: t["verdict"] for t in truth_tally.script_verdicts(rows)}
    assert len(per) == 12 and sum(v in ("yes", "tie") for v in per.values()) == 12
    assert per["resnet50_prefetch"] == "yes" and per["dcgan"] == "tie"
    tops = {t["fixture"]: t["verdict"] for t in truth_tally.top_verdicts(rows)}
    assert sum(v in ("yes", "tie") for v in tops.values()) >= 24
    assert tops["h200_real_dcgan_oos1"] == "tie"
    # twenty-fourth session, the chains through BatchNorm not counted: the fp32 ResNet-50's
    # top remedy is channels_last; run 5 agrees (its compile measured 12.94), the first call
    # not (amp with channels_last saved 25.96, channels_last alone 17.36): 24 of 43
    assert tops["h200_real_vit_timm_oos3"] == "yes"
    # the DCGAN's call left this list in the fourteenth session (top remedy unmeasured)
    assert sorted(f for f, v in tops.items() if v == "NO") == [
        "h200_real_lightning_fit_run6",
        "h200_real_resnet50_fp32",
        "h200_real_vit_timm_oos1",
        "h200_real_vit_timm_oos2",
    ]
    # where the diagnose run ran in another machine state than its call's baselines (its own
    # unprofiled step more than 5% outside their range: 7 of the 38 calls to 2026-12-04, the
    # DCGAN's of 2026-12-05), predictions missed more often: 16 of 30 rows within there, 68
    # of 97 elsewhere (12 of 25 and 65 of 87 before 2026-12-05); the ViT's third call, its
    # diagnose 1.7% off its baselines' mean: 70 of 100; the T5's compile with its TF32: 72
    off = {r["fixture"]: r["diagnose_off"] for r in rows}
    assert sorted(f for f, v in off.items() if abs(v) > truth_tally.OFF_SHARE) == [
        "h200_real_dcgan_oos1",
        "h200_real_hf_trainer_llama_run5",
        "h200_real_lightning_fit_run2",
        "h200_real_lightning_fit_run6",
        "h200_real_segmentation_tv_oos2",
        "h200_real_tabular_mlp_oos1",
        "h200_real_vit_timm_oos1",
        "h200_real_vit_timm_oos2",
    ]
    assert off["h200_real_segmentation_tv_oos2"] == pytest.approx(77.74 / 69.39 - 1, abs=2e-3)
    steady = [r for r in rows if abs(r["diagnose_off"]) <= truth_tally.OFF_SHARE]
    # 73 since the twenty-fourth session's CUDA graphs paying the compiled runtime
    assert (len(steady), sum(r["within"] for r in steady)) == (100, 73)
    # "no finding >= 10% of a step on a script whose measured interventions all save < 5%":
    # every script has a fix that saved 5% or more of its step, so none is judged
    assert truth_tally.quiet_scripts(rows) == []


def test_quiet_scripts_list_the_big_findings_where_no_fix_saved_much():
    def row(fixture, script, fix, measured, base, big=""):
        return {"fixture": fixture, "script": script, "fix": fix, "measured_ms": measured,
                "baseline_ms": base, "big_findings": big, "top_remedy": "",
                "fix_remedies": fix}  # fmt: skip

    rows = [
        row("q1", "quiet", "log", 0.5, 40.0, "launch-bound 12%"),
        row("q2", "quiet", "log", 2.5, 40.0),  # mean 1.5 of 40: quiet
        row("q2", "quiet", "pin", -1.0, 40.0),
        row("c1", "clean", "log", 1.0, 100.0),
        row("l1", "loud", "compile", 30.0, 100.0, "memory-bound-op 25%"),
    ]
    got = truth_tally.quiet_scripts(rows)
    assert [q["script"] for q in got] == ["quiet", "clean"]
    assert got[0]["best_ms"] == 1.5 and got[0]["big"] == ["q1: launch-bound 12%"]
    assert got[1]["big"] == []
    assert got[0]["fixes"] == ["log", "pin"] and got[0]["top_untimed"] == []
    # a script timed on one fix that is not its top remedy is unmeasured, and said so
    rows[0]["top_remedy"] = "compile"
    assert truth_tally.quiet_scripts(rows)[0]["top_untimed"] == ["compile"]


def test_diagnose_off_is_the_distance_outside_the_baselines_range():
    truth = {"baselines": [{"step_ms": 10.0}, {"step_ms": 12.0}]}
    off = truth_tally.diagnose_off
    assert off({"unprofiled_median_ms": 11.0}, truth) == 0.0
    assert off({"unprofiled_median_ms": 13.2}, truth) == pytest.approx(0.1)
    assert off({"unprofiled_median_ms": 9.0}, truth) == pytest.approx(-0.1)
    assert off({"unprofiled_median_ms": None}, truth) is None
    assert off({"unprofiled_median_ms": 11.0}, {"baselines": []}) is None


def test_top_verdicts_judge_the_top_remedy_against_the_best_measured_fix():
    def row(fixture, fix, measured, remedies, top):
        return {
            "fixture": fixture, "fix": fix, "measured_ms": measured,
            "fix_remedies": remedies, "top_remedy": top,
        }  # fmt: skip

    rows = [
        row("a", "pin", 10.0, "pin_memory", "pin_memory"),
        row("a", "compile", 4.0, "compile", "pin_memory"),
        row("b", "pin", 10.0, "pin_memory", "prefetch"),
        row("b", "prefetch", 9.0, "prefetch", "prefetch"),  # within 25% of 10: a tie
        row("c", "pin", 10.0, "pin_memory", "prefetch"),
        row("c", "prefetch", 5.0, "prefetch", "prefetch"),
        row("d", "pin", 10.0, "pin_memory", "compile"),
        row("e", "pin", 10.0, "pin_memory", ""),
        row("f", "amp+cl", 20.0, "channels_last+bf16", "bf16"),
    ]
    got = {t["fixture"]: t["verdict"] for t in truth_tally.top_verdicts(rows)}
    # pooled per script: the fix's mean over calls; the top remedy most fixtures put first
    calls = [
        {**row("x1", "pin", 10.0, "pin_memory", "prefetch"), "script": "s"},
        {**row("x1", "prefetch", 6.0, "prefetch", "prefetch"), "script": "s"},
        {**row("x2", "pin", 8.0, "pin_memory", "prefetch"), "script": "s"},
        {**row("x2", "prefetch", 12.0, "prefetch", "prefetch"), "script": "s"},
        {**row("x3", "pin", 9.0, "pin_memory", "pin_memory"), "script": "s"},
    ]
    (pooled,) = truth_tally.script_verdicts(calls)
    assert pooled["top_remedy"] == "prefetch" and pooled["top_votes"] == "2/3"
    assert pooled["best_fix"] == "pin" and pooled["best_ms"] == 9.0  # mean of 10, 8, 9
    assert pooled["top_fix_ms"] == 9.0 and pooled["verdict"] == "tie"  # 6 and 12: also 9
    assert got == {"a": "yes", "b": "tie", "c": "NO", "d": "unmeasured", "e": "none", "f": "yes"}


def test_process_rows_set_the_diagnose_run_beside_its_baselines(tmp_path, capsys):
    """A call whose diagnose process and baselines recorded what they did per step: one row
    each, the diagnose's from its meta's unprofiled phase (its step the median of those
    steps). Today's fixtures predate the figures: no rows, and the table says so."""
    usage = {"cpu_ms": 9.0, "minor_faults": 40.0, "major_faults": 0.0,
             "voluntary_switches": 1.0, "involuntary_switches": 6.0}  # fmt: skip
    folder = tmp_path / "h200_real_x"
    folder.mkdir()
    (folder / "capture.json").write_text(json.dumps({
        "step_times_ms": {"unprofiled": [12.0, 10.0, 11.0]},
        "process_per_step": {"unprofiled": {**usage, "cpu_ms": 20.0}},
        "thread_per_step": {"unprofiled": usage},
    }))  # fmt: skip
    base = {"process": {**usage, "cpu_ms": 18.0, "minor_faults": 2.0},
            "thread": {**usage, "involuntary_switches": 0.5, "cpu_ms": 8.0}}  # fmt: skip
    (folder / "truth.json").write_text(json.dumps({
        "script": "x", "baselines": [{"step_ms": 9.0, **base}, {"step_ms": 9.4, **base}],
    }))  # fmt: skip
    rows = truth_tally.process_rows(folder)
    assert [r["run"] for r in rows] == ["diagnose", "baseline 1", "baseline 2"]
    assert rows[0]["step_ms"] == 11.0 and rows[0]["thread.involuntary_switches"] == 6.0
    assert rows[0]["process.cpu_ms"] == 20.0 and rows[1]["process.minor_faults"] == 2.0
    assert rows[2]["thread.involuntary_switches"] == 0.5 and rows[2]["step_ms"] == 9.4
    truth_tally._print_process([folder])
    out = capsys.readouterr().out
    assert "thread.involuntary_switches" in out and out.count("h200_real_x") == 3

    old = truth_tally.fixtures()[0]
    assert truth_tally.process_rows(old) == []
    truth_tally._print_process([old])
    assert "no fixture records" in capsys.readouterr().out
