"""Where a loop's host time sits, beside what torch.compile measured: the recorded truth fixtures.

`compile` is predicted as the sum of its findings (`analysis.remedies`), and on host-paced
loops that sum was far off in both directions (2026-12-05: the DCGAN -1.77 measured against
4.24 predicted, the ViT 3.05 against 11.37, the T5 32.06 against 16.41). A model of what
compile does to the host would start from where the host's time goes. This re-analyzes each
fixture that timed compile and replays its timeline as the GPU what-if does
(`analysis.replay.Replay`, calibrated to the unprofiled step), then splits the host's work
per step (the gap before each runtime call, after the profiler's calibrated cost) by what the
call launched:

- `library`: a kernel compile keeps as it is (GEMMs, convolutions, attention, cuDNN, the
  optimizer's multi-tensor kernels, NCCL), named by `LIBRARY`, a heuristic on kernel names;
- `fusible`: any other kernel (ATen's elementwise, reductions, norms, copies): what inductor
  could fuse, whose Python and dispatch a compiled graph removes;
- `other`: calls that launch no kernel (memcpys, syncs, event records) and their own time.

Read-only, no GPU: one row per fixture.

    PYTHONPATH=src python benchmarks/compile_host_gaps.py [--only vit_timm,dcgan]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import truth_tally  # noqa: E402

#: each call as launching no kernel, a fusible one or a library's: the compile replay's own
#: heuristic (`analysis.compile_whatif`)
from membound.analysis.compile_whatif import LIBRARY, launch_kinds  # noqa: E402, F401


@contextlib.contextmanager
def kept_context():
    """The analysis context `gpu_whatif.curve` sees, kept while an analysis runs: the trace,
    steps and timing the replay is built from."""
    from membound.analysis import gpu_whatif, pipeline

    seen: dict = {}
    real = gpu_whatif.curve

    def spy(ctx):
        seen["ctx"] = ctx
        return real(ctx)

    pipeline.gpu_whatif.curve = spy
    try:
        yield seen
    finally:
        pipeline.gpu_whatif.curve = real


def split(ctx) -> dict | None:
    """ms per step of host work before library launches, fusible launches and other calls,
    with their counts, from `ctx`'s calibrated replay; None where it cannot be calibrated."""
    from membound.analysis.replay import Replay

    r = Replay.from_trace(ctx.trace, ctx.steps)
    if r is None or not r.faithful():
        return None
    if not r.calibrate(ctx.timing.unprofiled_median_ms, ctx.profiler_cost_us or 0.0):
        return None
    c = r.cost_per_call
    gap = np.maximum(r.gap - np.maximum(c - r.own, 0.0), 0.0)
    own = np.maximum(r.own - c, 0.0)
    _, kind, _ = launch_kinds(ctx.trace, r)  # 0 other, 1 fusible, 2 library
    per = r.steps * 1e3
    out = {"step_ms": round(r.step_ms(), 2), "cost_per_call_us": round(c, 2)}
    for k, label in ((2, "library"), (1, "fusible"), (0, "other")):
        m = kind == k
        out[f"{label}_gap_ms"] = round(float(gap[m].sum()) / per, 2)
        out[f"{label}_calls"] = round(int(m.sum()) / r.steps)
    out["other_own_ms"] = round(float(own[kind == 0].sum()) / per, 2)
    out["waited_ms"] = round(r.waited_ms, 2)
    return out


def rows(only: list[str] | None = None) -> list[dict]:
    """One row per fixture that timed a compile fix."""
    import bench_truth
    from membound.device.ceilings import Ceilings

    ceilings = Ceilings.load(truth_tally.FIXTURES / "h200_ceilings.json")
    out = []
    for folder in truth_tally.fixtures(only):
        truth = json.loads((folder / "truth.json").read_text())
        plan = bench_truth.PLAN.get(truth["script"])
        fixes = {f.name: f for f in plan.fixes} if plan else {}
        timed = [n for n in truth.get("fixes", {}) if n in fixes and "compile" in fixes[n].remedies]
        if not timed:
            continue
        with kept_context() as seen:
            report = truth_tally.report_of(folder, ceilings)
        got = split(seen["ctx"]) if "ctx" in seen else None
        if got is None:
            continue
        predicted, _ = bench_truth.predict(report, fixes[timed[0]])
        out.append({
            "fixture": folder.name,
            "compile_measured_ms": round(truth["fixes"][timed[0]]["saving_ms"], 2),
            "compile_predicted_ms": None if predicted is None else round(predicted, 2),
            **got,
        })  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", help="comma-separated scripts (default: every one that timed compile)")
    args = p.parse_args(argv)
    only = [s.strip() for s in args.only.split(",")] if args.only else None
    print(f"{'fixture':36s} {'step':>7s} {'c us':>5s}  host gap ms/step (calls) before: "
          f"{'library':>14s} {'fusible':>14s} {'other':>14s}  compile measured / predicted")  # fmt: skip
    for r in rows(only):
        cells = "".join(
            f"{r[f'{k}_gap_ms']:8.2f} ({r[f'{k}_calls']:4d})"
            for k in ("library", "fusible", "other")
        )
        pred = "-" if r["compile_predicted_ms"] is None else f"{r['compile_predicted_ms']:.2f}"
        print(f"{r['fixture']:36s} {r['step_ms']:7.2f} {r['cost_per_call_us']:5.2f}  {' ' * 27}"
              f"{cells}  {r['compile_measured_ms']:6.2f} / {pred}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
