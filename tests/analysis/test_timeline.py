"""Timeline numbers against planted traces whose answers are computed by hand."""

from __future__ import annotations

import gzip
import json

import pytest

from membound.analysis import analyze
from support import tracebuilder


def _scenario(data_dir, name):
    return data_dir / name / "trace.json.gz"


def test_input_pipeline_busy_idle_and_causes(data_dir, ceilings):
    a = analyze([_scenario(data_dir, "synthetic_input_pipeline")], ceilings)
    assert [s.index for s in a.steps] == [0, 1]
    for s in a.steps:
        # per 5 ms step: 100 µs copy + 2 × 1 ms kernels busy; see planted_input_pipeline
        assert s.wall_ms == pytest.approx(5.0)
        assert s.busy_ms == pytest.approx(2.1)
        assert s.kernel_busy_ms == pytest.approx(2.0)
        assert s.idle_ms == pytest.approx(2.9)
        assert s.idle_by_cause == pytest.approx(
            {
                "queued": 0.0,  # every kernel launched after the GPU had gone idle
                "dataloader": 1.0,
                "pageable_copy": 0.91,
                "copy": 0.0,
                "sync": 0.48,
                "launch": 0.0,
                "other": 0.51,
                "profiler": 0.0,  # a trace from elsewhere: nothing to correct
            }
        )
        assert s.kernels == 2
    assert a.gpu_busy_fraction == pytest.approx(0.42)
    assert a.idle_breakdown["dataloader"] == pytest.approx(1.0)
    assert a.notes == [n for n in a.notes if "step markers" not in n]


def _independent_busy_fraction(path):
    """Union of GPU intervals and step windows computed directly from the JSON."""
    doc = json.loads(gzip.open(path).read())
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = sorted(
        (e["ts"], e["ts"] + e["dur"]) for e in ev if e["name"].startswith("ProfilerStep#")
    )
    gpu = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
    )
    busy, cur_s, cur_e = 0.0, None, None
    for s, e in gpu:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    wall = max(max(e for _, e in steps), max(e for _, e in gpu)) - steps[0][0]
    return busy / wall


@pytest.mark.parametrize(
    "name",
    [
        "synthetic_input_pipeline",
        "synthetic_memory_block",
        "synthetic_launch_bound",
        "synthetic_healthy",
    ],
)
def test_busy_fraction_agrees_with_independent_union(data_dir, ceilings, name):
    path = _scenario(data_dir, name)
    a = analyze([path], ceilings)
    assert a.gpu_busy_fraction == pytest.approx(_independent_busy_fraction(path), rel=0.01)


def test_no_step_markers_is_one_step_with_a_note(data_dir, ceilings):
    a = analyze([_scenario(data_dir, "synthetic_no_steps")], ceilings)
    assert len(a.steps) == 1
    assert any("no step markers" in n for n in a.notes)
    assert not a.step_marked
    # window = first event (DataLoader at 0) .. last event (kernel_b of step 2 ends at 9500)
    assert a.steps[0].wall_ms == pytest.approx(9.5)
    assert a.steps[0].busy_ms == pytest.approx(4.2)


def test_cpu_only_trace_reports_steps_and_says_gpu_parts_do_not_apply(data_dir):
    a = analyze([data_dir / "cpu_only" / "trace.json.gz"])
    assert not a.has_gpu
    assert len(a.steps) == 3 and all(s.wall_ms > 0 for s in a.steps)
    assert a.gpu_busy_fraction is None and a.findings == [] and a.ops == []
    assert any("CPU-only" in n for n in a.notes)


def test_empty_trace_is_one_line_of_bad_input(tmp_path):
    """Issue 17: a trace with no usable event is refused (exit 2), not an empty report."""
    from membound.errors import BadInput

    p = tmp_path / "empty.json"
    p.write_text('{"traceEvents": []}')
    with pytest.raises(BadInput, match="holds no event membound can use"):
        analyze([p])


def test_last_step_extends_to_the_gpu_work_it_launched(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 100)
    b.launch("k", 10, 50, 400)  # launched inside the step, runs past the host's step end
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    assert a.steps[0].end_us == 450 and a.steps[0].busy_ms == pytest.approx(0.4)


def test_multiple_traces_pool_steps(data_dir, ceilings):
    a = analyze(
        [
            _scenario(data_dir, "synthetic_input_pipeline"),
            _scenario(data_dir, "synthetic_input_pipeline"),
        ],
        ceilings,
    )
    assert len(a.steps) == 4
    top = a.findings[0]
    assert top.code == "input-starved" and top.time_lost_ms_per_step == pytest.approx(1.0)


def test_step_marks_recorded_twice_count_once(tmp_path, ceilings):
    b = tracebuilder.planted_input_pipeline()
    for s in range(2):
        b.step(s, s * 5000.0, 5000.0, cat="cpu_op")  # older torch: also a cpu_op
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    assert [s.wall_ms for s in a.steps] == pytest.approx([5.0, 5.0])
    assert a.gpu_busy_fraction == pytest.approx(0.42)


def test_blocking_copy_sync_is_the_copys_not_a_host_sync(tmp_path, ceilings):
    """`.cuda()` from pageable memory: aten::copy_ holds cudaMemcpyAsync and a stream sync.
    The idle while the host sits in the copy op, and until the next kernel, is the copy's."""
    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k0", 1, 5, 295)  # GPU busy until 300
    b.op("aten::copy_", 10, 480)  # host: 10..490
    b.copy(12, 5, 300, 180, 4_000_000, "Pageable")  # the copy runs 300..480
    b.runtime("cudaStreamSynchronize", 20, 465)
    b.launch("k1", 560, 600, 300)  # next kernel: 600..900
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    s = a.steps[0]
    assert s.idle_by_cause["pageable_copy"] == pytest.approx(0.12)  # 480..600
    assert s.idle_by_cause["sync"] == 0.0
    codes = {f.code for f in a.findings}
    assert "host-sync" not in codes and "pageable-copy" in codes


def test_device_to_host_copy_is_a_sync(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 1000)
    b.launch("k0", 1, 5, 295)
    b.op("aten::_local_scalar_dense", 10, 300)  # .item(): D2H copy + sync, host 10..310
    corr = b.runtime("cudaMemcpyAsync", 12, 290)
    b.memcpy(300, 2, 4, "Pageable", corr, direction="DtoH")
    b.launch("k1", 700, 710, 200)
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    s = a.steps[0]
    assert s.idle_by_cause["sync"] == pytest.approx((710 - 302) / 1e3)  # memcpy end .. next kernel
    assert s.idle_by_cause["copy"] == 0.0 and s.idle_by_cause["pageable_copy"] == 0.0
