"""The kineto reader: a `.json` / `.json.gz` trace as `torch.profiler` exports it, streamed
into compact typed tables (`trace.model.Trace`), with kineto's naming conventions turned into
typed columns.

A 1 GB trace holds millions of events; `json.load` of it builds Python dicts for all of
them at once (> 4 GB). Kineto writes one top-level event after another, each starting on a
line of its own as `  {`, so the fast path reads the file in chunks, cuts each chunk after
the last `,\n  {` (only top-level events start a line with exactly two spaces and a brace),
parses the whole run of events as one JSON array (orjson when installed, else json), keeps
only the fields the analysis needs in columnar arrays, and drops the dicts. Files written
differently (one line, other indentation, a bare array) fall back to parsing the whole
document, which is fine for the small files such writers produce.

Its naming conventions become typed columns at load time: `trace.kineto_names.classify`.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import re
from collections import deque
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

import numpy as np

from membound.errors import BadInput
from membound.trace.files import is_gzip, open_trace
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


_CHUNK = 16 << 20
_HEAD_LIMIT = 64 << 20  # where "traceEvents" must start for the streaming path
_CUT = b",\n  {"
_PARALLEL_MIN = 256 << 20  # files from this size are parsed by worker processes
_MAX_WORKERS = 2


_GPU_KIND = {"kernel": KERNEL, "gpu_memcpy": MEMCPY, "gpu_memset": MEMSET}
_CPU_KIND = {"cpu_op": CPU_OP, "user_annotation": USER_ANNOTATION, "python_function": PYTHON}
_RUNTIME_CATS = ("cuda_runtime", "cuda_driver", "runtime", "driver")


def sniff(head: bytes) -> bool:
    """Whether a file starting with `head` (decompressed) may be a kineto trace: JSON."""
    return head.lstrip()[:1] in (b"{", b"[")


def read(path: Path, progress: Callable[[int, int], None] | None = None) -> Trace:
    """Load one kineto trace; `BadInput` with one sentence when it cannot be read.

    `progress(done, total)` is called as the file is read, in bytes of the file on disk
    (compressed bytes for .gz), so a caller can show a progress bar on big traces."""
    trace = _load_streaming(path, progress)
    if trace is None:
        trace = _load_whole(path)
    return trace


class _Columns:
    """Columns filled batch by batch: each batch of row tuples becomes NumPy arrays at once,
    so Python objects live only for one batch (the memory bound of a 1 GB trace)."""

    def __init__(self, **types: str):
        self.types = {name: np.dtype(code) for name, code in types.items()}
        self.parts: dict[str, list[np.ndarray]] = {name: [] for name in types}

    def extend(self, rows: list[tuple]) -> None:
        if not rows:
            return
        for name, col in zip(self.types, zip(*rows, strict=False), strict=False):
            self.parts[name].append(_column(col, self.types[name]))

    def freeze(self) -> dict[str, np.ndarray]:
        return {
            name: np.concatenate(parts) if parts else np.zeros(0, dtype=self.types[name])
            for name, parts in self.parts.items()
        }


def _column(values: tuple, dtype: np.dtype) -> np.ndarray:
    try:
        return np.array(values, dtype=dtype)
    except (TypeError, ValueError):
        # an odd value (a string thread id, a missing ts): convert one by one
        conv = float if dtype.kind == "f" else _int
        out = []
        for v in values:
            try:
                out.append(
                    conv(v) if v is not None else (float("nan") if dtype.kind == "f" else -1)
                )
            except (TypeError, ValueError):
                out.append(float("nan") if dtype.kind == "f" else -1)
        return np.array(out, dtype=dtype)


class _Builder:
    def __init__(self, path: str):
        self.path = path
        self.names: list[str] = []
        self._name_ids: dict[str, int] = {}
        self.shapes: list[tuple] = []
        self._shape_ids: dict[bytes, int] = {}
        self.cpu = _Columns(
            ts="f8", dur="f8", name="i4", tid="i8", kind="i1", ext_id="i8", shape="i4"
        )
        self.runtime = _Columns(ts="f8", dur="f8", name="i4", tid="i8", correlation="i8")
        self.gpu = _Columns(
            ts="f8",
            dur="f8",
            name="i4",
            kind="i1",
            stream="i8",
            device="i8",
            correlation="i8",
            bytes="i8",
        )
        self.events = 0

    def _name(self, name: str) -> int:
        i = self._name_ids.get(name)
        if i is None:
            i = self._name_ids[name] = len(self.names)
            self.names.append(name)
        return i

    def _shape(self, args: dict) -> int:
        dims = args.get("Input Dims")
        if dims is None:
            return -1
        return self._shape_of((dims, args.get("Input type"), args.get("Concrete Inputs")))

    def add(self, events: list) -> None:
        """Keep the needed fields of one batch of events (a tight loop: it runs per event)."""
        self.events += len(events)
        gpu_rows, rt_rows, cpu_rows = [], [], []
        gpu_add, rt_add, cpu_add = gpu_rows.append, rt_rows.append, cpu_rows.append
        name_ids, intern, shape = self._name_ids, self._name, self._shape
        gpu_kind, cpu_kind = _GPU_KIND, _CPU_KIND
        for ev in events:
            if type(ev) is not dict or ev.get("ph") != "X":
                continue
            cat = ev.get("cat")
            name = ev.get("name", "")
            nid = name_ids.get(name)
            if nid is None:
                nid = intern(name)
            args = ev.get("args") or {}
            kind = gpu_kind.get(cat)
            if kind is not None:
                gpu_add(
                    (
                        ev.get("ts"),
                        ev.get("dur", 0.0),
                        nid,
                        kind,
                        args.get("stream", ev.get("tid")),
                        args.get("device", 0),
                        args.get("correlation", -1),
                        args.get("bytes", -1),
                    )
                )
            elif cat in _RUNTIME_CATS:
                rt_add(
                    (
                        ev.get("ts"),
                        ev.get("dur", 0.0),
                        nid,
                        ev.get("tid"),
                        args.get("correlation", -1),
                    )
                )
            else:
                kind = cpu_kind.get(cat)
                if kind is None or kind == PYTHON:
                    continue  # python_function stacks: not used, often most of the file
                if kind == CPU_OP and name.startswith(STEP_PREFIX):
                    kind = USER_ANNOTATION  # some torch versions file step marks as cpu_op
                cpu_add(
                    (
                        ev.get("ts"),
                        ev.get("dur", 0.0),
                        nid,
                        ev.get("tid"),
                        kind,
                        args.get("External id", -1),
                        shape(args) if kind == CPU_OP else -1,
                    )
                )
        self.gpu.extend(gpu_rows)
        self.runtime.extend(rt_rows)
        self.cpu.extend(cpu_rows)

    def export(self) -> tuple:
        """What a worker process sends back: its own name/shape tables and columns."""
        return (
            self.names,
            self.shapes,
            self.gpu.freeze(),
            self.runtime.freeze(),
            self.cpu.freeze(),
            self.events,
        )

    def merge(self, part: tuple) -> None:
        names, shapes, gpu, runtime, cpu, events = part
        self.events += events
        name_map = np.array([self._name(n) for n in names] or [0], dtype=np.int32)
        shape_map = np.array([self._shape_of(parts) for parts in shapes] or [0], dtype=np.int32)
        for cols, target in ((gpu, self.gpu), (runtime, self.runtime), (cpu, self.cpu)):
            if not len(cols["ts"]):
                continue
            cols["name"] = name_map[cols["name"]]
            if "shape" in cols:
                sh = cols["shape"]
                cols["shape"] = np.where(sh >= 0, shape_map[np.maximum(sh, 0)], -1).astype(np.int32)
            for name, arr in cols.items():
                target.parts[name].append(arr)

    def _shape_of(self, parts: tuple) -> int:
        key = _dumps(parts)
        i = self._shape_ids.get(key)
        if i is None:
            i = self._shape_ids[key] = len(self.shapes)
            self.shapes.append(parts)
        return i

    def build(self, device_properties: list, metadata: dict) -> Trace:
        cpu, runtime, gpu = self.cpu.freeze(), self.runtime.freeze(), self.gpu.freeze()
        classify(self.names, cpu, runtime, gpu)
        return Trace(
            path=self.path,
            names=self.names,
            cpu=Table(cpu),
            runtime=Table(runtime),
            gpu=Table(gpu),
            shapes=self.shapes,
            device_properties=device_properties if isinstance(device_properties, list) else [],
            metadata=metadata,
        )


def _int(v: Any) -> int:
    if isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        # thread ids like "stream 7" or "PyTorch Profiler": keep them distinct but stable
        return -2 - (hash(str(v)) & 0xFFFFFF)


def bad(path: Path, why: str) -> BadInput:
    return BadInput(
        f"{path} is truncated or not a kineto trace ({why}); "
        "export it again with prof.export_chrome_trace() or pass another file."
    )


_KEY_RE = re.compile(rb'"(deviceProperties|baseTimeNanoseconds|schemaVersion)"\s*:\s*')


def _top_level_fields(text: bytes) -> dict[str, Any]:
    """The few top-level keys we use, read from the text around the event array."""
    out: dict[str, Any] = {}
    decoder = json.JSONDecoder()
    for m in _KEY_RE.finditer(text):
        try:
            value, _ = decoder.raw_decode(text[m.end() :].decode("utf-8", "replace"))
        except json.JSONDecodeError:
            continue
        out[m.group(1).decode()] = value
    return out


def _parse_piece(piece: bytes) -> tuple | None:
    """Parse one run of whole events (worker side); None when it is not valid JSON."""
    enabled = gc.isenabled()
    gc.disable()  # millions of short-lived dicts: the cyclic GC only costs time here
    try:
        try:
            events = _loads(b"[" + piece + b"]")
        except ValueError:
            return None
        builder = _Builder("")
        builder.add(events)
        del events
        return builder.export()
    finally:
        if enabled:
            gc.enable()


class _Sink:
    """Parses pieces inline, or in worker processes for big files (2+ cores).

    Workers are forked where the platform allows (no re-import of the caller's `__main__`,
    which may be stdin or a notebook); a worker only runs the JSON parser and NumPy, never
    CUDA. If the pool breaks, the pieces in flight are parsed inline.
    """

    def __init__(self, builder: _Builder, workers: int):
        self.builder = builder
        self.pool = None
        self.pending: deque = deque()
        self.failed = False
        if workers > 1:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            try:
                self.pool = ProcessPoolExecutor(
                    max_workers=workers, mp_context=multiprocessing.get_context(method)
                )
            except (OSError, ValueError):
                self.pool = None
            self.limit = 2 * workers  # bounded: never more than this many chunks in flight

    def submit(self, piece: bytes) -> None:
        if self.pool is not None:
            try:
                self.pending.append((self.pool.submit(_parse_piece, piece), piece))
            except (BrokenProcessPool, RuntimeError):
                self._go_inline()
        if self.pool is None:
            self._take(_parse_piece(piece))
            return
        while len(self.pending) >= self.limit:
            self._collect()

    def _collect(self) -> None:
        future, piece = self.pending.popleft()
        try:
            part = future.result()
        except Exception:  # a broken or killed worker: this piece and the rest run inline
            self.pending.appendleft((None, piece))
            self._go_inline()
            return
        self._take(part)

    def _go_inline(self) -> None:
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        while self.pending:
            future, piece = self.pending.popleft()
            part = None
            if future is not None:
                try:
                    part = future.result(timeout=0) if future.done() else None
                except Exception:
                    part = None
            self._take(part if part is not None else _parse_piece(piece))

    def _take(self, part) -> None:
        if part is None:
            self.failed = True
        else:
            self.builder.merge(part)

    def close(self) -> None:
        while self.pending and self.pool is not None:
            self._collect()
        self._go_inline()


def _workers(p: Path) -> int:
    size = p.stat().st_size
    gz = is_gzip(p)
    if size < (_PARALLEL_MIN // 8 if gz else _PARALLEL_MIN):
        return 1
    return min(_MAX_WORKERS, os.cpu_count() or 1)


def _position(f) -> int:
    """Bytes of the file on disk consumed so far (the compressed position for gzip)."""
    raw = getattr(f, "fileobj", None) or f
    try:
        return raw.tell()
    except (OSError, ValueError):
        return 0


def _load_streaming(p: Path, progress: Callable[[int, int], None] | None = None) -> Trace | None:
    """The chunked fast path; None when the file is not laid out the way kineto writes it."""
    total = p.stat().st_size
    with open_trace(p) as f:
        buf = f.read(_CHUNK)
        if not buf.lstrip()[:1] == b"{":
            if buf.lstrip()[:1] == b"[":
                return None  # a bare event array: whole-document path
            raise bad(p, "it is not JSON")
        head = buf
        while True:
            m = re.search(rb'"traceEvents"\s*:\s*\[', head)
            if m or len(head) > _HEAD_LIMIT:
                break
            more = f.read(_CHUNK)
            if not more:
                break
            head += more
        if not m or _CUT not in head[m.end() :]:
            return None
        header = head[: m.start()]
        buf = head[m.end() :]
        del head
        builder = _Builder(str(p))
        sink = _Sink(builder, _workers(p))
        try:
            while True:
                more = f.read(_CHUNK)
                if progress is not None:
                    progress(_position(f), total)
                cut = buf.rfind(_CUT)
                if cut > 0:
                    piece, buf = buf[:cut], buf[cut + 1 :]
                    sink.submit(piece)
                    del piece
                    if sink.failed:
                        return None  # not kineto's layout after all
                if not more:
                    break
                buf += more
            sink.close()  # merge in file order before the tail
            # the tail: the last events, "]", then the rest of the top-level object
            events, trailer = _parse_tail(p, buf)
            builder.add(events)
        finally:
            sink.close()
        if sink.failed:
            return None
        fields = _top_level_fields(header)
        fields.update(_top_level_fields(trailer))
        if progress is not None:
            progress(total, total)
    return builder.build(fields.get("deviceProperties") or [], _metadata(fields, builder))


def _parse_tail(p: Path, buf: bytes) -> tuple[list, bytes]:
    text = buf.decode("utf-8", "replace")
    decoder = json.JSONDecoder()
    events = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n:
            raise bad(p, "the event list never ends")
        if text[i] == "]":
            rest = text[i + 1 :].rstrip()
            if not rest.endswith("}"):
                raise bad(p, "the file ends mid-document")
            return events, rest.encode()
        try:
            ev, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            raise bad(p, "the last events are cut off") from None
        events.append(ev)


def _load_whole(p: Path) -> Trace:
    with open_trace(p) as f:
        data = f.read()
    try:
        doc = _loads(data)
    except ValueError as exc:
        raise bad(p, str(exc).split("\n")[0]) from None
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise bad(p, 'it has no "traceEvents" list')
    builder = _Builder(str(p))
    builder.add(doc["traceEvents"])
    return builder.build(doc.get("deviceProperties") or [], _metadata(doc, builder))


def _metadata(fields: dict, builder: _Builder) -> dict[str, Any]:
    return {
        "events": builder.events,
        "base_time_ns": fields.get("baseTimeNanoseconds"),
        "schema_version": fields.get("schemaVersion"),
    }
