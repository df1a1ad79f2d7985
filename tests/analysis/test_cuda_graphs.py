"""CUDA graph replays (issue 16): one cudaGraphLaunch per step, every kernel of the replay
carrying its correlation id. The gaps between a replay's kernels are the GPU's own node
scheduling, not the host launching: no launch-bound there, and the kernels stay joined."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from membound.trace.load import load_trace
from membound.trace.model import GRAPH_LAUNCH, LAUNCH
from support.tracebuilder import TraceBuilder, planted_launch_bound

KERNELS, DUR, GAP = 200, 5.0, 3.0


def graphed(steps: int = 2) -> TraceBuilder:
    """Per step: one graph launch (10 us of host), then 200 kernels of 5 us, 3 us apart."""
    b = TraceBuilder()
    wall = 20.0 + KERNELS * (DUR + GAP) + 50.0
    for s in range(steps):
        o = s * wall
        b.step(s, o, wall)
        b.op("CUDAGraph.replay", o + 1, 12.0)
        corr = b.runtime("cudaGraphLaunch", o + 2, 10.0)
        for k in range(KERNELS):
            b.kernel(f"node_{k}", o + 20 + k * (DUR + GAP), DUR, corr)
    return b


def test_graph_launch_is_its_own_call_kind(tmp_path):
    t = load_trace(graphed().write(tmp_path / "g.json"))
    calls = set(t.runtime.call.tolist())
    assert calls == {GRAPH_LAUNCH}
    b = TraceBuilder()
    b.launch("k", 0, 5, 5)
    assert set(load_trace(b.write(tmp_path / "e.json")).runtime.call.tolist()) == {LAUNCH}


def test_no_launch_gaps_inside_a_replay(tmp_path, ceilings):
    a = analyze([graphed().write(tmp_path / "g.json")], ceilings)
    assert len(a.steps) == 2
    assert not any(f.code == "launch-bound" for f in a.findings)
    # the replay is one launch: the host's 12 us issuing it (CUDAGraph.replay around the
    # cudaGraphLaunch call) before the first node is launch idle; the 199 gaps of 3 us
    # inside the replay are the GPU's own scheduling of work it already had: `queued`, all
    # of them and nothing else (the graph launch had returned before each)
    for s in a.steps:
        assert s.idle_by_cause["launch"] == pytest.approx(0.012, abs=1e-9)
        assert s.idle_by_cause["queued"] == pytest.approx((KERNELS - 1) * GAP / 1e3, abs=1e-9)
        assert s.kernels == KERNELS
    # the replay's kernels are not taken for one launch credited with 200 activities
    assert not any("do not name one launch call" in n for n in a.notes)


def test_the_same_loop_eager_is_launch_bound(tmp_path, ceilings):
    """The control: the same kind of kernels launched one by one are launch-bound."""
    a = analyze([planted_launch_bound().write(tmp_path / "e.json")], ceilings)
    assert a.findings and a.findings[0].code == "launch-bound"


def test_graph_replayed_kernels_count_as_uncosted(ceilings):
    """examples/planted/launch_bound_graphed.py recorded on the H200: the replay's kernels
    carry no op and no arguments, so they are GPU time the roofline cannot place. The costed
    share is of the GPU's device time, not of the op rows (which held one `aten::sum` and
    read 100% costed before), and a note says why."""
    from pathlib import Path

    path = Path(__file__).parents[1] / "fixtures" / "h200_launch_bound_graphed" / "trace.json.gz"
    a = analyze([path], ceilings)
    # independent count: aten::sum's share of the device time (the only costed op)
    rows = {r.name: r for r in a.ops}
    assert set(rows) == {"aten::sum"}
    assert a.ops_costed_fraction == pytest.approx(rows["aten::sum"].share_of_gpu_time)
    assert a.ops_costed_fraction < 0.01
    assert any("CUDA-graph replays" in n and "uncosted" in n for n in a.notes)
    # pooled with itself, the share stays what it is
    from membound.analysis.pipeline import merge

    assert merge([a, a]).ops_costed_fraction == pytest.approx(a.ops_costed_fraction)
