"""Print the figures of one or more membound JSON reports that a device call's log needs,
one block per report: the steps (unprofiled, profiled, overhead), GPU busy, the idle causes,
the top findings and remedies with their savings, and the top ops by device time.

    python benchmarks/report_brief.py report.json [more.json ...] [--ops 8]

A report that cannot be read is one line saying so; the others still print.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def brief(report: dict, n_ops: int = 8) -> list[str]:
    """The lines for one report (`membound diagnose --json` / `analyze --json`)."""
    s = report.get("steps") or {}

    def num(v, fmt=".2f"):
        return "-" if not isinstance(v, int | float) else format(v, fmt)

    lines = [
        f"step unprofiled {num(s.get('unprofiled_median_ms'))} ms, profiled "
        f"{num(s.get('profiled_median_ms'))} (overhead {num(report.get('profiler_overhead_fraction'), '.1%')}), "
        f"busy {num(report.get('gpu_busy_fraction'), '.1%')}, "
        f"costed {num(report.get('ops_costed_fraction'), '.1%')}, "
        f"steps {[round(p.get('wall_ms', 0), 1) for p in s.get('per_step') or []]}",
        "idle ms/step: "
        + ", ".join(
            f"{k} {v:.2f}"
            for k, v in sorted((report.get("idle_breakdown") or {}).items(), key=lambda kv: -kv[1])
            if v >= 0.01
        ),  # fmt: skip
    ]
    cpu = s.get("thread_cpu_ms") or {}
    if cpu:  # the training thread's CPU ms a step by phase
        lines.append("thread CPU ms/step: " + ", ".join(f"{k} {num(v)}" for k, v in cpu.items()))
    for f in (report.get("findings") or [])[:5]:
        ev = f.get("evidence") or {}
        extra = f" ({ev['kernels_per_step']:.0f} kernels/step)" if "kernels_per_step" in ev else ""
        lines.append(
            f"  finding {f.get('code')}: {num(f.get('time_lost_ms_per_step'))} ms/step "
            f"{num(f.get('share_of_step'), '.0%')}{extra}"
        )
    for r in (report.get("remedies") or [])[:4]:
        lines.append(f"  remedy {r.get('remedy')}: {num(r.get('saving_ms_per_step'))} ms/step")
    ops = sorted(report.get("ops") or [], key=lambda o: -(o.get("device_ms") or 0))[:n_ops]
    for o in ops:
        frac = o.get("fraction_of_attainable")
        lines.append(
            f"  op {o.get('name', '')[:48]:48} {num(o.get('device_ms'))} ms x{num(o.get('calls'), '.0f')} "
            f"{o.get('bound', '-')} {num(frac, '.0%')} of roof"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--ops", type=int, default=8, help="top ops by device time (default 8)")
    args = p.parse_args(argv)
    bad = 0
    for path in args.reports:
        try:
            report = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            print(f"{path}: not readable ({exc})")
            bad += 1
            continue
        print(f"== {path}")
        print("\n".join(brief(report, args.ops)))
    return 1 if bad == len(args.reports) else 0


if __name__ == "__main__":
    sys.exit(main())
