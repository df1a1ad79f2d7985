"""Peak memory and wall time of loading hostile-sized traces, whatever their layout (issue 17).

The bar: <= 2 GiB RSS for any input on a 2-core machine, and a 1 GiB trace in either layout
loaded and analysed in <= 15 s. Four inputs are generated under a temporary folder (never in
the repo; removed afterwards unless --keep):

- `kineto`: ~2 GiB written the way torch's exporter writes it (each event starting on a
  line `  {`, fields one per line), a real H200 fixture's steps repeated with shifted
  timestamps and fresh correlation / External ids;
- `oneline`: ~1 GiB of the same events on a single line, as `json.dump` writes them;
- `spaces_bomb`: a .json.gz holding `{"traceEvents": [`, 4 GiB of spaces, then `]}`;
- `events_bomb`: a .json.gz expanding to ~1.5 GiB of events on one line (one short block
  repeated, so it compresses a few hundred times).

Each input then runs in a subprocess: `membound analyze FILE --quiet --json R` (default) or
only the loader (`--mode load`), `--repeat` times. `--baseline DIR` (another checkout's
`src`, e.g. a copy made before a change) runs each input with that tree too, alternating
with this one, so a before/after pair shares the machine's load; rows say which `src` ran. A row records its wall time, the exit code, the peak RSS of
the biggest single process (`wait4`'s `ru_maxrss`: the loader or one of its parse workers)
and the peak of the whole process tree summed (sampled from /proc every 20 ms), and the CPU
seconds it used (its own and its workers': the figure least disturbed by other load).

    PYTHONPATH=src python benchmarks/bench_trace_memory.py [--only kineto,oneline]
        [--scale 0.25] [--mode analyze|load] [--repeat N] [--baseline OLD/src] [--run N]
        [--csv out.csv]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from harness import RESULTS_DIR, CsvRows, add_output_args  # noqa: E402

SOURCE = ROOT / "tests" / "fixtures" / "h200_launch_bound" / "trace.json.gz"
BUDGET_RSS = 2 << 30
BUDGET_S_PER_GIB = 15.0
INPUTS = ("kineto", "oneline", "spaces_bomb", "events_bomb")


def _source() -> tuple[dict, list[dict]]:
    doc = json.loads(gzip.decompress(SOURCE.read_bytes()))
    return doc, doc["traceEvents"]


def _shifted_copies(events: list[dict]):
    """Yield the source's events again and again, each copy later in time, with fresh ids
    and step numbers (mutated in place: the copies are written out one at a time)."""
    timed = [e for e in events if isinstance(e.get("ts"), (int, float))]
    t0 = min(e["ts"] for e in timed)
    period = max(e["ts"] + (e.get("dur") or 0) for e in timed) - t0 + 1.0
    ids = [
        v
        for e in events
        for v in (
            (e.get("args") or {}).get("correlation"),
            (e.get("args") or {}).get("External id"),
        )
        if isinstance(v, int)
    ]
    id_step = max(ids + [0]) + 1
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    n_steps = len(steps) or 1
    base = {id(e): int(e["name"].split("#")[1]) for e in steps}
    k = 0
    while True:
        yield events
        k += 1
        for e in timed:
            e["ts"] += period
        for e in events:
            args = e.get("args")
            if args:
                for key in ("correlation", "External id"):
                    if isinstance(args.get(key), int) and args[key] > 0:
                        args[key] += id_step
            if isinstance(e.get("id"), int):
                e["id"] += id_step
        for e in steps:
            e["name"] = f"ProfilerStep#{base[id(e)] + k * n_steps}"


def _header(doc: dict) -> bytes:
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    return b"{\n" + b"".join(f'  "{k}": {json.dumps(v)},\n'.encode() for k, v in head.items())


def write_kineto(out: Path, size: int) -> int:
    import orjson

    doc, events = _source()
    with out.open("wb") as f:
        f.write(_header(doc) + b'  "traceEvents": [')
        first = True
        for copy in _shifted_copies(events):
            body = orjson.dumps(copy, option=orjson.OPT_INDENT_2)[1:-2]  # "\n  {...},\n  {...}"
            f.write(body if first else b"," + body)
            first = False
            if f.tell() >= size:
                break
        f.write(b'\n  ],\n  "traceName": "bench"\n}\n')
        return f.tell()


def write_oneline(out: Path, size: int, *, gz: bool = False, block: int = 0) -> int:
    """`json.dump`'s layout: the whole document on one line. `block` > 0 repeats only the
    first `block` events, unshifted (a short period compresses hundreds of times)."""
    doc, events = _source()
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    opener = json.dumps({**head, "traceEvents": []})[:-2].encode()  # ... "traceEvents": [
    f = gzip.open(out, "wb", compresslevel=6) if gz else out.open("wb")
    written = 0
    with f:
        f.write(opener)
        first = True
        if block:
            piece = json.dumps(events[:block])[1:-1].encode()
            while written < size:
                f.write(piece if first else b", " + piece)
                written += len(piece) + 2
                first = False
        else:
            for copy in _shifted_copies(events):
                piece = json.dumps(copy)[1:-1].encode()
                f.write(piece if first else b", " + piece)
                written += len(piece) + 2
                first = False
                if written >= size:
                    break
        f.write(b"]}")
    return written + len(opener) + 2


def write_spaces_bomb(out: Path, size: int) -> int:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)  # 31: gzip container
    spaces = b" " * (16 << 20)
    with out.open("wb") as f:
        f.write(comp.compress(b'{"traceEvents": ['))
        left = size
        while left > 0:
            n = min(left, len(spaces))
            f.write(comp.compress(spaces[:n]))
            left -= n
        f.write(comp.compress(b"]}") + comp.flush())
    return size + 19


def _tree_rss(pid: int) -> int:
    """RSS of `pid` and all its descendants, in bytes (Linux /proc)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def run_one(
    path: Path, mode: str, workdir: Path, src: Path = ROOT / "src", tag: str = "this"
) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(src) + os.pathsep + env.get("PYTHONPATH", "")
    if mode == "analyze":
        report = workdir / f"{path.name}.{tag}.report.json"
        cmd = [sys.executable, "-m", "membound", "analyze", str(path), "--quiet"]
        cmd += ["--json", str(report)]
    else:
        code = "import sys; from membound.trace.load import load_trace; load_trace(sys.argv[1])"
        cmd = [sys.executable, "-c", code, str(path)]
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.02):
            peak[0] = max(peak[0], _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    # read the pipes in threads and reap with wait4, so its rusage (ru_maxrss) is this
    # child's own, not the largest of every child so far (RUSAGE_CHILDREN)
    chunks: dict = {proc.stdout: [], proc.stderr: []}

    def drain(stream) -> None:
        for line in iter(stream.readline, b""):
            chunks[stream].append(line)

    drains = [
        threading.Thread(target=drain, args=(s,), daemon=True) for s in (proc.stdout, proc.stderr)
    ]
    for d in drains:
        d.start()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    done.set()
    for d in drains:
        d.join()
    err = b"".join(chunks[proc.stderr]).decode(errors="replace").strip().splitlines()
    return {
        "rc": proc.returncode,
        "wall_s": round(wall, 2),
        # CPU seconds of the child and its parse workers: what wall time would be on an idle
        # machine with enough cores, and less sensitive to other load than wall time
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "max_process_rss_bytes": usage.ru_maxrss * 1024,  # KiB on Linux
        "tree_rss_bytes": peak[0],
        "stderr_last": err[-1][:200] if err else "",
    }


def _row(rows: CsvRows, mode: str, name: str, path: Path, expanded: int, src: str, r: dict):
    gib = 1 << 30
    rows.add(
        bench=f"{mode}_{name}",
        bytes=expanded,
        flops="",
        file_bytes=path.stat().st_size,
        src=src,
        **r,
        fraction_of_rss_budget=round(max(r["tree_rss_bytes"], 1) / BUDGET_RSS, 3),
        fraction_of_time_budget=round(r["wall_s"] / (BUDGET_S_PER_GIB * max(expanded / gib, 1)), 3),
        cpus=os.cpu_count(),
    )
    print(
        f"{name} ({src}): exit {r['rc']}, {r['wall_s']:.1f} s ({r['cpu_s']:.1f} s CPU, load "
        f"{os.getloadavg()[0]:.1f}), peak RSS "
        f"{r['max_process_rss_bytes'] / gib:.2f} GiB (one process), "
        f"{r['tree_rss_bytes'] / gib:.2f} GiB (tree); {r['stderr_last']}",
        flush=True,
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--only", default=",".join(INPUTS), help=f"comma list of {', '.join(INPUTS)}")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every input size")
    p.add_argument("--mode", choices=("analyze", "load"), default="analyze")
    p.add_argument("--dir", type=Path, default=None, help="where inputs go (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the generated inputs")
    p.add_argument("--repeat", type=int, default=1, help="runs of each input (each a row)")
    p.add_argument(
        "--baseline", type=Path, default=None, help="another src tree to run each input with too"
    )
    add_output_args(p, RESULTS_DIR / "trace_memory.csv")
    args = p.parse_args()
    names = [n for n in args.only.split(",") if n]
    unknown = set(names) - set(INPUTS)
    if unknown:
        raise SystemExit(f"unknown inputs {sorted(unknown)}; choose from {', '.join(INPUTS)}")
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="membound_bench_mem_"))
    workdir.mkdir(parents=True, exist_ok=True)
    gib = 1 << 30
    makers = {
        "kineto": ("kineto.json", lambda o: write_kineto(o, int(2 * gib * args.scale))),
        "oneline": ("oneline.json", lambda o: write_oneline(o, int(gib * args.scale))),
        "spaces_bomb": (
            "spaces.json.gz",
            lambda o: write_spaces_bomb(o, int(4 * gib * args.scale)),
        ),
        "events_bomb": (
            "events.json.gz",
            lambda o: write_oneline(o, int(1.5 * gib * args.scale), gz=True, block=40),
        ),
    }
    rows = CsvRows(args.csv, args.run)
    try:
        for name in names:
            fname, make = makers[name]
            path = workdir / fname
            t = time.perf_counter()
            expanded = make(path)
            print(
                f"built {name}: {path.stat().st_size / 2**20:.1f} MiB on disk, "
                f"{expanded / 2**30:.2f} GiB of JSON in {time.perf_counter() - t:.0f} s",
                flush=True,
            )
            trees = [("this", ROOT / "src")]
            if args.baseline is not None:
                trees.insert(0, ("baseline", args.baseline.resolve()))
            for _ in range(args.repeat):
                for label, src in trees:
                    r = run_one(path, args.mode, workdir, src, label)
                    _row(rows, args.mode, name, path, expanded, label, r)
            reports = [workdir / f"{path.name}.{label}.report.json" for label, _ in trees]
            if len(reports) == 2 and all(r.exists() for r in reports):
                same = reports[0].read_bytes() == reports[1].read_bytes()
                print(f"{name}: the two trees' reports are {'identical' if same else 'DIFFERENT'}")
            if not args.keep:
                path.unlink(missing_ok=True)
    finally:
        if not args.keep and args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
