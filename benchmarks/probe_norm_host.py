"""Where a swapped norm's time goes on a GPU: host enqueue time, wall time and GPU kernel time
per forward+backward, for torch's LayerNorm and membound's (both dispatch modes), at GPT-2 shapes under bf16
autocast (issue 15: `--swap-norms` made examples/real/gpt2.py slower).

    PYTHONPATH=src python benchmarks/probe_norm_host.py [--rows 12288 --hidden 768]

Prints one JSON line per variant: host_us (enqueue time per fwd+bwd, GPU queue not full),
wall_us (synced, long loop), gpu_us (sum of the kernels' device time per fwd+bwd, profiler),
kernels (name -> us per call)."""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn as nn


def variants(hidden, device):
    from membound.nn import FusedAddLayerNorm

    out = {"torch": (nn.LayerNorm(hidden, device=device), None)}
    for mode in ("kernels", "adaptive"):
        out[f"membound-{mode}"] = (FusedAddLayerNorm(hidden, device=device), mode)
    return out


def probe(m, x, g, autocast: bool, iters: int):
    ctx = (
        torch.autocast("cuda", torch.bfloat16)
        if autocast
        else torch.autocast("cuda", enabled=False)
    )

    def one():
        with ctx:
            y = m(x)
        y.backward(g)

    for _ in range(20):
        one()
    torch.cuda.synchronize()
    # host: enqueue a short burst with the GPU idle at its start
    t = time.perf_counter()
    for _ in range(30):
        one()
    host = (time.perf_counter() - t) / 30
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        one()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / iters
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            one()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            kernels[e.name[:60]] = kernels.get(e.name[:60], 0.0) + e.device_time / 10
    return {
        "host_us": host * 1e6,
        "wall_us": wall * 1e6,
        "gpu_us": sum(kernels.values()),
        "kernels": {k: round(v, 1) for k, v in sorted(kernels.items(), key=lambda kv: -kv[1])},
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=12288)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--iters", type=int, default=300)
    a = p.parse_args()
    dev = "cuda"
    x = torch.randn(a.rows, a.hidden, device=dev, requires_grad=True)
    g = torch.randn(a.rows, a.hidden, device=dev)
    for autocast in (True, False):
        for name, (m, mode) in variants(a.hidden, dev).items():
            if mode is not None:
                from membound.nn import set_add_norm_dispatch

                set_add_norm_dispatch(mode)
            r = probe(m, x, g, autocast, a.iters)
            print(
                json.dumps(
                    {"variant": name, "autocast": autocast, "rows": a.rows, "hidden": a.hidden, **r}
                )
            )


if __name__ == "__main__":
    main()
