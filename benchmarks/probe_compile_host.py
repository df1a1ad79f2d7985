"""What torch.compile does to a host-paced step's time: eager against compiled, same process.

Issue 15's truth runs found torch.compile predicted to save 1-4 ms/step on loops whose steps
are short and host-paced (the DCGAN, a tabular MLP, Kipf's GCN, the word-level LSTM, the
CIFAR ResNet-18) and measured it losing 0.04-2.11 ms/step on every one of them, while it saved
17-37 ms on the host-paced transformer loops (the HF Llama, the T5). This probe measures, on
the device, what compile does to the host's side of a step when the GPU's work is too small to
matter: for a few small models (an MLP of Linear/BatchNorm/ReLU/Dropout blocks, a CNN of
Conv/BatchNorm/ReLU blocks, a stack of nanoGPT's pre-norm blocks: `bench_capture.Block`) at
sizes whose kernels take microseconds, it times `steps` training steps (zero_grad, forward,
loss, backward, SGD) eager and under `torch.compile(model)`, each with a plain timer
(synchronize only at the window's two ends), and counts the kernels a step launches (a
CUDA-only `torch.profiler` pass over a few more steps, not timed). One JSON line per model
and mode, then a summary line per model:

    PYTHONPATH=src python benchmarks/probe_compile_host.py [--steps 200] [--models mlp,cnn,tf]
        [--depths 2,8] [--out FILE]

Each model is built at every depth in `--depths` (blocks), so the summary can say whether
compile's cost per step is a fixed amount, or grows with the ops it replaces.

On two H100 hosts (2026-12-06, `benchmarks/results/compile_host_2026-12-06_h100.jsonl`,
`benchmarks/gpu/session_dec06l.sh` and `_dec06m.sh`) compile hardly lowered the kernels a step
launches (MLP 54 -> 57 and 150 -> 153, CNN 45 -> 40 and 111 -> 94, transformer 94 -> 83 and
318 -> 283 at 2 and 8 blocks), lost at 2 blocks (MLP -0.99, CNN -0.14, transformer -0.46
ms/step) and won at 8 (+0.14, +0.72, +2.96). Fitted per model as compiled = a x eager + b:
a = 0.67-0.73 and b = 1.1-1.8 ms, a fixed cost per step that a short step's savings do not
cover.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench_capture import Block  # nanoGPT's pre-norm block


class MLP(nn.Module):
    def __init__(self, depth: int, width: int = 256):
        super().__init__()
        layers = [nn.Linear(64, width)]
        for _ in range(depth):
            layers += [nn.Linear(width, width), nn.BatchNorm1d(width), nn.ReLU(), nn.Dropout(0.1)]
        layers.append(nn.Linear(width, 10))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class CNN(nn.Module):
    def __init__(self, depth: int, ch: int = 32):
        super().__init__()
        layers = [nn.Conv2d(3, ch, 3, padding=1)]
        for _ in range(depth):
            layers += [nn.Conv2d(ch, ch, 3, padding=1, bias=False), nn.BatchNorm2d(ch), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(ch, 10)

    def forward(self, x):
        return self.head(self.body(x).mean((2, 3)))


class TF(nn.Module):
    def __init__(self, depth: int, d: int = 128):
        super().__init__()
        self.emb = nn.Embedding(512, d)
        self.blocks = nn.Sequential(*[Block(d, 4) for _ in range(depth)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, 512)

    def forward(self, idx):
        return self.head(self.ln(self.blocks(self.emb(idx))))


def batch(kind: str, device):
    """A fixed batch for `kind`: inputs and class targets, small enough that the GPU's work
    takes microseconds."""
    g = torch.Generator(device="cpu").manual_seed(0)
    if kind == "mlp":
        x, n = torch.randn(256, 64, generator=g), 256
    elif kind == "cnn":
        x, n = torch.randn(16, 3, 16, 16, generator=g), 16
    else:
        x, n = torch.randint(0, 512, (4, 32), generator=g), 4 * 32
    classes = 512 if kind == "tf" else 10
    return x.to(device), torch.randint(0, classes, (n,), generator=g).to(device)


MODELS = {"mlp": MLP, "cnn": CNN, "tf": TF}


def run(kind: str, depth: int, compiled: bool, steps: int, device) -> dict:
    torch.manual_seed(0)
    model = MODELS[kind](depth).to(device)
    net = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x, y = batch(kind, device)

    def step():
        opt.zero_grad()
        out = net(x)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), y)
        loss.backward()
        opt.step()

    t0 = time.perf_counter()
    for _ in range(20):  # compile, autotune, allocator
        step()
    torch.cuda.synchronize()
    warm_s = time.perf_counter() - t0
    best = None
    for _ in range(3):  # three windows; the best is the host's pace without interference
        torch.cuda.synchronize()
        c0, t0 = time.thread_time(), time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        ms = (time.perf_counter() - t0) / steps * 1e3
        cpu = (time.thread_time() - c0) / steps * 1e3
        best = (ms, cpu) if best is None or ms < best[0] else best
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            step()
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels, gpu_us = len(gpu), sum(e.device_time for e in gpu)
    return {
        "model": kind, "depth": depth, "compiled": compiled, "step_ms": round(best[0], 4),
        "thread_cpu_ms": round(best[1], 4), "kernels_per_step": kernels / 10,
        "gpu_ms_per_step": round(gpu_us / 10 / 1e3, 4), "warmup_s": round(warm_s, 1),
    }  # fmt: skip


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--models", default="mlp,cnn,tf")
    p.add_argument("--depths", default="2,8")
    p.add_argument("--out", default=None)
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("probe_compile_host: needs a CUDA device", file=sys.stderr)
        return 2
    out = open(a.out, "a") if a.out else None
    for kind in a.models.split(","):
        for depth in (int(d) for d in a.depths.split(",")):
            rows = {}
            for compiled in (False, True):
                r = run(kind, depth, compiled, a.steps, "cuda")
                rows[compiled] = r
                line = json.dumps(r)
                print(line, flush=True)
                if out:
                    out.write(line + "\n")
            e, c = rows[False], rows[True]
            print(
                f"== {kind} depth {depth}: eager {e['step_ms']:.3f} ms "
                f"({e['kernels_per_step']:.0f} kernels, GPU {e['gpu_ms_per_step']:.3f}), "
                f"compiled {c['step_ms']:.3f} ms ({c['kernels_per_step']:.0f} kernels, GPU "
                f"{c['gpu_ms_per_step']:.3f}): compile saves {e['step_ms'] - c['step_ms']:+.3f} "
                "ms/step",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
