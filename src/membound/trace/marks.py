"""membound's own host marks, written into a trace that recorded GPU activity only.

The timeline pass traces GPU activity and the CUDA runtime calls alone (`ProfilerActivity.CUDA`:
+1-13% on the step, measured on the H200, against +12-34% with CPU ops; see
`benchmarks/bench_capture.py`), so the trace holds no step marks and no DataLoader spans of its
own. membound takes them itself, at almost no cost: a host timestamp (`time.perf_counter_ns`)
at every step boundary and around every DataLoader `__next__`, and writes them into the
exported trace as the `user_annotation` events kineto itself writes (`ProfilerStep#N`,
`enumerate(DataLoader)#<iterator>.__next__`), on the trace's clock, so the analysis reads the
file like any other.

The clock: at every recorded step boundary the step hook also calls `cudaStreamQuery` (through
`torch.cuda.current_stream().query()`: ~1 µs, no sync), a runtime call the trace records.
kineto's clock is the host's monotonic clock plus a constant (checked on the H200: 50 anchors,
offset spread 10-20 µs, the call's own latency), so the offset is the one most anchor/event
pairs agree on; marks then land within a few µs of where kineto would have put them.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: anchor/event pairs within this many µs of each other agree on the clock offset
AGREE_US = 50.0
ANCHOR_CALL = "cudaStreamQuery"


@dataclass
class HostMarks:
    """What the timeline pass's hooks saw: step boundaries, anchors, DataLoader spans (ns)."""

    pid: int = field(default_factory=os.getpid)
    tid: int = field(default_factory=threading.get_native_id)
    boundaries: list[tuple[int, int]] = field(default_factory=list)  # (step number, t)
    anchors: list[int] = field(default_factory=list)  # just before each cudaStreamQuery
    loader: list[tuple[int, int, str]] = field(default_factory=list)  # (t0, t1, iterator)

    def boundary(self, step: int, t_ns: int, query) -> None:
        """Step `step` starts at `t_ns`; issue the anchor call."""
        self.boundaries.append((step, t_ns))
        self.anchors.append(time.perf_counter_ns())
        query()

    def offset_us(self, trace_events: list[dict]) -> float | None:
        """Trace clock − host clock, in µs: the offset most anchors agree on (None: no anchor
        call in the trace)."""
        calls = sorted(
            float(e["ts"])
            for e in trace_events
            if isinstance(e, dict)
            and e.get("name") == ANCHOR_CALL
            and isinstance(e.get("ts"), int | float)
        )
        if not calls or not self.anchors:
            return None
        best, best_n = None, 0
        for a in self.anchors:
            for c in calls:
                d = c - a / 1e3
                n = sum(1 for x in self.anchors if _near(calls, x / 1e3 + d))
                if n > best_n:
                    best, best_n = d, n
        if best is None:
            return None
        # the anchor call starts just after its stamp: the smallest agreeing gap is the closest
        gaps = [
            c - a / 1e3 for a in self.anchors for c in calls if abs(c - a / 1e3 - best) <= AGREE_US
        ]
        return min(gaps) if gaps else best

    def events(self, offset_us: float, end_ns: int | None) -> list[dict]:
        """The marks as kineto `user_annotation` events on the trace's clock."""
        out = []
        ts = [(n, t / 1e3 + offset_us) for n, t in self.boundaries]
        stop = None if end_ns is None else end_ns / 1e3 + offset_us
        for k, (n, start) in enumerate(ts):
            end = ts[k + 1][1] if k + 1 < len(ts) else stop
            if end is None or end <= start:
                continue
            out.append(self._span(f"ProfilerStep#{n}", start, end))
        for t0, t1, it in self.loader:
            out.append(
                self._span(
                    f"enumerate(DataLoader)#{it}.__next__",
                    t0 / 1e3 + offset_us,
                    t1 / 1e3 + offset_us,
                )
            )
        return out

    def _span(self, name: str, start: float, end: float) -> dict[str, Any]:
        return {
            "ph": "X",
            "cat": "user_annotation",
            "name": name,
            "pid": self.pid,
            "tid": self.tid,
            "ts": round(start, 3),
            "dur": round(end - start, 3),
            "args": {"membound": "host mark"},
        }


def _near(sorted_calls: list[float], t: float) -> bool:
    import bisect

    i = bisect.bisect_left(sorted_calls, t - AGREE_US)
    return i < len(sorted_calls) and sorted_calls[i] <= t + AGREE_US


def inject(path: Path, marks: HostMarks, end_ns: int | None) -> int | None:
    """Write `marks` into the exported trace at `path` (gzipped or not), in place; returns the
    number of events added, None when the trace holds no anchor (nothing written)."""
    path = Path(path)
    opener = gzip.open if _is_gzip(path) else open
    with opener(path, "rb") as f:
        doc = json.loads(f.read())
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        return None
    offset = marks.offset_us(events)
    if offset is None:
        return None
    added = marks.events(offset, end_ns)
    events.extend(added)
    doc.setdefault("membound", {})["host_marks"] = {"clock_offset_us": offset, "events": len(added)}
    tmp = path.with_name(path.name + ".tmp")
    with opener(tmp, "wb") as f:
        f.write(_kineto_layout(doc))
    tmp.replace(path)
    return len(added)


def _kineto_layout(doc: dict) -> bytes:
    """The document as kineto lays it out (one event per line, each starting `  {`), which
    `trace.kineto` streams instead of parsing whole."""
    head = ",\n".join(
        f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items() if k != "traceEvents"
    )
    body = ",\n".join("  " + json.dumps(e) for e in doc["traceEvents"])
    return (
        "{\n" + (head + ",\n" if head else "") + '  "traceEvents": [\n' + body + "\n  ]\n}\n"
    ).encode()


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"
