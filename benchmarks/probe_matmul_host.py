"""Does a TF32 or bf16-autocast matmul cost the host more than an fp32 one? (issue 15: T5)

On the H200 (2026-12-05) the T5 loop of `examples/real/` (Seq2SeqTrainer, t5-small size,
fp32) saved 4.55 ms/step with TF32 and 2.65 with bf16 autocast, where membound's GPU
what-if predicted 15.9 for both. `probe_small_gemm.py` measured its matmul kernels 3-7x
faster with TF32, so the kernels did shorten: the step stayed near the host's own time.
The what-if replays the loop with shorter kernels and the host's work as recorded in fp32;
if the TF32 path (cuBLASLt's heuristics) or autocast (a cast per operand, its dispatch)
costs the host more per matmul, that floor is too low. This measures it.

For each mode (fp32 with TF32 off, TF32, bf16 autocast) and each t5-small linear shape, it
times the host side of N calls, forward and forward+backward of an `nn.Linear`, with the GPU
kept busy by a long sleep kernel queued first (so no call waits for the GPU), and prints
one JSON line per shape and mode: µs of wall and of thread CPU time per call.

    PYTHONPATH=src python benchmarks/probe_matmul_host.py > matmul_host.jsonl
"""

from __future__ import annotations

import json
import time

import torch

B, S, T, D, F, V = 16, 512, 128, 512, 2048, 32128
SHAPES = [  # (name, tokens, in, out)
    ("enc qkvo", B * S, D, D),
    ("enc ff-in", B * S, D, F),
    ("dec qkvo", B * T, D, D),
    ("lm head", B * T, D, V),
]
MODES = ("fp32", "tf32", "bf16")
CALLS = 200
ROUNDS = 5


def _host_us(fn, calls: int) -> tuple[float, float]:
    """Median over `ROUNDS` of (wall µs, thread CPU µs) per call of `fn`, the GPU busy."""
    walls, cpus = [], []
    for _ in range(ROUNDS):
        torch.cuda.synchronize()
        torch.cuda._sleep(int(2e8))  # ~0.1 s of GPU time: every call below only queues
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(calls):
            fn()
        walls.append((time.perf_counter() - w0) / calls * 1e6)
        cpus.append((time.thread_time() - c0) / calls * 1e6)
        torch.cuda.synchronize()
    walls.sort()
    cpus.sort()
    return walls[len(walls) // 2], cpus[len(cpus) // 2]


def main() -> None:
    torch.manual_seed(0)
    for name, tokens, din, dout in SHAPES:
        layer = torch.nn.Linear(din, dout, device="cuda")
        x = torch.randn(tokens, din, device="cuda", requires_grad=True)
        for mode in MODES:
            torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"

            def forward(layer=layer, x=x, cached=mode == "bf16"):
                if cached:  # a step casts each weight once: no cast kept from the last call
                    torch.clear_autocast_cache()
                return layer(x)

            def train(forward=forward):
                forward().sum().backward()

            # autocast is entered once around the timed calls, as a training step enters it
            # once around its forward: its own enter/exit (~30 us) is not a matmul's cost
            # (the 2026-12-05 run entered it per call, so its bf16 figures hold that too)
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=mode == "bf16"):
                for _ in range(10):  # warm: heuristics, caches, the allocator
                    train()
                torch.cuda.synchronize()
                fwd = _host_us(forward, CALLS)
                # the backward's launches run on autograd's device thread: wall time of the
                # call counts them, the calling thread's CPU time does not
                both = _host_us(train, CALLS // 4)
            print(json.dumps({
                "shape": name, "tokens": tokens, "in": din, "out": dout, "mode": mode,
                "fwd_wall_us": round(fwd[0], 2), "fwd_cpu_us": round(fwd[1], 2),
                "train_wall_us": round(both[0], 2), "train_cpu_us": round(both[1], 2),
            }), flush=True)  # fmt: skip
            layer.zero_grad(set_to_none=True)
            x.grad = None
    torch.backends.cuda.matmul.allow_tf32 = False


if __name__ == "__main__":
    main()
