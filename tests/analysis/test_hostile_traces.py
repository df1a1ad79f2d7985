"""Issue 17's silently wrong reports: traces with events no analysis can use. Each defect is
planted in `planted_memory_block` (per 5 ms step: a 3 ms fp32 matmul, a 0.6 ms add, a 0.15 ms
LayerNorm) and must give either a one-line BadInput or the figures of the trace without the
bad events, with a note saying how many were left out; every report passes `check_report`."""

from __future__ import annotations

import pytest

from membound.analysis import analyze, analyze_trace
from membound.analysis.sanity import check_report
from membound.errors import BadInput
from membound.report.json_report import to_dict
from membound.trace.capture_meta import timeline_in
from membound.trace.files import open_trace
from membound.trace.load import load_trace
from membound.trace.model import KERNEL
from support import tracebuilder
from support.tracebuilder import TraceBuilder

STEPS = 4


def _kernels(b):
    return [e for e in b.events if e["cat"] == "kernel"]


def _marks(b):
    return [e for e in b.events if e["name"].startswith("ProfilerStep")]


def _analyze(b, tmp_path, ceilings):
    a = analyze([b.write(tmp_path / "trace.json")], ceilings)
    assert check_report(to_dict(a)) == []
    return a


def _ops(a):
    return {r.name: r for r in a.ops}


def _note(a, start):
    hits = [n for n in a.notes if n.startswith(start)]
    assert len(hits) == 1, a.notes
    return hits[0]


@pytest.fixture
def block():
    return tracebuilder.planted_memory_block(STEPS)


def test_the_clean_trace_has_no_note_and_whole_figures(block, tmp_path, ceilings):
    a = _analyze(block, tmp_path, ceilings)
    assert not any("left out" in n or "not joined" in n for n in a.notes)
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)
    assert _ops(a)["aten::add"].device_ms == pytest.approx(0.6 * STEPS)


def test_negative_kernel_dur_is_left_out_with_a_note(block, tmp_path, ceilings):
    # the first matmul kernel made -3 ms long: it used to subtract GPU time (op time 9 - 3)
    # and invent idle
    _kernels(block)[0]["dur"] = -3000.0
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 event(s) left out") == "1 event(s) left out: 1 with a negative dur"
    mm = _ops(a)["aten::mm"]
    assert mm.device_ms == pytest.approx(3.0 * (STEPS - 1))
    assert mm.calls == STEPS - 1
    assert all(s.busy_ms >= 0 and s.idle_ms >= 0 for s in a.steps)
    assert "host-sync" not in {f.code for f in a.findings}


@pytest.mark.parametrize("dur", [-5000.0, 1e300], ids=["negative", "1e300"])
def test_step_mark_without_usable_dur_leaves_its_step_out(block, tmp_path, ceilings, dur):
    _marks(block)[1]["dur"] = dur
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 step mark") == (
        "1 step mark(s) without a usable ts or dur: the 1 step(s) they bound left out"
    )
    # the other steps keep their own 5 ms (not one 10 ms step with its neighbour)
    assert [s.index for s in a.steps] == [0, 2, 3]
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * 3)
    # ops are counted in the steps kept, so per step they are the same as before
    assert _ops(a)["aten::mm"].device_ms == pytest.approx(3.0 * 3)
    assert a.findings[0].share_of_step == pytest.approx(
        tracebuilder_share(block, tmp_path, ceilings), rel=1e-6
    )


def tracebuilder_share(block, tmp_path, ceilings):
    """The top finding's share of a step in the untouched scenario."""
    clean = tracebuilder.planted_memory_block(STEPS)
    return analyze([clean.write(tmp_path / "clean.json")], ceilings).findings[0].share_of_step


def test_last_step_mark_with_negative_dur_is_left_out(block, tmp_path, ceilings):
    _marks(block)[-1]["dur"] = -5000.0
    a = _analyze(block, tmp_path, ceilings)
    assert [s.index for s in a.steps] == [0, 1, 2]
    assert all(s.wall_ms == pytest.approx(5.0) for s in a.steps)


def test_kernel_dur_of_1e300_is_left_out(block, tmp_path, ceilings):
    # it swallowed every step: steps [1e297, 0, 0, 0] ms, median 0, memory-bound-op 100%
    _kernels(block)[1]["dur"] = 1e300
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 event(s) left out") == (
        "1 event(s) left out: 1 with a dur over a day or a ts past any clock"
    )
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)
    assert _ops(a)["aten::add"].device_ms == pytest.approx(0.6 * (STEPS - 1))


@pytest.mark.parametrize("how", ["missing ts", "null ts", "string ts", "null dur", "string dur"])
def test_kernel_without_numeric_ts_or_dur_is_left_out(block, tmp_path, ceilings, how):
    # every step used to become NaN ms (and the terminal's step bar crashed on it)
    k = _kernels(block)[1]
    field, value = how.split()[1], {"null": None, "string": "abc"}.get(how.split()[0])
    if how == "missing ts":
        del k["ts"]
    else:
        k[field] = value
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 event(s) left out") == (
        "1 event(s) left out: 1 with a missing, null or non-numeric ts or dur"
    )
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)
    assert a.median_step_ms == pytest.approx(5.0)
    assert "host-sync" not in {f.code for f in a.findings}


@pytest.mark.parametrize("column", ["ts", "dur"])
def test_nan_in_a_loaded_trace_is_left_out(block, tmp_path, ceilings, column):
    # a reader may keep NaN (JSON has no NaN; the kineto reader rejects the literal): the
    # analysis drops it whichever way it arrives
    import numpy as np

    trace = load_trace(block.write(tmp_path / "trace.json"))
    values = getattr(trace.gpu, column).copy()
    values[np.flatnonzero(trace.gpu.kind == KERNEL)[1]] = np.nan
    trace.gpu.cols[column] = values
    a = analyze_trace(trace, ceilings)
    assert check_report(to_dict(a)) == []
    assert _note(a, "1 event(s) left out")
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)


def test_step_mark_without_ts_leaves_out_the_step_it_ends(block, tmp_path, ceilings):
    del _marks(block)[2]["ts"]
    a = _analyze(block, tmp_path, ceilings)
    # step 1 would run into step 2 (10 ms): both are left out, not merged
    assert [s.index for s in a.steps] == [0, 3]
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0, 5.0])


def test_all_correlation_ids_equal_joins_nothing(block, tmp_path, ceilings):
    # every kernel was joined to the one op around the first launch: memory-bound-op 96%
    for e in block.events:
        if "correlation" in e["args"]:
            e["args"]["correlation"] = 7
    a = _analyze(block, tmp_path, ceilings)
    note = _note(a, "12 GPU activities carry a correlation id")
    assert note.endswith("they are not joined to ops")
    assert a.ops == []
    assert not {"memory-bound-op", "fp32-matmul", "unfused-chain"} & {f.code for f in a.findings}
    # the steps stay where the host put them (an ambiguous launch places no boundary)
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)


def test_many_kernels_on_one_kernel_launch_are_not_joined(tmp_path, ceilings):
    # the runtime side intact, every kernel claiming the first launch's id
    b = TraceBuilder()
    b.step(0, 0.0, 5000.0)
    b.op("aten::add", 10, 20, [[8192, 1024], [8192, 1024], []], ["float", "float", "Scalar"])
    corr = b.launch("vectorized_elementwise_kernel", 20, 100, 300.0)
    for i in range(1, 12):
        b.kernel("vectorized_elementwise_kernel", 100 + 400 * i, 300.0, corr)
    a = _analyze(b, tmp_path, ceilings)
    assert _note(a, "12 GPU activities")
    assert a.ops == []


def test_a_graph_launch_keeps_its_kernels(tmp_path, ceilings):
    # one cudaGraphLaunch issues every kernel of its graph under one id: that is no defect
    b = TraceBuilder()
    b.step(0, 0.0, 5000.0)
    b.op("aten::add", 10, 30, [[8192, 1024], [8192, 1024], []], ["float", "float", "Scalar"])
    corr = b.runtime("cudaGraphLaunch", 20, 10.0)
    for i in range(12):
        b.kernel("vectorized_elementwise_kernel", 100 + 400 * i, 300.0, corr)
    a = _analyze(b, tmp_path, ceilings)
    assert not any("correlation" in n for n in a.notes)
    assert _ops(a)["aten::add"].calls == 1
    assert _ops(a)["aten::add"].device_ms == pytest.approx(12 * 0.3)


def test_duplicate_step_mark_at_the_same_time_is_left_out(block, tmp_path, ceilings):
    # another name at step 1's start made a 0 ms step: median 0, shares above 1
    dup = {**_marks(block)[1], "name": "ProfilerStep#99"}
    block.events.append(dup)
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 duplicate step mark") == (
        "1 duplicate step mark(s) left out (a step name or start time seen twice)"
    )
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)
    assert a.median_step_ms == pytest.approx(5.0)


def test_duplicate_step_name_is_left_out(block, tmp_path, ceilings):
    dup = {**_marks(block)[1], "ts": _marks(block)[1]["ts"] + 2500.0}
    block.events.append(dup)
    a = _analyze(block, tmp_path, ceilings)
    assert _note(a, "1 duplicate step mark")
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)


def test_a_step_mark_recorded_twice_is_no_defect(block, tmp_path, ceilings):
    # some torch versions file the same mark as cpu_op and user_annotation: kept once, silently
    m = _marks(block)[1]
    block.events.append({**m, "cat": "cpu_op"})
    a = _analyze(block, tmp_path, ceilings)
    assert not any("duplicate" in n for n in a.notes)
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0] * STEPS)


def test_one_step_mark_counts_op_time_inside_its_window(block, tmp_path, ceilings):
    # with one mark, the ops' device time of all four steps was set against one step's GPU
    # time: share_of_gpu_time 3.2 and a finding at 213% of the step
    for m in _marks(block)[1:]:
        block.events.remove(m)
    a = _analyze(block, tmp_path, ceilings)
    assert len(a.steps) == 1
    ops = _ops(a)
    assert ops["aten::mm"].device_ms == pytest.approx(3.0)
    assert ops["aten::add"].device_ms == pytest.approx(0.6)
    assert ops["aten::mm"].share_of_gpu_time == pytest.approx(3.0 / 3.75)
    assert all(0 <= f.share_of_step <= 1 for f in a.findings)


def test_overlapping_kernels_on_streams_keep_shares_within_one(tmp_path, ceilings):
    # two streams busy at once: the op's 2 ms of kernels ran in 1 ms of GPU time, which made
    # its share of the union 2.0 (1.008 on a public multi-stream trace)
    b = TraceBuilder()
    b.step(0, 0.0, 5000.0)
    b.op("aten::add", 10, 30, [[8192, 1024], [8192, 1024], []], ["float", "float", "Scalar"])
    b.launch("vectorized_elementwise_kernel", 15, 100, 1000.0, stream=7)
    b.launch("vectorized_elementwise_kernel", 25, 100, 1000.0, stream=8)
    b.op("aten::mul", 2000, 20, [[8192, 1024], [8192, 1024]], ["float", "float"])
    b.launch("vectorized_elementwise_kernel", 2005, 2100, 500.0, stream=7)
    a = _analyze(b, tmp_path, ceilings)
    ops = _ops(a)
    assert ops["aten::add"].share_of_gpu_time == pytest.approx(2.0 / 2.5)
    assert ops["aten::mul"].share_of_gpu_time == pytest.approx(0.5 / 2.5)
    assert a.steps[0].kernel_busy_ms == pytest.approx(1.5)


def test_every_event_unusable_is_bad_input(block, tmp_path, ceilings):
    for e in block.events:
        if e.get("ph") == "X":
            e["ts"] = None
    with pytest.raises(BadInput, match="none of its .* events has a usable ts and dur"):
        analyze([block.write(tmp_path / "trace.json")], ceilings)


def test_every_step_mark_unusable_is_bad_input(block, tmp_path, ceilings):
    for m in _marks(block):
        m["dur"] = -1.0
    with pytest.raises(BadInput, match="no step of the trace can be timed"):
        analyze([block.write(tmp_path / "trace.json")], ceilings)


def test_no_finding_saves_more_than_the_step(monkeypatch):
    # a rule's estimate from a profiled step longer than the unprofiled one: cut to the step
    from membound.analysis import findings as fs

    class Ctx:
        def expected_after(self, lost):
            return max(4.0 - lost, 0.0)

    def over(ctx):
        return [
            fs.Finding("test-over", "t", 6.0, 1.5, {"x": 1}, "fix"),
            fs.Finding("test-over", "nan", float("nan"), 0.5, {}, "fix"),
        ]

    monkeypatch.setitem(fs.RULES, "test-over", over)
    (f,) = fs.run_rules(Ctx(), ["test-over"])
    assert f.share_of_step == 1.0 and f.time_lost_ms_per_step == pytest.approx(4.0)
    assert f.evidence == {"x": 1, "estimated_ms_per_step": 6.0}
    assert f.expected_step_ms_after_fix == 0.0


def _four_steps(tmp_path, meta):
    import json

    from support.tracebuilder import TraceBuilder

    b = TraceBuilder()
    for n in range(2, 6):  # ProfilerStep#2..#5, 1 ms each, one kernel each
        b.step(n, n * 1000.0, 1000.0)
        b.launch("k", n * 1000.0 + 10, n * 1000.0 + 20, 100.0)
    path = b.write(tmp_path / "trace.json.gz")
    (tmp_path / "capture.json").write_text(json.dumps({"trace": "trace.json.gz", **meta}))
    return path


def test_only_the_captures_complete_recorded_steps_count(tmp_path):
    """capture.json names the complete recorded steps (commands/diagnose, issue 17): a crash
    inside step #5 leaves #2-#4, whatever the trace's marks say."""
    from membound.analysis import analyze

    path = _four_steps(tmp_path, {"complete": False, "steps_captured": 3,
                                  "recorded_steps": [2, 3, 4], "partial_step": 5})  # fmt: skip
    a = analyze([path])
    assert [s.index for s in a.steps] == [2, 3, 4]
    assert any("1 partial step(s) left out" in n for n in a.notes)


def test_no_complete_recorded_step_is_one_line(tmp_path):
    from membound.analysis import analyze
    from membound.errors import BadInput

    path = _four_steps(tmp_path, {"complete": False, "steps_captured": 0, "recorded_steps": [],
                                  "partial_step": 2, "ended": "crashed"})  # fmt: skip
    with pytest.raises(BadInput, match="before any recorded step was complete \\(crashed\\)"):
        analyze([path])


def test_lost_runtime_calls_keep_the_host_windows(tmp_path):
    """GPU activity whose launch call is not in the trace is the pre-capture backlog only
    before the first activity launched inside the capture; found by the fuzz suite: with
    every cuda_runtime ts null, the 4 steps of h200_memory_bound_op all became 0 ms."""
    import json

    from membound.analysis import analyze
    from support.paths import FIXTURES

    doc = json.loads(open_trace(timeline_in(FIXTURES / "h200_memory_bound_op")).read())
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and e.get("cat") == "cuda_runtime":
            e["ts"] = None
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    a = analyze([p])
    assert len(a.steps) == 4 and all(s.wall_ms > 2.0 for s in a.steps)


def test_a_step_of_no_duration_is_left_out(tmp_path):
    """Found by the long fuzz profile: one step mark's ts negated (it sorts first and bounds
    nothing) gave a 0-ms step that entered the median."""
    from membound.analysis import analyze
    from support.tracebuilder import TraceBuilder

    b = TraceBuilder()
    for n in range(4):
        b.step(n, n * 1000.0, 1000.0)
        b.launch("k", n * 1000.0 + 10, n * 1000.0 + 20, 100.0)
    doc = b.document()
    marks = [e for e in doc["traceEvents"] if str(e.get("name", "")).startswith("ProfilerStep")]
    marks[2]["ts"] = -marks[2]["ts"] - 5e6
    p = tmp_path / "t.json"
    import json

    p.write_text(json.dumps(doc))
    a = analyze([p])
    assert all(s.wall_ms > 0 for s in a.steps) and a.median_step_ms > 0
