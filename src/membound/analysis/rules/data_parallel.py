"""`data-parallel-one-gpu`: `nn.DataParallel` wrapped around a model that runs on one GPU.

On one device `nn.DataParallel.forward` still checks that every parameter and buffer sits on
its first device and scatters the batch (an autograd `Scatter` that chunks the inputs into
one piece) before it calls the module, every step. That is host work in front of the model's
first kernel, which a host-paced loop pays in full. Out of sample on an H100 (2026-12-06,
kuangliu/pytorch-cifar's ResNet-18, `examples/real/cifar_resnet18.py`, a 10.37 ms step):
dropping the wrapper saved 0.53 ms/step, and the recorded forward spent 0.37-0.42 ms in
DataParallel before the model's first op.
"""

from __future__ import annotations

import numpy as np

from membound.analysis.findings import rule
from membound.analysis.timeline import step_windows
from membound.trace.model import CPU_OP, USER_ANNOTATION

#: the span `nn.DataParallel.forward` records around itself (`record_function`)
SPAN = "DataParallel.forward"
#: the op DataParallel scatters the inputs with; its children (chunk, split, narrow, ...)
#: run inside it
SCATTER = "Scatter"
#: the idle causes a host-paced loop's own host work shows up as (the GPU waits for the
#: host to issue the next kernel)
HOST_CAUSES = ("launch", "other")

FIX = (
    "nn.DataParallel on one GPU only adds work: call the model directly (net = model, not "
    "nn.DataParallel(model)); it then checks no parameters and scatters no batch each step. "
    "For several GPUs, DistributedDataParallel (one process per GPU) instead."
)


def _overheads(trace) -> tuple[list[float], int] | None:
    """µs of each DataParallel forward spent outside the wrapped module (from the span's
    start to the module's first op, the Scatter and its children included; and from the
    module's last op to the span's end), and how many steps the trace's windows hold; None
    where the trace recorded no such span or no CPU ops in it."""
    if trace is None:
        return None
    cpu = trace.cpu
    span_id = trace.name_ids(lambda n: n == SPAN)
    if not len(span_id):
        return None
    spans = np.flatnonzero((cpu.kind == USER_ANNOTATION) & np.isin(cpu.name, span_id))
    if not len(spans):
        return None
    scatter_id = trace.name_ids(lambda n: n == SCATTER)
    ops = np.flatnonzero(cpu.kind == CPU_OP)
    out = []
    for i in spans.tolist():
        start, end, tid = float(cpu.ts[i]), float(cpu.ts[i] + cpu.dur[i]), cpu.tid[i]
        inside = ops[(cpu.tid[ops] == tid) & (cpu.ts[ops] >= start) & (cpu.ts[ops] < end)]
        if not len(inside):
            continue
        inside = inside[np.argsort(cpu.ts[inside], kind="stable")]
        scat = inside[np.isin(cpu.name[inside], scatter_id)]
        after = float(cpu.ts[scat[0]] + cpu.dur[scat[0]]) if len(scat) else start
        module = inside[cpu.ts[inside] >= after]
        if not len(module):
            continue
        last = float((cpu.ts[module] + cpu.dur[module]).max())
        out.append((float(cpu.ts[module[0]]) - start) + max(end - last, 0.0))
    windows, _ = step_windows(trace)
    return (out, len(windows)) if out else None


@rule("data-parallel-one-gpu")
def data_parallel_one_gpu(ctx):
    """`nn.DataParallel` on a loop that runs on one GPU.

    Time lost per step = the host time each DataParallel forward spends outside the module
    (`_overheads`, in the trace that recorded CPU ops), times the forwards per step, at most
    the GPU's idle waiting on the host's work (causes `launch` and `other`): where the GPU
    sets the pace the host's extra work is hidden and dropping the wrapper saves nothing.
    No finding where the loop's GPU work runs on more than one device.
    """
    t = ctx.trace
    if len(np.unique(t.gpu.device)) > 1:
        return []
    found = _overheads(getattr(ctx, "op_trace", None) or t)
    if found is None:
        return []
    per_call, windows = found
    calls_per_step = len(per_call) / max(windows, 1)
    overhead = float(np.median(per_call)) / 1e3 * calls_per_step
    host_idle = sum(ctx.idle_ms_per_step(c) for c in HOST_CAUSES)
    lost = min(overhead, host_idle)
    if lost <= 0:
        return []
    evidence = {
        "data_parallel_ms_per_call": round(float(np.median(per_call)) / 1e3, 4),
        "calls_per_step": round(calls_per_step, 3),
        "host_idle_ms_per_step": round(host_idle, 4),
        "devices": 1,
    }
    return [
        ctx.finding(
            code="data-parallel-one-gpu",
            title="nn.DataParallel wraps a model that runs on one GPU: host work every step",
            lost_ms=lost,
            evidence=evidence,
            fix=FIX,
            spans=[],
        )
    ]
