"""The twelfth session's out-of-sample call on an H100 (2026-12-06, `bash
benchmarks/gpu/session_dec06e.sh`; the datasheet ceilings membound looks up where none were
measured): examples/real/mnist_cnn.py, PyTorch's examples/mnist (a small CNN, one worker
turning PIL images into tensors item by item, pinned, Adadelta, the loss read every 10
batches), written after `host-bound` and `graph_step` were built from the LSTM and measured
before any rule was changed for it (`tests/fixtures/h100_real_mnist_cnn_oos1`).

What it showed, out of sample (the device's report, bench_truth's table):
- the top finding was right: input-starved (7.67 ms/step), and 4 workers saved the most
  (6.33 of a 9.18 ms step);
- the top remedy was not: input-starved with workers stood for membound's prefetcher alone
  (predicted 7.67), which saved 2.40; no remedy named more workers;
- the whole-step graph (predicted 2.31) saved 0.42 and compile (1.48) lost 0.67: with the
  loader setting the pace, taking the host's work out of the step saves little;
- the diagnose run's own unprofiled steps (13.44 ms, 41 steps before the capture) were 46%
  longer than the plain timer's (8.24 and 10.12 in the two baselines, 20% apart), and the
  steps after the capture 9.13: issue 15's 5% target missed. A probe call after it
  (`benchmarks/gpu/session_dec06f.sh`, `benchmarks/results/mnist_step_drift_2026-12-06_h100.txt`)
  found the loop's own pace wandering that much: plain runs of 8.36, 10.11 and 12.06 ms, and
  inside one diagnose run medians of ten steps from 9.7 to 15.1; diagnose's unprofiled steps
  there were 9.51 and 11.35, inside the plain runs' range.

Changed after it (in sample from here on): behind such a loader a fix of the step's own work
saves only what it removes beyond the wait (`analysis.pacing`); and a worker-fed loader whose training thread waits
far longer than its batch's bytes take to hand over (`rules.input_starved.WORKER_BOUND_MB_S`:
26 MB/s here, 3,700-34,000 on every loader recorded before) is worker-bound: its remedies
are more workers, then the prefetcher, credited only with the step's own host work it can
overlap the wait with (3.22 ms/step: the training and autograd threads' CPU).

The savings are the device's; the predictions are today's code's."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from support import truth
from support.paths import FIXTURES

_load = truth.own


def test_mnist_measurements_out_of_sample():
    rows, report, t = _load("h100_real_mnist_cnn_oos1")
    assert t["baseline_ms"] == pytest.approx(9.181, abs=1e-3)
    assert t["baselines_differ_pct"] == pytest.approx(20.4, abs=0.05)
    measured = {k: round(r["measured_ms"], 2) for k, r in rows.items()}
    assert measured == {
        "num-workers-4": 6.33, "membound-prefetch": 2.4, "cuda-graphs": 0.42,
        "log-interval-100": 1.28, "compile": -0.67,
    }  # fmt: skip
    # membound's unprofiled step against the plain timer: the 5% target missed here
    assert report["unprofiled_median_ms"] == pytest.approx(13.444, abs=1e-3)
    assert report["unprofiled_median_ms"] > 1.4 * t["baseline_ms"]


def test_mnist_worker_bound_loader_names_more_workers_first():
    rows, report, _ = _load("h100_real_mnist_cnn_oos1")
    top = report["findings"][0]
    assert top["code"] == "input-starved"
    ev = top["evidence"]
    assert ev["worker_bound"] is True and ev["multiprocess_workers"] is True
    assert ev["batch_mb_per_step"] == pytest.approx(0.2012, abs=1e-4)
    assert [r["remedy"] for r in report["remedies"][:2]] == ["workers", "prefetch"]
    workers, prefetch = rows["num-workers-4"], rows["membound-prefetch"]
    assert workers["predicted_by"] == "workers" and workers["within"]
    assert workers["predicted_ms"] == pytest.approx(7.669, abs=1e-3)
    # the prefetcher hides the wait behind the step's own host work only
    assert prefetch["predicted_ms"] == pytest.approx(3.216, abs=1e-3) and prefetch["within"]
    # the loader sets the pace: the step's own fixes predict nothing (`analysis.pacing`)
    for fix in ("compile", "cuda-graphs", "log-interval-100"):
        assert rows[fix]["predicted_ms"] in (None, 0.0) and rows[fix]["within"], fix


def test_behind_a_worker_bound_loader_the_steps_own_findings_save_nothing():
    """Out of sample the whole-step graph was predicted 2.31 (saved 0.42), compile 1.48
    (lost 0.67): with the loader's wait (7.67 ms/step) they only lengthen it. The findings
    that save nothing alone are left out and named in a note."""
    folder = FIXTURES / "h100_real_mnist_cnn_oos1"
    a = analyze([timeline_in(folder)], Ceilings.load(folder / "ceilings.json"))
    assert [f.code for f in a.findings] == ["input-starved"]
    note = next(n for n in a.notes if n.startswith("the loader's workers set the pace"))
    assert "launch-bound 1.66, host-bound 0.65, host-sync 0.25" in note
    assert [r.key for r in a.remedies] == ["workers", "prefetch"]


def test_loaders_recorded_before_are_not_worker_bound():
    """The loaders with workers recorded before (pageable batches of 6-39 MB) keep the
    prefetcher as their remedy."""
    for name in ("h100_real_lightning_fit_truth1", "h100_real_dcgan_truth1"):
        _, report, _ = _load(name)
        f = next(f for f in report["findings"] if f["code"] == "input-starved")
        assert f["evidence"]["worker_bound"] is False
        remedies = {r["remedy"] for r in report["remedies"]}
        assert "prefetch" in remedies and "workers" not in remedies
