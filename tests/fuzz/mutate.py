"""Mutators for the fuzz suite: hostile variants of the recorded fixture traces.

A mutation is plain data (`Mutation`: a kind, the base it starts from, its parameters, the
layout and file type) that hypothesis draws and shrinks; `render_trace` turns it into the bytes
of a file. The kinds are the families of issue 17 (truncate, corrupt, retype, negate, duplicate,
reorder, nest, drop, empty, non-object events, foreign traces, pads), one strategy per kind, so
a failure shrinks to one small mutation of one kind and the test names that kind. Reports
(for `compare`) are mutated in `mutate_report.py`.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
import os
import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from membound.trace.capture_meta import timeline_in
from membound.trace.files import open_trace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

#: the recorded traces the mutations start from, with how many events of each to keep (small
#: enough that one analysis takes well under a second, whole steps kept)
BASES = {
    "h200_memory_bound_op": None,  # 484 events, 4 steps, kernels, memcpy, memset
    "h200_pageable_copy": 700,  # H2D copies, syncs; the first 700 of its events
    "synthetic_input_pipeline": None,  # 23 events: DataLoader, pageable copy, sync
}

#: what a hostile or broken producer may write where a number, a string or an object belongs
WEIRD = (
    None,
    "",
    "abc",
    "12",
    [],
    [1, 2],
    {},
    {"a": 1},
    True,
    0,
    -1,
    1e300,
    -1e300,
    math.nan,
    math.inf,
    -math.inf,
    2**70,
    -(2**64),
)

#: placeholder for deep nesting, replaced in the serialized text (json.dumps would recurse)
NEST = "__membound_fuzz_nest__"


@dataclass(frozen=True)
class Mutation:
    kind: str
    base: str
    params: tuple = ()
    #: layout and file type: kineto.json(.form) (one event per line, as kineto writes it: the
    #: loader's streaming path) or line.json(.form) (one line, as json.dump writes it)
    form: str = "kineto.json"

    def __str__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params)
        return f"{self.kind}({params}) on {self.base}, {self.form}"

    def get(self, key: str, default: Any = None) -> Any:
        return dict(self.params).get(key, default)

    @property
    def suffix(self) -> str:
        return ".json.gz" if self.gz else ".json"

    @property
    def gz(self) -> bool:
        return self.form.endswith(".gz")

    @property
    def layout(self) -> str:
        return self.form.split(".")[0]


# ---------------------------------------------------------------------------------------------
# bases


@cache
def base_trace(name: str) -> dict:
    doc = json.loads(open_trace(timeline_in(FIXTURES / name)).read())
    keep = BASES[name]
    if keep is not None:
        doc["traceEvents"] = doc["traceEvents"][:keep]
    return doc


def events_of(doc: dict, cat: str) -> list[int]:
    """Indices of the events of one category ("step": the ProfilerStep marks; "any": all)."""
    out = []
    for i, ev in enumerate(doc["traceEvents"]):
        if cat == "any" or (cat == "step" and str(ev.get("name", "")).startswith("ProfilerStep")):
            out.append(i)
        elif ev.get("cat") == cat:
            out.append(i)
    return out


CATS = ("step", "kernel", "cpu_op", "cuda_runtime", "gpu_memcpy", "user_annotation", "any")


def nested_text(depth: int, shape: str) -> str:
    if shape == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


FORMS = ("kineto.json", "kineto.json.gz", "line.json", "line.json.gz")


def _j(obj: Any) -> str:
    return json.dumps(obj, allow_nan=True)  # NaN / Infinity tokens, as Python's json writes them


def dumps(doc: Any, nest: tuple[int, str] | None = None, layout: str = "line") -> bytes:
    if layout == "kineto" and isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        items = []
        for k, v in doc.items():
            if k == "traceEvents":  # events joined by ",\n  {", the loader's cut
                items.append('  "traceEvents": [\n  ' + ",\n  ".join(map(_j, v)) + "\n  ]")
            else:
                items.append(f"  {_j(k)}: {_j(v)}")
        text = "{\n" + ",\n".join(items) + "\n}"
    else:
        text = _j(doc)
    if nest is not None:
        text = text.replace(json.dumps(NEST), nested_text(*nest))
    return text.encode()


def _write(data: bytes, gz: bool) -> bytes:
    return gzip.compress(data, mtime=0) if gz else data


# ---------------------------------------------------------------------------------------------
# trace mutations: one strategy per kind


def _base_and_form(draw, forms=FORMS) -> tuple[str, str]:
    return draw(st.sampled_from(tuple(BASES))), draw(st.sampled_from(forms))


def _size(base: str, form: str) -> int:
    data = dumps(base_trace(base), layout=form.split(".")[0])
    return len(_write(data, form.endswith(".gz")))


def _index(draw, doc: dict, cat: str) -> int | None:
    idx = events_of(doc, cat)
    return draw(st.sampled_from(idx)) if idx else None


@st.composite
def _truncate(draw):
    base, form = _base_and_form(draw, FORMS[::2])
    n = _size(base, form)
    return Mutation("truncate", base, (("keep_bytes", draw(st.integers(0, n - 1))),), form)


@st.composite
def _truncate_gzip(draw):
    base, form = _base_and_form(draw, FORMS[1::2])
    n = _size(base, form)
    return Mutation("truncate-gzip", base, (("keep_bytes", draw(st.integers(0, n - 1))),), form)


@st.composite
def _corrupt_bytes(draw):
    base, form = _base_and_form(draw)
    n = _size(base, form.removesuffix(".gz"))
    at = draw(st.integers(0, n - 1))
    new = draw(st.binary(min_size=1, max_size=16))
    return Mutation("corrupt-bytes", base, (("at", at), ("bytes", new)), form)


@st.composite
def _corrupt_gzip(draw):
    base, form = _base_and_form(draw, FORMS[1::2])
    n = _size(base, form)
    at = draw(st.sampled_from((40, 1000, 10)) | st.integers(0, n - 1))
    length = draw(st.sampled_from((16, 1, 4)))
    return Mutation("corrupt-gzip", base, (("at", min(at, n - 1)), ("invert", length)), form)


#: the fields each retype kind replaces, by where they live ("args." = inside the event's args)
RETYPE_FIELDS = {
    "retype.name": ("name", "cat", "ph"),
    "retype.time": ("ts", "dur"),
    "retype.ids": (
        "pid",
        "tid",
        "args.correlation",
        "args.External id",
        "args.stream",
        "args.device",
        "id",
    ),  # fmt: skip
    "retype.args": ("args", "args.Input Dims", "args.Input type", "args.Concrete Inputs"),
}


def _retype(kind: str):
    @st.composite
    def strategy(draw):
        base, form = _base_and_form(draw)
        doc = base_trace(base)
        cat = draw(st.sampled_from(CATS))
        i = _index(draw, doc, cat)
        every = draw(st.booleans())  # the field of every event of that category, or of one
        return Mutation(
            kind,
            base,
            (
                ("cat", cat),
                ("event", "all" if every else i),
                ("field", draw(st.sampled_from(RETYPE_FIELDS[kind]))),
                ("value", draw(st.sampled_from(WEIRD))),
            ),
            form,
        )

    return strategy()


TOP_FIELDS = ("traceEvents", "deviceProperties", "schemaVersion", "baseTimeNanoseconds",
              "displayTimeUnit", "traceName")  # fmt: skip


@st.composite
def _retype_top(draw):
    base, form = _base_and_form(draw)
    params = (
        ("field", draw(st.sampled_from(TOP_FIELDS))),
        ("value", draw(st.sampled_from(WEIRD + ([{}], [{"name": "x"}], [None])))),
    )
    return Mutation("retype.top", base, params, form)


@st.composite
def _negate(draw):
    base, form = _base_and_form(draw)
    cat = draw(st.sampled_from(CATS))
    i = _index(draw, base_trace(base), cat)
    every = draw(st.booleans())
    params = (("cat", cat), ("event", "all" if every else i),
              ("field", draw(st.sampled_from(("dur", "ts")))))  # fmt: skip
    return Mutation("negate", base, params, form)


@st.composite
def _huge_time(draw):
    base, form = _base_and_form(draw)
    cat = draw(st.sampled_from(("step", "kernel", "gpu_memcpy", "cpu_op", "cuda_runtime")))
    i = _index(draw, base_trace(base), cat)
    params = (("cat", cat), ("event", i), ("field", draw(st.sampled_from(("dur", "ts")))),
              ("value", draw(st.sampled_from((1e300, 1e18, 2**70, 1e-300)))))  # fmt: skip
    return Mutation("huge-time", base, params, form)


@st.composite
def _duplicate_events(draw):
    base, form = _base_and_form(draw)
    n = len(base_trace(base)["traceEvents"])
    picks = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=8))
    return Mutation("duplicate-events", base, (("events", tuple(picks)),
                                               ("times", draw(st.integers(1, 3)))), form)  # fmt: skip


@st.composite
def _duplicate_steps(draw):
    base, form = _base_and_form(draw)
    how = draw(st.sampled_from(("copy", "same-name", "same-ts", "all-same-ts")))
    return Mutation("duplicate-steps", base, (("how", how),), form)


@st.composite
def _same_correlation(draw):
    base, form = _base_and_form(draw)
    value = draw(st.sampled_from((1, 0, -1, 2**70)))
    return Mutation("same-correlation", base, (("value", value),), form)


@st.composite
def _reorder(draw):
    base, form = _base_and_form(draw)
    how = draw(st.sampled_from(("reverse", "shuffle", "steps-last", "sort-by-name")))
    seed = draw(st.integers(0, 2**16)) if how == "shuffle" else 0
    return Mutation("reorder", base, (("how", how), ("seed", seed)), form)


@st.composite
def _drop_field(draw):
    base, form = _base_and_form(draw)
    cat = draw(st.sampled_from(CATS))
    i = _index(draw, base_trace(base), cat)
    every = draw(st.booleans())
    fld = draw(st.sampled_from(("ts", "dur", "name", "ph", "cat", "pid", "tid", "args",
                                "args.correlation", "args.External id")))  # fmt: skip
    return Mutation("drop-field", base, (("cat", cat), ("event", "all" if every else i),
                                         ("field", fld)), form)  # fmt: skip


@st.composite
def _drop_events(draw):
    base, form = _base_and_form(draw)
    how = draw(st.sampled_from(CATS[:-1] + ("all-but-one-step", "gpu")))
    return Mutation("drop-events", base, (("which", how),), form)


@st.composite
def _nest(draw):
    base, form = _base_and_form(draw)
    where = draw(st.sampled_from(("args", "deviceProperties", "trailer", "last-event",
                                  "new-event", "name")))  # fmt: skip
    depth = draw(st.sampled_from((10**4, 10**5, 1000)))
    shape = draw(st.sampled_from(("list", "dict")))
    i = _index(draw, base_trace(base), draw(st.sampled_from(("kernel", "cpu_op", "step"))))
    return Mutation("nest", base, (("where", where), ("depth", depth), ("shape", shape),
                                   ("event", i)), form)  # fmt: skip


EMPTY_DOCS = {
    "[]": [],
    "{}": {},
    "no-events": {"traceEvents": []},
    "events-null": {"traceEvents": None},
    "events-object": {"traceEvents": {}},
    "string": "trace",
    "number": 42,
    "null": None,
    "metadata-only": None,  # the base's ph=M events and top-level fields only
    "top-level-list": None,  # the base's events as a bare JSON array (the Chrome array form)
    "empty-file": None,
    "whitespace": None,
}


@st.composite
def _empty(draw):
    base, form = _base_and_form(draw)
    return Mutation("empty", base, (("doc", draw(st.sampled_from(tuple(EMPTY_DOCS)))),), form)


@st.composite
def _non_object_events(draw):
    base, form = _base_and_form(draw)
    how = draw(st.sampled_from(("insert", "replace-all", "only")))
    value = draw(st.sampled_from((1, "x", None, [], [1], True, 1.5)))
    n = len(base_trace(base)["traceEvents"])
    return Mutation("non-object-events", base, (("how", how), ("value", value),
                                                ("at", draw(st.integers(0, n - 1)))), form)  # fmt: skip


#: whitespace padding inside the event array (the layout of issue 17's gzip bomb, at a size CI
#: can afford; the long profile adds 1 GiB)
PAD_SIZES = (1 << 20, 16 << 20) + (
    (1 << 30,) if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz-long" else ()
)


@st.composite
def _pad(draw):
    base, form = _base_and_form(draw)
    where = draw(st.sampled_from(("after-open", "before-close", "between-events")))
    return Mutation("pad", base, (("bytes", draw(st.sampled_from(PAD_SIZES))), ("where", where)),
                    form)  # fmt: skip


@st.composite
def _foreign(draw):
    form = draw(st.sampled_from(FORMS))
    params = (("events", draw(st.integers(0, 40))), ("array_form", draw(st.booleans())),
              ("seed", draw(st.integers(0, 255))))  # fmt: skip
    return Mutation("foreign", "chrome", params, form)


TRACE_KINDS = {
    "truncate": _truncate(),
    "truncate-gzip": _truncate_gzip(),
    "corrupt-bytes": _corrupt_bytes(),
    "corrupt-gzip": _corrupt_gzip(),
    **{kind: _retype(kind) for kind in RETYPE_FIELDS},
    "retype.top": _retype_top(),
    "negate": _negate(),
    "huge-time": _huge_time(),
    "duplicate-events": _duplicate_events(),
    "duplicate-steps": _duplicate_steps(),
    "same-correlation": _same_correlation(),
    "reorder": _reorder(),
    "drop-field": _drop_field(),
    "drop-events": _drop_events(),
    "nest": _nest(),
    "empty": _empty(),
    "non-object-events": _non_object_events(),
    "foreign": _foreign(),
    "pad": _pad(),
}


def trace_mutations(kinds=None) -> st.SearchStrategy[Mutation]:
    kinds = tuple(TRACE_KINDS) if kinds is None else tuple(kinds)
    return st.one_of(*(TRACE_KINDS[k] for k in kinds))


# ---------------------------------------------------------------------------------------------
# applying a trace mutation


def _targets(doc: dict, m: Mutation) -> list[dict]:
    evs = doc["traceEvents"]
    if m.get("event") == "all":
        return [evs[i] for i in events_of(doc, m.get("cat"))]
    i = m.get("event")
    return [] if i is None else [evs[i]]


def _set(ev: dict, fld: str, value: Any) -> None:
    if fld.startswith("args."):
        args = ev.get("args")
        if not isinstance(args, dict):
            args = ev["args"] = {}
        args[fld[5:]] = value
    else:
        ev[fld] = value


def _drop(ev: dict, fld: str) -> None:
    if fld.startswith("args."):
        if isinstance(ev.get("args"), dict):
            ev["args"].pop(fld[5:], None)
    else:
        ev.pop(fld, None)


def _foreign_doc(m: Mutation) -> Any:
    """A small Chrome/Blink (DevTools performance panel) trace: no kineto categories at all."""
    rng = random.Random(m.get("seed"))
    names = ("RunTask", "ParseHTML", "FunctionCall", "Layout", "Paint", "v8.compile", "GCEvent")
    cats = ("devtools.timeline", "v8", "blink", "disabled-by-default-devtools.timeline", "toplevel")
    events: list[dict] = [
        {"ph": "M", "pid": 1, "tid": 0, "name": "process_name", "args": {"name": "Renderer"}},
        {"ph": "M", "pid": 1, "tid": 7, "name": "thread_name", "args": {"name": "CrRendererMain"}},
    ]
    ts = 1000.0
    for _ in range(m.get("events")):
        ts += rng.uniform(1, 500)
        ev = {"pid": 1, "tid": 7, "ts": ts, "ph": rng.choice("XBEIi"), "cat": rng.choice(cats),
              "name": rng.choice(names), "args": {"data": {"frame": "F1"}}}  # fmt: skip
        if ev["ph"] == "X":
            ev["dur"] = rng.uniform(1, 2000)
        events.append(ev)
    if m.get("array_form"):
        return events
    return {"traceEvents": events, "metadata": {"source": "DevTools", "cpu-family": 6}}


def render_trace(m: Mutation) -> bytes:
    """The bytes of the file that mutation `m` describes."""
    if m.kind == "foreign":
        return _write(dumps(_foreign_doc(m), layout=m.layout), m.gz)
    doc = copy.deepcopy(base_trace(m.base))
    evs = doc["traceEvents"]
    nest = None
    k = m.kind
    if k == "pad":
        text = dumps(doc, layout=m.layout)
        spaces = b" " * m.get("bytes")
        start = text.index(b'"traceEvents": [') + 16
        at = {"after-open": start, "before-close": text.rindex(b"]"),
              "between-events": text.index(b"},", start) + 2}[m.get("where")]  # fmt: skip
        return _write(text[:at] + spaces + text[at:], m.gz)
    if k == "truncate":
        return _write(dumps(doc, layout=m.layout)[: m.get("keep_bytes")], m.gz)
    if k == "truncate-gzip":
        return _write(dumps(doc, layout=m.layout), True)[: m.get("keep_bytes")]
    if k == "corrupt-bytes":
        data = bytearray(dumps(doc, layout=m.layout))
        at, new = m.get("at"), m.get("bytes")
        data[at : at + len(new)] = new
        return _write(bytes(data), m.gz)
    if k == "corrupt-gzip":
        data = bytearray(_write(dumps(doc, layout=m.layout), True))
        at = m.get("at")
        for j in range(at, min(at + m.get("invert"), len(data))):
            data[j] ^= 0xFF
        return bytes(data)
    if k.startswith("retype.") and k != "retype.top":
        for ev in _targets(doc, m):
            _set(ev, m.get("field"), m.get("value"))
    elif k == "retype.top":
        doc[m.get("field")] = m.get("value")
    elif k == "negate":
        for ev in _targets(doc, m):
            if isinstance(ev.get(m.get("field")), (int, float)):
                ev[m.get("field")] = -ev[m.get("field")]
    elif k == "huge-time":
        for ev in _targets(doc, m):
            ev[m.get("field")] = m.get("value")
    elif k == "duplicate-events":
        for i in sorted(set(m.get("events")), reverse=True):
            evs[i + 1 : i + 1] = [copy.deepcopy(evs[i]) for _ in range(m.get("times"))]
    elif k == "duplicate-steps":
        steps = [evs[i] for i in events_of(doc, "step")]
        how = m.get("how")
        if how == "copy":
            evs += copy.deepcopy(steps)
        elif how == "same-name":
            for s in steps:
                s["name"] = steps[0]["name"]
        elif how == "same-ts":
            evs.append({**copy.deepcopy(steps[0]), "name": "ProfilerStep#999"})
        else:
            for s in steps:
                s["ts"] = steps[0]["ts"]
    elif k == "same-correlation":
        for ev in evs:
            if isinstance(ev.get("args"), dict) and "correlation" in ev["args"]:
                ev["args"]["correlation"] = m.get("value")
            if ev.get("cat") == "ac2g":
                ev["id"] = m.get("value")
    elif k == "reorder":
        how = m.get("how")
        if how == "reverse":
            evs.reverse()
        elif how == "shuffle":
            random.Random(m.get("seed")).shuffle(evs)
        elif how == "steps-last":
            evs.sort(key=lambda ev: str(ev.get("name", "")).startswith("ProfilerStep"))
        else:
            evs.sort(key=lambda ev: str(ev.get("name", "")))
    elif k == "drop-field":
        for ev in _targets(doc, m):
            _drop(ev, m.get("field"))
    elif k == "drop-events":
        which = m.get("which")
        if which == "all-but-one-step":
            steps = events_of(doc, "step")
            drop = set(steps[1:])
        elif which == "gpu":
            drop = {i for i, ev in enumerate(evs) if ev.get("cat") in
                    ("kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation")}  # fmt: skip
        else:
            drop = set(events_of(doc, which))
        doc["traceEvents"] = [ev for i, ev in enumerate(evs) if i not in drop]
    elif k == "nest":
        where = m.get("where")
        nest = (m.get("depth"), m.get("shape"))
        i = m.get("event") if m.get("event") is not None else 0
        if where == "args":
            evs[i]["args"] = {"deep": NEST}
        elif where == "name":
            evs[i]["name"] = NEST
        elif where == "deviceProperties":
            doc["deviceProperties"] = NEST
        elif where == "trailer":  # after traceEvents, where kineto writes traceName
            doc.pop("traceName", None)
            doc["traceName"] = NEST
        elif where == "last-event":
            evs[-1] = NEST
        else:
            evs.append({"ph": "X", "cat": "cpu_op", "name": "x", "ts": 1, "dur": 1,
                        "pid": 1, "tid": 1, "args": NEST})  # fmt: skip
    elif k == "empty":
        which = m.get("doc")
        if which == "metadata-only":
            doc["traceEvents"] = [ev for ev in evs if ev.get("ph") == "M"]
        elif which == "top-level-list":
            doc = evs
        elif which == "empty-file":
            return _write(b"", m.gz)
        elif which == "whitespace":
            return _write(b" \n\t" * 1000, m.gz)
        else:
            doc = copy.deepcopy(EMPTY_DOCS[which])
    elif k == "non-object-events":
        how, value = m.get("how"), m.get("value")
        if how == "insert":
            evs.insert(m.get("at"), value)
        elif how == "replace-all":
            doc["traceEvents"] = [value for _ in evs]
        else:
            doc["traceEvents"] = [ev for ev in evs if ev.get("ph") == "M"] + [value] * 3
    else:
        raise ValueError(f"unknown trace mutation kind {k!r}")
    return _write(dumps(doc, nest, m.layout), m.gz)
