"""Each rule against a planted trace: exact findings, exact time lost (hand-computed)."""

from __future__ import annotations

import pytest
import tracebuilder

from membound.analysis import analyze
from membound.analysis.findings import RULES, Finding, rule
from membound.cost.trace_args import cost_of


def _run(data_dir, name, ceilings):
    return analyze([data_dir / name / "trace.json.gz"], ceilings)


def _by_code(a):
    return {f.code: f for f in a.findings}


def test_input_pipeline_findings(data_dir, ceilings):
    a = _run(data_dir, "synthetic_input_pipeline", ceilings)
    assert [f.code for f in a.findings] == ["input-starved", "pageable-copy", "host-sync"]
    f = _by_code(a)
    assert f["input-starved"].time_lost_ms_per_step == pytest.approx(1.0)
    assert f["input-starved"].share_of_step == pytest.approx(0.2)
    # pageable: (100 µs − 1 MB at 50 GB/s = 20 µs) + 900 µs idle inside aten::copy_ + 10 µs
    # until the next kernel starts
    pc = f["pageable-copy"]
    assert pc.time_lost_ms_per_step == pytest.approx(0.08 + 0.91)
    assert pc.evidence["pinned_bandwidth_gb_s"] == pytest.approx(50.0)
    assert pc.evidence["pinned_bandwidth_source"] == "measured ceilings"
    assert pc.evidence["achieved_bandwidth_gb_s"] == pytest.approx(10.0)
    assert "membound.data.prefetch" in pc.fix
    # sync: aten::item starts at 3020, the next kernel at 3500
    assert f["host-sync"].time_lost_ms_per_step == pytest.approx(0.48)
    assert f["host-sync"].evidence["syncs_per_step"] == {
        "cudaStreamSynchronize": 1,
        "aten::item": 1,
    }
    # blocking-copy: 20 µs of pinned-equivalent copy per step = 0.4% of a step: below the floor
    assert "blocking-copy" not in f
    # the H2D copy is PCIe time: it never becomes a roofline row of aten::copy_
    assert all(r.name != "aten::copy_" for r in a.ops)


def test_without_ceilings_pinned_rate_comes_from_the_trace_then_a_default(tmp_path):
    b = tracebuilder.planted_input_pipeline()
    b.device = "Mystery GPU 9000"  # no datasheet, nothing measured
    a = analyze([b.write(tmp_path / "a.json")])
    assert a.ceilings is None and a.ceilings_source is None
    assert any("no ceilings for device Mystery GPU 9000" in n for n in a.notes)
    pc = _by_code(a)["pageable-copy"]
    assert pc.evidence["pinned_bandwidth_source"].startswith("typical PCIe Gen4")
    assert pc.time_lost_ms_per_step == pytest.approx(0.91 + (100 - 1e6 / 25e9 * 1e6) / 1e3)
    b.memcpy(4000, 20, 1_000_000, "Pinned")  # a pinned copy at 50 GB/s in the trace
    a = analyze([b.write(tmp_path / "b.json")])
    pc = _by_code(a)["pageable-copy"]
    assert pc.evidence["pinned_bandwidth_source"] == "fastest pinned copy in this trace"
    assert pc.evidence["pinned_bandwidth_gb_s"] == pytest.approx(50.0)


def test_datasheet_ceilings_are_used_and_said(data_dir):
    a = _run(data_dir, "synthetic_input_pipeline", None)  # NVIDIA H200: datasheet, nothing cached
    assert a.ceilings_source == "datasheet"
    assert any("datasheet" in n for n in a.notes)


def test_blocking_copy_counts_unoverlapped_pinned_copies(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    for s in range(2):
        o = s * 1000.0
        b.step(s, o, 1000.0)
        b.copy(o, 5, o + 10, 200, 10_000_000, "Pinned")  # 200 µs, no kernel during it
        b.launch("k", o + 6, o + 210, 700)
        b.copy(o + 7, 5, o + 300, 100, 5_000_000, "Pinned", stream=9)  # hidden under k
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    f = _by_code(a)
    assert f["blocking-copy"].time_lost_ms_per_step == pytest.approx(0.2)
    assert "pageable-copy" not in f


def test_memory_block_findings(data_dir, ceilings):
    a = _run(data_dir, "synthetic_memory_block", ceilings)
    assert [f.code for f in a.findings] == [
        "fp32-matmul",
        "memory-bound-op",
        "launch-bound",
        "fp32-storage",
        "unfused-chain",
    ]
    f = _by_code(a)
    # the GPU waits for the first launch: 90 µs per step inside the ops that launch the
    # kernels (mm 10-30, add 40-60, layer_norm 70-100) and the 10 µs glue between them
    assert f["launch-bound"].time_lost_ms_per_step == pytest.approx(0.09)
    mm_flops = 2 * 4096**3
    # 3 ms at fp32 speed vs the same FLOPs at the 400 TFLOP/s TF32 ceiling
    assert f["fp32-matmul"].time_lost_ms_per_step == pytest.approx(3.0 - mm_flops / 400e12 * 1e3)
    add = cost_of(
        "aten::add", [[8192, 1024], [8192, 1024], []], ["float", "float", "Scalar"], ["", "", "1"]
    )
    ln = cost_of(
        "aten::native_layer_norm",
        tracebuilder.LN_DIMS,
        ["float", "float", "float", "Scalar"],
        ["", "[1024]", "", "", "1e-05"],
    )
    # aten::add: 0.6 ms of the 3.75 ms of kernels (16%) vs its bytes at 1 TB/s
    mb = f["memory-bound-op"]
    assert mb.evidence["op"] == "aten::add"
    assert mb.time_lost_ms_per_step == pytest.approx(0.6 - add.bytes / 1e12 * 1e3)
    assert f["fp32-storage"].time_lost_ms_per_step == pytest.approx(
        0.5 * (add.bytes + ln.bytes) / 1e12 * 1e3
    )
    # the add's 32 MiB output is written then read back by the LayerNorm
    uc = f["unfused-chain"]
    assert uc.evidence["top_chain"] == "aten::add → aten::native_layer_norm"
    assert uc.time_lost_ms_per_step == pytest.approx(2 * 8192 * 1024 * 4 / 1e12 * 1e3)
    assert "FusedAddLayerNorm" in uc.fix
    rows = {r.name: r for r in a.ops}
    assert rows["aten::mm"].bound == "compute"
    assert rows["aten::mm"].achieved_flops_fraction == pytest.approx(mm_flops / 3e-3 / 50e12)
    assert rows["aten::add"].bound == "memory" and rows["aten::native_layer_norm"].bound == "memory"
    assert rows["aten::add"].achieved_bandwidth_fraction == pytest.approx(add.bytes / 0.6e-3 / 1e12)
    assert "aten::layer_norm" not in rows  # kernels belong to the innermost op with a cost


def test_fp32_matmul_skipped_when_tf32_already_on(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 1000)
    flops = 2 * 4096**3
    b.op("aten::mm", 1, 5, [[4096, 4096], [4096, 4096]], ["float", "float"])
    b.launch("tf32_gemm", 2, 10, flops / 300e12 * 1e6)  # 300 TFLOP/s: far above fp32's 50
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    assert "fp32-matmul" not in _by_code(a)


def test_launch_bound(data_dir, ceilings):
    a = _run(data_dir, "synthetic_launch_bound", ceilings)
    assert [f.code for f in a.findings] == ["launch-bound"]
    f = a.findings[0]
    # 199 gaps of 10 µs between kernels per step; before step 0's first kernel 10 µs: the
    # host inside aten::relu (0-4, which launches it) then in the glue before the next
    # relu (4-15); before step 1's first kernel a 10 µs gap after step 0's last kernel:
    # (1990 + 10 + 1990 + 10) / 2 µs
    assert f.time_lost_ms_per_step == pytest.approx(2.0)
    assert f.evidence["kernels_per_step"] == 200
    assert f.evidence["median_kernel_us"] == pytest.approx(5.0)
    assert "torch.compile" in f.fix and "CUDA graph" in f.fix


def test_healthy_run_has_no_finding_above_ten_percent(data_dir, ceilings):
    a = _run(data_dir, "synthetic_healthy", ceilings)
    assert all(f.share_of_step < 0.10 for f in a.findings)
    assert a.gpu_busy_fraction > 0.99
    assert a.ops[0].bound == "compute" and a.ops[0].fraction_of_attainable == pytest.approx(0.9)


def test_findings_are_ranked_and_carry_spans(data_dir, ceilings):
    a = _run(data_dir, "synthetic_input_pipeline", ceilings)
    lost = [f.time_lost_ms_per_step for f in a.findings]
    assert lost == sorted(lost, reverse=True)
    starved = _by_code(a)["input-starved"]
    assert starved.spans == [(0.0, 1000.0), (5000.0, 6000.0)]


def test_user_rule_registers_and_runs(data_dir, ceilings):
    @rule("test-always")
    def always(ctx):
        ms = ctx.mean_step_ms * 0.5
        return [
            Finding("test-always", "planted", ms, ctx.share(ms), {"steps": ctx.n_steps}, "none")
        ]

    try:
        a = _run(data_dir, "synthetic_input_pipeline", ceilings)
        top = a.findings[0]
        assert top.code == "test-always" and top.share_of_step == pytest.approx(0.5)
        with pytest.raises(ValueError, match="already registered"):
            rule("test-always")(lambda ctx: [])
    finally:
        RULES.pop("test-always", None)


def test_every_builtin_rule_documents_its_method():
    import membound.analysis.rules  # noqa: F401

    expected = {
        "pageable-copy",
        "blocking-copy",
        "input-starved",
        "host-sync",
        "launch-bound",
        "memory-bound-op",
        "unfused-chain",
        "fp32-storage",
        "fp32-matmul",
    }
    assert expected <= set(RULES)
    for code in expected:
        assert "per step" in (RULES[code].__doc__ or ""), code
