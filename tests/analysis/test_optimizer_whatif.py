"""The fused optimizer's what-if (`analysis.optimizer_whatif`): hand-built loops worked out by
hand, how the remedies read it, and the recorded H100 ConvNeXt whose fused AdamW was timed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from membound.analysis import analyze, optimizer_whatif
from membound.analysis.findings import Finding
from membound.analysis.remedies import combined, remedies
from membound.analysis.replay import Replay
from membound.analysis.result import Step
from membound.trace.capture_meta import timeline_in
from membound.trace.load import load_trace
from support.paths import FIXTURES
from support.tracebuilder import TraceBuilder

MULTI = "void at::native::multi_tensor_apply_kernel<FusedOptimizerTensorListMetadata<4>>"
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4>"


def _loop(tmp_path, scaler: bool, steps: int = 3, cls: str = "AdamW"):
    """Per step, from its host mark T (every launch call 5 µs, its kernel 5 µs after it):
    - host-paced (`scaler` False, 300 µs a step): an elementwise kernel launched at T (10 µs),
      the optimizer's four multi-tensor kernels (20 µs each) launched at T+100, +150, +200,
      +250, then Python to the next mark;
    - with a GradScaler's sync (`scaler` True, 450 µs a step): a 200-µs kernel launched at
      T, a cudaStreamSynchronize at T+60 that waits for it (returns at T+210), the four
      launched at T+250, +300, +350, +400."""
    b = TraceBuilder()
    period = 450.0 if scaler else 300.0
    out = []
    for s in range(steps):
        t = s * period
        b.step(s, t, period)
        b.annotation(f"Optimizer.step#{cls}.step", t + (240 if scaler else 90), 170)
        b.launch(ELEMENTWISE, t, t + 5, 200 if scaler else 10)
        if scaler:
            b.runtime("cudaStreamSynchronize", t + 60, 150)
        first = 250 if scaler else 100
        for k in range(4):
            h = t + first + 50 * k
            b.launch(MULTI, h, h + 5, 20)
        out.append(Step(s, t, t + period, period / 1e3, 0.1, 0.1, 0.0,
                        host_start_us=t, host_end_us=t + period))  # fmt: skip
    trace = load_trace(b.write(tmp_path / "loop.json"))
    timing = SimpleNamespace(unprofiled_median_ms=period / 1e3, launchers_cpu=None)
    return SimpleNamespace(
        trace=trace, steps=out, timing=timing, profiler_cost_us=0.0, calls=[], op_trace=None
    )


def test_the_block_is_each_steps_run_of_multi_tensor_launches(tmp_path):
    ctx = _loop(tmp_path, scaler=False)
    r = Replay.from_trace(ctx.trace, ctx.steps)
    assert list(optimizer_whatif.blocks(ctx.trace, r)) == [
        -1,
        0,
        0,
        0,
        0,
        -1,
        1,
        1,
        1,
        1,
        -1,
        2,
        2,
        2,
        2,
    ]


def test_a_host_paced_loop_saves_the_update_s_host_work_after_its_first_launch(tmp_path):
    """The block's first call keeps its 95 µs of set-up and its 5 µs; the other three lose
    their 45 µs of Python and 5 µs each: 150 µs of the 300-µs step. Alone (the kernels at
    their full 20 µs), the four queue after the first's launch and the window's last step
    ends on the GPU, 35 µs after its host: the three steps take 300 + 105 + 80 = 485 µs
    against 900; the kernels alone change nothing: the host paces the loop."""
    w = optimizer_whatif.of(_loop(tmp_path, scaler=False))
    assert w["optimizer"] == "AdamW"
    assert w["launches_per_step"] == 4
    assert w["saving_ms"] == pytest.approx(0.15, abs=1e-4)
    assert w["host_ms"] == pytest.approx((900 - 485) / 3 / 1e3, abs=1e-4)
    assert w["kernel_ms"] == pytest.approx(0.0)
    assert w["sync_ms"] == 0.0 and not w["grad_scaler_sync"]


def test_a_gradscaler_s_sync_goes_with_the_fused_step(tmp_path, monkeypatch):
    """Without the sync and the three calls' host work the host runs ahead: the GPU paces the
    loop, each step its 200-µs kernel and four 7-µs update kernels (20 x 7/20), the first from
    T+5: (5 + 3 x 228) / 3 = 229.67 µs a step against 450."""
    from membound.analysis.rules import host_sync

    monkeypatch.setattr(host_sync, "grad_scaler_sync", lambda ctx: True)
    w = optimizer_whatif.of(_loop(tmp_path, scaler=True))
    assert w["grad_scaler_sync"] and w["scaler_syncs_per_step"] == 1
    assert w["saving_ms"] == pytest.approx(0.45 - (5 + 3 * 228) / 3 / 1e3, abs=1e-4)
    assert w["sync_ms"] > 0.0


def test_the_sync_stays_without_a_gradscaler(tmp_path):
    """A sync before the update that is not the scaler's (a loss read) is not the fused
    step's to remove: the host work after the update's first launch goes (150 µs), and the
    four update kernels, 7 µs each, end before the next step's 200-µs kernel is launched:
    300 µs a step against 450."""
    w = optimizer_whatif.of(_loop(tmp_path, scaler=True))
    assert not w["grad_scaler_sync"] and w["sync_ms"] == 0.0
    assert w["saving_ms"] == pytest.approx(0.15, abs=1e-4)


def test_no_what_if_for_an_optimizer_torch_cannot_fuse(tmp_path):
    assert optimizer_whatif.of(_loop(tmp_path, scaler=False, cls="RMSprop")) is None


def test_no_what_if_where_the_optimizer_is_fused_already(tmp_path, monkeypatch):
    from membound.analysis import op_calls

    ctx = _loop(tmp_path, scaler=False)
    ctx.calls = ["stub"]
    monkeypatch.setattr(
        op_calls, "call_column", lambda calls, col: np.array(["aten::_fused_adamw_"])
    )
    assert optimizer_whatif.optimizer_class(ctx) is None


def _f(code, ms, **ev):
    return Finding(code, "t", ms, 0.0, ev, "f")


CURVE = {"fused_optimizer": {"optimizer": "SGD", "saving_ms": 6.0}}


def test_remedies_read_the_fused_optimizer_from_its_replay():
    """The scaler's sync finding (0.9: its idle) is in the replay, not added to it; the fix
    names the loop's own optimizer; applied with sync_less the sync is counted once."""
    findings = [_f("host-sync", 0.9, grad_scaler_sync=True), _f("launch-bound", 3.0)]
    got = {r.key: r for r in remedies(findings, 60.0, CURVE)}
    assert got["fused_optimizer"].saving_ms_per_step == pytest.approx(6.0)
    assert "torch.optim.SGD(..., fused=True)" in got["fused_optimizer"].what
    assert got["sync_less"].saving_ms_per_step == pytest.approx(0.9)
    assert combined(findings, ["fused_optimizer"], 60.0, CURVE) == pytest.approx(6.0)
    assert combined(findings, ["fused_optimizer"], 60.0, None) == pytest.approx(0.9)


def test_bf16_without_a_scaler_takes_the_scaler_s_sync_from_the_replay():
    """bf16 autocast needs no GradScaler: the scaler's sync goes, priced by the replay of that
    sync alone (2.5 here) in place of the host-sync finding's idle (0.9); without a scaler's
    sync in the what-if, the finding's own figure stays."""
    findings = [_f("host-sync", 0.9, grad_scaler_sync=True)]
    curve = {"fused_optimizer": {**CURVE["fused_optimizer"], "grad_scaler_sync": True,
                                 "sync_ms": 2.5}}  # fmt: skip
    got = {r.key: r.saving_ms_per_step for r in remedies(findings, 60.0, curve)}
    assert got["bf16"] == pytest.approx(2.5)
    assert combined(findings, ["bf16"], 60.0, curve) == pytest.approx(2.5)
    # with the fused optimizer too, the sync is in its replay once
    assert combined(findings, ["bf16", "fused_optimizer"], 60.0, curve) == pytest.approx(6.0)
    got = {r.key: r.saving_ms_per_step for r in remedies(findings, 60.0, CURVE)}
    assert got["bf16"] == pytest.approx(0.9)


def test_only_the_scaler_s_sync_finding_takes_the_replay_s_figure():
    from membound.analysis.rules.host_sync import priced_by_replay

    scaler = _f("host-sync", 0.9, grad_scaler_sync=True)
    plain = _f("host-sync", 0.9)
    got = priced_by_replay([_f("launch-bound", 3.0), scaler, plain], 5.0, 50.0)
    assert [f.time_lost_ms_per_step for f in got] == [5.0, 3.0, 0.9]
    assert got[0].share_of_step == pytest.approx(0.1)
    assert got[0].expected_step_ms_after_fix == pytest.approx(45.0)
    # never lowered: a replay below the finding's own figure leaves it
    low = _f("host-sync", 0.9, grad_scaler_sync=True)
    assert priced_by_replay([low], 0.5, 50.0)[0].time_lost_ms_per_step == 0.9


def test_the_remedy_stands_where_no_finding_names_it():
    findings = [_f("launch-bound", 3.0)]
    got = {r.key: r for r in remedies(findings, 60.0, CURVE)}
    assert got["fused_optimizer"].saving_ms_per_step == pytest.approx(6.0)
    assert got["fused_optimizer"].findings == []
    lost = {"fused_optimizer": {"optimizer": "SGD", "saving_ms": -0.2}}
    assert "fused_optimizer" not in {r.key for r in remedies(findings, 60.0, lost)}


def test_the_convnext_s_fused_adamw_on_the_h100():
    """timm's ConvNeXt-T recipe under --amp (fp16, a GradScaler, AdamW over two groups): 32
    foreach launches a step in 5.3 ms of host work; the scaler's inf check before them. The
    fused AdamW was timed in two calls: 10.91 ms/step saved (this fixture's call) and 9.08
    (a second host's), 13.59 on a third (`h100_real_convnext_amp_truth2`). The findings' sum
    said 0.90; the replay says 11.89: within issue 15's tolerance of this call's 10.91 (7.71
    before the EMA's device-to-device copies stopped counting as waits, `analysis.replay`),
    2.81 over the second's (max(25%, 2 ms) = 2.27)."""
    a = analyze([timeline_in(FIXTURES / "h100_real_convnext_amp_truth1")])
    w = a.gpu_whatif["fused_optimizer"]
    assert (w["optimizer"], w["launches_per_step"], w["scaler_syncs_per_step"]) == ("AdamW", 32, 1)
    assert w["block_host_ms_per_step"] == pytest.approx(5.28, abs=0.01)
    assert w["sync_ms"] == pytest.approx(10.49, abs=0.01)
    assert w["saving_ms"] == pytest.approx(11.89, abs=0.01)
    fused = next(r for r in a.remedies if r.key == "fused_optimizer")
    assert fused.saving_ms_per_step == pytest.approx(11.89, abs=0.01)
    assert abs(fused.saving_ms_per_step - 10.91) <= max(0.25 * 10.91, 2.0)
    assert abs(fused.saving_ms_per_step - 9.08) > max(0.25 * 9.08, 2.0)
    # bf16 autocast (no GradScaler): the scaler's sync alone, 10.49 (0.90 before: its idle);
    # measured 14.63 in this call (0.51 outside its tolerance), 5.56 on the second host
    bf16 = next(r for r in a.remedies if r.key == "bf16")
    assert bf16.saving_ms_per_step == pytest.approx(10.49, abs=0.01)
    # the finding that names the scaler carries the replay's figure (0.90, its idle, before),
    # ranked second; reading the loss less often keeps the idle, as its remedy
    sync = next(f for f in a.findings if f.code == "host-sync")
    assert [f.code for f in a.findings[:2]] == ["memory-bound-op", "host-sync"]
    assert sync.time_lost_ms_per_step == pytest.approx(10.49, abs=0.01)
    assert sync.evidence["saving_by_remedy"]["sync_less"] == pytest.approx(0.904, abs=1e-3)
    assert "the scaler's sync alone costs 10.49 ms/step" in sync.fix
    less = next(r for r in a.remedies if r.key == "sync_less")
    assert less.saving_ms_per_step == pytest.approx(0.904, abs=1e-3)


def test_a_gan_steps_two_optimizers_and_both_updates_are_replayed(monkeypatch):
    """The DCGAN steps its discriminator's and its generator's Adam each step (two step
    annotations a step in its ops pass): both blocks, 7 foreach launches each, are fused."""
    from membound.analysis import pipeline

    box = {}
    run_rules = pipeline.run_rules
    monkeypatch.setattr(
        pipeline, "run_rules", lambda ctx: box.setdefault("ctx", ctx) and run_rules(ctx)
    )
    a = analyze([timeline_in(FIXTURES / "h100_real_dcgan_truth1")])
    assert optimizer_whatif.optimizers_per_step(box["ctx"]) == 2
    w = a.gpu_whatif["fused_optimizer"]
    assert (w["optimizer"], w["launches_per_step"]) == ("Adam", 14)
