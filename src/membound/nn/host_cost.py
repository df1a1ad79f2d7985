"""What one norm call costs the host and the GPU here: ATen's against membound's.

membound's fused norm kernels move fewer bytes than ATen's, but each call costs more host time
(Triton's launcher, the Python autograd Function, its allocations). On the H200 at 12288 x 768
fp32 under bf16 autocast, fwd+bwd took 86 us of GPU time against ATen's 156, but 411 us of
host time against 154 (543 against 251 on a slower host,
benchmarks/results/probe_norm_host_2026-12-02b.jsonl). Whether the fix saves or costs step
time depends on how far ahead of its GPU the loop's host runs, which only the loop's own
replay knows (`analysis.norm_whatif`); this module measures the two costs it needs, on the
machine the loop ran on, the way benchmarks/probe_norm_host.py does:

- `host_us`: the host's enqueue time per fwd+bwd over a short burst started with the GPU
  idle (the queue never fills, so the host is never held back by the GPU); the median of
  `BURSTS` bursts.
- `gpu_us`: the device time of the kernels of one fwd+bwd, from torch.profiler's CUDA activity.

Four variants: ATen's norm module (`aten`), ATen's residual add then the norm (`aten_add`),
membound's module (`membound`, what `swap_norms` puts in) and membound's with the residual
(`membound_add`, what `FusedAdd*` in the block does; prenorm, so the sum is returned and
back-propagated too, as a residual stream is). Gradients of the inputs and the norm's
parameters are returned (`torch.autograd.grad`), never accumulated into `.grad`: the probe's
inputs are leaf tensors where a loop's residual stream is not, and accumulating the gradient
the residual add hands to both of its leaf inputs cloned it. With `.grad` accumulation the
`aten_add` variant took 468 us of host time against `aten`'s 185 on the H200, and the
what-if predicted -2.23 ms/step for `fused_add_norm` on eager GPT-2 where -17.32 was measured
(tests/fixtures/h200_real_gpt2_run7/capture.json, truth_2026-12-02k.log).

    python -m membound.nn.host_cost --rows 12288 --hidden 768 --kind layer --dtype float32 --autocast

prints one JSON object. Without CUDA it exits with code 2 and one line saying so.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

from membound.errors import BadInput, MemboundError, NeedsGPU

#: fwd+bwd calls run before measuring (Triton compiles and caches its kernels on the first)
WARMUP = 20
#: fwd+bwd calls per host burst: short enough that the GPU queue never fills (~30 x 0.2 ms
#: of GPU work at GPT-2's shape), long enough to average out the timer
BURST = 30
#: host bursts per variant; the median is kept (a stray context switch lands in one)
BURSTS = 5
#: fwd+bwd calls recorded by the profiler for the GPU time
PROFILED = 10
#: host launches per norm fwd+bwd that a per-call host cost is spread over: ATen's forward
#: kernel and its backward (input-grad + gamma/beta kernels, launched back to back)
LAUNCHES_PER_FWD_BWD = 2
KINDS = ("layer", "rms")
DTYPES = ("float32", "bfloat16", "float16")


def measure(
    rows: int,
    hidden: int,
    *,
    kind: str = "layer",
    dtype: str = "float32",
    autocast: bool = False,
    device: str = "cuda",
) -> dict[str, Any]:
    """Host and GPU time (µs) per fwd+bwd of ATen's and membound's norm over a `rows` x
    `hidden` input of `dtype` (`autocast`: under bf16 autocast, as a mixed-precision loop
    runs it). `NeedsGPU` without CUDA, `BadInput` for a shape or kind it cannot take."""
    import torch

    if kind not in KINDS:
        raise BadInput(f"host_cost: kind {kind!r}: use one of {', '.join(KINDS)}.")
    if dtype not in DTYPES:
        raise BadInput(f"host_cost: dtype {dtype!r}: use one of {', '.join(DTYPES)}.")
    if not (rows > 0 and hidden > 0):
        raise BadInput(f"host_cost: rows and hidden must be positive, got {rows} x {hidden}.")
    if not str(device).startswith("cuda") or not torch.cuda.is_available():
        raise NeedsGPU(
            "host_cost measures CUDA kernels and no CUDA device is available here; "
            "run it on the machine the training loop runs on."
        )
    from membound.nn import add_norm_op
    from membound.nn.modules import FusedAddLayerNorm, FusedAddRMSNorm

    dev = torch.device(device)
    dt = getattr(torch, dtype)
    if kind == "layer":
        aten, ours = torch.nn.LayerNorm(hidden, device=dev, dtype=dt), FusedAddLayerNorm
    else:
        if not hasattr(torch.nn, "RMSNorm"):
            raise BadInput("host_cost: this torch has no nn.RMSNorm (torch >= 2.4).")
        aten, ours = torch.nn.RMSNorm(hidden, device=dev, dtype=dt), FusedAddRMSNorm
    mine = ours(hidden, device=dev, dtype=dt)
    mine_add = ours(hidden, device=dev, dtype=dt, prenorm=True)
    x = torch.randn(rows, hidden, device=dev, dtype=dt, requires_grad=True)
    r = torch.randn(rows, hidden, device=dev, dtype=dt, requires_grad=True)
    g = torch.randn(rows, hidden, device=dev, dtype=dt)

    def aten_add(x, r):
        s = x + r
        return aten(s), s

    variants = {
        "aten": (aten, lambda: (aten(x),)),
        "aten_add": (aten, lambda: aten_add(x, r)),
        "membound": (mine, lambda: (mine(x),)),
        "membound_add": (mine_add, lambda: tuple(mine_add(x, r))),
    }
    out: dict[str, Any] = {
        "rows": rows, "hidden": hidden, "kind": kind, "dtype": dtype, "autocast": autocast,
        "device_name": torch.cuda.get_device_name(dev), "torch": torch.__version__,
        "dispatch": add_norm_op.DISPATCH, "launches_per_fwd_bwd": LAUNCHES_PER_FWD_BWD,
    }  # fmt: skip
    for name, (module, forward) in variants.items():
        out[name] = _probe(torch, module, forward, (x, r), g, autocast)
    return out


def _probe(torch, module, forward, inputs, g, autocast: bool) -> dict[str, float]:
    ctx = (
        (lambda: torch.autocast("cuda", torch.bfloat16))
        if autocast
        else (lambda: torch.autocast("cuda", enabled=False))
    )
    wrt = (*inputs, *module.parameters())

    def one():
        with ctx():
            outs = forward()
        # gradients returned, not accumulated into `.grad`: the probe's inputs are leaves, a
        # residual stream's are not, and accumulating the one gradient the add hands to both
        # of its leaf inputs clones it (host time and kernels no loop pays)
        grads = [g.to(o.dtype) if o.dtype != g.dtype else g for o in outs]
        torch.autograd.grad(outs, wrt, grads, allow_unused=True)  # aten, membound: no `r`

    for _ in range(WARMUP):
        one()
    torch.cuda.synchronize()
    bursts = []
    for _ in range(BURSTS):
        torch.cuda.synchronize()  # the GPU idle at the burst's start: the queue never fills
        t = time.perf_counter()
        for _ in range(BURST):
            one()
        bursts.append((time.perf_counter() - t) / BURST * 1e6)
    torch.cuda.synchronize()
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILED):
            one()
        torch.cuda.synchronize()
    kernels: dict[str, float] = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels[e.name[:80]] = kernels.get(e.name[:80], 0.0) + e.device_time / PROFILED
    return {
        "host_us": round(statistics.median(bursts), 2),
        "gpu_us": round(sum(kernels.values()), 2),
        "kernels": {k: round(v, 2) for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m membound.nn.host_cost", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--hidden", type=int, required=True)
    p.add_argument("--kind", choices=KINDS, default="layer")
    p.add_argument("--dtype", choices=DTYPES, default="float32")
    p.add_argument("--autocast", action="store_true", help="under bf16 autocast")
    p.add_argument("--device", default="cuda")
    a = p.parse_args(argv)
    try:
        result = measure(
            a.rows, a.hidden, kind=a.kind, dtype=a.dtype, autocast=a.autocast, device=a.device
        )
    except MemboundError as exc:
        print(f"membound.nn.host_cost: {exc}", file=sys.stderr)
        return exc.exit_code
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
