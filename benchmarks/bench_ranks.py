"""`membound analyze` of many rank traces: wall time and memory (issue 19's CPU part).

A multi-node run leaves one trace per rank in a shared folder; `membound analyze <folder>`
analyses them in worker processes (`analysis.ranks.analyze_ranks`) and merges the results.
This writes `--ranks` synthetic rank traces of about `--mb` MB each (plain JSON, kineto's
layout: `STEPS` steps, each a chain of compute kernels launched by aten ops with shapes, as
many as make up the size, then one NCCL all-reduce announced by `record_param_comms`; rank 1 starts each step's compute
`STRAGGLE_US` late), then times the analysis of the folder in a child process, sampling the
resident memory of it and its workers, and checks the report: every rank present, rank 1
the straggler. One CSV row per run (`results/ranks.csv`).

    PYTHONPATH=src python benchmarks/bench_ranks.py [--ranks 256] [--mb 10] [--dir /tmp/ranks]

The traces are kept in `--dir` and reused when their parameters match (writing 2.5 GB of
JSON takes a minute or two on the 2-core CI machine).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_trace_memory import run_one  # noqa: E402
from harness import CsvRows, add_output_args  # noqa: E402

DEFAULT_CSV = Path(__file__).resolve().parent / "results" / "ranks.csv"
STEP_US = 20_000.0
#: steps per rank trace (a capture records a few); the kernels per step make up the size
STEPS = 10
#: rank 1's compute starts this late each step: the straggler the report must name
STRAGGLE_US = 3_000.0
AR = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _x(cat, name, ts, dur, pid=1, tid=100, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def rank_events(rank: int, world: int, kernels: int, steps: int = STEPS) -> list[dict]:
    """The events of one rank: `steps` steps, each `kernels` matmuls of 12 ms / `kernels`
    in all, then a 100 MB fp32 all-reduce ending at 16 ms into the `STEP_US` step on every
    rank (so the late rank's is shorter by `STRAGGLE_US`)."""
    each = 12_000.0 / kernels
    ev, corr, ext = [], 1000, 1
    for s in range(steps):
        o = 1_000_000.0 + s * STEP_US
        ev.append(_x("user_annotation", f"ProfilerStep#{s}", o, STEP_US, **{"External id": ext}))
        ext += 1
        t = o + 100 + (STRAGGLE_US if rank == 1 else 0.0)
        for _ in range(kernels):
            corr += 1
            ev.append(_x("cpu_op", "aten::mm", t, 8.0, **{
                "External id": ext, "Input Dims": [[1024, 1024], [1024, 1024]],
                "Input type": ["float", "float"], "Concrete Inputs": ["", ""]}))  # fmt: skip
            ext += 1
            ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 2, 5.0, correlation=corr))
            ev.append(_x("kernel", "volta_sgemm_128x64_nn", t + 10, each * 0.95, pid=0, tid=7,
                         correlation=corr, stream=7, device=0))  # fmt: skip
            t += each
        corr += 1
        ev.append(_x("cpu_op", "record_param_comms", t, 5.0, **{
            "External id": ext, "Collective name": "allreduce", "dtype": "Float",
            "In msg nelems": 25_000_000, "Out msg nelems": 25_000_000, "Group size": world,
            "Process Group Name": "0", "Rank": rank}))  # fmt: skip
        ext += 1
        ev.append(_x("cuda_runtime", "cudaLaunchKernel", t + 6, 5.0, correlation=corr))
        end = o + 16_000.0
        ev.append(_x("kernel", AR, t + 20, end - (t + 20), pid=0, tid=20, correlation=corr,
                     stream=20, device=0))  # fmt: skip
    return ev


def write_rank(path: Path, rank: int, world: int, kernels: int, steps: int = STEPS) -> int:
    """Write rank `rank`'s trace in kineto's layout (one event per line); returns its bytes."""
    head = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H200",
            "totalGlobalMem": 150 << 30}], "distributedInfo": {"backend": "nccl", "rank": rank,
            "world_size": world}}  # fmt: skip
    lines = [json.dumps(head)[:-1] + ', "traceEvents": [']
    events = rank_events(rank, world, kernels, steps)
    lines += [json.dumps(e) + ("," if i < len(events) - 1 else "") for i, e in enumerate(events)]
    lines.append('], "traceName": "bench_ranks"}')
    data = "\n".join(lines).encode()
    path.write_bytes(data)
    return len(data)


def kernels_for(mb: float, world: int, steps: int = STEPS) -> int:
    """Kernels per step that make one rank's trace of `steps` steps about `mb` MB."""
    one, two = (len(json.dumps(rank_events(0, world, k, steps))) for k in (10, 20))
    per_kernel = (two - one) / 10
    return max(1, round((mb * 1e6 - (one - 10 * per_kernel)) / per_kernel))


def write_all(folder: Path, ranks: int, mb: float, steps: int = STEPS, say=print) -> int:
    """The traces of `ranks` ranks in `folder` (reused when a stamp says they match)."""
    stamp = folder / "bench_ranks.json"
    want = {"ranks": ranks, "mb": mb, "steps": steps, "straggle_us": STRAGGLE_US}
    if stamp.exists() and json.loads(stamp.read_text()).get("params") == want:
        return json.loads(stamp.read_text())["bytes"]
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("trace.rank*.json"):
        old.unlink()
    kernels = kernels_for(mb, ranks, steps)
    total = 0
    for r in range(ranks):
        total += write_rank(folder / f"trace.rank{r}.json", r, ranks, kernels, steps)
        if (r + 1) % 32 == 0:
            say(f"[bench_ranks] wrote {r + 1}/{ranks} traces ({total / 1e9:.2f} GB)")
    stamp.write_text(json.dumps({"params": want, "bytes": total, "kernels_per_step": kernels}))
    return total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ranks", type=int, default=256)
    p.add_argument("--mb", type=float, default=10.0, help="MB per rank trace (default 10)")
    p.add_argument("--steps", type=int, default=STEPS, help=f"steps per rank (default {STEPS})")
    p.add_argument("--dir", type=Path, default=Path("/tmp/membound-bench-ranks"))
    add_output_args(p, DEFAULT_CSV)
    args = p.parse_args(argv)
    if args.ranks < 2 or args.mb <= 0 or args.steps < 2:
        p.error("--ranks and --steps must be at least 2 and --mb above 0")
    total = write_all(args.dir, args.ranks, args.mb, args.steps)
    r = run_one(args.dir, "analyze", args.dir.parent, tag=f"ranks{args.ranks}")
    report_path = args.dir.parent / f"{args.dir.name}.ranks{args.ranks}.report.json"
    ok, why = False, r["stderr_last"]
    if r["rc"] == 0 and report_path.exists():
        rep = json.loads(report_path.read_text())
        ranks = rep.get("ranks") or {}
        rows = ranks.get("per_rank") or []
        stragglers = [f for f in rep.get("findings") or [] if f.get("code") == "straggler-rank"]
        late = {(f.get("evidence") or {}).get("rank") for f in stragglers}
        ok = len(rows) == args.ranks and late == {1}
        why = f"{len(rows)} rank rows, stragglers {sorted(x for x in late if x is not None)}"
    kernels = json.loads((args.dir / "bench_ranks.json").read_text()).get("kernels_per_step")
    row = {
        "ranks": args.ranks, "mb_per_rank": args.mb, "steps": args.steps,
        "kernels_per_step": kernels,
        "bytes": total,
        "wall_s": r["wall_s"], "cpu_s": r["cpu_s"],
        "peak_tree_rss_mb": round(r["tree_rss_bytes"] / 1e6, 1),
        "max_process_rss_mb": round(r["max_process_rss_bytes"] / 1e6, 1),
        "rc": r["rc"], "report_ok": ok, "check": why,
    }  # fmt: skip
    print(json.dumps(row), flush=True)
    CsvRows(args.csv, args.run).add(**{k: v for k, v in row.items() if k != "bytes"},
                                    bytes=total, flops="")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
