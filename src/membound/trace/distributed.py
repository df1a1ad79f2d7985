"""Rank-aware capture and the distributed parts of a kineto trace.

membound meets distributed training where it already runs, under `torchrun`: every rank
captures its own trace into the same folder, named by its rank (`trace.rank{R}.json.gz`),
and rank 0 merges them once all ranks have written theirs. `membound diagnose
--nproc-per-node N` only re-launches itself under torchrun.

Reading side: the loader keeps no event `args`, but a collective's size lives there
(`record_param_comms` / `nccl:*` events carry `In msg nelems`, `Out msg nelems`, `dtype`,
`Group size`, ...; newer kineto puts the same on the NCCL kernels) and the rank lives in the
top-level `distributedInfo`. `read_comm_records` scans the file once for just those events.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membound._env import nccl_safe_env
from membound.dtypes import canonical, itemsize
from membound.trace.files import open_trace
from membound.trace.kineto_names import collective_kind

RANK_TRACE = "trace.rank{rank}.json.gz"
RANK_META = "capture.rank{rank}.json"
RANK_STEPS = "capture.rank{rank}.steps.jsonl"
_RANK_RE = re.compile(r"rank[._-]?(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class RankInfo:
    rank: int
    world_size: int
    local_rank: int

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def rank_info(env: dict | None = None) -> RankInfo:
    """This process's rank from torchrun's environment (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`);
    a single process when they are absent or unreadable."""
    env = os.environ if env is None else env

    def num(key: str, default: int) -> int:
        try:
            return int(env.get(key, default))
        except (TypeError, ValueError):
            return default

    world = max(num("WORLD_SIZE", 1), 1)
    rank = num("RANK", 0)
    return RankInfo(rank=rank, world_size=world, local_rank=num("LOCAL_RANK", rank))


def trace_name(rank: int | None) -> str:
    return "trace.json.gz" if rank is None else RANK_TRACE.format(rank=rank)


def meta_name(rank: int | None) -> str:
    return "capture.json" if rank is None else RANK_META.format(rank=rank)


def steps_name(rank: int | None) -> str:
    """The capture's per-step marks, appended as each step ends (survives a killed run)."""
    return "capture.steps.jsonl" if rank is None else RANK_STEPS.format(rank=rank)


def ops_name(rank: int | None) -> str:
    """The ops pass's trace (CPU ops and shapes, for the roofline) beside the timeline's."""
    return trace_name(rank).replace(".json.gz", ".ops.json.gz")


def rank_of_path(path: str | os.PathLike) -> int | None:
    """The rank a file name carries (`trace.rank3.json.gz` -> 3), or None."""
    m = _RANK_RE.search(Path(path).name)
    return int(m.group(1)) if m else None


# ------------------------------------------------------------------------------- launching
def torchrun_command(nproc: int, membound_args: list[str]) -> list[str]:
    """`python -m torch.distributed.run --nproc-per-node N -m membound <args>`: the same
    interpreter as this one, so the venv and membound version match."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={nproc}",
        "-m",
        "membound",
        *membound_args,
    ]


def strip_nproc(argv: list[str]) -> list[str]:
    """argv without `--nproc-per-node N` / `--nproc-per-node=N` (before the script's `--`)."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            out += argv[i:]
            break
        if a == "--nproc-per-node":
            i += 2
            continue
        if a.startswith("--nproc-per-node="):
            i += 1
            continue
        out.append(a)
        i += 1
    return out


def relaunch(nproc: int, membound_args: list[str]) -> int:
    """Run `membound <args>` on `nproc` ranks under torchrun; returns torchrun's exit code."""
    env = nccl_safe_env(dict(os.environ))
    cmd = torchrun_command(nproc, membound_args)
    print("membound diagnose: launching " + " ".join(cmd[1:]), file=sys.stderr, flush=True)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130


def clear_stale(out: Path, rank: int) -> None:
    """Remove this rank's trace and meta file from an earlier run, so rank 0 cannot merge a
    stale one."""
    for name in (trace_name(rank), meta_name(rank)):
        try:
            (out / name).unlink()
        except FileNotFoundError:
            pass


def wait_for_ranks(out: Path, world_size: int, since: float, timeout_s: float = 120.0):
    """Block until every rank's meta file (written after its trace) is newer than `since`;
    returns (traces present, ranks still missing at the timeout)."""
    deadline = time.monotonic() + timeout_s
    while True:
        missing = []
        for r in range(world_size):
            meta = out / meta_name(r)
            try:
                fresh = meta.stat().st_mtime >= since
            except FileNotFoundError:
                fresh = False
            if not fresh:
                missing.append(r)
        if not missing or time.monotonic() > deadline:
            traces = [
                out / trace_name(r)
                for r in range(world_size)
                if r not in missing and (out / trace_name(r)).exists()
            ]
            return traces, missing
        time.sleep(0.2)


# -------------------------------------------------------------------------------- reading
@dataclass
class CommRecord:
    """One collective as the host recorded it (or as kineto annotated its kernel)."""

    ts: float  # µs
    name: str  # "allreduce", "allgather", ... (lower case, no separators)
    nelems: int  # max(In msg nelems, Out msg nelems)
    dtype: str
    group_size: int | None
    on_kernel: bool  # the args were on the GPU kernel itself
    process_group: str | None = None
    source: str = ""  # the event's name ("record_param_comms", "nccl:all_reduce", a kernel)
    seq: int | None = None  # "Seq": the process group's collective number, same on every rank

    @property
    def bytes(self) -> int | None:
        size = dtype_size(self.dtype)
        return self.nelems * size if size else None


def dtype_size(dtype: str | None) -> int | None:
    """Bytes per element of a recorded dtype ("BFloat16", "c10::Half", "torch.float32");
    None when unknown."""
    name = canonical(dtype) if dtype else None
    return itemsize(name) if name else None


_HEAD = 1 << 20
_CHUNK = 16 << 20
_KEY = b'"In msg nelems"'
#: how far back from a hit a single-line trace's event opening is looked for, and how much
#: is decoded for it first: a collective's event is a few hundred bytes. Unbounded, every
#: hit searched and decoded the rest of its 16 MiB chunk: a one-event-a-line trace of 10 MB
#: with 437 all-reduces spent 2.7 of its 3.7 s of analysis here (`benchmarks/bench_ranks.py`)
_EVENT_SPAN = 64 << 10
#: how an event opens in a single-line trace (torch writes `"ph"` first; other writers differ)
_OPENERS = (b'{"ph"', b'{"name"', b'{"cat"', b'{"ts"')
_INFO_RE = re.compile(rb'"distributedInfo"\s*:\s*')


def read_distributed_info(path: str | os.PathLike) -> dict[str, Any] | None:
    """The trace's top-level `distributedInfo` (backend, rank, world_size, ...), if any."""
    try:
        with open_trace(Path(path)) as f:
            head = f.read(_HEAD)
    except (OSError, EOFError, zlib.error):  # not a regular file, unreadable, corrupt
        return None
    m = _INFO_RE.search(head)
    if m is None:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(head[m.end() :].decode("utf-8", "replace"))
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def read_comm_records(path: str | os.PathLike) -> list[CommRecord]:
    """Every event carrying collective sizes (`In msg nelems`), in time order. Streams the
    file in chunks and parses only the events around each hit, so a large trace costs one
    pass of byte search, not a second full parse."""
    out: list[CommRecord] = []
    seen: set[tuple] = set()
    tail = b""
    try:
        with open_trace(Path(path)) as f:
            while True:
                chunk = f.read(_CHUNK)
                buf = tail + chunk
                if not chunk:
                    _scan(buf, out, seen, final=True)
                    break
                tail = _scan(buf, out, seen, final=False)
    except (OSError, EOFError, zlib.error):
        pass  # the loader already reported a broken file; sizes are a bonus
    # one record per collective: the kernels' own args when kineto wrote them, else the
    # host's record_param_comms, else whatever carried the sizes
    for keep in (lambda r: r.on_kernel, lambda r: r.source == "record_param_comms"):
        if any(keep(r) for r in out):
            out = [r for r in out if keep(r)]
            break
    out.sort(key=lambda r: r.ts)
    return out


def _scan(buf: bytes, out: list[CommRecord], seen: set, final: bool) -> bytes:
    """Parse events holding `_KEY` in `buf`; returns the unscanned tail (from the last event
    start that may be incomplete)."""
    # kineto's own layout opens every event on a line `  {`: the searches below stop at the
    # hit's own event; a buffer without one is single-line (or one event a line), whose
    # events are found from their opening `{"ph"` near the hit (`_parse_compact`)
    last_line = buf.rfind(b"\n  {")
    lines = last_line >= 0
    # up to the last event that opens in the buffer; the rest is carried over
    limit = len(buf) if final else last_line if lines else _last_opening(buf)
    pos = 0
    while True:
        hit = buf.find(_KEY, pos, limit)
        if hit < 0:
            break
        ev_start = ev_end = -1
        if lines:  # the enclosing event: back to the `{` that opens a line at event depth
            ev_start = buf.rfind(b"\n  {", 0, hit)
            ev_start = ev_start + 3 if ev_start >= 0 else buf.rfind(b"{", 0, hit)
            ev_end = buf.find(b"\n  }", hit)
        if ev_end < 0 or (not final and ev_end >= limit):
            ev = _parse_compact(buf, hit)
        else:
            ev = _loads(buf[ev_start : ev_end + 4])
        if ev is not None:
            rec = _record(ev)
            if rec is not None:
                key = (rec.ts, rec.name, rec.on_kernel)
                if key not in seen:
                    seen.add(key)
                    out.append(rec)
        pos = hit + len(_KEY)
    return buf[limit:] if not final else b""


def _last_opening(buf: bytes) -> int:
    """Where the last event of a single-line buffer opens (else the whole file would be
    carried to the end), by the first kind of opening the buffer has: a nested `{"name"`
    must not cut an event. 0 where none opens."""
    for opener in _OPENERS:
        at = buf.rfind(opener)
        if at >= 0:
            return at
    return 0


def _parse_compact(buf: bytes, hit: int) -> dict | None:
    """Single-line traces: walk back to the event's `{"ph"` / `{"name"` opening brace."""
    for opener in _OPENERS:
        start = buf.rfind(opener, max(0, hit - _EVENT_SPAN), hit)
        if start < 0:  # an event longer than the span (never a collective's, so far)
            start = buf.rfind(opener, 0, hit)
        if start < 0:
            continue
        # the event's own bytes first; the rest of the buffer only for an event that long
        for end in (start + 2 * _EVENT_SPAN, len(buf)):
            try:
                text = buf[start:end].decode("utf-8", "replace")
                ev, _ = json.JSONDecoder().raw_decode(text)
            except json.JSONDecodeError:
                if end >= len(buf):
                    break
                continue
            if isinstance(ev, dict) and _KEY.strip(b'"').decode() in (ev.get("args") or {}):
                return ev
            break
    return None


def _loads(data: bytes) -> dict | None:
    try:
        ev = json.loads(data)
    except ValueError:
        return None
    return ev if isinstance(ev, dict) else None


def _record(ev: dict) -> CommRecord | None:
    args = ev.get("args") or {}
    try:
        nin = int(args.get("In msg nelems") or 0)
        nout = int(args.get("Out msg nelems") or 0)
        ts = float(ev.get("ts"))
    except (TypeError, ValueError):
        return None
    name = args.get("Collective name") or ev.get("name", "")
    group = args.get("Group size")
    seq = args.get("Seq")
    return CommRecord(
        ts=ts,
        name=collective_kind(str(name)),
        nelems=max(nin, nout),
        dtype=str(args.get("dtype", "")),
        group_size=int(group) if isinstance(group, (int, float)) else None,
        on_kernel=ev.get("cat") == "kernel",
        process_group=args.get("Process Group Name"),
        source=str(ev.get("name", "")),
        seq=int(seq) if isinstance(seq, (int, float)) and not isinstance(seq, bool) else None,
    )
