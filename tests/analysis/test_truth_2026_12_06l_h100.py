"""The eighteenth session's H100 call (2026-12-06, `SKIP_ROOF=1 bash
benchmarks/gpu/session_dec09c.sh`; the datasheet ceilings): the wav2vec2 CTC fine-tune
(`examples/real/wav2vec2_ctc.py --quick`, HF Trainer, fp16, gradient checkpointing, a
collator that pads on the loop's thread), measured for the first time, out of sample.

What it showed:
- A host-paced loop: 276 ms a step unprofiled in the diagnose run, the GPU busy 30 ms of it
  (11%); the training thread used 157 ms of CPU a step, 276 with the autograd threads.
- The two baselines differ by 33% (359 and 258 ms), so every saving below is against their
  mean (308.7) and uncertain by about 50 ms: the unprofiled step of the diagnose run, between
  them in time, was 276.
- DataLoader workers (the top remedy, 42.17 predicted) saved 132.25; dropping gradient
  checkpointing 96.63, Trainer's NaN/Inf loss filter (a sync a step) 61.23, membound's
  swap_norms 33.57 (26 of 26 norms swapped); bf16 lost 49.74. None of the last four had a
  prediction.
- The profiler added nothing measurable (-0.8%).

After the call (fitted to it, so not out of sample): host-bound had set 44.4 ms/step of the
host's pauses aside as the step's input side, because its end was the first kernel after the
step's last host-to-device copy, and here the model copies in mid-step (SpecAugment's mask
70 ms in, the CTC loss's lengths 134 ms in). The batch's way in is now the step's first
copies (`rules.host_bound._input_side`): 1.28 ms/step is the input side, and host-bound
holds the rest (131.77 ms/step, where no finding held those 44 ms before)."""

from __future__ import annotations

import pytest

from support import truth

NAME = "h100_real_wav2vec2_ctc_truth1"

#: fix -> (measured, predicted or None, within)
CALL = {
    "num-workers-4": (132.25, 42.17, False),
    "no-gradient-checkpointing": (96.63, None, False),
    "no-nan-inf-filter": (61.23, None, False),
    "swap-norms": (33.57, None, False),
    "bf16": (-49.74, None, False),
}


def test_the_fixes_as_measured_and_predicted():
    rows, _, _ = truth.own(NAME)
    assert set(rows) == set(CALL)
    for fix, (measured, predicted, within) in CALL.items():
        truth.check_row(rows[fix], measured, predicted, within)


def test_the_step_and_the_profilers_cost():
    _, report, t = truth.own(NAME)
    assert report["unprofiled_median_ms"] == pytest.approx(276.17, abs=0.01)
    assert abs(report["profiler_overhead_fraction"]) < 0.01
    assert report["gpu_busy_ms"] == pytest.approx(30.27, abs=0.01)
    assert t["baselines_differ_pct"] == pytest.approx(32.6, abs=0.1)


def test_the_models_own_copies_are_not_the_batchs_way_in():
    report = truth.report(NAME)
    codes = [f["code"] for f in report["findings"]]
    assert codes[:3] == ["host-bound", "input-starved", "launch-bound"]
    hb = report["findings"][0]
    assert hb["evidence"]["left_to_input_side_ms_per_step"] == pytest.approx(1.28, abs=0.01)
    assert hb["time_lost_ms_per_step"] == pytest.approx(131.77, abs=0.01)
    # the loop's pauses are on the host, and the shapes vary: no whole-step graph
    assert hb["evidence"]["shapes_vary"] is True
    assert "graph_step" not in {r["remedy"] for r in report["remedies"]}
    # the top remedy is the workers, the best measured fix
    assert report["remedies"][0]["remedy"] == "workers"
    assert report["findings"][1]["evidence"]["multiprocess_workers"] is False


def test_idle_findings_fit_in_the_steps_idle():
    _, report, _ = truth.own(NAME)
    idle = report["unprofiled_median_ms"] - report["gpu_busy_ms"]
    idle_codes = {"host-bound", "input-starved", "launch-bound", "host-sync"}
    lost = sum(f["time_lost_ms_per_step"] for f in report["findings"] if f["code"] in idle_codes)
    assert lost <= idle
