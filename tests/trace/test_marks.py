"""membound's host marks on a GPU-only timeline trace: the clock offset from the anchor calls,
the marks written in as kineto's own annotations, and the analysis of such a trace with its
ops pass beside it (the two-pass capture, as the H200 writes it; built here by hand)."""

from __future__ import annotations

import gzip
import json
import shutil

import pytest

from membound.analysis import analyze
from membound.trace.load import load_trace
from membound.trace.marks import HostMarks, inject
from membound.trace.model import DATALOADER, STEP
from support import tracebuilder

OFFSET_US = 5_292_876_633_401.0  # trace clock − perf_counter, as measured on the H200


def _gpu_only_trace(tmp_path, steps=4, step_us=2000.0, anchors=True, extra_queries=()):
    """Kernels launched by cudaLaunchKernel calls, one cudaStreamQuery per boundary (the
    anchors), no CPU op at all; host stamps for the same boundaries in ns."""
    b = tracebuilder.TraceBuilder()
    base = 1_000_000.0  # trace µs of boundary 0
    stamps = []
    for s in range(steps + 1):
        t = base + s * step_us
        stamps.append(int((t - OFFSET_US - 3.0) * 1e3))  # the stamp comes 3 µs before the call
        if anchors:
            b.runtime("cudaStreamQuery", t, 1.0)
        if s < steps:
            for k in range(4):  # four 300 µs kernels, launched 20 µs apart
                b.launch("gemm", t + 10 + 20 * k, t + 100 + 300 * k, 300.0, host_dur=4.0)
    for t in extra_queries:
        b.runtime("cudaStreamQuery", t, 1.0)  # the user's own queries: not anchors
    b.device = "NVIDIA H200"
    path = b.write(tmp_path / "trace.json.gz")
    return path, stamps, base


def _marks(stamps, loader=()):
    m = HostMarks(pid=1, tid=100)
    m.boundaries = [(10 + k, t) for k, t in enumerate(stamps)]
    m.anchors = list(stamps)
    m.loader = list(loader)
    return m


def test_offset_is_what_the_anchors_agree_on_despite_other_queries(tmp_path):
    path, stamps, base = _gpu_only_trace(tmp_path, extra_queries=(1_000_500.0, 1_003_100.0))
    events = json.loads(gzip.open(path).read())["traceEvents"]
    assert sum(e.get("name") == "cudaStreamQuery" for e in events) == len(stamps) + 2
    offset = _marks(stamps).offset_us(events)
    assert offset == pytest.approx(OFFSET_US + 3.0, abs=0.01)
    assert HostMarks().offset_us([]) is None


def test_marks_become_steps_and_dataloader_spans_on_the_trace_clock(tmp_path):
    path, stamps, base = _gpu_only_trace(tmp_path)
    loader = [(stamps[1] + 5_000, stamps[1] + 205_000, "_MultiProcessingDataLoaderIter")]
    assert inject(path, _marks(stamps, loader), None) == 4 + 1
    t = load_trace(path)  # the streaming reader still takes the rewritten layout
    steps = t.cpu.role == STEP
    assert sorted(t.cpu.step[steps].tolist()) == [10, 11, 12, 13]
    first = t.cpu.ts[steps].min()
    assert first == pytest.approx(base, abs=0.01)  # the stamp + offset is the anchor's time
    assert t.cpu.dur[steps].tolist() == pytest.approx([2000.0] * 4, abs=0.01)
    dl = t.cpu.role != 0
    assert (t.cpu.role[dl & ~steps] >= DATALOADER).all() and (dl & ~steps).sum() == 1


def test_no_anchor_no_marks(tmp_path):
    path, stamps, _ = _gpu_only_trace(tmp_path, anchors=False)
    before = path.read_bytes()
    assert inject(path, _marks(stamps), None) is None
    assert path.read_bytes() == before


def test_two_pass_analysis_times_from_the_timeline_and_ops_from_the_ops_pass(tmp_path):
    ceilings = tracebuilder.test_ceilings()
    path, stamps, base = _gpu_only_trace(tmp_path)
    inject(path, _marks(stamps), None)
    # the ops pass: 2 steps of the same work with CPU ops and shapes (a 4096^3 bf16 matmul)
    ops = tracebuilder.TraceBuilder()
    dims = [[4096, 4096], [4096, 4096]]
    for s in range(2):
        o = s * 3000.0
        ops.step(s, o, 2000.0)
        for k in range(4):
            ops.op("aten::mm", o + 10 + 20 * k, 15, dims, ["c10::BFloat16"] * 2)
            ops.launch("gemm_bf16", o + 12 + 20 * k, o + 100 + 300 * k, 300.0)
    ops.write(tmp_path / "trace.ops.json.gz")
    meta = {"ops_trace": "trace.ops.json.gz", "timeline": "gpu+host marks",
            "step_times_ms": {"unprofiled": [2.0, 2.0], "profiled": [2.0], "after": []}}  # fmt: skip
    (tmp_path / "capture.json").write_text(json.dumps(meta))
    a = analyze([path], ceilings)
    assert [s.index for s in a.steps] == [10, 11, 12, 13]
    assert all(s.wall_ms == pytest.approx(2.0) for s in a.steps)
    assert all(s.busy_ms == pytest.approx(1.2) for s in a.steps)
    (mm,) = [r for r in a.ops if r.name == "aten::mm"]
    # 8 calls over the ops pass's 2 steps = 4 per step; reported over the timeline's 4 steps
    assert mm.calls == pytest.approx(16) and mm.device_ms == pytest.approx(16 * 0.3)
    assert mm.flops == pytest.approx(16 * 2 * 4096**3)
    assert mm.bound == "compute"
    assert any("ops pass (2 step(s)" in n for n in a.notes)
    # each step starts with 100 µs of GPU idle: the host in its four launch calls (10-14,
    # 30-34, 50-54, 70-74 µs) and the glue between them is `launch` (a GPU-only trace has no
    # CPU ops to span), 10-74 µs; the rest `other`
    s = a.steps[1]
    assert s.idle_by_cause["launch"] == pytest.approx(0.064)
    assert s.idle_by_cause["other"] == pytest.approx(0.8 - 0.064)
    # the same timeline without its ops pass: timed, but nothing on the roofline, and said so
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(path, alone / "trace.json.gz")
    b = analyze([alone / "trace.json.gz"], ceilings)
    assert not b.ops and any("GPU activity only" in n for n in b.notes)
