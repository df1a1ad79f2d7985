"""The timeline pass's GPU work mapped to the ops pass's calls (`analysis.kernel_map`), and
what it lets the loop's own chains claim: the GPU's wait for the host while it issued them
(`rules.memory.loop_idle_ms`). On the ConvNeXt recorded on an H100 (2026-12-06,
`tests/fixtures/h100_real_convnext_amp_truth1`, `test_truth_2026_12_06b_h100.py`)."""

from __future__ import annotations

import numpy as np
import pytest

from membound.analysis import kernel_map, model_reach
from membound.analysis.op_calls import call_column
from membound.analysis.rules import memory
from membound.device.ceilings import Ceilings
from support.analysis import run_with_context
from support.paths import FIXTURES

CONVNEXT = FIXTURES / "h100_real_convnext_amp_truth1"


@pytest.fixture(scope="module")
def convnext():
    """(the analysis, its context) of the ConvNeXt's trace: the context caught as the rules
    see it."""
    return run_with_context(CONVNEXT.name, Ceilings.load(CONVNEXT / "ceilings.json"))


def test_every_activity_of_the_steps_maps_to_a_call(convnext):
    """The 5 timeline steps and the 3 ops steps launch the same 1955 activities (1626
    kernels, and the EMA's device-to-device copies among the rest), in the same order."""
    _, ctx = convnext
    mapped = kernel_map.timeline_calls(ctx)
    assert (mapped >= 0).sum() == 9775 and len(mapped) == 9795
    names = call_column(ctx.calls, "name")
    # the first EMA op of each step: the same call every step
    first = ctx.trace.gpu.ts[mapped == 1]
    assert len(first) == 5 and set(names[mapped[mapped == 1]]) == {"aten::mul"}


def test_a_step_that_launched_other_work_is_aligned_or_left_unmapped(convnext):
    """A step whose kernels differ from every ops step's by one is aligned with one: all of
    its kernels but that one map. One whose kernels differ in a fifth of their places shares
    less than `ALIGN_MIN` of them and is left unmapped, never guessed."""
    _, ctx = convnext
    gpu = ctx.trace.gpu
    saved = gpu.name.copy()
    s = ctx.steps[2]
    inside = np.flatnonzero((gpu.ts >= s.start_us) & (gpu.ts < s.end_us))
    other = lambda i: gpu.name[inside[i + 1]] if gpu.name[inside[i]] != gpu.name[  # noqa: E731
        inside[i + 1]] else gpu.name[inside[0]]  # fmt: skip
    try:
        gpu.name[inside[100]] = other(100)
        ctx._timeline_calls = None
        mapped = kernel_map.timeline_calls(ctx)
        assert (mapped >= 0).sum() == 9775 - 1
        assert mapped[inside[100]] == -1 and mapped[inside[101]] >= 0
        gpu.name[:] = saved
        for i in range(0, len(inside) - 1, 5):
            gpu.name[inside[i]] = other(i)
        ctx._timeline_calls = None
        mapped = kernel_map.timeline_calls(ctx)
        assert (mapped >= 0).sum() == 9775 - 1955  # that step alone
    finally:
        gpu.name[:] = saved
        ctx._timeline_calls = None


def test_steps_of_different_lengths_are_aligned():
    """timm's random erasing (a Python loop over the batch's samples, each erased with
    probability 0.2) launched a different number of kernels every step of an EfficientNet-B0
    (H100, 2026-12-06): no step matched an ops step, and none mapped. Aligned, 23,919 of the
    23,959 activities map, and the loop chains claim the GPU's wait before their work."""
    name = "h100_real_efficientnet_amp_truth1"
    _, ctx = run_with_context(name, Ceilings.load(FIXTURES / name / "ceilings.json"))
    mapped = kernel_map.timeline_calls(ctx)
    windows = [(x.index, x.start_us, x.end_us, x.host_start_us, x.host_end_us) for x in ctx.steps]
    lengths = {len(ks) for ks in kernel_map._step_kernels(ctx.trace, windows)}
    assert len(lengths) > 1  # the steps' kernel counts differ
    assert int((mapped >= 0).sum()) == 23919 and len(mapped) == 23959


def test_scale_update_before_the_next_forward_is_not_the_models(convnext):
    """`_amp_update_scale_` records the number of the next step's first node; the EMA's 182
    chains a step after it are the loop's."""
    _, ctx = convnext
    calls = ctx.calls
    seq, bwd = call_column(calls, "seq"), call_column(calls, "backward")
    out, _ = model_reach.outside_model(seq, bwd, memory._host_ts(ctx))
    names = call_column(calls, "name")
    scale = np.flatnonzero(names == "aten::_amp_update_scale_")
    carried = set(seq[bwd & (seq >= 0)].tolist())
    assert all(int(seq[i]) in carried for i in scale)  # the number a backward node carries
    assert out[scale].all()
    cols = memory._columns_of(ctx)
    assert ctx.per_op_step(int(cols.loop_chain.sum())) == pytest.approx(182)


def test_the_loop_claims_the_idle_before_its_work(convnext):
    """The EMA ran after the scaler's sync: the GPU waited 7.6 ms a step while the host
    issued it (its launches, the state_dict walk before it, its copies). The foreach finding
    holds that idle and its own 0.84 ms of kernel gap; launch-bound keeps the rest."""
    a, ctx = convnext
    cols = memory._columns_of(ctx)
    idle = memory.loop_idle_ms(ctx, cols)
    assert idle["launch"] == pytest.approx(4.652, abs=2e-3)
    assert idle["other"] == pytest.approx(0.946, abs=2e-3)
    assert idle["copy"] == pytest.approx(2.025, abs=2e-3)
    loop = next(f for f in a.findings if (f.evidence or {}).get("outside_model"))
    assert loop.evidence["per_tensor"] is True
    assert loop.evidence["gpu_ms_per_step"] == pytest.approx(0.837, abs=2e-3)
    assert loop.time_lost_ms_per_step == pytest.approx(0.837 + sum(idle.values()), abs=2e-3)
    lb = next(f for f in a.findings if f.code == "launch-bound")
    assert lb.evidence["left_to_loop_chains_ms_per_step"] == pytest.approx(idle["launch"])
    assert lb.time_lost_ms_per_step == pytest.approx(6.996 - idle["launch"], abs=2e-3)
    remedies = {r.key: r.saving_ms_per_step for r in a.remedies}
    assert remedies["foreach"] == pytest.approx(8.46, abs=0.01)  # 11.70 measured


def test_grad_scaler_sync_named_with_its_fixes(convnext):
    a, _ = convnext
    sync = next(f for f in a.findings if f.code == "host-sync")
    assert sync.evidence["grad_scaler_sync"] is True
    assert "found_inf.item()" in sync.fix and "AdamW(..., fused=True)" in sync.fix
    assert "bf16 autocast needs no GradScaler" in sync.fix
    for key in ("fused_optimizer", "bf16"):
        assert next(r for r in a.remedies if r.key == key).codes == ["host-sync"]


def test_forward_of_model_takes_the_last_run_of_a_number():
    """Columns by hand: a scale update (number 7) ends step 1, the EMA (-1) follows, then the
    next forward's first op makes node 7; backward carries 7 and 8."""
    names = ["fwd6", "bwd6", "scale", "ema1", "ema2", "norm_in", "conv7", "lin8", "bwd8", "bwd7"]
    seq = np.array([6, 6, 7, -1, -1, 7, 7, 8, 8, 7])
    bwd = np.array([0, 1, 0, 0, 0, 0, 0, 0, 1, 1], dtype=bool)
    ts = np.arange(len(seq), dtype=float)
    out, passes = model_reach.outside_model(seq, bwd, ts)
    assert dict(zip(names, out.tolist(), strict=True)) == {
        "fwd6": False, "bwd6": False, "scale": True, "ema1": True, "ema2": True, "norm_in": False,
        "conv7": False, "lin8": False, "bwd8": False, "bwd7": False,
    }  # fmt: skip
    assert passes.tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 2, 2]


@pytest.mark.parametrize(
    "name, ceilings, share",
    [
        ("h100_real_dcgan_truth1", "h100_datasheet_ceilings.json", 0.98),
        ("h200_real_hf_trainer_llama", "h200_ceilings.json", 0.988),
    ],
)
def test_mapped_share_on_other_loops(name, ceilings, share):
    """Across the recorded real runs 79-100% of the timeline's GPU activities map. The HF
    Trainer's Llama mapped 79% until steps were aligned: the first of its 5 recorded steps is
    one that logs (logging_steps=10) and launched 1336 activities where the ops pass's steps
    launched 1332, so none of that step's mapped; aligned, all but its 4 extra ones do
    (98.8%: the rest are activities outside the steps)."""
    _, ctx = run_with_context(name, Ceilings.load(FIXTURES / ceilings))
    share_mapped = float((kernel_map.timeline_calls(ctx) >= 0).mean())
    assert share_mapped == pytest.approx(share, abs=0.005)
