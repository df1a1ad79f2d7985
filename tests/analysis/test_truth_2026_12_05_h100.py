"""Two truth calls on an H100 (2026-12-05, sixth session; no H200 was lent), each a
`benchmarks/bench_truth.py` run of one script: its plain-timer baselines, membound's diagnose
(the launches-only timeline pass, the profiled phase's thread CPU) and its fixes timed in the
same call. Kept apart from the H200 tally (`benchmarks/truth_tally.py`, whose counts the
2026-12-03 tests pin), with the datasheet ceilings the call used (it measured none). The
savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import json

import pytest

from membound.device.ceilings import Ceilings
from support.paths import FIXTURES
from support.truth import truth_tally

CEILINGS = FIXTURES / "h100_datasheet_ceilings.json"


def _rows(name: str) -> tuple[dict, dict, dict]:
    folder = FIXTURES / f"h100_real_{name}_truth1"
    c = Ceilings.load(CEILINGS)
    rows = {r["fix"]: r for r in truth_tally.rows_of(folder, c)}
    truth = json.loads((folder / "truth.json").read_text())
    return rows, truth_tally.report_of(folder, c), truth


def test_dcgan_cuda_graphs_saved_and_compile_lost_as_on_the_h200():
    """Compile lost 1.76 and 0.73 ms/step in two rounds against baselines of 12.0-15.0 ms
    (-2.24 and -1.30 on the H200 before, their mean -1.77); CUDA graphs (reduce-overhead) saved
    1.35 and 2.04, within tolerance of the 3.12 that launch-bound, the top finding, predicts.
    The remedies put compile first (3.79: launch-bound whole, plus the GPU-work findings)
    until the fourteenth session, issue 15's one script whose top remedy the truth
    contradicted. compile is now read from its own replay (`analysis.compile_whatif`): fusion
    takes few launches off this loop (BatchNorm + LeakyReLU between cuDNN's convolutions) and
    the compiled runtime costs a step, so compile is predicted to lose 0.08 (within
    tolerance of both rounds) and drops to the bottom; membound's prefetch (3.18, untimed
    here; 1.04 measured on the H200) leads. CUDA graphs pay the compiled runtime that
    mode='reduce-overhead' runs each step since the twenty-fourth session (2.02 predicted:
    within), below pin_memory."""
    rows, report, truth = _rows("dcgan")
    assert rows["compile"]["measured_ms"] < 0 < rows["reduce-overhead"]["measured_ms"]
    rounds = {k: [r["saving_ms"] for r in v["rounds"]] for k, v in truth["fixes"].items()}
    assert rounds["compile"] == pytest.approx([-1.7645, -0.7278], abs=1e-4)
    assert rounds["reduce-overhead"] == pytest.approx([1.3539, 2.0397], abs=1e-4)
    assert rows["reduce-overhead"]["predicted_by"] == "cuda_graphs"
    assert rows["reduce-overhead"]["within"] is True
    assert rows["compile"]["top_finding"] == "launch-bound"
    assert rows["compile"]["top_remedy"] == "prefetch"
    assert [r["remedy"] for r in report["remedies"][:2]] == ["prefetch", "pin_memory"]
    assert rows["reduce-overhead"]["predicted_ms"] == pytest.approx(3.12 - 1.1, abs=0.01)
    # 3.79 until the launch gaps inside cuDNN's convolutions (0.40 of launch-bound's 3.12)
    # were left to CUDA graphs, which replay them (`rules.launch_bound.inside_library_ms`);
    # 3.39 then, the findings' sum; -0.08 from compile's replay; -0.18 once the chains
    # through BatchNorm were not counted (twenty-fourth session)
    assert rows["compile"]["predicted_ms"] == pytest.approx(-0.18, abs=0.01)
    assert rows["compile"]["within"] is True
    # the profiler's host work: the training thread's CPU a step by phase
    assert report["thread_cpu_ms"] == pytest.approx(
        {"unprofiled": 9.4001, "profiled": 9.7742, "after": 11.4566}, abs=1e-4
    )
    assert report["profiler_overhead_fraction"] == pytest.approx(0.1727, abs=1e-3)


def test_lightning_fit_prefetch_on_top_and_at_least_the_frameworks_pinning():
    """The Lightning fit without pin_memory: pageable-copy on top (13.46 ms/step), the
    remedies' first prefetch (16.29). Measured: pin_memory=True saved 13.75, membound's
    prefetch 15.02, 16.18 and 14.22 (each run its own process): every one within tolerance,
    and membound's fix at least the framework's switch. The capture added 8.1% to the step
    (issue 15's target: 10%); bf16-mixed saved 5.10 where 0.50 was predicted (it measured
    -1.04, -0.11 and 3.46 on the H200: a fix of the size of this loop's spread)."""
    rows, report, _ = _rows("lightning_fit")
    assert report["findings"][0]["code"] == "pageable-copy"
    assert report["remedies"][0]["remedy"] == "prefetch"
    prefetch = [r for k, r in rows.items() if k.startswith("membound-prefetch")]
    assert len(prefetch) == 3 and all(r["within"] for r in prefetch)
    assert rows["pin-memory"]["within"] is True
    assert min(r["measured_ms"] for r in prefetch) >= rows["pin-memory"]["measured_ms"]
    assert report["profiler_overhead_fraction"] == pytest.approx(0.0809, abs=1e-3)
    assert report["profiler_overhead_fraction"] <= 0.10
    assert rows["bf16-mixed"]["within"] is False
    assert report["thread_cpu_ms"]["profiled"] - report["thread_cpu_ms"]["unprofiled"] == (
        pytest.approx(0.82, abs=0.01)
    )


def test_t5_autograd_threads_floor_and_autocast_host_cost():
    """The HF Seq2SeqTrainer T5 on an H100 (2026-12-05, seventh session, call 3,
    `benchmarks/gpu/session_dec05q.sh`), the first trace with the autograd threads' CPU.

    - The training thread used 52.29 ms of CPU a step unprofiled; with PyTorch's autograd
      thread (backward's host work), 83.76 in an 85.78 ms step (the plain timer: 84.40 and
      82.78). The CPU floor (83.76 less the replay's 27.48 ms waiting in syncs: 56.28) sits
      2.1 ms below the replay's own (58.39), which stays: the two agree. (27.78, 55.98 and
      58.12 until the fifteenth session, when the replay stopped taking the pinned batches'
      async copies for waits where a call had returned after its copy.)
    - Measured: TF32 saved 20.15 (predicted 24.63: within); bf16 0.73. bf16 was predicted
      26.04, above TF32, before its host work was priced; with 0.4 plain launches (11.971 us
      here) per kernel of 1832 a step (8.77 ms) it is 18.61: still far above what it saved
      (this host's bf16 cost 19.4 ms a step more than TF32's), but below TF32, so the top
      remedy is the fix that saved most of those timed."""
    folder = FIXTURES / "h100_real_t5_seq2seq_truth3"
    c = Ceilings.load(folder / "ceilings.json")
    rows = {r["fix"]: r for r in truth_tally.rows_of(folder, c)}
    report = truth_tally.report_of(folder, c)
    meta = json.loads((folder / "capture.json").read_text())
    usage = meta["thread_per_step"]["unprofiled"]
    assert usage["cpu_ms_median"] == pytest.approx(52.293, abs=1e-3)
    assert usage["launchers_cpu_ms_median"] == pytest.approx(83.7555, abs=1e-3)
    # the report's JSON carries it by phase (steps.launchers_cpu_ms)
    assert report["launchers_cpu_ms"] == pytest.approx(
        {"unprofiled": 83.7555, "profiled": 114.0207, "after": 88.2443}, abs=1e-4
    )
    curve = report["gpu_whatif"]
    assert curve["host_cpu_floor_ms"] == pytest.approx(56.28, abs=0.01)
    assert curve["step_ms"] - curve["saving_ms"][-1] == pytest.approx(58.39, abs=0.01)
    assert curve["autocast_host_ms"] == pytest.approx(0.4 * 1832 * 11.971e-3, abs=1e-3)
    assert rows["tf32"]["measured_ms"] == pytest.approx(20.149, abs=1e-3)
    assert rows["tf32"]["within"] and rows["tf32"]["predicted_ms"] == pytest.approx(24.63, abs=0.01)
    assert rows["bf16"]["predicted_ms"] == pytest.approx(18.61, abs=0.01)
    assert rows["bf16"]["measured_ms"] == pytest.approx(0.727, abs=1e-3)
    assert not rows["bf16"]["within"]
    assert rows["tf32"]["top_remedy"] == "tf32"
    assert [r["remedy"] for r in report["remedies"][:3]] == ["tf32", "compile", "bf16"]
