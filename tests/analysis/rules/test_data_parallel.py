"""`data-parallel-one-gpu`: nn.DataParallel's host work around a model on one GPU."""

from __future__ import annotations

import pytest

from support.analysis import by_code
from support.tracebuilder import TraceBuilder


def _loop(tmp_path, second_device: bool = False, gpu_bound: bool = False):
    """Two steps of 1000 µs. Each: a `DataParallel.forward` span from the step's start to
    800 µs; inside it the Scatter at 300-350 µs (its chunk inside), then the model's two ops
    at 400 and 700 µs, each launching a kernel, the last op ending at 750: 400 + 50 = 450 µs
    of DataParallel's own work a forward. `gpu_bound`: a 990-µs kernel launched at the
    step's start keeps the GPU busy instead. `second_device`: one kernel on GPU 1."""
    b = TraceBuilder()
    for s in range(2):
        t = s * 1000.0
        b.step(s, t, 1000)
        if gpu_bound:
            b.launch("busy", t + 1, t + 5, 990)
        b.annotation("DataParallel.forward", t, 800)
        b.op("Scatter", t + 300, 50)
        b.op("aten::chunk", t + 305, 30)
        b.op("aten::mul", t + 400, 20)
        b.launch("k1", t + 405, t + 410 if not gpu_bound else t + 995, 3)
        b.op("aten::add", t + 700, 50)
        b.launch("k2", t + 705, t + 710 if not gpu_bound else t + 998, 2)
    if second_device:
        b._x("kernel", "other_gpu", 20.0, 5.0, pid=1, tid=7, correlation=-1, stream=7, device=1)
    return b.write(tmp_path / "trace.json.gz")


def test_data_parallel_on_one_gpu_costs_its_host_work(tmp_path):
    from membound.analysis import analyze
    from membound.analysis.remedies import remedies_of

    a = analyze([_loop(tmp_path)], None)
    f = by_code(a)["data-parallel-one-gpu"]
    assert f.evidence["data_parallel_ms_per_call"] == pytest.approx(0.45)
    assert f.evidence["calls_per_step"] == pytest.approx(1.0)
    assert f.time_lost_ms_per_step == pytest.approx(0.45)
    assert "call the model directly" in f.fix and "DistributedDataParallel" in f.fix
    assert remedies_of(f.code, f.evidence) == ("drop_data_parallel",)
    assert f.doc == "docs/findings/data-parallel-one-gpu.md"


def test_no_finding_where_the_gpu_sets_the_pace_or_several_gpus_run(tmp_path):
    from membound.analysis import analyze

    (tmp_path / "busy").mkdir()
    (tmp_path / "two").mkdir()
    busy = analyze([_loop(tmp_path / "busy", gpu_bound=True)], None)
    assert "data-parallel-one-gpu" not in by_code(busy)
    two = analyze([_loop(tmp_path / "two", second_device=True)], None)
    assert "data-parallel-one-gpu" not in by_code(two)


def test_without_data_parallel_spans_no_finding(tmp_path):
    from membound.analysis import analyze

    b = TraceBuilder()
    for s in range(2):
        t = s * 1000.0
        b.step(s, t, 1000)
        b.op("aten::mul", t + 400, 20)
        b.launch("k1", t + 405, t + 410, 3)
    a = analyze([b.write(tmp_path / "trace.json.gz")], None)
    assert "data-parallel-one-gpu" not in by_code(a)
