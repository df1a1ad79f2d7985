"""truth_tally's table of membound's own fix against the framework's switch (issue 15:
membound.data.prefetch must do at least as well as the loader's pin_memory), from the rows
bench_truth writes to benchmarks/results/truth.csv."""

from __future__ import annotations

import csv

from support.paths import benchmark

truth_tally = benchmark("truth_tally")


def _row(run, script, variant, saving, gpu="NVIDIA H200", status="ok", kind="fix"):
    return {"run": run, "script": script, "kind": kind, "variant": variant,
            "saving_ms": "" if saving is None else str(saving), "gpu": gpu, "status": status}  # fmt: skip


def test_rounds_are_medians_and_the_verdicts_follow_the_tolerance():
    rows = [
        # call a: the prefetcher's rounds 8, 11, 12 (median 11) against pin_memory 10: yes
        _row("a", "lightning_fit", "membound-prefetch", 8.0),
        _row("a", "lightning_fit", "membound-prefetch.r2", 11.0),
        _row("a", "lightning_fit", "membound-prefetch.r3", 12.0),
        _row("a", "lightning_fit", "pin-memory", 10.0),
        # call b: 9 against 11.5, short by 2.5 <= max(25% of 11.5, 2) = 2.875: tie
        _row("b", "segmentation_tv", "membound-prefetch", 9.0),
        _row("b", "segmentation_tv", "pin-memory", 11.5),
        # call c: 7.6 against 20: NO; a non-core variant that saved more is not the own fix
        _row("c", "vit_timm", "membound-prefetch", 7.6),
        _row("c", "vit_timm", "membound-prefetch-t1", 25.0),
        _row("c", "vit_timm", "pin-mem", 20.0),
        # the producers timed beside it are shown, each the median of its rounds
        _row("c", "vit_timm", "membound-prefetch-inline", 9.5),
        _row("c", "vit_timm", "membound-prefetch-inline.r2", 10.5),
        _row("c", "vit_timm", "membound-prefetch-thread", 7.0),
        # not tallied: another card, a failed run, a call that timed one side only
        _row("d", "vit_timm", "membound-prefetch", 1.0, gpu="NVIDIA H100 80GB HBM3"),
        _row("d", "vit_timm", "pin-mem", 9.0, gpu="NVIDIA H100 80GB HBM3"),
        _row("e", "lightning_fit", "membound-prefetch", 1.0, status="failed"),
        _row("e", "lightning_fit", "pin-memory", 9.0),
        _row("f", "dcgan", "pin-memory", 2.0),
        _row("f", "dcgan", "baseline-1", None, kind="baseline"),
    ]
    got = {r["run"]: r for r in truth_tally.own_vs_switch(rows, "h200")}
    assert set(got) == {"a", "b", "c"}
    assert (got["a"]["own_ms"], got["a"]["switch_ms"], got["a"]["verdict"]) == (11.0, 10.0, "yes")
    assert got["b"]["verdict"] == "tie"
    assert (got["c"]["own_fix"], got["c"]["switch_fix"]) == ("membound-prefetch", "pin-mem")
    assert got["c"]["verdict"] == "NO"
    assert got["c"]["producers"] == {
        "membound-prefetch-inline": 10.0, "membound-prefetch-thread": 7.0}  # fmt: skip
    assert got["a"]["producers"] == {}
    h100 = truth_tally.own_vs_switch(rows, "h100")
    assert [(r["run"], r["verdict"]) for r in h100] == [("d", "NO")]


def test_the_recorded_calls_are_read():
    # every call recorded so far that timed both on the H200 is a row (22 up to 2026-12-05)
    with truth_tally.TRUTH_CSV.open(newline="") as fh:
        rows = truth_tally.own_vs_switch(list(csv.DictReader(fh)), "h200")
    assert len(rows) >= 22
    assert {r["switch_fix"] for r in rows} <= {"pin-memory", "pin-mem"}
    assert {r["verdict"] for r in rows} <= {"yes", "tie", "NO"}


def test_a_rows_baselines_spread_decides_whether_it_can_judge_a_prediction():
    truth = {"baselines": [{"step_ms": 169.7}, {"step_ms": 154.7}, {"step_ms": 160.0}]}
    assert truth_tally.baselines_spread_ms(truth) == 15.0
    assert truth_tally.baselines_spread_ms({"baselines": [{"step_ms": 100.0}]}) is None
    # tolerance of a 14 ms saving: max(25% of 14, 2) = 3.5 ms, less than the 15 ms spread
    assert not truth_tally.steady_baselines({"measured_ms": 14.0, "baselines_spread_ms": 15.0})
    assert truth_tally.steady_baselines({"measured_ms": 14.0, "baselines_spread_ms": 3.5})
    # a 4 ms saving's tolerance is the 2 ms floor
    assert not truth_tally.steady_baselines({"measured_ms": 4.0, "baselines_spread_ms": 2.1})
    assert truth_tally.steady_baselines({"measured_ms": 4.0, "baselines_spread_ms": None})
