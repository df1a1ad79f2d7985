"""The kineto reader: a `.json` / `.json.gz` trace as `torch.profiler` exports it, streamed
into compact typed tables (`trace.model.Trace`), with kineto's naming conventions turned into
typed columns.

A 1 GB trace holds millions of events; `json.load` of it builds Python dicts for all of
them at once (> 4 GB). So the event array is split into runs of whole events as the file is
read (`trace.jsonstream`: any layout, one event per line as kineto writes it or one line as
`json.dump` does), each run is parsed as JSON arrays of ~256 KiB, so that their dicts are
still in the CPU's caches when read and freed (orjson when installed, else json; json also
for runs holding NaN), only the fields the analysis needs are kept in columnar arrays, and
the dicts are dropped. Memory stays bounded whatever the file holds: a few chunks in
flight, at most one event kept back.

Whatever an event's fields hold, loading does not fail on them: odd ids become -1 (or a
stable id for string thread names), odd names text, odd shapes "no shape recorded". Events
whose times cannot be used are dropped and counted (`Trace.dropped`). A file holding no
event the analysis can use (no CPU op, runtime call, kernel or copy) is `BadInput`.

Kineto's category names are read in both spellings: today's (`kernel`, `cuda_runtime`,
`cpu_op`, `gpu_memcpy`...) and the capitalised ones older torch versions wrote (`Kernel`,
`Runtime`, `Operator`, `Memcpy`, `Memset`). Its naming conventions become typed columns at
load time: `trace.kineto_names.classify`.
"""

from __future__ import annotations

import gc
import json
import math
import multiprocessing
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from membound.errors import BadInput
from membound.trace import jsonstream
from membound.trace.columns import Columns
from membound.trace.files import is_compressed, open_trace
from membound.trace.kineto_names import STEP_PREFIX, classify
from membound.trace.model import (
    CPU_OP,
    KERNEL,
    MEMCPY,
    MEMSET,
    PYTHON,
    USER_ANNOTATION,
    Table,
    Trace,
    describe_dropped,
)  # fmt: skip

try:  # orjson is optional: the GPU machine may not have it
    import orjson as _orjson

    def _loads(data: bytes) -> Any:
        return _orjson.loads(data)

    _dumps = _orjson.dumps

except ImportError:  # pragma: no cover - exercised where orjson is absent

    def _loads(data: bytes) -> Any:
        return json.loads(data)

    def _dumps(obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()


_PARALLEL_MIN = 256 << 20  # files from this size are parsed by worker processes
#: bytes of JSON parsed at once: one run's objects (~12x its bytes) are still in the CPU's
#: caches while `_Builder.add` reads them and as they are freed; the dicts of a 16 MiB piece
#: parsed whole (~190 MiB) are fetched from memory again by each pass (on a 2-core EPYC VM,
#: parse + add + free: 2.4 us an event whole, 1.45 us in 256 KiB runs)
_RUN = 256 << 10
_MAX_WORKERS = 2

#: category -> kind, in today's spelling and the one older torch versions wrote
_GPU_KIND = {
    "kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET,
    "Kernel": KERNEL, "Memcpy": MEMCPY, "Memset": MEMSET,
}  # fmt: skip
_CPU_KIND = {
    "cpu_op": CPU_OP, "user_annotation": USER_ANNOTATION, "python_function": PYTHON,
    "Operator": CPU_OP,
}  # fmt: skip
_RUNTIME_CATS = frozenset(("cuda_runtime", "cuda_driver", "runtime", "driver", "Runtime"))
_NO_ARGS: dict = {}
#: a cpu_op's autograd sequence number: a forward op and the backward node it made share it
SEQ = "Sequence number"
#: a cpu_op's shape args: one interned key of the four
DIMS, TYPES, CONCRETE, STRIDES = "Input Dims", "Input type", "Concrete Inputs", "Input Strides"
_NO_SHAPE = (-1, -1)
#: the table an event of a category goes to, and its kind: one lookup per event. Categories
#: not here are not used (python_function stacks among them: often most of a file)
_CPU, _RUNTIME, _GPU = 0, 1, 2
_ROUTE: dict[str, tuple[int, int | None]] = {
    **{cat: (_GPU, kind) for cat, kind in _GPU_KIND.items()},
    **{cat: (_RUNTIME, None) for cat in _RUNTIME_CATS},
    **{cat: (_CPU, kind) for cat, kind in _CPU_KIND.items() if kind != PYTHON},
}


def sniff(head: bytes) -> bool:
    """Whether a file starting with `head` (decompressed) may be a kineto trace: JSON."""
    return head.lstrip()[:1] in (b"{", b"[")


def read(path: Path, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Load one kineto trace; `BadInput` with one sentence when it cannot be read.

    `progress(done, total)` is called as the file is read, in bytes of the file on disk
    (compressed bytes for .gz), so a caller can show a progress bar on big traces."""
    p = Path(path)
    limits = jsonstream.Limits.from_env()
    try:
        return _read(p, progress, limits, exact=False)
    except jsonstream.WrongCut:  # a fast cut fell inside an event: read again, exactly
        return _read(p, progress, limits, exact=True)


def _blocks(grid: Any) -> int:
    """A kernel's thread blocks from its recorded launch `grid` ([x, y, z]); -1 when it has
    none or it is not three integers."""
    try:
        x, y, z = grid
    except (TypeError, ValueError):
        return -1
    if type(x) is not int or type(y) is not int or type(z) is not int:
        return -1
    return x * y * z


def _text(name: Any) -> str:
    """An event name that is not a string (null, a number, a list), as text; a number that
    is no number (NaN, inf) is no name a report should print ("nan"): "(unnamed)"."""
    if name is None:
        return ""
    if isinstance(name, bool) or not isinstance(name, (int, float)):
        return "(unnamed)"  # a list or object (str() of a 1000-deep one recurses)
    if isinstance(name, float) and not math.isfinite(name):
        return "(unnamed)"
    return str(name)


def _dims_ok(dims: Any) -> bool:
    """Whether `dims` is one list per input, each of ints (or of such lists: a TensorList).
    Checked without recursion: a hostile file may nest lists 10^5 deep."""
    if type(dims) is not list:
        return False
    todo = []
    for d in dims:
        if type(d) is not list:
            return False
        todo.append(d)
    while todo:
        for x in todo.pop():
            if type(x) is list:
                todo.append(x)
            elif type(x) is not int:
                return False
    return True


class _Builder:
    def __init__(self, path: str):
        self.path = path
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self.shapes: list[tuple] = []
        self._shape_ids: dict[bytes, int] = {}
        self.strides: list[list] = []
        self._stride_ids: dict[bytes, int] = {}
        self._op_ids: dict[bytes, tuple[int, int]] = {}
        self.dropped: dict[str, int] = {}
        d = self.dropped
        self.cpu = Columns(
            d, check_times=False, ts="f8", dur="f8", name="i4", tid="i8", kind="i1", ext_id="i8", shape="i4",
            strides="i4", seq="i8",
        )  # fmt: skip
        self.runtime = Columns(d, ts="f8", dur="f8", name="i4", tid="i8", correlation="i8")
        self.gpu = Columns(
            d, ts="f8", dur="f8", name="i4", kind="i1", stream="i8", device="i8",
            correlation="i8", bytes="i8", blocks="i8",
        )  # fmt: skip
        self.events = 0

    def _name(self, name: str) -> int:
        i = self._name_ids.get(name)
        if i is None:
            i = self._name_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def _shape(self, args: dict) -> tuple[int, int]:
        """(shape id, strides id) of a cpu_op's args, interned together: one key per op (the
        per-event loop in `add` does the same inline)."""
        dims, strides = args.get(DIMS), args.get(STRIDES)
        if dims is None and strides is None:
            return _NO_SHAPE
        try:
            key = _dumps((dims, args.get(TYPES), args.get(CONCRETE), strides))
        except (TypeError, ValueError, RecursionError):
            return _NO_SHAPE
        return self._op_ids.get(key) or self._new_op(key, dims, args, strides)

    def _new_op(self, key: bytes, dims: Any, args: dict, strides: Any) -> tuple[int, int]:
        ids = self._op_ids[key] = (
            -1 if dims is None else self._shape_of((dims, args.get(TYPES), args.get(CONCRETE))),
            -1 if strides is None else self._stride_of(strides),
        )
        return ids

    def _shape_of(self, parts: tuple) -> int:
        """Intern (dims, types, concrete); malformed dims (a string, a flat list) intern as
        "no shape" (-1), odd types as no types, odd concrete inputs as none."""
        try:
            key = _dumps(parts)
        except (TypeError, ValueError, RecursionError):
            return -1
        i = self._shape_ids.get(key)
        if i is None:
            dims, types, concrete = parts
            if not _dims_ok(dims):
                i = -1
            else:
                types = [t if type(t) is str else "" for t in types] if type(types) is list else []
                concrete = concrete if type(concrete) is list else None
                i = len(self.shapes)
                self.shapes.append((dims, types, concrete))
            self._shape_ids[key] = i
        return i

    def _stride_of(self, strides: Any) -> int:
        try:
            key = _dumps(strides)
        except (TypeError, ValueError, RecursionError):
            return -1
        i = self._stride_ids.get(key)
        if i is None:
            i = -1
            if _dims_ok(strides):
                i = len(self.strides)
                self.strides.append(strides)
            self._stride_ids[key] = i
        return i

    def add(self, events: list) -> None:
        """Keep the needed fields of one batch of events (a tight loop: it runs per event).

        Subscripts, not `.get`: every field kineto writes is there, and an event that lacks
        one (a KeyError, raised before anything is kept) goes through `_add_one`, which
        reads it the patient way and keeps the same row."""
        self.events += len(events)
        gpu_rows, rt_rows, cpu_rows = [], [], []
        gpu_add, rt_add, cpu_add = gpu_rows.append, rt_rows.append, cpu_rows.append
        name_ids, intern, route = self._name_ids, self._name, _ROUTE
        op_ids, new_op, dumps, no_shape = self._op_ids, self._new_op, _dumps, _NO_SHAPE
        for ev in events:
            try:
                if ev["ph"] != "X":
                    continue
                table, kind = route[ev["cat"]]
            except (KeyError, TypeError):  # no dict, no "ph", no kineto category (or a list)
                continue
            try:
                name = ev["name"]
                args = ev["args"]
                ts, dur = ev["ts"], ev["dur"]
                if type(args) is not dict:
                    args = _NO_ARGS
                if table == _CPU:  # the most frequent first
                    tid, ext = ev["tid"], args["External id"]
                elif table == _GPU:
                    stream, device, corr = args["stream"], args["device"], args["correlation"]
                else:
                    tid, corr = ev["tid"], args["correlation"]
            except KeyError:
                self._add_one(ev, table, kind, gpu_add, rt_add, cpu_add)
                continue
            if type(name) is not str:
                name = _text(name)
            nid = name_ids.get(name)
            if nid is None:
                nid = intern(name)
            if table == _CPU:
                ids = no_shape
                if kind == CPU_OP:
                    if name.startswith(STEP_PREFIX):
                        kind = USER_ANNOTATION  # some torch versions file step marks as cpu_op
                    else:  # `_shape`, inline: a third of all events
                        dims, strides = args.get(DIMS), args.get(STRIDES)
                        if dims is not None or strides is not None:
                            try:
                                key = dumps((dims, args.get(TYPES), args.get(CONCRETE), strides))
                                ids = op_ids.get(key) or new_op(key, dims, args, strides)
                            except (TypeError, ValueError, RecursionError):
                                pass
                sid, stid = ids
                cpu_add((ts, dur, nid, tid, kind, ext, sid, stid, args.get(SEQ, -1)))
            elif table == _GPU:
                grid = args.get("grid")
                blocks = -1 if grid is None else _blocks(grid)
                gpu_add((ts, dur, nid, kind, stream, device, corr, args.get("bytes", -1), blocks))
            else:
                rt_add((ts, dur, nid, tid, corr))
        self.gpu.extend(gpu_rows)
        self.runtime.extend(rt_rows)
        self.cpu.extend(cpu_rows)

    def _add_one(self, ev: dict, table: int, kind, gpu_add, rt_add, cpu_add) -> None:
        """One routed event missing a field `add` reads by subscript: the defaults kineto's
        absent fields stand for (no time: dropped later; no stream: the event's tid)."""
        name = ev.get("name", "")
        if type(name) is not str:
            name = _text(name)
        nid = self._name_ids.get(name)
        if nid is None:
            nid = self._name(name)
        args = ev.get("args")
        if type(args) is not dict:
            args = _NO_ARGS
        ts, dur = ev.get("ts"), ev.get("dur")
        if table == _GPU:
            gpu_add(
                (
                    ts,
                    dur,
                    nid,
                    kind,
                    args.get("stream", ev.get("tid")),
                    args.get("device", 0),
                    args.get("correlation", -1),
                    args.get("bytes", -1),
                    _blocks(args.get("grid")),
                )
            )
        elif table == _CPU:
            sid = stid = -1
            if kind == CPU_OP:
                if name.startswith(STEP_PREFIX):
                    kind = USER_ANNOTATION
                else:
                    sid, stid = self._shape(args)
            cpu_add(
                (ts, dur, nid, ev.get("tid"), kind, args.get("External id", -1), sid, stid,
                 args.get(SEQ, -1))
            )  # fmt: skip
        else:
            rt_add((ts, dur, nid, ev.get("tid"), args.get("correlation", -1)))

    def export(self) -> tuple:
        """What a worker process sends back: its own name/shape tables and columns."""
        return (
            self.names,
            self.shapes,
            self.strides,
            self.gpu.freeze(),
            self.runtime.freeze(),
            self.cpu.freeze(),
            self.events,
            self.dropped,
        )

    def merge(self, part: tuple) -> None:
        names, shapes, strides, gpu, runtime, cpu, events, dropped = part
        self.events += events
        for reason, n in dropped.items():
            self.dropped[reason] = self.dropped.get(reason, 0) + n
        name_map = np.array([self._name(n) for n in names] or [0], dtype=np.int32)
        shape_map = np.array([self._shape_of(s) for s in shapes] or [0], dtype=np.int32)
        stride_map = np.array([self._stride_of(s) for s in strides] or [0], dtype=np.int32)
        for cols, target in ((gpu, self.gpu), (runtime, self.runtime), (cpu, self.cpu)):
            if not len(cols["ts"]):
                continue
            cols["name"] = name_map[cols["name"]]
            for col, mapping in (("shape", shape_map), ("strides", stride_map)):
                if col in cols:
                    ids = cols[col]
                    cols[col] = np.where(ids >= 0, mapping[np.maximum(ids, 0)], -1).astype(np.int32)
            for name, arr in cols.items():
                target.parts[name].append(arr)

    def build(self, fields: dict) -> Trace:
        cpu, runtime, gpu = self.cpu.freeze(), self.runtime.freeze(), self.gpu.freeze()
        if not (len(cpu["ts"]) or len(runtime["ts"]) or len(gpu["ts"])):
            dropped = describe_dropped(self.dropped)
            raise BadInput(
                f"{self.path} holds no event membound can use (no CPU op, runtime call, kernel "
                f"or copy in kineto's categories{'; ' + dropped if dropped else ''}); pass "
                "a trace exported by torch.profiler (prof.export_chrome_trace())."
            )
        classify(self.names, cpu, runtime, gpu)
        props = fields.get("deviceProperties")
        return Trace(
            path=self.path,
            names=self.names,
            cpu=Table(cpu),
            runtime=Table(runtime),
            gpu=Table(gpu),
            shapes=self.shapes,
            device_properties=props if isinstance(props, list) else [],
            metadata={
                "events": self.events,
                "base_time_ns": fields.get("baseTimeNanoseconds"),
                "schema_version": fields.get("schemaVersion"),
            },
            strides=self.strides,
            dropped=dict(self.dropped),
        )


def bad(path: Path, why: str) -> BadInput:
    return BadInput(
        f"{path} is truncated or not a kineto trace ({why}); "
        "export it again with prof.export_chrome_trace() or pass another file."
    )


def _object_fields(body: bytes) -> dict[str, Any]:
    """The top-level keys in `body`, text of the document's object without its braces and
    event array (before or after it). {} when it does not parse (too deep, malformed): the
    few header fields used are optional."""
    body = body.strip().strip(b",").strip()
    if not body:
        return {}
    try:
        doc = _loads(b"{" + body + b"}")
    except (ValueError, RecursionError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _parse(piece: bytes) -> Any:
    """A run of events as a list; json where orjson refuses (NaN, which json.dump writes)."""
    return _parse_array(b"[" + piece + b"]")


def _parse_array(data: bytes | memoryview) -> Any:
    """`data`, a JSON array, as a list; json where orjson refuses (NaN, Infinity)."""
    try:
        return _loads(data)
    except ValueError as exc:
        raw = bytes(data)
        if b"NaN" not in raw and b"Infinity" not in raw:
            raise
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):
            raise exc from None


def _parse_piece(piece: bytes) -> tuple | str:
    """Parse one run of whole events (worker side); a message when it is not valid JSON."""
    return _build(b"[" + piece + b"]")


def _build(data: bytes | memoryview) -> tuple | str:
    """The builder's export of `data`, a JSON array of events; a message when it is not
    valid JSON."""
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived dicts: the cyclic GC only costs time here
    try:
        builder = _Builder("")
        if len(data) > 2 * _RUN and _add_runs(builder, data):
            return builder.export()
        try:  # one run, or a run that did not parse: the array whole says what is wrong
            events = _parse_array(data)
        except (ValueError, RecursionError) as exc:
            return str(exc).split(":")[0].split("\n")[0] or "invalid JSON"
        builder = _Builder("")
        builder.add(events)
        del events
        return builder.export()
    finally:
        if enabled:
            gc.enable()


def _add_runs(builder: _Builder, data: bytes | memoryview) -> bool:
    """`builder.add` of the events of `data` (a JSON array), parsed `_RUN` bytes at a time,
    each run cut at a fast cut; False where a run does not parse (the builder then holds
    part of the array: start again).

    The same events as one parse of `data`: runs that all parse as arrays are the array's
    elements in order, and a cut inside a string or a nested list leaves the run before it
    unclosed, which never parses."""
    with memoryview(data) as view:
        end = len(view) - 1  # the array's "]"
        start = 1
        while start < end:
            cut = jsonstream.next_cut(view, start + _RUN, end) if end - start > 2 * _RUN else -1
            stop = cut if cut >= 0 else end
            try:
                events = _parse_array(b"".join((b"[", view[start:stop], b"]")))
            except (ValueError, RecursionError):
                return False
            builder.add(events)
            del events
            start = stop + 1
    return True


#: a worker's read buffer, kept from piece to piece, the piece read straight into its
#: "[...]": a fresh 16 MiB read, then its wrapped copy, cost a page fault per 4 KiB each
_buffer = bytearray()


def _parse_range(path: str, offset: int, length: int) -> tuple | str:
    """`_parse_piece` of bytes [offset, offset + length) of a plain file, read here (a
    worker): the page cache is cheaper than 16 MiB through a pipe."""
    global _buffer
    if len(_buffer) < length + 2:
        _buffer = bytearray(length + 2 + (length >> 3))
    view = memoryview(_buffer)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            n = f.readinto(view[1 : length + 1])
        view[0], view[n + 1] = 0x5B, 0x5D  # "[" piece "]"
        with view[: n + 2] as data:
            return _build(data)
    finally:
        view.release()


#: glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3


def _worker_init() -> None:
    """A parse worker keeps the memory it freed for the next piece. orjson asks for ~12x a
    piece at once (~190 MiB for 16 MiB, a fraction of it touched): glibc maps a block that
    big afresh each time and gives the heap's top back after it, so every touched page
    faults in again, piece after piece (a sixth of the worker's time on this VM). Above
    these thresholds it still does; the heap kept is bounded by one piece's parse. A no-op
    where the C library has no mallopt."""
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt(_M_MMAP_THRESHOLD, 1 << 30)
        mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError, TypeError):  # pragma: no cover - not glibc
        pass


def _parse_job(job: tuple) -> tuple | str:
    """`_parse_piece` here (inline) of a job (piece, (path, offset), length): a piece not
    read yet is read now."""
    piece, where, length = job
    if piece is None:
        with open(where[0], "rb") as f:
            f.seek(where[1])
            piece = f.read(length)
    return _parse_piece(piece)


class _PieceError(Exception):
    """A run of events did not parse."""


class _Sink:
    """Parses pieces inline, or in worker processes for big files (2+ cores).

    Workers are forked where the platform allows (no re-import of the caller's `__main__`,
    which may be stdin or a notebook); a worker only runs the JSON parser and NumPy, never
    CUDA. If the pool breaks, the pieces in flight are parsed inline. A piece that does not
    parse raises `_PieceError` (in file order).
    """

    def __init__(self, builder: _Builder, workers: int, start_after: int = 0):
        self.builder = builder
        self.pool = None
        self.pending: deque = deque()
        self.workers = workers
        self.start_after = start_after  # bytes parsed inline before the workers start
        self.seen = 0
        self.limit = 2 * workers  # bounded: never more than this many chunks in flight
        if workers > 1 and start_after <= 0:
            self._start()

    def _start(self) -> None:
        self.start_after = -1  # once only
        method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
        try:
            self.pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_worker_init,
            )
        except (OSError, ValueError):
            self.pool = None

    def submit(
        self, piece: bytes | None, where: tuple[str, int] | None = None, length: int = 0
    ) -> None:
        """Parse `piece`; `where` = (path, offset) when it is that slice of a plain file,
        `length` bytes long (`piece` None: not read yet)."""
        job = (piece, where, len(piece) if piece is not None else length)
        self.seen += job[2]
        if self.workers > 1 and 0 < self.start_after < self.seen:
            self._start()  # a small gzip that expands to a big trace
        if self.pool is not None:
            try:
                if where is not None:
                    future = self.pool.submit(_parse_range, where[0], where[1], job[2])
                else:
                    future = self.pool.submit(_parse_piece, piece)
                self.pending.append((future, job))
            except (BrokenProcessPool, RuntimeError):
                self._go_inline()
        if self.pool is None:
            self._take(_parse_job(job))
            return
        while len(self.pending) >= self.limit:
            self._collect()

    def _collect(self) -> None:
        future, job = self.pending.popleft()
        try:
            part = future.result()
        except Exception:  # a broken or killed worker: this piece and the rest run inline
            self.pending.appendleft((None, job))
            self._go_inline()
            return
        self._take(part)

    def _go_inline(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        while self.pending:
            future, job = self.pending.popleft()
            part = None
            if future is not None:
                try:
                    part = future.result(timeout=0) if future.done() else None
                except Exception:
                    part = None
            self._take(part if part is not None else _parse_job(job))

    def _take(self, part) -> None:
        if isinstance(part, str):
            raise _PieceError(part)
        self.builder.merge(part)

    def close(self) -> None:
        while self.pending and self.pool is not None:
            self._collect()
        self._go_inline()

    def abandon(self) -> None:
        self.pending.clear()
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


def _workers(p: Path, compressed: bool) -> tuple[int, int]:
    """(worker processes, bytes to parse inline before starting them): at once for a big
    file, once a compressed one has expanded past the same size (its size on disk says
    little)."""
    workers = min(_MAX_WORKERS, os.cpu_count() or 1)
    if workers < 2:
        return 1, 0
    if not compressed and p.stat().st_size >= _PARALLEL_MIN:
        return workers, 0
    return workers, _PARALLEL_MIN


def _position(f) -> int:
    """Bytes of the file on disk consumed so far (the compressed position for gzip and xz:
    a GzipFile's `fileobj`, an LZMAFile's `_fp`)."""
    raw = getattr(f, "fileobj", None) or getattr(f, "_fp", None) or f
    try:
        return raw.tell()
    except (OSError, ValueError):
        return 0


def _read(
    p: Path, progress: Callable[[int, int], None] | None, limits: jsonstream.Limits, exact: bool
) -> Trace:
    total = p.stat().st_size
    compressed = is_compressed(p)  # judged once: the workers and the expansion limit ask
    builder = _Builder(str(p))
    events = None
    with open_trace(p) as f:
        sink = _Sink(builder, *_workers(p, compressed))
        try:
            events = jsonstream.EventArray(
                f,
                exact=exact,
                limits=limits,
                compressed_size=total if compressed else None,
            )
            for piece, offset, length in events.spans():
                sink.submit(piece, None if offset is None else (str(p), offset), length)
                if progress is not None:
                    progress(_position(f), total)
            sink.close()
        except jsonstream.TooBig as exc:
            raise BadInput(f"{p} {exc}.") from None
        except jsonstream.StreamError as exc:
            wrong = events is not None and events.fast_cuts and not exact
            if wrong:
                raise jsonstream.WrongCut from None  # a fast cut may have misled the scan
            raise bad(p, str(exc)) from None
        except _PieceError as exc:
            if not exact:
                raise jsonstream.WrongCut from None
            raise bad(p, f"an event is not valid JSON: {exc}") from None
        finally:
            sink.abandon()
    fields = _object_fields(events.header)
    fields.update(_object_fields(events.trailer))
    if progress is not None:
        progress(total, total)
    return builder.build(fields)
