"""Where membound's norm spends its host time per fwd+bwd (issue 15: on the H200 host it took
522-716 us against ATen's 140-147, benchmarks/results/host_cost_2026-12-03b.txt, so the fix
slowed eager GPT-2 by 20%).

    PYTHONPATH=src python benchmarks/probe_norm_host_profile.py [--rows 12288 --hidden 768]

For ATen's LayerNorm and membound's FusedAddLayerNorm (alone and with the residual) under
bf16 autocast: the host time per fwd+bwd without a profiler (median of bursts started on an
idle GPU), then cProfile over `--iters` fwd+bwd, its top functions by own time (one JSON
line per variant: `host_us`, `top` = [[function, own us per fwd+bwd, calls per fwd+bwd]]).
Gradients are returned (`torch.autograd.grad`), as `membound.nn.host_cost` does."""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import statistics
import time

import torch


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=12288)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    from membound.nn import FusedAddLayerNorm

    dev = "cuda"
    x = torch.randn(a.rows, a.hidden, device=dev, requires_grad=True)
    r = torch.randn(a.rows, a.hidden, device=dev, requires_grad=True)
    g = torch.randn(a.rows, a.hidden, device=dev)
    aten = torch.nn.LayerNorm(a.hidden, device=dev)
    ours = FusedAddLayerNorm(a.hidden, device=dev)
    ours_add = FusedAddLayerNorm(a.hidden, device=dev, prenorm=True)
    cases = {
        "aten": (aten, lambda: (aten(x),)),
        "membound": (ours, lambda: (ours(x),)),
        "membound_add": (ours_add, lambda: tuple(ours_add(x, r))),
    }
    for name, (module, fwd) in cases.items():
        wrt = (x, r, *module.parameters())

        def one(fwd=fwd, wrt=wrt):
            with torch.autocast("cuda", torch.bfloat16):
                outs = fwd()
            grads = [g.to(o.dtype) for o in outs]
            torch.autograd.grad(outs, wrt, grads, allow_unused=True)

        for _ in range(20):
            one()
        bursts = []
        for _ in range(7):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(30):
                one()
            bursts.append((time.perf_counter() - t) / 30 * 1e6)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for i in range(a.iters):
            one()
            if i % 30 == 29:
                torch.cuda.synchronize()  # keep the queue from filling (host time, not GPU)
        prof.disable()
        torch.cuda.synchronize()
        # the ATen ops and runtime calls one fwd+bwd makes (allocations, casts, launches)
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as tp:
            for _ in range(10):
                one()
            torch.cuda.synchronize()
        ops = {
            e.key: [round(e.count / 10, 1), round(e.self_cpu_time_total / 10, 1)]
            for e in tp.key_averages()
            if e.count
        }
        ops = dict(sorted(ops.items(), key=lambda kv: -kv[1][1])[: a.top])
        st = pstats.Stats(prof)
        rows = []
        for (file, line, fn), (_cc, nc, tt, ct, _callers) in st.stats.items():
            rows.append(
                (tt, ct, nc, f"{file.split('site-packages/')[-1].split('/src/')[-1]}:{line}:{fn}")
            )
        rows.sort(reverse=True)
        top = [[f, round(tt / a.iters * 1e6, 2), round(ct / a.iters * 1e6, 2), round(nc / a.iters, 2)]
               for tt, ct, nc, f in rows[: a.top]]  # fmt: skip
        cum = sorted(rows, key=lambda r: -r[1])[: a.top]
        print(json.dumps({
            "variant": name, "host_us": round(statistics.median(bursts), 1),
            "profiled_us": round(sum(r[0] for r in rows) / a.iters * 1e6, 1),
            "top_own": top,
            "torch_ops": ops,
            "top_cum": [[f, round(ct / a.iters * 1e6, 2)] for tt, ct, nc, f in cum],
        }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
