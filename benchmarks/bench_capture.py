"""What the profiler does to the program it measures, and how membound's own marks line up
with its trace (issue 15: "capture that barely disturbs").

For each workload, one process, paired: the loop timed without the profiler (a window of
steps, synchronized only at its two ends), then under each profiler configuration (started,
warmed up, then the same timed window while it records), then without the profiler again
(drift check). Configurations: GPU activity only (`ProfilerActivity.CUDA`: kernels, copies and
the CUDA runtime calls), CPU ops without shapes, CPU ops with shapes (what `membound
diagnose` recorded until now).

Clock check: with GPU activity only, membound cannot see its own step marks in the trace, so
it would have to map its host timestamps onto the trace's clock. The script issues
`cudaStreamQuery` (a runtime call the GPU-only trace records, costing ~1 us and no sync) at
known host times (perf_counter_ns, monotonic_ns, time_ns) and fits each clock to the trace's
timestamps: the offset's spread says which host clock kineto's clock is and how well one
anchor aligns the rest.

    PYTHONPATH=src python benchmarks/bench_capture.py --out DIR [--steps 20] [--only gpt2,launch]
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


# ------------------------------------------------------------------------------ workloads
class Block(nn.Module):
    """A GPT-2 block as nanoGPT writes it (pre-norm, fused qkv, flash attention, GELU MLP)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.heads = heads

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, layers=12, d=768, heads=12, vocab=50304, block=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def gpt2(device: str):
    """GPT-2 124M, bf16 autocast, fused AdamW, loss.item() per step; micro-batches 4 x 12x1024."""
    cuda = device == "cuda"
    model = GPT() if cuda else GPT(layers=2, d=64, heads=2, vocab=512, block=64)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=cuda)
    b, t = (12, 1024) if cuda else (2, 64)
    vocab = model.head.weight.shape[0]
    data = torch.randint(0, vocab, (b, t + 1), device=device)

    def step():
        for _ in range(4):
            with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
                loss = model(data[:, :-1], data[:, 1:]) / 4
            loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def launch(device: str):
    """~200 tiny elementwise kernels per step (the planted launch-bound loop's shape)."""
    x = torch.randn(64, 64, device=device, requires_grad=True)
    opt = torch.optim.SGD([x], lr=1e-3)

    def step():
        y = x
        for _ in range(50):
            y = torch.relu(y * 1.001 + 0.001)
        loss = y.sum()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item()

    return step


def gemm(device: str):
    """GPU-bound: bf16 4096-wide MLP (the healthy planted loop's shape), no per-step sync."""
    n = 4096 if device == "cuda" else 64
    model = nn.Sequential(*[nn.Linear(n, n) for _ in range(8)]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(4096 if device == "cuda" else 64, n, device=device)

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step


WORKLOADS = {"gpt2": gpt2, "launch": launch, "gemm": gemm}


# --------------------------------------------------------------------------------- timing
def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def window_ms(step, steps: int, device: str) -> float:
    """Mean ms per step over `steps` steps, synchronized only at the window's two ends."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    sync(device)
    return (time.perf_counter() - t0) * 1e3 / steps


def profiled_ms(step, steps: int, device: str, activities, shapes: bool, trace: Path | None):
    from torch.profiler import profile

    with profile(activities=activities, record_shapes=shapes) as prof:
        for _ in range(3):  # profiler start-up and warm-up stay out of the window
            step()
        ms = window_ms(step, steps, device)
    if trace is not None:
        prof.export_chrome_trace(str(trace))
    return ms


def configs(device: str):
    from torch.profiler import ProfilerActivity as A

    gpu = [A.CUDA] if device == "cuda" else []
    return {
        "gpu-only": (gpu or [A.CPU], False),
        "cpu-ops": ([A.CPU, *gpu], False),
        "cpu-ops+shapes": ([A.CPU, *gpu], True),
    }


# ---------------------------------------------------------------------------- clock check
def clock_check(device: str, out: Path) -> dict:
    """Host clocks vs the trace's clock, through cudaStreamQuery calls the GPU-only trace
    records; and which of membound's possible marks a GPU-only trace keeps."""
    if device != "cuda":
        return {"skipped": "needs CUDA"}
    from torch.profiler import ProfilerActivity, profile, record_function

    stream = torch.cuda.current_stream()
    x = torch.randn(1 << 20, device=device)
    stamps = []
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(50):
            with record_function(f"ProfilerStep#{i}"):
                x.mul_(1.0001)
            t = (time.perf_counter_ns(), time.monotonic_ns(), time.time_ns())
            stream.query()
            stamps.append(t)
            time.sleep(0.002)
        prof.step()
    path = out / "clock_check.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    queries = sorted(
        float(e["ts"]) for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
        and "StreamQuery" in str(e.get("name"))
    )  # fmt: skip
    cats: dict[str, int] = {}
    for e in events:
        cats[str(e.get("cat"))] = cats.get(str(e.get("cat")), 0) + 1
    steps_seen = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    result = {"queries_in_trace": len(queries), "categories": cats, "step_marks_seen": steps_seen}
    if len(queries) == len(stamps):
        for k, name in enumerate(("perf_counter_ns", "monotonic_ns", "time_ns")):
            offsets = [q - s[k] / 1e3 for q, s in zip(queries, stamps, strict=True)]
            result[name] = {
                "offset_us_median": statistics.median(offsets),
                "offset_spread_us": max(offsets) - min(offsets),
            }
    return result


# ---------------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None, help="folder for the JSON result and traces")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--only", default=",".join(WORKLOADS))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--keep-traces", action="store_true")
    a = p.parse_args(argv)
    out = Path(a.out or tempfile.mkdtemp(prefix="membound-capture-"))
    out.mkdir(parents=True, exist_ok=True)
    results = {"device": torch.cuda.get_device_name(0) if a.device == "cuda" else "cpu",
               "torch": torch.__version__, "steps": a.steps, "workloads": {}}  # fmt: skip
    results["clock"] = clock_check(a.device, out)
    print("clock check:", json.dumps(results["clock"]), flush=True)
    for name in a.only.split(","):
        step = WORKLOADS[name](a.device)
        for _ in range(5):  # warm-up: allocator, cuBLAS handles, autotuning
            step()
        row = {"unprofiled_ms": window_ms(step, a.steps, a.device)}
        for cfg, (acts, shapes) in configs(a.device).items():
            trace = out / f"{name}.{cfg}.json" if a.keep_traces else None
            row[cfg] = profiled_ms(step, a.steps, a.device, acts, shapes, trace)
            if trace is not None:
                with open(trace, "rb") as f, gzip.open(f"{trace}.gz", "wb") as g:
                    g.write(f.read())
                trace.unlink()
        row["unprofiled_again_ms"] = window_ms(step, a.steps, a.device)
        base = statistics.mean([row["unprofiled_ms"], row["unprofiled_again_ms"]])
        row["overhead"] = {c: row[c] / base - 1 for c in configs(a.device)}
        results["workloads"][name] = row
        print(
            f"{name:7s} unprofiled {row['unprofiled_ms']:8.2f} / {row['unprofiled_again_ms']:8.2f} ms  "
            + "  ".join(
                f"{c} {row[c]:8.2f} ({row['overhead'][c]:+.0%})" for c in configs(a.device)
            ),
            flush=True,
        )
        del step
        if a.device == "cuda":
            torch.cuda.empty_cache()
    (out / "capture_overhead.json").write_text(json.dumps(results, indent=1, default=str))
    return 0 if all(math.isfinite(r["unprofiled_ms"]) for r in results["workloads"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
