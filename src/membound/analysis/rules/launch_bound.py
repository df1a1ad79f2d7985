"""`launch-bound`: the host cannot issue kernels as fast as the GPU runs them."""

from __future__ import annotations

import numpy as np

from membound.analysis import intervals as iv
from membound.analysis.findings import Finding, rule
from membound.analysis.timeline import LAUNCH_GAP_US
from membound.trace.load import KERNEL


@rule("launch-bound")
def launch_bound(ctx):
    """GPU idle between kernels while the host launches the next one.

    Time lost per step = GPU idle attributed to the timeline cause `launch` (the host inside
    a launch call, or a gap shorter than `LAUNCH_GAP_US` between two GPU activities), ÷
    steps. Evidence: kernels per step and their median duration — many kernels of a few
    microseconds each is the signature.
    """
    idle = ctx.idle("launch")
    lost = ctx.per_step(iv.total(idle) / 1e3)
    if lost <= 0:
        return []
    gpu = ctx.trace.gpu
    k = (gpu.kind == KERNEL) & ctx.in_window(gpu.ts)
    n_gaps = len(idle[0])
    return [
        Finding(
            code="launch-bound",
            title="many short kernels: the GPU idles between launches",
            time_lost_ms_per_step=lost,
            share_of_step=ctx.share(lost),
            evidence={
                "kernels_per_step": int(k.sum()) / ctx.n_steps,
                "median_kernel_us": float(np.median(gpu.dur[k])) if k.any() else 0.0,
                "launch_gaps_per_step": n_gaps / ctx.n_steps,
                "mean_gap_us": iv.total(idle) / n_gaps if n_gaps else 0.0,
                "short_gap_threshold_us": LAUNCH_GAP_US,
            },
            fix=(
                "Issue fewer, larger kernels: torch.compile(model) (fuses elementwise ops and "
                "can use CUDA graphs with mode='reduce-overhead'), capture the step in a CUDA "
                "graph (torch.cuda.graphs), use fused modules (membound.nn.FusedAddLayerNorm via "
                "membound.swap_norms(model)), or raise the batch size."
            ),
            spans=ctx.spans(idle),
        )
    ]
