"""What would membound's FusedAddLayerNorm do to a recorded loop, given its host cost per call?

A what-if over `analysis.replay` (issue 15: the norm kernels saved 2.36 ms/step on one host
and cost 19.93 on a slower one, and membound predicts neither): the recorded GPT-2 step is
replayed (calibrated on the unprofiled step) with ATen's LayerNorm kernels shortened to the
fused kernels' share of their time (`--gpu-ratio`: membound's fwd+bwd kernel time over ATen's,
86.0 / 155.8 µs at 12288 x 768 on the H200, `benchmarks/results/probe_norm_host_2026-12-02b.jsonl`)
and `--extra-us` of host time added to each LayerNorm forward and backward launch (membound's
host cost per call over ATen's; the same probe measured 543 against 251 µs per fwd+bwd on the
2026-12-02 host: 146 µs per call). One line per fixture and extra, against what the fix saved.

    PYTHONPATH=src python benchmarks/probe_replay_norm_host.py [--extra-us 0,100,146,200]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from membound.trace.capture_meta import timeline_in

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fixtures", default="gpt2,gpt2_run3")
    p.add_argument("--extra-us", default="0,100,146,200")
    p.add_argument("--gpu-ratio", type=float, default=86.0 / 155.8)
    args = p.parse_args(argv)

    import membound.analysis.pipeline as pipeline
    from membound.analysis import analyze
    from membound.analysis.replay import Replay
    from membound.device.ceilings import Ceilings

    seen = []

    class Recorded(pipeline.AnalysedTrace):  # the analysis context, kept for the replay
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            seen.append(self)

    pipeline.AnalysedTrace = Recorded
    ceilings = Ceilings.load(FIXTURES / "h200_ceilings.json")
    for name in args.fixtures.split(","):
        d = FIXTURES / f"h200_real_{name}"
        analyze([timeline_in(d)], ceilings)
        ctx = seen[-1]
        trace = ctx.trace
        r = Replay.from_trace(trace, ctx.steps)
        calibrated = r.calibrate(ctx.timing.unprofiled_median_ms)
        base = r.step_ms()
        names = [trace.names[int(i)] for i in trace.gpu.name[r.act_row]]
        norm = np.array(["layer_norm" in n or "GammaBeta" in n for n in names])
        launch = np.array(
            ["vectorized_layer_norm" in n or "layer_norm_grad_input" in n for n in names]
        )
        call_of = np.repeat(np.arange(len(r.gap)), np.diff(r.act_start))
        truth = json.loads((d / "truth.json").read_text())
        fixes = truth["fixes"]
        measured = {
            k: round(truth["baseline_ms"] - v["truth"]["step_ms"], 2)
            for k, v in fixes.items()
            if v.get("truth") and k in ("fused-add-norm", "swap-norms", "swap-norms-kernels")
        }
        dur, gap = r.act_dur.copy(), r.gap.copy()
        for extra in (float(x) for x in args.extra_us.split(",")):
            r.act_dur = np.where(norm, dur * args.gpu_ratio, dur)
            add = np.zeros(len(gap))
            np.add.at(add, call_of[launch], extra)
            r.gap = gap + add
            row = {
                "fixture": name, "calibrated": calibrated,
                "profiler_cost_per_call_us": round(r.cost_per_call, 2),
                "norm_launches_per_step": int(launch.sum() / r.steps), "extra_us": extra,
                "predicted_saving_ms": round(base - r.step_ms(), 2), "measured": measured,
            }  # fmt: skip
            print(json.dumps(row), flush=True)
        r.act_dur, r.gap = dur, gap
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
