"""What the analysis loses when launch calls have no duration: a timeline built from kernels'
queued times instead of launch records (issue 15's overhead).

With CUPTI's kernel latency timestamps on, every kernel record says when the host queued it
(kineto exports it as the kernel's `queued`), so a timeline pass could record no launch call
at all (`benchmarks/probe_cupti_kinds.py`: variants `noapi_queued`, `syncs_queued`). Such a
timeline knows each launch as an instant, not as a call with a duration. This re-analyzes
recorded fixtures twice, as recorded and with every launch call shrunk to an instant at its
end (where the kernel was queued), and prints the top findings, remedies, the GPU what-if's
end and the idle causes of each, so what depends on the calls' durations shows:

    PYTHONPATH=src python benchmarks/point_launches.py h100_real_t5_seq2seq_truth3 ...

Read-only, no GPU. On 2026-12-05 (H100 T5, H200 eager GPT-2 run 9, H200 ViT): the replay and
its GPU what-if, host-sync, pageable-copy, memory-bound-op and fp32 findings stayed within
0.1 ms/step; the `launch` idle cause fell from 14.2 to 1.1 ms/step (T5) and from 4.0 to 1.1
(ViT), moving to `other`, and with it launch-bound, the launch gaps of the T5's written-out
norms (its unfused-chain 7.65 -> 4.24) and compile's saving (24.1 -> 10.2): the timeline
pass's launch spans are the calls bridged by short glue (`analysis.timeline.
_issuing_op_spans`), and an instant bridges less. A timeline built on queued times needs a
launch span per kernel of a measured length.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from membound.trace.capture_meta import timeline_in

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"


def point_launches(trace):
    """`trace` with every launch call shrunk to an instant at its end (in place; returned)."""
    from membound.trace.model import LAUNCH

    rt = trace.runtime
    m = rt.call == LAUNCH
    rt.cols["ts"] = np.where(m, rt.ts + rt.dur, rt.ts)
    rt.cols["dur"] = np.where(m, 0.0, rt.dur)
    return trace


def summary(report: dict) -> dict:
    """The figures compared: top findings and remedies (ms/step), the what-if's end, idle."""
    gw = report.get("gpu_whatif") or {}
    return {
        "findings": [(f["code"], round(f["time_lost_ms_per_step"], 2)) for f in report["findings"][:6]],
        "remedies": [(r["remedy"], round(r["saving_ms_per_step"], 2)) for r in (report.get("remedies") or [])[:5]],
        "whatif_end_ms": (gw.get("saving_ms") or [None])[-1],
        "idle_ms": {k: round(v, 2) for k, v in report["idle_breakdown"].items() if v > 0.05},
    }  # fmt: skip


def compare(folder: Path) -> tuple[dict, dict]:
    """(as recorded, with point launches) summaries of one fixture, with its own ceilings
    where it keeps them, else the H200's."""
    from membound.analysis import pipeline
    from membound.device.ceilings import Ceilings
    from membound.report.json_report import to_dict

    beside = folder / "ceilings.json"
    ceilings = Ceilings.load(beside if beside.exists() else FIXTURES / "h200_ceilings.json")
    real = pipeline.load_trace

    def shrunk(path, progress=None):
        t = real(path, progress)
        return point_launches(t) if Path(path).name.startswith("trace.json") else t

    recorded = summary(to_dict(pipeline.analyze([timeline_in(folder)], ceilings)))
    pipeline.load_trace = shrunk
    try:
        point = summary(to_dict(pipeline.analyze([timeline_in(folder)], ceilings)))
    finally:
        pipeline.load_trace = real
    return recorded, point


def main(argv: list[str] | None = None) -> int:
    names = (sys.argv[1:] if argv is None else argv) or ["h100_real_t5_seq2seq_truth3"]
    for name in names:
        recorded, point = compare(FIXTURES / name)
        print(name)
        for key in recorded:
            print(f"  {key:14s} recorded {recorded[key]}")
            print(f"  {'':14s} point    {point[key]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
