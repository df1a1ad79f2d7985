"""What torch.compile saves a step: the loop's own timeline, replayed with compile's two effects.

compile does two things to an eager training step. On the GPU, inductor fuses ATen's
elementwise, reduction and norm kernels (the `unfused-chain` and `memory-bound-op` findings'
kernel time). On the host, each kernel fused away no longer costs its op's Python and dispatch,
but the compiled graph adds a runtime of its own each step (guards, the AOT autograd wrappers).
Summing the findings compile recovers (the fused kernel time and the `launch-bound` idle) was
off both ways on the recorded truth runs (2026-12-03 to 06): it predicted 2-4 ms/step on six
short host-paced loops (the DCGAN on two cards, the tabular MLP, the GCN, the LSTM, the CIFAR
ResNet-18) where compile lost 0.04-2.11, and it could not see that a loop whose host is cut
by fusion passes the GPU's saving on in full.

`curve(ctx)` replays the timeline pass (`analysis.replay`, calibrated to the unprofiled step:
the replay the GPU what-if plays, `gpu_whatif.calibrated_replay`) with:

- the host work (the gap before the call and its own time) of every launch inductor would fuse
  into the one before it taken off: in each run of launches of *fusible* kernels (not a
  library's, `LIBRARY`) with no library launch or sync between them, the first keeps its host
  work and so does each launch of a kernel that stays a kernel of its own (`KEPT`: reductions,
  norms, softmax, gathers and scatters, losses, dropout's random numbers); the rest lose it;
- kernel time removed from the fusible kernels first, then from all kernels alike, at a few
  amounts, up to the step's kernel time;
- `FIXED_MS` taken off the saving: the compiled runtime's own cost a step.

and records the step's saving against the kernel time removed. A remedy's saving is read at the
kernel time its GPU-work findings remove (`saving`); the `launch-bound` idle it recovers is the
replay's host part, not added again (`analysis.remedies`). The saving is signed: where fusion
removes too few launches to pay the fixed cost, compile is predicted to lose.

The estimate of what fuses is a heuristic on kernel names, and coarse: on the H100 DCGAN it
keeps 70 of the 98 fusible launches a step, where the compiled run recorded in the same call
(`tests/fixtures/h100_samecall_dcgan_compiled`) launched 82 triton and 45 ATen kernels; a
compiled launch's own host work is taken as an eager one's (the triton launches of the compiled
GPT-2 and DCGAN waited a median 20-29 us each on the host, the eager ATen launches 12-25).
`FIXED_MS` is the compile probe's (`benchmarks/probe_compile_host.py`, two H100 hosts,
2026-12-06): small MLP, CNN and transformer steps, eager against compiled, fitted per model as
compiled = a x eager + b, b = 1.1-1.8 ms; the low end is taken.

Re-analysed over the recorded fixtures that timed compile (`benchmarks/truth_tally.py`), see
`docs/remedies.md` for the figures. Where no replay is trusted the findings' sum stays.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from membound.analysis import gpu_whatif, pacing

#: kernels torch.compile keeps as they are (a library's: GEMMs, convolutions, attention,
#: cuDNN, the optimizer's multi-tensor kernels, NCCL), a heuristic on kernel names; any other
#: kernel (ATen's elementwise, reductions, norms, copies) is one inductor could fuse
LIBRARY = re.compile(
    r"gemm|cutlass|cublas|sm90|sm80|xmma|cudnn|conv|flash|fmha|attention|nccl|multi_tensor|"
    r"adam|winograd|implicit|dgrad|wgrad|splitk|gemv|nchwToNhwc|nhwcToNchw",
    re.IGNORECASE,
)

#: fusible kernels that stay kernels of their own once compiled (a reduction ends a fused
#: kernel; gathers, scatters and random numbers stay apart), a heuristic on kernel names
KEPT = re.compile(
    r"reduce|norm|softmax|welford|arg|cumsum|scan|sort|topk|index|scatter|gather|embedding|"
    r"nll|loss|dropout|fused",
    re.IGNORECASE,
)
#: the compiled runtime's own host cost a step, ms (the probe's b, its low end)
FIXED_MS = 1.1
#: shares of the step's kernel time removed at which the step is replayed
FRACTIONS = (0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 1.0)


def launch_kinds(trace, r) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per activity of replay `r`: a kernel compile could fuse; per call: 0 it launches no
    kernel, 1 a fusible one, 2 a library's; per call: its kernel stays a kernel of its own
    once compiled, `KEPT`). Fusible kernels are those `LIBRARY` does not match; a call counts
    by its first activity."""
    names, gpu = trace.names, trace.gpu
    name_ids = gpu.name[r.act_row]
    ids = [int(i) for i in np.unique(name_ids)]
    lib = [i for i in ids if LIBRARY.search(names[i])]
    kept = [i for i in ids if KEPT.search(names[i])]
    act = r.act_kernel & ~np.isin(name_ids, lib)
    first = r.act_start[:-1]
    has = r.act_start[1:] > first
    kind = np.zeros(len(first), dtype=np.int8)
    kind[has] = np.where(r.act_kernel[first[has]], np.where(act[first[has]], 1, 2), 0)
    stays = np.zeros(len(first), dtype=bool)
    stays[has] = np.isin(name_ids[first[has]], kept)
    return act, kind, stays


def fusible(trace, r) -> tuple[np.ndarray, np.ndarray]:
    """(per activity of replay `r`: a kernel compile could fuse, per call: the host work the
    compiled step keeps of it, 1 or 0; `launch_kinds`): a fusible launch right after another,
    with no library launch or sync between, loses its host work unless its kernel stays apart
    (`KEPT`)."""
    act, kind, stays = launch_kinds(trace, r)
    host = np.ones(len(kind))
    prev = 0
    for i, (k, w) in enumerate(zip(kind.tolist(), r.wait.tolist(), strict=True)):
        if k == 1 and prev == 1 and not stays[i]:
            host[i] = 0.0
        if k or w:
            prev = k
    return act, host


def curve(ctx) -> dict[str, Any] | None:
    """{"kernel_ms_per_step", "fusible_ms_per_step", "launches_fused_per_step",
    "removed_ms": [...], "saving_ms": [...], "fixed_ms"} for `ctx`'s timeline steps, or None
    where the replay is not trusted (`gpu_whatif.calibrated_replay`). Kept on `ctx`."""
    if hasattr(ctx, "_compile_whatif"):
        return ctx._compile_whatif
    ctx._compile_whatif = None
    r = gpu_whatif.calibrated_replay(ctx)
    if r is None:
        return None
    act, host = fusible(ctx.trace, r)
    per = r.steps * 1e3
    kernel_ms = float(r.act_dur[r.act_kernel].sum()) / per
    fusible_ms = float(r.act_dur[act].sum()) / per
    if kernel_ms <= 0:
        return None
    base = r.step_ms()
    removed, saved = [], []
    for f in FRACTIONS:
        gone = f * kernel_ms
        scale = _act_scale(r.act_kernel, act, gone, fusible_ms, kernel_ms)
        after = r.step_ms(host_scale=host, act_scale=scale)
        removed.append(round(gone, 4))
        saved.append(round(base - after - FIXED_MS, 4))
    ctx._compile_whatif = {
        "kernel_ms_per_step": round(kernel_ms, 4),
        "fusible_ms_per_step": round(fusible_ms, 4),
        "launches_fused_per_step": round(float((host == 0).sum()) / r.steps, 1),
        "removed_ms": removed,
        "saving_ms": saved,
        "fixed_ms": FIXED_MS,
    }
    return ctx._compile_whatif


def _act_scale(
    kernel: np.ndarray, act: np.ndarray, gone: float, fusible_ms: float, kernel_ms: float
) -> np.ndarray:
    """Per activity, the duration's scale that removes `gone` ms/step of kernel time: from the
    fusible kernels first, what is left of it from the others alike."""
    scale = np.ones(len(kernel))
    if gone <= 0:
        return scale
    if gone <= fusible_ms:
        scale[act] = 1.0 - gone / fusible_ms
        return scale
    scale[act] = 0.0
    rest = kernel_ms - fusible_ms
    if rest > 0:
        scale[kernel & ~act] = max(1.0 - (gone - fusible_ms) / rest, 0.0)
    return scale


def saving(c: dict[str, Any] | None, removed_ms: float) -> float | None:
    """compile's signed saving (ms/step) when its findings remove `removed_ms` of kernel time
    a step (curve `c`, linear between its points); None where there is no curve."""
    if not c:
        return None
    xs, ys = c.get("removed_ms") or [], c.get("saving_ms") or []
    if len(xs) < 2 or len(xs) != len(ys):
        return None
    return float(np.interp(min(max(removed_ms, 0.0), xs[-1]), xs, ys))


def behind_loader(c: dict[str, Any], wait_ms: float | None) -> dict[str, Any]:
    """Curve `c` where a worker-bound loader paces the loop, the training thread waiting
    `wait_ms` a step for batches (`analysis.pacing.loader_wait_ms`; None: `c` as it is): the
    wait takes up what compile changes of the step's own work, each point moved toward 0 by
    it (a saving only beyond the wait, a loss only beyond the slack it leaves)."""
    if not wait_ms or wait_ms <= 0:
        return c
    moved = [pacing.behind(v, wait_ms) for v in c["saving_ms"]]
    return {**c, "saving_ms": [round(v, 4) for v in moved], "loader_wait_ms": round(wait_ms, 4)}


def say_loss(findings: list, ranked: list) -> None:
    """Where the remedies `ranked` (`analysis.remedies.remedies`) predict compile to save
    nothing or lose, each finding it would recover says so after its fix text."""
    c = next((r for r in ranked if r.key == "compile"), None)
    if c is None or c.saving_ms_per_step > 0:
        return
    loss = -c.saving_ms_per_step
    said = (
        f" Here torch.compile is predicted to {'lose' if loss > 0 else 'save'} "
        f"{abs(loss):.2f} ms/step: the launches it would fuse take "
        f"less host time off than its runtime adds each step (about {FIXED_MS:g} ms)."
    )
    for i in c.findings:
        if said not in findings[i].fix:
            findings[i].fix = findings[i].fix.rstrip() + said
