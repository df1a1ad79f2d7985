"""Hostile inputs to the loader (issue 17): each one loads, or is one `BadInput` sentence;
never a traceback. Files are generated in tmp_path, small: the big-file memory bounds are
measured by benchmarks/bench_trace_memory.py."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from membound.errors import BadInput
from membound.trace import jsonstream
from membound.trace import kineto as kineto_mod
from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from membound.trace.model import CPU_OP, KERNEL, MEMCPY, MEMSET, STEP, describe_dropped
from support import tracebuilder


def _write(path: Path, doc, *, gz: bool = False) -> Path:
    data = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def _doc(events: list, **top) -> dict:
    return {"schemaVersion": 1, **top, "traceEvents": events}


def _kernel(ts=10.0, dur=5.0, **args) -> dict:
    return {
        "ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
        "args": {"stream": 7, "device": 0, "correlation": 1, **args},
    }  # fmt: skip


def _op(name="aten::add", ts=0.0, dur=20.0, **args) -> dict:
    return {
        "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 100, "ts": ts, "dur": dur,
        "args": {"External id": 1, **args},
    }  # fmt: skip


def _both_layouts(tmp_path: Path, doc: dict) -> list:
    """The document loaded as json.dump writes it (one line) and as kineto does."""
    one = load_trace(_write(tmp_path / "one.json", doc))
    b = tracebuilder.TraceBuilder()
    b.events = doc["traceEvents"]
    kin = load_trace(b.write(tmp_path / "kin.json"))
    return [one, kin]


# --- hostile fields --------------------------------------------------------------------


@pytest.mark.parametrize("args", [["a", 1], "a string", 7, None])
def test_args_not_a_dict_is_no_args(tmp_path, args):
    ev = _kernel()
    ev["args"] = args
    for t in _both_layouts(tmp_path, _doc([ev, _op()])):
        assert len(t.gpu) == 1 and t.gpu.correlation[0] == -1 and t.gpu.device[0] == 0


@pytest.mark.parametrize("name", [None, 17, 2.5, float("nan"), float("inf"), ["a", "b"], {"x": 1}])
def test_name_not_a_string_becomes_text(tmp_path, name):
    ops = [_op(name=name), _op(name="aten::mm", ts=30)]
    for t in _both_layouts(tmp_path, _doc([_kernel(), *ops])):
        names = [t.names[i] for i in t.cpu.name]
        assert len(names) == 2 and all(isinstance(n, str) for n in names)
        assert names[1] == "aten::mm"
        assert "nan" not in names[0].lower() and "inf" not in names[0].lower()


@pytest.mark.parametrize("cat", [["kernel"], {"a": 1}, 3, None])
def test_category_not_a_string_is_skipped(tmp_path, cat):
    ev = _kernel(ts=1)
    ev["cat"] = cat
    t = load_trace(_write(tmp_path / "t.json", _doc([ev, _kernel(ts=2)])))
    assert t.gpu.ts.tolist() == [2.0]


@pytest.mark.parametrize(
    "dims",
    ["abc", [1, 2], [[1, "x"]], [[1.5, 2]], {"a": 1}, 5, [[[1, [2, None]]]], [None]],
)
def test_malformed_input_dims_are_no_shape(tmp_path, dims):
    good = _op("aten::mm", ts=30, **{"Input Dims": [[2, 3], [3, 4]], "Input type": ["float"] * 2})
    bad = _op("aten::add", **{"Input Dims": dims, "Input type": "float", "Input Strides": "x"})
    t = load_trace(_write(tmp_path / "t.json", _doc([_kernel(), bad, good])))
    assert t.cpu.shape.tolist()[0] == -1 and t.cpu.strides.tolist() == [-1, -1]
    dims_, types, concrete = t.shapes[t.cpu.shape[1]]
    assert dims_ == [[2, 3], [3, 4]] and types == ["float", "float"] and concrete is None


def test_malformed_types_and_concrete_inputs_are_dropped_not_fatal(tmp_path):
    op = _op(**{"Input Dims": [[4], [4]], "Input type": "float", "Concrete Inputs": "1"})
    op2 = _op(ts=30, **{"Input Dims": [[4]], "Input type": [3, None]})
    t = load_trace(_write(tmp_path / "t.json", _doc([op, op2])))
    assert t.shapes[t.cpu.shape[0]] == ([[4], [4]], [], None)
    assert t.shapes[t.cpu.shape[1]] == ([[4]], ["", ""], None)


def test_hostile_shapes_survive_join_calls(tmp_path):
    """The cost join (analysis.ops.join_calls) reads what the loader kept."""
    from membound.analysis.ops import join_calls

    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 1000)
    b.op("aten::add", 10, 50)
    b.events[-1]["args"].update({"Input Dims": "abc", "Input type": 5})
    b.launch("k", 20, 30, 10)
    b.op("aten::mul", 100, 50)
    b.events[-1]["args"].update({"Input Dims": [[2, "x"]], "Input type": ["float"]})
    b.launch("k2", 110, 130, 10)
    calls = join_calls(load_trace(b.write(tmp_path / "t.json")))
    assert [c.dims for c in calls] == [None, None] and not any(c.known for c in calls)


@pytest.mark.parametrize(
    "field,value",
    [("correlation", 2**70), ("correlation", -(2**64)), ("stream", -(2**64)), ("device", 2**70)],
)
def test_ids_past_int64_do_not_overflow(tmp_path, field, value):
    evs = [_kernel(ts=1, **{field: value}), _kernel(ts=2, correlation=5)]
    for t in _both_layouts(tmp_path, _doc(evs)):
        assert len(t.gpu) == 2
        col = t.gpu.cols[field][0]
        if field == "stream":  # thread-like: kept distinct, stable, below -1
            assert col < -1 and t.gpu.stream[1] == 7
        else:
            assert col == -1
        assert t.gpu.correlation[1] == 5


def test_thread_and_stream_names_get_distinct_stable_ids(tmp_path):
    a, b = _kernel(ts=1), _kernel(ts=2)
    a["args"]["stream"], b["args"]["stream"] = "stream 7", "stream 8"
    t1 = load_trace(_write(tmp_path / "a.json", _doc([a, b])))
    t2 = load_trace(_write(tmp_path / "b.json", _doc([a, b])))
    s = t1.gpu.stream.tolist()
    assert s[0] != s[1] and min(s) < -1 and s == t2.gpu.stream.tolist()


def test_bad_times_are_dropped_and_counted(tmp_path):
    evs = [
        _kernel(ts=1),
        _kernel(ts=None),
        _kernel(ts="soon"),
        _kernel(ts=[1]),
        _kernel(dur=None),
        _kernel(dur=-5),
        _kernel(dur=1e300),
        _kernel(ts=float("nan")),  # json.dump writes NaN, which orjson refuses
        _kernel(ts=3, dur=float("inf")),
        _op(ts=4),
    ]
    missing = _kernel(ts=5)
    del missing["ts"]
    nodur = _op(ts=6)
    del nodur["dur"]
    for t in _both_layouts(tmp_path, _doc(evs + [missing, nodur])):
        assert t.gpu.ts.tolist() == [1.0]
        # host events keep their times as read (NaN where none): the analysis leaves them out
        # and, for a step mark, the step it bounds (analysis/clean.py)
        assert t.cpu.ts.tolist() == [4.0, 6.0] and np.isnan(t.cpu.dur[1])
        assert t.dropped == {"bad_ts": 5, "bad_dur": 2, "negative_dur": 1, "huge_dur": 1}
        assert describe_dropped(t.dropped).startswith("9 events dropped: 5 without a usable ts")
        assert np.isfinite(t.gpu.ts).all() and (t.gpu.dur >= 0).all()
    assert load_trace(_write(tmp_path / "ok.json", _doc([_kernel()]))).dropped == {}


def test_only_bad_times_is_bad_input_saying_so(tmp_path):
    p = _write(tmp_path / "t.json", _doc([_kernel(ts=None), _kernel(dur=math.nan)]))
    with pytest.raises(BadInput, match="2 events dropped"):
        load_trace(p)


# --- no usable events --------------------------------------------------------------------

_CHROME = {
    "traceEvents": [
        {"ph": "X", "cat": "blink", "name": "Document::updateStyle", "ts": 1, "dur": 2,
         "pid": 1, "tid": 1, "args": {}},
        {"ph": "X", "cat": "v8,devtools.timeline", "name": "v8.compile", "ts": 3, "dur": 4,
         "pid": 1, "tid": 1, "args": {"data": {}}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "CrRendererMain"}},
    ],
    "metadata": {"product-version": "Chrome/120"},
}  # fmt: skip


@pytest.mark.parametrize(
    "doc",
    [
        [],
        {"traceEvents": []},
        {"traceEvents": [1, "two", None, [3], True]},
        [1, 2, 3],
        {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]},
        _CHROME,
        {"traceEvents": [{"ph": "i", "cat": "kernel", "name": "k", "ts": 1}]},
    ],
    ids=[
        "bare-empty",
        "empty",
        "not-objects",
        "bare-scalars",
        "metadata-only",
        "chrome",
        "instant",
    ],
)
def test_no_usable_events_is_bad_input(tmp_path, doc):
    for gz in (False, True):
        p = _write(tmp_path / ("t.json.gz" if gz else "t.json"), doc, gz=gz)
        with pytest.raises(BadInput, match="holds no event membound can use"):
            load_trace(p)


# --- pre-kineto categories ----------------------------------------------------------------


def test_pre_kineto_categories_read_as_their_modern_kinds(tmp_path):
    """Older torch wrote `Operator`, `Runtime`, `Kernel`, `Memcpy`, `Memset` (as in the
    tensorboard plugin's and HTA's test traces): a GPU trace, not a CPU-only one."""
    evs = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 13721, "tid": "123",
         "ts": 50, "dur": 400, "args": {"Input Dims": [], "External id": 1}},
        {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 13721, "tid": "123",
         "ts": 100, "dur": 100, "args": {"Input Dims": [[2, 3], [3, 4]], "External id": 2}},
        {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 13721, "tid": "123",
         "ts": 120, "dur": 5, "args": {"correlation": 334, "external id": 2}},
        {"ph": "X", "cat": "Kernel", "name": "void gemmSN_TN_kernel", "pid": 0,
         "tid": "stream 7", "ts": 130, "dur": 8,
         "args": {"correlation": 334, "external id": 2, "device": 0, "stream": 7}},
        {"ph": "X", "cat": "Memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0,
         "tid": "stream 7", "ts": 405, "dur": 10,
         "args": {"stream": 7, "correlation": 335, "bytes": 4096, "device": 0}},
        {"ph": "X", "cat": "Memset", "name": "Memset (Device)", "pid": 0, "tid": "stream 7",
         "ts": 420, "dur": 5, "args": {"stream": 7, "correlation": 336, "device": 0}},
    ]  # fmt: skip
    t = load_trace(_write(tmp_path / "old.json", evs))
    assert t.has_gpu
    assert t.gpu.kind.tolist() == [KERNEL, MEMCPY, MEMSET]
    assert t.gpu.correlation.tolist() == [334, 335, 336] and t.gpu.bytes[1] == 4096
    assert t.runtime.correlation.tolist() == [334]
    assert t.cpu.kind.tolist()[1] == CPU_OP and t.cpu.role.tolist()[0] == STEP
    assert t.shapes[t.cpu.shape[1]][0] == [[2, 3], [3, 4]]


# --- input strides ------------------------------------------------------------------------


def test_input_strides_are_stored_and_interned(tmp_path):
    b = tracebuilder.TraceBuilder()
    for ts, strides in ((0, [[3, 1], [4, 1]]), (10, [[3, 1], [4, 1]]), (20, [[1, 2], [1, 3]])):
        b.op("aten::mm", ts, 5, [[2, 3], [3, 4]], ["float", "float"])
        b.events[-1]["args"]["Input Strides"] = strides
    b.op("aten::relu", 30, 5, [[4]], ["float"])
    for t in _both_layouts(tmp_path, b.document()):
        ids = t.cpu.strides.tolist()
        assert ids[0] == ids[1] != ids[2] and ids[3] == -1
        assert t.strides[ids[0]] == [[3, 1], [4, 1]] and t.strides[ids[2]] == [[1, 2], [1, 3]]
        assert len(t.strides) == 2
        dims, types, concrete = t.shapes[t.cpu.shape[0]]  # shapes keep three parts
        assert t.cpu.shape[0] == t.cpu.shape[2]  # strides do not split shape interning


def test_real_trace_keeps_strides():
    from support.paths import FIXTURES

    t = load_trace(timeline_in(FIXTURES / "cpu_only"))
    ops = np.flatnonzero(t.cpu.strides >= 0)
    assert len(ops) > 100
    i = int(ops[0])
    dims = t.shapes[t.cpu.shape[i]][0]
    strides = t.strides[t.cpu.strides[i]]
    assert len(strides) == len(dims)


# --- broken gzip, nesting, layout ---------------------------------------------------------


@pytest.mark.parametrize("offset", [40, 1000])
def test_inverted_gzip_bytes_are_bad_input(tmp_path, offset):
    text = tracebuilder.planted_launch_bound(steps=2, kernels=100).text().encode()
    data = bytearray(gzip.compress(text))
    for i in range(offset, offset + 16):
        data[i] ^= 0xFF
    p = tmp_path / "t.json.gz"
    p.write_bytes(bytes(data))
    with pytest.raises(BadInput, match="truncated or not a kineto trace"):
        load_trace(p)


_DEEP = 100_000


@pytest.mark.parametrize("where", ["deviceProperties", "trailer"])
def test_deep_nesting_around_the_events_is_tolerated(tmp_path, where):
    deep = "[" * _DEEP + "]" * _DEEP
    events = json.dumps([_kernel()])[1:-1]
    if where == "deviceProperties":
        text = f'{{"deviceProperties": {deep}, "traceEvents": [{events}]}}'
    else:
        text = f'{{"traceEvents": [{events}], "distributedInfo": {deep}}}'
    t = load_trace(_write(tmp_path / "t.json", text))
    assert len(t.gpu) == 1 and t.device_properties == []


@pytest.mark.parametrize("closed", [True, False])
def test_deep_nesting_in_the_last_event_is_one_line(tmp_path, closed):
    deep = "[" * _DEEP + ("]" * _DEEP if closed else "")
    events = json.dumps([_kernel()])[1:-1]
    text = f'{{"traceEvents": [{events}, {{"ph": "X", "args": {deep}}}]}}'
    with pytest.raises(BadInput, match="truncated or not a kineto trace"):
        load_trace(_write(tmp_path / "t.json", text))


def test_whitespace_runs_are_not_kept(tmp_path, monkeypatch):
    """{"traceEvents": [ + spaces + ]}: read in chunks, none kept (no usable events)."""
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    kept = []
    real = jsonstream.EventArray._cut

    def spy(self, buf, eof):
        kept.append(len(buf))
        return real(self, buf, eof)

    monkeypatch.setattr(jsonstream.EventArray, "_cut", spy)
    text = '{"traceEvents": [' + " " * (8 << 20) + "]}"
    with pytest.raises(BadInput, match="holds no event"):
        load_trace(_write(tmp_path / "t.json.gz", text, gz=True))
    assert max(kept) <= 2 << 16


def test_spaces_between_events_do_not_accumulate(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    gap = " " * (1 << 20)
    events = gap.join(json.dumps(e) + "," for e in [_kernel(ts=i) for i in range(5)])
    text = '{"traceEvents": [' + events.rstrip(",") + gap + "]" + gap + "}"
    t = load_trace(_write(tmp_path / "t.json", text))
    assert t.gpu.ts.tolist() == [0, 1, 2, 3, 4]


def test_an_event_past_the_limit_is_refused_saying_how_to_raise_it(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    monkeypatch.setenv("MEMBOUND_MAX_EVENT_MB", "0.5")
    big = _kernel(ts=2)
    big["args"]["blob"] = "x" * (1 << 20)
    p = _write(tmp_path / "t.json", _doc([_kernel(ts=1), big]))
    with pytest.raises(BadInput, match="MEMBOUND_MAX_EVENT_MB"):
        load_trace(p)
    monkeypatch.setenv("MEMBOUND_MAX_EVENT_MB", "4")
    assert len(load_trace(p).gpu) == 2


def test_whitespace_inside_a_big_event_is_squeezed_not_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    monkeypatch.setenv("MEMBOUND_MAX_EVENT_MB", "0.5")
    text = json.dumps(_doc([_kernel(ts=1), _kernel(ts=2)]))
    text = text.replace('"dur": 5.0', '"dur":' + " " * (1 << 20) + "5.0", 1)
    assert load_trace(_write(tmp_path / "t.json", text)).gpu.ts.tolist() == [1.0, 2.0]


def test_gzip_expanding_past_the_ratio_is_refused_early(tmp_path, monkeypatch):
    monkeypatch.setattr(jsonstream, "GZIP_RATIO_FLOOR", 1 << 20)
    monkeypatch.setattr(jsonstream, "CHUNK", 1 << 16)
    text = '{"traceEvents": [' + " " * (8 << 20) + "]}"
    p = _write(tmp_path / "bomb.json.gz", text, gz=True)
    with pytest.raises(BadInput, match="MEMBOUND_MAX_GZIP_RATIO"):
        load_trace(p)
    monkeypatch.setenv("MEMBOUND_MAX_GZIP_RATIO", "0")
    with pytest.raises(BadInput, match="holds no event"):  # read to the end: only spaces
        load_trace(p)


@pytest.mark.parametrize(
    "layout",
    ["compact", "dump", "indent4", "bare", "braces-in-strings", "nested-lists-of-objects"],
)
def test_every_layout_streams_to_the_same_tables(tmp_path, monkeypatch, layout):
    """Small chunks: cuts land everywhere, fast cuts inside strings and nested objects are
    caught, and each layout reads the same tables as kineto's."""
    b = tracebuilder.planted_launch_bound(steps=2, kernels=60)
    if layout == "braces-in-strings":
        for e in b.events[::7]:
            e["args"]["note"] = 'x"}, {"a": [1], "b\\\\": "}, {'
    if layout == "nested-lists-of-objects":
        for e in b.events[::5]:
            e["args"]["list"] = [{"a": 1}, {"b": [{"c": 2}, {"d": 3}]}]
    ref = load_trace(b.write(tmp_path / "ref.json"))
    doc = b.document()
    text = {
        "compact": json.dumps(doc, separators=(",", ":")),
        "dump": json.dumps(doc),
        "indent4": json.dumps(doc, indent=4),
        "bare": json.dumps(doc["traceEvents"]),
    }.get(layout, json.dumps(doc))
    p = _write(tmp_path / "t.json", text)
    monkeypatch.setattr(jsonstream, "CHUNK", 1500)
    got = load_trace(p)
    for table in ("cpu", "runtime", "gpu"):
        a, c = getattr(ref, table).cols, getattr(got, table).cols
        assert {k: v.tolist() for k, v in a.items()} == {k: v.tolist() for k, v in c.items()}
    assert got.names == ref.names


@pytest.mark.parametrize("path", ["skimmed", "streamed"])
def test_a_wrong_fast_cut_reads_again_exactly(tmp_path, monkeypatch, path):
    """A fast cut inside a string fails the piece's parse and the file is read again with
    exact cuts, whether the cut was found by skimming a plain file (windows only) or in
    the stream; the tables are those of an exact read."""
    b = tracebuilder.planted_launch_bound(steps=1, kernels=30)
    for e in b.events:  # longer than a chunk: a window ending inside it cuts there
        e["args"]["note"] = "}, {" + "x" * 1500
    p = b.write(tmp_path / "t.json", layout="compact")
    ref = load_trace(p)  # one chunk: cut exactly, at the array's end
    chunk = 700 if path == "skimmed" else p.stat().st_size * 2 // 3
    monkeypatch.setattr(jsonstream, "CHUNK", chunk)
    modes, skimmed = [], []
    real, real_skim = kineto_mod._read, jsonstream.EventArray._skim

    def spy(path, progress, limits, exact):
        modes.append(exact)
        return real(path, progress, limits, exact)

    def skim_spy(self, start):
        for span in real_skim(self, start):
            skimmed.append(span)
            yield span

    monkeypatch.setattr(kineto_mod, "_read", spy)
    monkeypatch.setattr(jsonstream.EventArray, "_skim", skim_spy)
    got = load_trace(p)
    assert modes == [False, True]
    assert bool(skimmed) == (path == "skimmed")
    assert _same_tables(got, ref)


def _same_tables(a, b) -> bool:
    return (
        all(
            {k: v.tolist() for k, v in getattr(a, t).cols.items()}
            == {k: v.tolist() for k, v in getattr(b, t).cols.items()}
            for t in ("cpu", "runtime", "gpu")
        )
        and a.names == b.names
    )


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.95])
def test_truncated_one_line_trace_is_bad_input(tmp_path, cut):
    text = tracebuilder.planted_launch_bound(steps=2, kernels=50).text("compact")
    p = _write(tmp_path / "t.json", text[: int(len(text) * cut)])
    with pytest.raises(BadInput, match="truncated or not a kineto trace"):
        load_trace(p)


def test_scan_block_by_block_matches_one_block(monkeypatch):
    """Block edges anywhere (inside strings, backslash runs, deep nesting) change nothing."""
    text = json.dumps(
        [_kernel(ts=i, note='a\\"b}, {\\\\', deep=[[[{"x": "]"}]]]) for i in range(40)]
    )
    body = text[1:].encode()  # starts inside the array
    whole = jsonstream.scan(body)
    squeezed = jsonstream.squeeze(body)
    for block in (1, 2, 3, 7, 64):
        monkeypatch.setattr(jsonstream, "_BLOCK", block)
        assert jsonstream.scan(body) == whole
        assert jsonstream.squeeze(body) == squeezed
        assert jsonstream.scan(body[: len(body) // 2]).depth >= 1
    assert whole.end == len(body) - 1 and json.loads(b"[" + squeezed) == json.loads(text)


def test_piece_offsets_are_where_the_pieces_lie_in_a_plain_file(tmp_path, monkeypatch):
    """Workers read a plain file's pieces themselves, by offset: each must be that slice."""
    monkeypatch.setattr(jsonstream, "CHUNK", 2000)
    b = tracebuilder.planted_launch_bound(steps=2, kernels=40)
    for layout in ("kineto", "compact"):
        p = b.write(tmp_path / f"{layout}.json", layout=layout)
        data = p.read_bytes()
        with p.open("rb") as f:
            events = jsonstream.EventArray(f, exact=False, limits=jsonstream.Limits.from_env())
            n = 0
            for piece in events:
                off = events.piece_offset
                assert data[off : off + len(piece)] == piece
                n += 1
        assert n > 5
        with gzip.open(b.write(tmp_path / f"{layout}.json.gz", layout=layout)) as f:
            gz = jsonstream.EventArray(
                f, exact=False, limits=jsonstream.Limits.from_env(), compressed_size=1
            )
            assert all(gz.piece_offset is None for _ in gz)


def test_a_deeply_nested_name_is_unnamed_not_a_recursion(tmp_path):
    deep = "x"
    for _ in range(1000):  # under orjson's depth limit (deeper is one line of BadInput)
        deep = [deep]
    ev = _op(ts=5)
    ev["name"] = deep
    import json as _json
    import sys

    p = tmp_path / "t.json"
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)  # json.dumps of the input itself needs the depth
    try:
        p.write_text(_json.dumps(_doc([_kernel(), ev])))
    finally:
        sys.setrecursionlimit(old)
    t = load_trace(p)
    assert "(unnamed)" in [t.names[i] for i in t.cpu.name]
