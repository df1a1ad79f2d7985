"""The kineto reader's per-event loop and its skimmed reading of plain files.

`_Builder.add` reads kineto's fields by subscript and sends an event lacking one to a
patient path; whichever field is missing, the row kept must be the one the documented
defaults give (checked here against a plain `.get` reading of the same events). A plain
file's pieces are cut by reading windows only (`EventArray._skim`); the pieces must still
be exactly the file's events, in order, also where skimming stops (a giant event, a
whitespace run) and the stream takes over."""

from __future__ import annotations

import copy
import json

import pytest

from membound.errors import BadInput
from membound.trace import jsonstream
from membound.trace import kineto as kineto_mod
from membound.trace.columns import Columns
from membound.trace.load import load_trace
from membound.trace.model import CPU_OP, KERNEL, MEMCPY, USER_ANNOTATION
from support import tracebuilder

_OP = {
    "ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 11, "ts": 10.0,
    "dur": 2.0, "args": {"External id": 7, "Input Dims": [[4, 4], [4, 4]],
                         "Input type": ["float", "float"], "Input Strides": [[4, 1], [4, 1]],
                         "Concrete Inputs": ["", ""]},
}  # fmt: skip
_ANNOTATION = {
    "ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 1, "tid": 11,
    "ts": 0.0, "dur": 50.0, "args": {"External id": 1},
}  # fmt: skip
_CALL = {
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 11,
    "ts": 11.0, "dur": 1.0, "args": {"External id": 7, "correlation": 99},
}  # fmt: skip
_KERNEL = {
    "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 12.0, "dur": 3.0,
    "args": {"device": 1, "stream": 7, "correlation": 99, "grid": [1, 1, 1]},
}  # fmt: skip
_COPY = {
    "ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 0,
    "tid": 7, "ts": 20.0, "dur": 1.0,
    "args": {"device": 0, "stream": 7, "correlation": 100, "bytes": 4096},
}  # fmt: skip
_FIELDS = ("name", "tid", "ts", "dur", "args")
_ARGS = ("External id", "correlation", "stream", "device", "bytes", "Input Dims", "grid")


def _variants() -> list:
    """Each event whole, then without each field and each arg, then with odd args."""
    out = []
    for base in (_OP, _ANNOTATION, _CALL, _KERNEL, _COPY):
        out.append(copy.deepcopy(base))
        for field in _FIELDS:
            ev = copy.deepcopy(base)
            ev.pop(field)
            out.append(ev)
        for arg in _ARGS:
            if arg in base["args"]:
                ev = copy.deepcopy(base)
                del ev["args"][arg]
                out.append(ev)
        for odd in (None, [1, 2], "x"):
            ev = copy.deepcopy(base)
            ev["args"] = odd
            out.append(ev)
        ev = copy.deepcopy(base)
        ev["name"] = 12
        out.append(ev)
    for grid in ([4, 2, 3], [4, "x", 1], [4, 2], None, 7, [2.0, 1, 1], [True, 1, 1]):
        ev = copy.deepcopy(_KERNEL)
        ev["args"]["grid"] = grid  # blocks: 24, then -1 for every grid that is not 3 ints
        out.append(ev)
    steplike = copy.deepcopy(_OP)
    steplike["name"] = "ProfilerStep#4"  # a cpu_op step mark: an annotation, no shape
    out.append(steplike)
    # never kept: not a complete event, no category, an unused or odd category, no dict
    out += [
        {**_OP, "ph": "B"},
        {k: v for k, v in _OP.items() if k != "ph"},
        {k: v for k, v in _OP.items() if k != "cat"},
        {**_OP, "cat": "python_function"},
        {**_OP, "cat": ["cpu_op"]},
        {**_OP, "cat": 3},
        [1, 2],
        "event",
        None,
    ]
    return out


def _reference(events: list) -> dict[str, list[tuple]]:
    """The rows kineto's fields give, read with `.get` and the documented defaults."""
    gpu_kind = {"kernel": KERNEL, "gpu_memcpy": MEMCPY}
    cpu_kind = {"cpu_op": CPU_OP, "user_annotation": USER_ANNOTATION}
    rows: dict[str, list[tuple]] = {"cpu": [], "runtime": [], "gpu": []}
    for ev in events:
        if not isinstance(ev, dict) or ev.get("ph") != "X":
            continue
        cat = ev.get("cat")
        if not isinstance(cat, str) or cat not in {*gpu_kind, *cpu_kind, "cuda_runtime"}:
            continue
        name = ev.get("name", "")
        name = name if isinstance(name, str) else str(name)
        args = ev.get("args") if isinstance(ev.get("args"), dict) else {}
        if cat in cpu_kind:
            kind = cpu_kind[cat]
            if kind == CPU_OP and name.startswith("ProfilerStep#"):
                kind = USER_ANNOTATION
            dims = args.get("Input Dims") if kind == CPU_OP else None
            shape = json.dumps(dims) if dims is not None else None
            rows["cpu"].append(
                (ev.get("ts"), ev.get("dur"), name, ev.get("tid"), kind,
                 args.get("External id", -1), shape)
            )  # fmt: skip
        elif cat in gpu_kind:
            rows["gpu"].append(
                (ev.get("ts"), ev.get("dur"), name, gpu_kind[cat], args.get("stream", ev.get("tid")),
                 args.get("device", 0), args.get("correlation", -1), args.get("bytes", -1),
                 _blocks(args.get("grid")))
            )  # fmt: skip
        else:
            rows["runtime"].append(
                (ev.get("ts"), ev.get("dur"), name, ev.get("tid"), args.get("correlation", -1))
            )
    return rows


def _blocks(grid) -> int:
    """The documented blocks of a kernel: x·y·z of a grid of three ints, else -1."""
    if isinstance(grid, list) and len(grid) == 3 and all(type(v) is int for v in grid):
        return grid[0] * grid[1] * grid[2]
    return -1


def _as_columns(rows: list[tuple], builder_cols: Columns) -> dict[str, list]:
    """`rows` through the same typed columns (same conversions, same drops), names kept."""
    names = sorted({r[2] for r in rows})
    cols = Columns({}, check_times=builder_cols.check_times, **{
        k: v.str for k, v in builder_cols.types.items() if k not in ("shape", "strides")
    })  # fmt: skip
    cols.extend([(*r[:2], names.index(r[2]), *r[3 : len(cols.types)]) for r in rows])
    out = _lists(cols.freeze())
    out["name"] = [names[i] for i in out["name"]]
    return out


def _lists(cols: dict) -> dict[str, list]:
    """Columns as lists, NaN as "nan" (NaN equals nothing)."""
    return {k: ["nan" if x != x else x for x in v.tolist()] for k, v in cols.items()}


def test_every_missing_field_keeps_the_row_its_defaults_give():
    events = _variants()
    b = kineto_mod._Builder("t")
    b.add(events)
    want = _reference(events)
    for table in ("cpu", "runtime", "gpu"):
        cols = getattr(b, table)
        got = _lists(cols.freeze())
        got["name"] = [b.names[i] for i in got["name"]]
        shapes = got.pop("shape", None)
        got.pop("strides", None)
        assert got == _as_columns(want[table], cols), table
        if shapes is not None:  # the interned shape is the event's Input Dims
            dims = [json.dumps(b.shapes[i][0]) if i >= 0 else None for i in shapes]
            assert dims == [r[6] for r in want[table]]
    assert b.events == len(events)


def test_the_patient_path_is_taken_only_for_missing_fields(monkeypatch):
    calls = []
    real = kineto_mod._Builder._add_one
    monkeypatch.setattr(
        kineto_mod._Builder, "_add_one", lambda self, ev, *a: calls.append(ev) or real(self, ev, *a)
    )
    b = kineto_mod._Builder("t")
    b.add([copy.deepcopy(e) for e in (_OP, _ANNOTATION, _CALL, _KERNEL, _COPY)])
    assert calls == []
    no_stream = copy.deepcopy(_KERNEL)
    del no_stream["args"]["stream"]
    b.add([no_stream])
    assert calls == [no_stream]
    assert b.gpu.freeze()["stream"].tolist()[-1] == 7  # the event's tid stands in


def _spans(path, chunk, monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    with open(path, "rb") as f:
        arr = jsonstream.EventArray(f, exact=False, limits=jsonstream.Limits.from_env())
        spans = list(arr.spans())
        data = path.read_bytes()
        events = []
        for piece, offset, length in spans:
            if piece is None:
                piece = data[offset : offset + length]
            else:
                assert offset is None or data[offset : offset + length] == piece
            events += json.loads(b"[" + piece + b"]")
    return spans, events


@pytest.mark.parametrize("layout", ["kineto", "compact"])
def test_skimmed_pieces_are_the_files_events_in_order(tmp_path, monkeypatch, layout):
    b = tracebuilder.planted_launch_bound(steps=3, kernels=40)
    p = b.write(tmp_path / "t.json", layout=layout)
    spans, events = _spans(p, 2000, monkeypatch)
    assert events == json.loads(p.read_bytes())["traceEvents"]
    skimmed = [s for s in spans if s[0] is None]
    assert len(skimmed) > 5 and spans[-1][0] is not None  # the array's end is streamed
    assert all(0 < length <= 2000 for _, _, length in skimmed)


@pytest.mark.parametrize("obstacle", ["giant event", "whitespace run"])
def test_skimming_stops_where_a_window_holds_no_cut(tmp_path, monkeypatch, obstacle):
    """Past a giant event or a run of spaces the stream reads on; the tables are those of
    a one-chunk read."""
    b = tracebuilder.planted_launch_bound(steps=3, kernels=40)
    doc = b.document()
    events = doc["traceEvents"]
    middle = len(events) // 3
    text = json.dumps({**doc, "traceEvents": []})[:-2]
    parts = [json.dumps(e) for e in events]
    if obstacle == "giant event":
        big = copy.deepcopy(events[middle])
        big.setdefault("args", {})["blob"] = "y" * 9000
        parts.insert(middle, json.dumps(big))
    else:
        parts[middle] += " " * 9000
    p = tmp_path / "t.json"
    p.write_text(text + ", ".join(parts) + "]}")
    ref = load_trace(p)
    spans, got_events = _spans(p, 2000, monkeypatch)
    assert got_events == json.loads(p.read_bytes())["traceEvents"]
    first_streamed = next(i for i, s in enumerate(spans) if s[0] is not None)
    assert first_streamed > 2 and all(s[0] is not None for s in spans[first_streamed:])
    got = load_trace(p)
    for table in ("cpu", "runtime", "gpu"):
        want = {k: v.tolist() for k, v in getattr(ref, table).cols.items()}
        assert {k: v.tolist() for k, v in getattr(got, table).cols.items()} == want


def _tables(t) -> dict:
    return {
        table: {
            k: ["nan" if x != x else x for x in v.tolist()]
            for k, v in getattr(t, table).cols.items()
        }
        for table in ("cpu", "runtime", "gpu")
    }


@pytest.mark.parametrize(
    "variant", ["kineto", "compact", "braces-in-strings", "nested-lists-of-objects", "nan"]
)
def test_a_piece_parsed_run_by_run_reads_the_tables_of_one_parse(tmp_path, monkeypatch, variant):
    """A piece is parsed a few hundred KiB at a time, each run cut at a fast cut; where one
    lies inside a string or a nested list the run does not parse and the piece is parsed
    whole, so the tables are always those of one parse of the piece."""
    b = tracebuilder.planted_launch_bound(steps=2, kernels=60)
    if variant == "braces-in-strings":
        for e in b.events[::7]:
            e["args"]["note"] = 'x"}, {"a": [1], "b\\\\": "}, {'
    if variant == "nested-lists-of-objects":
        for e in b.events[::5]:
            e["args"]["list"] = [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]
    if variant == "nan":  # json.dump writes NaN: those runs go through json
        b.events[len(b.events) // 2]["ts"] = float("nan")
        b.events[len(b.events) // 3]["dur"] = float("nan")
    p = b.write(tmp_path / "t.json", layout="kineto" if variant == "kineto" else "compact")
    monkeypatch.setattr(kineto_mod, "_RUN", 1 << 40)  # one parse per piece
    ref = load_trace(p)
    runs, parses = [], []
    real_runs, real_parse = kineto_mod._add_runs, kineto_mod._parse_array
    monkeypatch.setattr(kineto_mod, "_add_runs", lambda *a: runs.append(real_runs(*a)) or runs[-1])
    monkeypatch.setattr(kineto_mod, "_parse_array", lambda d: parses.append(1) or real_parse(d))
    monkeypatch.setattr(kineto_mod, "_RUN", 300)
    got = load_trace(p)
    assert _tables(got) == _tables(ref) and got.names == ref.names
    assert got.shapes == ref.shapes and got.dropped == ref.dropped
    if variant in ("kineto", "compact", "nan"):
        assert all(runs) and len(parses) > 20  # run by run
    else:  # a run cut inside a string or a nested list, then the piece whole
        assert runs == [False] and len(parses) >= 2


def test_a_piece_that_does_not_parse_says_so_as_one_parse_does(tmp_path, monkeypatch):
    b = tracebuilder.planted_launch_bound(steps=2, kernels=60)
    text = b.text("compact")
    at = text.index('{"ph"', len(text) // 2)
    p = tmp_path / "t.json"
    p.write_text(text[:at] + '{"ph": "X", oops}, ' + text[at:])
    messages = []
    for run in (1 << 40, 300):
        monkeypatch.setattr(kineto_mod, "_RUN", run)
        with pytest.raises(BadInput, match="an event is not valid JSON") as exc:
            load_trace(p)
        messages.append(str(exc.value))
    assert messages[0] == messages[1]
