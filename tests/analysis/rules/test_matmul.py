"""`fp32-matmul` against planted traces (hand-computed numbers)."""

from __future__ import annotations

import pytest

from membound.analysis import analyze
from support import tracebuilder
from support.analysis import by_code, run

MM_FLOPS = 2 * 4096**3


def test_fp32_matmul_in_the_memory_block(ceilings):
    a = run("synthetic_memory_block", ceilings)
    # 3 ms at fp32 speed vs the same FLOPs at the 400 TFLOP/s TF32 ceiling
    f = by_code(a)["fp32-matmul"]
    assert f.time_lost_ms_per_step == pytest.approx(3.0 - MM_FLOPS / 400e12 * 1e3)
    rows = {r.name: r for r in a.ops}
    assert rows["aten::mm"].bound == "compute"
    assert rows["aten::mm"].achieved_flops_fraction == pytest.approx(MM_FLOPS / 3e-3 / 50e12)


def test_fp32_matmul_skipped_when_tf32_already_on(tmp_path, ceilings):
    b = tracebuilder.TraceBuilder()
    b.step(0, 0, 1000)
    b.op("aten::mm", 1, 5, [[4096, 4096], [4096, 4096]], ["float", "float"])
    b.launch("tf32_gemm", 2, 10, MM_FLOPS / 300e12 * 1e6)  # 300 TFLOP/s: far above fp32's 50
    a = analyze([b.write(tmp_path / "t.json")], ceilings)
    assert "fp32-matmul" not in by_code(a)
