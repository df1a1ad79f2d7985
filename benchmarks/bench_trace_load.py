"""How long `membound analyze` takes on a ~1 GB kineto trace, and how much memory.

The issue's bar: a 1 GB trace loads and analyzes in ≤ 60 s and ≤ 4 GB RSS on a 2-core
machine. The big trace is built from a small source trace (default: the synthetic
launch-bound trace under tests/fixtures; pass a real one with --source) by repeating its steps
with shifted timestamps and fresh correlation / External ids, written in the layout torch's
exporter uses (each event starting on a line `  {`, fields one per line). It goes under
/tmp (never into the repo); `membound analyze` then runs in a subprocess and the row records
its wall time and peak RSS (`getrusage(RUSAGE_CHILDREN).ru_maxrss`).

    PYTHONPATH=src python benchmarks/bench_trace_load.py --size-gb 1 [--run N] [--csv out.csv]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from harness import RESULTS_DIR, CsvRows, add_output_args  # noqa: E402

DEFAULT_SOURCE = ROOT / "tests" / "fixtures" / "synthetic_launch_bound" / "trace.json.gz"
BUDGET_S = 60.0
BUDGET_RSS = 4 << 30


def _read(path: Path) -> dict:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def _dump(ev: dict) -> bytes:
    # kineto layout: "  {" then one field per line, nested objects indented further
    text = json.dumps(ev, indent=2)
    return ("  " + text.replace("\n", "\n  ")).encode()


def build(source: Path, out: Path, size_bytes: int) -> tuple[int, int]:
    """Write `out` (~size_bytes) by repeating `source`'s events; returns (bytes, events)."""
    doc = _read(source)
    events = [e for e in doc["traceEvents"] if e.get("ph") in ("X", "s", "f", "i")]
    meta = [e for e in doc["traceEvents"] if e.get("ph") == "M"]
    ts = [e["ts"] for e in events if "ts" in e]
    t0 = min(ts)
    period = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e) - t0 + 1.0
    max_corr = (
        max(
            [e.get("args", {}).get("correlation", 0) or 0 for e in events]
            + [e.get("id", 0) or 0 for e in events]
        )
        + 1
    )
    max_ext = max([e.get("args", {}).get("External id", 0) or 0 for e in events]) + 1
    steps = [
        int(e["name"].split("#")[1])
        for e in events
        if e.get("name", "").startswith("ProfilerStep#")
    ]
    n_steps = len(steps) or 1
    template = [_dump(e) for e in events]
    per_copy = sum(len(t) + 2 for t in template)
    copies = max(1, size_bytes // per_copy)
    written = 0
    n_events = 0
    with out.open("wb") as f:
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        f.write(b"{\n" + b"".join(f'  "{k}": {json.dumps(v)},\n'.encode() for k, v in head.items()))
        f.write(b'  "traceEvents": [\n')
        f.write(b",\n".join(_dump(e) for e in meta) + b",\n")
        first = True
        for k in range(copies):
            parts = []
            for e in events:
                e2 = dict(e)
                if "ts" in e2:
                    e2["ts"] = e["ts"] + k * period
                args = e.get("args")
                if args:
                    a2 = dict(args)
                    if "correlation" in a2 and a2["correlation"] not in (None, -1):
                        a2["correlation"] = a2["correlation"] + k * max_corr
                    if "External id" in a2:
                        a2["External id"] = a2["External id"] + k * max_ext
                    e2["args"] = a2
                if "id" in e2:
                    e2["id"] = e2["id"] + k * max_corr
                if e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(e2['name'].split('#')[1]) + k * n_steps}"
                parts.append(_dump(e2))
            chunk = b",\n".join(parts)
            f.write((b"" if first else b",\n") + chunk)
            first = False
            n_events += len(parts)
        f.write(b'\n  ],\n  "traceName": "bench"\n}\n')
        written = f.tell()
    return written, n_events


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    p.add_argument("--size-gb", type=float, default=1.0)
    p.add_argument(
        "--out", type=Path, default=Path(tempfile.gettempdir()) / "membound_bench_1gb.json"
    )
    p.add_argument("--keep", action="store_true", help="keep the big trace afterwards")
    add_output_args(p, RESULTS_DIR / "trace_load.csv")
    args = p.parse_args()

    t = time.perf_counter()
    nbytes, n_events = build(args.source, args.out, int(args.size_gb * (1 << 30)))
    build_s = time.perf_counter() - t
    print(
        f"built {args.out}: {nbytes / 1e9:.2f} GB, {n_events} events in {build_s:.0f} s", flush=True
    )

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    report = args.out.with_suffix(".report.json")
    cmd = [
        sys.executable,
        "-m",
        "membound",
        "analyze",
        str(args.out),
        "--json",
        str(report),
        "--quiet",
    ]
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # KiB on Linux
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        raise SystemExit(f"membound analyze failed with exit code {proc.returncode}")
    result = json.loads(report.read_text())
    steps = result["steps"]["count"]
    if not args.keep:
        args.out.unlink(missing_ok=True)
    report.unlink(missing_ok=True)

    row = CsvRows(args.csv, args.run).add(
        bench="analyze_trace",
        source=args.source.name if args.source != DEFAULT_SOURCE else "synthetic_launch_bound",
        bytes=nbytes,
        events=n_events,
        steps=steps,
        flops=0,
        median_ms=round(wall * 1e3, 1),
        peak_rss_bytes=rss,
        fraction_of_time_budget=round(wall / BUDGET_S, 3),
        fraction_of_rss_budget=round(rss / BUDGET_RSS, 3),
        cpus=os.cpu_count(),
    )
    print(
        f"analyze: {wall:.1f} s ({wall / BUDGET_S:.0%} of the 60 s budget), peak RSS "
        f"{rss / 2**30:.2f} GiB ({rss / BUDGET_RSS:.0%} of 4 GiB), {n_events} events, {steps} steps"
    )
    print(row)


if __name__ == "__main__":
    main()
