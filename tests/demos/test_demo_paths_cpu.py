"""The live demos' code paths (written for CUDA), run on the CPU at toy sizes: every variant is
timed or captured, the charts and report JSONs are written, the comparison runs. The numbers
mean nothing on a CPU; the plumbing is what is checked here (the GPU run is
benchmarks/gpu/demo.sh)."""

from __future__ import annotations

import json

from rich.console import Console

from membound.demos import input_pipeline, layernorm


def test_layernorm_path_on_cpu(tmp_path):
    console = Console(width=160, record=True)
    res = layernorm.run(tmp_path, console, device="cpu", shape=(16, 64))
    rows = res["rows"]
    assert len(rows) == 5
    assert all(r.ms is not None and r.ms > 0 for r in rows), [(r.name, r.error) for r in rows]
    # bytes follow the dtype and the kernel count: fp32 LN moves twice bf16 LN; fused < unfused
    e = 16 * 64
    assert [r.bytes for r in rows] == [8 * e, 8 * e, 4 * e, 15 * e, 8 * e]
    assert res["chart"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = console.export_text()
    assert "symptom → real bottleneck → fix" in text and "FusedAddLayerNorm" in text


def test_input_pipeline_path_on_cpu(tmp_path):
    console = Console(width=160, record=True)
    res = input_pipeline.run(tmp_path, console, device="cpu", shape=(2, 16), width=32, workers=0)
    assert [r[0] for r in res["rows"]] == list(input_pipeline.VARIANTS)
    for name in input_pipeline.VARIANTS:
        assert (tmp_path / name / "trace.json.gz").exists()  # captured by membound.profile
        report = json.loads((tmp_path / f"{name}.json").read_text())
        assert report["schema"] == 1
        assert report["steps"]["count"] == input_pipeline.STEPS
    assert res["compare"]["step_ms"]["before"] > 0
    # every variant also timed without the profiler, shown beside the profiled numbers
    assert set(res["timed"]) == set(input_pipeline.VARIANTS)
    assert all(t["step_ms"] > 0 for t in res["timed"].values())
    text = console.export_text()
    assert "membound compare" in text and "no profiler" in text
    assert set(res["story"]) == set(input_pipeline.STORY_CODES)
    assert "the story, from the findings" in text
    # (b) is the realistic pinned path: a DataLoader with pin_memory, not pre-pinned tensors
    assert "b-dl-pinned" in input_pipeline.VARIANTS


def test_benchmark_uses_the_demo_definitions():
    """One workload and one set of variants: the benchmark imports the demo's."""
    from support.paths import benchmark

    bench = benchmark("bench_input_pipeline")
    assert bench.Workload is input_pipeline.Workload
    assert bench.time_steps is input_pipeline.time_steps
    f32, u8 = input_pipeline.make_batches(2, 8, 2)
    names = set(bench.variants(f32, u8, 0, 1))
    assert set(input_pipeline.VARIANTS) <= names
