"""Mutators of report JSONs (what `membound analyze --json` writes), for `membound compare`.

Same scheme as `mutate.py`: a `Mutation` drawn and shrunk by hypothesis, `render_report`
turns it into the bytes of a file. The reports themselves come from analysing the bases once
per session (conftest `reports`).
"""

from __future__ import annotations

import copy
import math
from typing import Any

from hypothesis import strategies as st

from fuzz.mutate import NEST, WEIRD, Mutation, dumps


def leaf_paths(obj: Any, path: tuple = ()) -> list[tuple]:
    """Every path (a tuple of keys and indices) in a JSON document, nodes and leaves."""
    out = [path] if path else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += leaf_paths(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += leaf_paths(v, (*path, i))
    return out


def _at(obj: Any, path: tuple) -> Any:
    for p in path:
        obj = obj[p]
    return obj


#: the key, among the session's reports, of the report analyze writes for `{"traceEvents": []}`
#: (present while analyze exits 0 on it; issue 17 wants exit 2)
EMPTY_TRACE = "empty-trace"


def empty_trace_report(report: dict) -> dict:
    """What a report of a trace with no usable events looks like: zero steps, no work."""
    r = copy.deepcopy(report)
    r["steps"] = {**{k: None for k in r["steps"]}, "count": 0, "per_step": [], "marked": False}
    r.update(findings=[], ops=[], idle_breakdown={}, notes=["the trace holds no events"])
    for k in ("gpu_busy_fraction", "gpu_computing_fraction", "ops_costed_fraction",
              "profiler_overhead_fraction", "step_shares"):  # fmt: skip
        r[k] = None
    return r


#: the report keys `compare` reads: half of the paths drawn lie under one of them
COMPARE_READS = {"steps", "median_step_ms", "per_step", "wall_ms", "kernel_busy_ms", "marked",
                 "findings", "code", "time_lost_ms_per_step", "gpu_busy_fraction", "trace",
                 # the prediction check (analysis.fix_check) and the idle rows
                 "evidence", "remedies", "remedy", "saving_ms_per_step", "idle_breakdown",
                 "ops", "dtypes", "device_ms", "gpu_whatif"}  # fmt: skip

REPORT_KINDS = ("retype.leaf", "retype.node", "drop-key", "nan", "nest", "empty",
                "truncate", "corrupt-bytes", "empty-trace", "schema")  # fmt: skip


def report_mutations(reports: dict[str, dict], kinds=REPORT_KINDS) -> st.SearchStrategy:
    """(mutation, side) pairs: side is which of compare's two inputs gets the mutated file."""

    @st.composite
    def strategy(draw):
        kind = draw(st.sampled_from(tuple(kinds)))
        base = draw(st.sampled_from(sorted(set(reports) - {EMPTY_TRACE})))
        doc = reports[base]
        paths = leaf_paths(doc)
        if kind in ("retype.leaf", "retype.node", "drop-key", "nest"):
            pool = [p for p in paths if (kind == "retype.leaf") == (not isinstance(
                _at(doc, p), (dict, list)))] or paths  # fmt: skip
            read = [p for p in pool if set(map(str, p)) & COMPARE_READS] or pool
            params: tuple = (("path", draw(st.sampled_from(read) | st.sampled_from(pool))),)
            if kind.startswith("retype."):
                params += (("value", draw(st.sampled_from(WEIRD))),)
            if kind == "nest":
                params += (("depth", draw(st.sampled_from((10**4, 10**5)))),
                           ("shape", draw(st.sampled_from(("list", "dict")))))  # fmt: skip
        elif kind == "nan":
            nums = [p for p in paths if isinstance(_at(doc, p), (int, float))
                    and not isinstance(_at(doc, p), bool)] or paths  # fmt: skip
            read = [p for p in nums if set(map(str, p)) & COMPARE_READS] or nums
            path = draw(st.just("all") | st.sampled_from(read) | st.sampled_from(nums))
            params = (("path", path),
                      ("value", draw(st.sampled_from((math.nan, math.inf, -math.inf)))))  # fmt: skip
        elif kind == "empty":
            params = (("doc", draw(st.sampled_from(("{}", "[]", "null", "string", "only-schema",
                                                    "empty-file")))),)  # fmt: skip
        elif kind in ("truncate", "corrupt-bytes"):
            n = len(dumps(doc))
            params = (("at", draw(st.integers(0, n - 1))),)
            if kind == "corrupt-bytes":
                params += (("bytes", draw(st.binary(min_size=1, max_size=8))),)
        elif kind == "schema":
            params = (("value", draw(st.sampled_from((2, 0, "1", 1.0, None, [1], 2**70)))),)
        else:  # empty-trace: the report a trace without usable events would give
            params = ()
        side = draw(st.sampled_from(("before", "after", "both")))
        return Mutation(kind, base, params), side

    return strategy()


def render_report(m: Mutation, reports: dict[str, dict]) -> bytes:
    doc = copy.deepcopy(reports[m.base])
    nest = None
    k = m.kind
    if k in ("retype.leaf", "retype.node"):
        path = m.get("path")
        _at(doc, path[:-1])[path[-1]] = m.get("value")
    elif k == "drop-key":
        path = m.get("path")
        del _at(doc, path[:-1])[path[-1]]
    elif k == "nest":
        path = m.get("path")
        _at(doc, path[:-1])[path[-1]] = NEST
        nest = (m.get("depth"), m.get("shape"))
    elif k == "nan":
        path = m.get("path")
        targets = [path] if path != "all" else [
            p for p in leaf_paths(doc) if isinstance(_at(doc, p), float)]  # fmt: skip
        for p in targets:
            _at(doc, p[:-1])[p[-1]] = m.get("value")
    elif k == "empty":
        which = m.get("doc")
        if which == "empty-file":
            return b""
        doc = {"{}": {}, "[]": [], "null": None, "string": "report",
               "only-schema": {"schema": 1}}[which]  # fmt: skip
    elif k == "truncate":
        return dumps(doc)[: m.get("at")]
    elif k == "corrupt-bytes":
        data = bytearray(dumps(doc))
        data[m.get("at") : m.get("at") + len(m.get("bytes"))] = m.get("bytes")
        return bytes(data)
    elif k == "schema":
        doc["schema"] = m.get("value")
    elif k == "empty-trace":  # the report analyze wrote for a trace without events, if it did
        doc = copy.deepcopy(reports.get(EMPTY_TRACE) or empty_trace_report(doc))
    else:
        raise ValueError(f"unknown report mutation kind {k!r}")
    return dumps(doc, nest)
