"""`trace.meta_probe`: reading the capture meta and the trace it names, shared by the four
after-script probes (norm_probe, profiler_cost, loader_probe, layout_probe)."""

from __future__ import annotations

from membound.trace import layout_probe, loader_probe, norm_probe, profiler_cost
from membound.trace.meta_probe import read_meta, trace_beside


def test_an_unreadable_meta_is_one_sentence_for_every_probe(tmp_path):
    path = tmp_path / "capture.json"
    path.write_text("{not json")
    meta, why = read_meta(path, "x not measured")
    assert meta is None and why.startswith("x not measured: the capture meta cannot be read (")
    for probe in (norm_probe, profiler_cost, loader_probe, layout_probe):

        def run(cmd, **kw):
            raise AssertionError("must not run")

        said = probe.probe(path, run=run)
        assert said.startswith(f"{probe.LABEL}: the capture meta cannot be read (")


def test_the_first_named_trace_is_the_one_looked_for(tmp_path):
    path = tmp_path / "capture.json"
    (tmp_path / "trace.json.gz").write_bytes(b"")
    assert trace_beside(path, {"trace": "trace.json.gz"}, "trace") == tmp_path / "trace.json.gz"
    # an ops pass that is named but missing is not replaced by the timeline trace
    meta = {"ops_trace": "trace.ops.json.gz", "trace": "trace.json.gz"}
    assert trace_beside(path, meta, "ops_trace", "trace") is None
    assert trace_beside(path, {"ops_trace": None, "trace": "trace.json.gz"}, "ops_trace", "trace")
    assert (
        trace_beside(path, {}, "trace") is None
        and trace_beside(path, {"trace": 3}, "trace") is None
    )


def test_a_missing_trace_is_said(tmp_path):
    path = tmp_path / "capture.json"
    path.write_text('{"trace": "gone.json.gz"}')

    def run(cmd, **kw):
        raise AssertionError("must not run")

    assert (
        loader_probe.probe(path, run=run) == "worker batch cost not measured: no trace was written."
    )
    assert norm_probe.probe(path, run=run) == (
        "norm host cost not measured: no trace with op shapes was written."
    )
