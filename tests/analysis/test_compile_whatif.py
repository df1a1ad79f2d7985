"""compile's what-if (`analysis.compile_whatif`): a hand-built host-paced loop worked out by
hand, how remedies read it, and the H100 same-call DCGAN pair, where compile was measured."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from membound.analysis import analyze, compile_whatif
from membound.analysis.findings import Finding
from membound.analysis.fix_check import within_tolerance
from membound.analysis.remedies import combined, remedies
from membound.analysis.replay import Replay
from membound.analysis.result import Step
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from support.paths import FIXTURES
from support.tracebuilder import TraceBuilder

PERIOD = 200.0  # µs per step of the hand-built loop


def _loop(tmp_path, steps: int = 3):
    """Per step, from its host mark T: a GEMM launched at T (GPU T+5, 20 µs), three ATen
    elementwise kernels launched at T+40, T+75, T+110 and a reduction at T+145 (each 5 µs on
    the GPU, 5 µs after its launch), every launch call 5 µs long, then 50 µs of Python to
    the next mark: host-paced, 200 µs a step."""
    b = TraceBuilder()
    out = []
    for s in range(steps):
        t = s * PERIOD
        b.step(s, t, PERIOD)
        b.launch("ampere_sgemm_128x64_tn", t, t + 5, 20)
        for h in (40, 75, 110):
            b.launch("void at::native::vectorized_elementwise_kernel<4>", t + h, t + h + 5, 5)
        b.launch("void at::native::reduce_kernel<512, 1>", t + 145, t + 150, 5)
        out.append(Step(s, t, t + PERIOD, PERIOD / 1e3, 0.04, 0.16, 0.0,
                        host_start_us=t, host_end_us=t + PERIOD))  # fmt: skip
    return load_trace(b.write(tmp_path / "loop.json")), out


def _ctx(trace, steps):
    timing = SimpleNamespace(unprofiled_median_ms=PERIOD / 1e3, launchers_cpu=None)
    return SimpleNamespace(trace=trace, steps=steps, timing=timing, profiler_cost_us=0.0)


def test_fusion_takes_the_host_work_of_the_launches_it_merges(tmp_path):
    """The GEMM is a library's and keeps its launch; the first elementwise kernel after it
    starts a fused kernel; the next two merge into it (their 30 µs gaps and 5 µs calls go);
    the reduction ends a fused kernel and keeps its own."""
    trace, steps = _loop(tmp_path)
    r = Replay.from_trace(trace, steps)
    act, host = compile_whatif.fusible(trace, r)
    assert list(host) == [1, 1, 0, 0, 1] * 3
    assert list(act) == [False, True, True, True, True] * 3


def test_the_replay_of_a_host_paced_loop_saves_the_merged_launches(tmp_path, monkeypatch):
    """Two launches' host work (2 x (30 + 5) µs) leave each 200-µs step: 0.07 ms saved,
    less the compiled runtime's fixed cost; faster kernels save nothing more here (the host
    paces the loop)."""
    trace, steps = _loop(tmp_path)
    monkeypatch.setattr(compile_whatif, "FIXED_MS", 0.0)
    c = compile_whatif.curve(_ctx(trace, steps))
    assert c["launches_fused_per_step"] == 2
    assert c["kernel_ms_per_step"] == pytest.approx(0.04)
    assert c["fusible_ms_per_step"] == pytest.approx(0.02)
    assert compile_whatif.saving(c, 0.0) == pytest.approx(0.07)
    assert compile_whatif.saving(c, 0.02) == pytest.approx(0.07)


def test_a_short_host_paced_loop_is_predicted_to_lose(tmp_path):
    """With the fixed cost (the compile probe's 1.1 ms a step) the signed saving is below 0."""
    trace, steps = _loop(tmp_path)
    c = compile_whatif.curve(_ctx(trace, steps))
    assert compile_whatif.saving(c, 0.0) == pytest.approx(0.07 - compile_whatif.FIXED_MS)


def test_kernel_time_goes_from_the_fusible_kernels_first():
    kernel = np.array([True, True, True, False])
    act = np.array([False, True, True, False])
    # 1 of the 2 ms/step of fusible kernels: each at half its time
    assert list(compile_whatif._act_scale(kernel, act, 1.0, 2.0, 6.0)) == [1, 0.5, 0.5, 1]
    # 4 ms: the fusible ones gone, 2 of the other 4 ms: the GEMM at half; copies untouched
    assert list(compile_whatif._act_scale(kernel, act, 4.0, 2.0, 6.0)) == [0.5, 0, 0, 1]


def _f(code, ms, **ev):
    return Finding(code, "t", ms, 0.0, ev, "f")


CURVE = {"compile": {"removed_ms": [0.0, 10.0], "saving_ms": [-1.0, 9.0]}}


def test_remedies_read_compile_from_its_replay_not_the_findings_sum():
    """launch-bound's idle is the replay's host part: not added to what the curve says; the
    unfused chain's 4 ms of kernel time are read at 4 ms (3.0); the host sync stays apart."""
    findings = [
        _f("launch-bound", 5.0),
        _f("unfused-chain", 4.0, top_chain="add -> mul"),
        _f("host-sync", 2.0),
    ]
    got = {r.key: r.saving_ms_per_step for r in remedies(findings, 50.0, CURVE)}
    assert got["compile"] == pytest.approx(3.0)
    assert got["sync_less"] == pytest.approx(2.0)
    assert combined(findings, ["compile", "sync_less"], 50.0, CURVE) == pytest.approx(5.0)
    # without the replay: the findings' sum, as before
    assert combined(findings, ["compile"], 50.0, None) == pytest.approx(9.0)


def test_tf32_applied_with_compile_shortens_the_same_replayed_step():
    """HF's torch_compile turns TF32 on: the matmul time TF32 removes (its raw kernel time)
    joins compile's in one reading of the curve, 4 + 3 ms -> 6.0, not two savings added."""
    findings = [
        _f("unfused-chain", 4.0, top_chain="add -> mul"),
        _f("fp32-matmul", 2.0, kernel_ms_per_step=3.0),
    ]
    assert combined(findings, ["compile", "tf32"], 50.0, CURVE) == pytest.approx(6.0)


def test_compile_on_the_h100_dcgan_against_the_compiled_run_of_the_same_call():
    """The H100 DCGAN, eager and compiled in one device call (2026-12-05): membound's
    unprofiled steps 15.23 and 15.16 ms. The findings' sum predicted 4.85 ms/step; the replay
    (fusion keeps most of the BatchNorm + LeakyReLU launches, the runtime's fixed cost)
    predicts about nothing, within issue 15's tolerance of what compile measured."""
    ceilings = Ceilings.load(FIXTURES / "h100_samecall_ceilings.json")
    eager = analyze([timeline_in(FIXTURES / "h100_samecall_dcgan")], ceilings)
    compiled = analyze([timeline_in(FIXTURES / "h100_samecall_dcgan_compiled")], ceilings)
    measured = eager.unprofiled_step_ms - compiled.unprofiled_step_ms
    got = {r.key: r.saving_ms_per_step for r in eager.remedies}
    assert eager.gpu_whatif["compile"]["launches_fused_per_step"] < 40
    assert within_tolerance(got["compile"], measured)
    assert got["compile"] < 1.0
    if got["compile"] <= 0:  # the findings compile would recover say so in their fix text
        said = f"torch.compile is predicted to lose {-got['compile']:.2f} ms/step"
        compiled_fixes = [f.fix for f in eager.findings if f.code == "launch-bound"]
        assert compiled_fixes and all(said in fix for fix in compiled_fixes)


def test_a_worker_bound_loader_takes_up_what_compile_changes():
    """Where the training thread waits 3 ms a step for the workers, a 5-ms saving is 2 and
    a 1-ms one nothing; a 1-ms loss is hidden in the slack, a 4-ms one is 1."""
    c = {"removed_ms": [0.0, 1.0, 2.0, 3.0], "saving_ms": [-4.0, -1.0, 1.0, 5.0]}
    got = compile_whatif.behind_loader(c, 3.0)
    assert got["saving_ms"] == [-1.0, 0.0, 0.0, 2.0] and got["loader_wait_ms"] == 3.0
    assert compile_whatif.behind_loader(c, None) is c


def test_the_report_says_a_fix_is_predicted_to_lose():
    """The H100 DCGAN (the truth call's trace): compile, predicted to lose, is listed last
    among the fixes, and its line says so."""
    import io

    from rich.console import Console

    from membound.report.terminal import render_list

    a = analyze(
        [timeline_in(FIXTURES / "h100_real_dcgan_truth1")],
        Ceilings.load(FIXTURES / "h100_datasheet_ceilings.json"),
    )
    assert a.remedies[-1].key == "compile" and a.remedies[-1].saving_ms_per_step < 0
    out = io.StringIO()
    opts = SimpleNamespace(top_findings=10, top_ops=3, step_bars=2)
    render_list(a, Console(file=out, width=200), opts)
    line = next(x for x in out.getvalue().splitlines() if x.strip().startswith("torch.compile"))
    assert line.endswith("(predicted to lose time here)")
