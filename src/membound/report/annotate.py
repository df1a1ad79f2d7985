"""The annotated trace: the original events plus one track of findings, for Perfetto.

Findings become "ph":"X" spans in a process named "membound findings", one thread per
finding code, each span carrying the finding's title and evidence. Chrome/Perfetto traces
do not care about event order, so the spans are inserted right after `"traceEvents": [`
and the rest of the original is streamed through unchanged (a 1 GB trace is never held in
memory). Written gzipped.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from membound.errors import BadInput
from membound.report.numbers import finite, value

FINDINGS_PID = "membound findings"
_CHUNK = 16 << 20


def finding_events(analysis) -> list[dict]:
    events: list[dict] = [
        {
            "ph": "M",
            "name": "process_name",
            "pid": FINDINGS_PID,
            "tid": 0,
            "args": {"name": FINDINGS_PID},
        },
        {
            "ph": "M",
            "name": "process_sort_index",
            "pid": FINDINGS_PID,
            "tid": 0,
            "args": {"sort_index": -1},
        },
    ]
    for rank, f in enumerate(analysis.findings):
        tid = f"{rank + 1}. {f.code}"
        events.append(
            {
                "ph": "M",
                "name": "thread_name",
                "pid": FINDINGS_PID,
                "tid": tid,
                "args": {"name": tid},
            }
        )
        args = {
            "time_lost_ms_per_step": round(value(f.time_lost_ms_per_step), 4),
            "fix": f.fix,
            # JSON has no NaN: a figure that is not finite is left out of the annotation
            **{k: v for k, v in f.evidence.items() if isinstance(v, (str, bool)) or finite(v)},
        }
        for s, e in f.spans:
            events.append(
                {
                    "ph": "X",
                    "cat": "membound",
                    "name": f.title,
                    "pid": FINDINGS_PID,
                    "tid": tid,
                    "ts": s,
                    "dur": max(e - s, 0.001),
                    "args": args,
                }
            )
    return events


def _open(path: Path):
    with path.open("rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rb") if magic == b"\x1f\x8b" else path.open("rb")


def default_path(trace_path) -> Path:
    p = Path(trace_path)
    stem = p.name
    for suffix in (".gz", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return p.with_name(f"{stem}.membound.json.gz")


def write(analysis, path=None, source=None) -> Path:
    """Write `source` (default: the analysed trace) plus the findings track to `path`."""
    source = Path(source or analysis.trace_path)
    path = Path(path) if path else default_path(source)
    if path.is_dir():
        path = path / default_path(source).name
    added = b",\n".join(json.dumps(e).encode() for e in finding_events(analysis))
    with _open(source) as src:
        head = src.read(_CHUNK)
        m = re.search(rb'"traceEvents"\s*:\s*\[', head)
        if not m:
            raise BadInput(
                f'cannot annotate {source}: it has no "traceEvents" list near its start.'
            )
        rest = head[m.end() :]
        empty = rest.lstrip()[:1] == b"]"
        path.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(path, "wb", compresslevel=3) as out:
            out.write(head[: m.end()])
            out.write(b"\n" + added + (b"\n" if empty else b",\n"))
            out.write(rest)
            while chunk := src.read(_CHUNK):
                out.write(chunk)
    return path
