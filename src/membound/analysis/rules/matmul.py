"""`fp32-matmul`: compute-bound matmul/conv in fp32 without tensor cores."""

from __future__ import annotations

from collections import Counter

import numpy as np

from membound.analysis.findings import rule
from membound.analysis.fixes import bf16_fix
from membound.analysis.op_calls import call_column, value_codes

MATMUL_FAMILIES = {"matmul", "conv", "convolution", "attention"}
#: an fp32 matmul faster than this multiple of the fp32 (no TF32) ceiling already uses TF32
TF32_EVIDENCE = 1.1


def _group(call) -> str:
    return "conv" if call.family.startswith("conv") or "conv" in call.name else "matmul"


def _tf32_groups(calls) -> set[str]:
    """The library groups (`_group`) with an fp32 call on tensor cores: TF32 is allowed there
    (cuDNN's convolutions by default)."""
    return {
        _group(call)
        for call in calls
        if call.tensor_cores and call.storage_dtype == "float" and call.family in MATMUL_FAMILIES
    }


@rule("fp32-matmul")
def fp32_matmul(ctx):
    """Compute-bound matmul/conv on fp32 running at the fp32 (CUDA-core) rate.

    For calls whose cost model compute key is "fp32", whose op row is compute-bound, and
    whose achieved FLOP rate is not above `TF32_EVIDENCE` × the fp32 ceiling (faster means
    TF32 is already on): time lost per step = Σ (device time − FLOPs ÷ TF32 ceiling, or the
    bf16 ceiling when TF32 was not measured) ÷ steps.

    Kernel names are evidence too: a call whose kernel names say tensor cores (tf32,
    TensorOp, hmma, ...) already ran at the TF32 rate (its compute key is then "tf32", see
    `membound.analysis.ops`). And when any fp32 call of the same library group (cuBLAS
    matmuls, cuDNN convolutions) ran on tensor cores, TF32 is allowed for that group — e.g.
    `torch.backends.cudnn.allow_tf32` is True by default — so its CUDA-core fp32 calls are
    the library's own choice for their shapes (a 3-channel first convolution) and enabling
    TF32 would not change them: they are not counted.
    """
    c = ctx.ceilings
    if c is None:
        return []
    fast_key = "tf32" if "tf32" in c.flops else "bf16" if "bf16" in c.flops else None
    if fast_key is None or "fp32" not in c.flops:
        return []
    fp32_peak, fast_peak = c.flops["fp32"], c.flops[fast_key]
    rows = {r.name: r for r in ctx.rows}
    # only calls of the matmul families or without one can count: their objects are made,
    # not a big trace's millions of others (`OpCalls` builds them when indexed)
    codes, families = value_codes(call_column(ctx.calls, "family"))
    wanted = np.array([not f or f in MATMUL_FAMILIES for f in families], dtype=bool)
    calls = [ctx.calls[i] for i in np.flatnonzero(wanted[codes]).tolist()] if len(codes) else []
    tf32_on = _tf32_groups(calls)
    lost_us = 0.0
    flops = 0.0
    device_us = 0.0
    ops: Counter = Counter()
    for call in calls:
        r = rows.get(call.name)
        if call.compute != "fp32" or r is None or r.bound != "compute" or call.device_us <= 0:
            continue
        if call.family and call.family not in MATMUL_FAMILIES:
            continue
        if call.tensor_cores or _group(call) in tf32_on:
            continue
        rate = call.flops / (call.device_us * 1e-6)
        if rate > TF32_EVIDENCE * fp32_peak:
            continue
        lost_us += max(call.device_us - call.flops / fast_peak * 1e6, 0.0)
        flops += call.flops
        device_us += call.device_us
        ops[call.name] += 1
    if lost_us <= 0:
        return []
    lost = ctx.per_op_step(lost_us / 1e3)
    return [
        ctx.finding(
            code="fp32-matmul",
            title="fp32 matmuls/convolutions run without tensor cores",
            lost_ms=lost,
            evidence={
                "ops": dict(ops),
                "device_ms_per_step": ctx.per_op_step(device_us / 1e3),
                "achieved_tflops": flops / (device_us * 1e-6) / 1e12 if device_us else 0.0,
                "fp32_ceiling_tflops": fp32_peak / 1e12,
                f"{fast_key}_ceiling_tflops": fast_peak / 1e12,
            },
            fix=(
                "Enable TF32 (torch.backends.cuda.matmul.allow_tf32 = True; "
                "torch.backends.cudnn.allow_tf32 = True, or torch.set_float32_matmul_precision('high')) "
                "or run the model under torch.autocast('cuda', dtype=torch.bfloat16)."
            ),
        )
    ]


@rule("tf32-matmul")
def tf32_matmul(ctx):
    """fp32 matmuls/convolutions where TF32 is allowed, which bf16 autocast runs faster by
    what this GPU measured (`trace.dtype_probe`).

    For the calls whose compute key is "tf32" (a tensor-core kernel name on fp32 storage, or
    an fp32 matmul with TF32 allowed; `analysis.ops`), and the fp32 calls cuDNN or cuBLAS
    ran on CUDA cores where TF32 is allowed (the library's choice for their shapes, which
    `fp32-matmul` leaves: bf16 changes their kernels too): time lost per step = Σ device time
    × (1 − bf16 time ÷ fp32 time of its shape, timed here after the script) ÷ steps. A call
    whose shape was not among the probe's keys (those of the most kernel time) takes the
    time-weighted ratio of its kind's timed calls (`dtype_whatif.call_ratios`, as the bf16
    and channels_last what-ifs do). Whatever the op row's bound: classification_tv's
    convolution backward sat below the TF32 ridge (125 FLOP/B) on an H100 (2026-12-07) and
    ran 1.4-2x faster in bf16 there; its fp16 autocast saved 14.30 ms/step where bf16 was
    predicted 6.44 with the compute-bound calls alone. The ceilings' ratio (bf16 twice TF32)
    is not used: on the H200 it predicted 14-17 ms/step for a channels-first ResNet-50 whose
    AMP saved 4.8-5.5. No measurement, no finding.

    cuDNN's TF32 convolutions are PyTorch's default (`torch.backends.cudnn.allow_tf32`), so
    an fp32 conv net runs them unless told otherwise: `fp32-matmul` does not see them (they
    are on tensor cores already), and `fp32-storage` only the memory-bound ops around them.
    """
    from membound.analysis.dtype_whatif import call_ratios
    from membound.trace.dtype_probe import MATMULS

    found = call_ratios(ctx, "bf16_ms", "float32", ops=MATMULS, split=True)
    if not found:
        return []
    own, borrowed = found
    calls = [ctx.calls[i] for i in (*own, *borrowed)]
    tf32_on = _tf32_groups(calls)
    matched_us = matched_bf16_us = other_us = other_bf16_us = flops = 0.0
    ops: Counter = Counter()
    for i, ratio in (*own.items(), *borrowed.items()):
        call = ctx.calls[i]
        if call.compute not in ("tf32", "fp32") or call.device_us <= 0:
            continue
        # an fp32 call on CUDA cores where TF32 is allowed: the library's choice for its
        # shape (not `fp32-matmul`'s); bf16 changes it too
        if call.compute == "fp32" and (call.tensor_cores or _group(call) not in tf32_on):
            continue
        if i in own:
            matched_us += call.device_us
            matched_bf16_us += call.device_us * ratio
        else:
            other_us += call.device_us
            other_bf16_us += call.device_us * ratio
        flops += call.flops
        ops[call.name] += 1
    if not matched_us > 0:
        return []
    device_us = matched_us + other_us
    ratio = (matched_bf16_us + other_bf16_us) / device_us  # weighted by kernel time
    lost_us = device_us - matched_bf16_us - other_bf16_us
    if not lost_us > 0:
        return []
    return [
        ctx.finding(
            code="tf32-matmul",
            title="fp32 matmuls/convolutions (TF32 allowed); bf16 runs them faster here",
            lost_ms=ctx.per_op_step(lost_us / 1e3),
            evidence={
                "ops": dict(ops),
                "device_ms_per_step": ctx.per_op_step(device_us / 1e3),
                "achieved_tflops": flops / (device_us * 1e-6) / 1e12,
                "bf16_time_ratio_measured": round(ratio, 4),
                "measured_share_of_time": round(matched_us / device_us, 4),
            },
            fix=bf16_fix(getattr(ctx, "frameworks", ()), ratio),
        )
    ]
