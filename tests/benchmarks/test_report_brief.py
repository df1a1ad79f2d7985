"""benchmarks/report_brief.py: a device call's log lines from membound JSON reports."""

from __future__ import annotations

import json

from support.paths import benchmark

REPORT = {
    "steps": {"unprofiled_median_ms": 13.51, "profiled_median_ms": 15.77,
              "per_step": [{"wall_ms": 17.21}, {"wall_ms": 15.2}]},
    "profiler_overhead_fraction": 0.167, "gpu_busy_fraction": 0.358, "ops_costed_fraction": 0.998,
    "idle_breakdown": {"launch": 3.62, "sync": 1.22, "queued": 0.001},
    "findings": [{"code": "launch-bound", "time_lost_ms_per_step": 3.62, "share_of_step": 0.27,
                  "evidence": {"kernels_per_step": 323.0}},
                 {"code": "host-sync", "time_lost_ms_per_step": 1.22, "share_of_step": 0.09}],
    "remedies": [{"remedy": "compile", "saving_ms_per_step": 4.24}],
    "ops": [{"name": "aten::add_", "device_ms": 0.28, "calls": 175, "bound": "memory",
             "fraction_of_attainable": 0.28},
            {"name": "aten::convolution_backward", "device_ms": 11.84, "calls": 100,
             "bound": "compute", "fraction_of_attainable": 0.25}],
}  # fmt: skip


def test_brief_gives_the_figures_in_order():
    lines = benchmark("report_brief").brief(REPORT, n_ops=1)
    assert lines[0].startswith("step unprofiled 13.51 ms, profiled 15.77 (overhead 16.7%)")
    assert "busy 35.8%" in lines[0] and "[17.2, 15.2]" in lines[0]
    assert lines[1] == "idle ms/step: launch 3.62, sync 1.22"  # largest first, dust left out
    assert "thread CPU" not in "\n".join(lines)  # the report measured none
    cpu = {
        **REPORT,
        "steps": {**REPORT["steps"], "thread_cpu_ms": {"unprofiled": 9.2, "profiled": 11.5}},
    }
    assert benchmark("report_brief").brief(cpu, n_ops=1)[2] == (
        "thread CPU ms/step: unprofiled 9.20, profiled 11.50"
    )
    assert "  finding launch-bound: 3.62 ms/step 27% (323 kernels/step)" in lines
    assert "  remedy compile: 4.24 ms/step" in lines
    ops = [x for x in lines if x.startswith("  op ")]
    assert len(ops) == 1 and "aten::convolution_backward" in ops[0] and "25% of roof" in ops[0]


def test_a_sparse_report_prints_dashes_and_a_bad_file_is_one_line(tmp_path, capsys):
    rb = benchmark("report_brief")
    assert rb.brief({})[0].startswith("step unprofiled - ms, profiled - (overhead -)")
    good = tmp_path / "r.json"
    good.write_text(json.dumps(REPORT))
    assert rb.main([str(good), str(tmp_path / "missing.json")]) == 0
    out = capsys.readouterr().out
    assert "missing.json: not readable" in out and "== " + str(good) in out
    assert rb.main([str(tmp_path / "missing.json")]) == 1
