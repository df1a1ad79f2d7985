"""Eager / torch.compile / membound add_norm, forward and forward+backward, by GPU time alone
(CUDA-graph replay) next to do_bench's host-inclusive figure.

The fused problem (residual + dropout 0.1, weight and bias) at the benchmark shapes; `mb_kernel`
is membound with the size rule off (the kernels even where it picks eager ops). Rows: dtype,
direction, rows, hidden, variant, timing (gpu: graph replay; bench: do_bench, best of
`rounds` interleaved rounds on host-bound shapes), ms, fraction_of_copy (4 tensors forward,
7 forward+backward).

    PYTHONPATH=src python benchmarks/add_norm/kernel_only.py [--hidden 4096,16384] [--dtype fp32]
"""

from __future__ import annotations

import torch
from _common import (
    FLOPS_PER_ELEM,
    M,
    P,
    bench_ms,
    eager_fused,
    gpu_ms,
    kernels_always,
    membound_fused,
    parser,
    start,
)


def kernel_only(csv, copy_bw, shapes, compile_h, dtype=torch.bfloat16):
    from membound.nn import add_norm_op

    print(f"{'shape':<12}{'variant':<9}{'fwd gpu':>8}{'frac':>6}{'fwd bench':>10}{'frac':>6}"
          f"{'f+b gpu':>9}{'frac':>6}{'f+b bench':>10}{'frac':>6}")  # fmt: skip
    for m, n in shapes:
        x, r = (torch.randn(m, n, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))  # fmt: skip
        w, b = (torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))  # fmt: skip
        dy = torch.randn(m, n, device="cuda", dtype=dtype)
        fns = {"eager": eager_fused, "membound": membound_fused}
        if m * n <= add_norm_op.EAGER_MAX_ELEMS:  # the size rule took eager ops
            fns["mb_kernel"] = kernels_always(membound_fused)
        if n in compile_h:
            torch._dynamo.reset()
            fns["compile"] = torch.compile(eager_fused, dynamic=False)
        el = m * n * x.element_size()
        calls = {}
        for name, fn in fns.items():

            def f(fn=fn, args=(x, r, w, b)):
                return fn(*args, P)

            def fb(fn=fn, args=(x, r, w, b), dy=dy):
                y, _ = fn(*args, P)
                torch.autograd.grad(y, args, dy)

            calls[name] = (("fwd", f, 4 * el), ("fwd+bwd", fb, 7 * el))
        timers = {"gpu": gpu_ms, "bench": lambda c: bench_ms(c, warmup_ms=3, rep_ms=10)}
        # host-bound shapes: do_bench moves with the host's other load; the best of 3 rounds,
        # variants interleaved, compares them under the same conditions
        rounds = {"gpu": 1, "bench": 3 if m * n <= 1 << 25 else 1}
        best = {}
        for how, timer in timers.items():
            for _ in range(rounds[how]):
                for name, dirs in calls.items():
                    for d, call, _nb in dirs:
                        try:
                            ms = timer(call)
                        except Exception as e:  # noqa: BLE001
                            print(f"  {name} {d} {how}: {type(e).__name__}: {str(e)[:100]}")
                            ms = float("nan")
                        key = (name, d, how)
                        best[key] = min(best.get(key, ms), ms)
        for name, dirs in calls.items():
            row = {}
            for d, _call, nb in dirs:
                for how in timers:
                    ms = best[(name, d, how)]
                    frac = nb / (ms / 1e3) / copy_bw
                    row[(d, how)] = (ms, frac)
                    csv.add(part="kernel_only", dtype=str(dtype).split(".")[-1], direction=d,
                            rows=m, hidden=n, variant=name, timing=how, rounds=rounds[how],
                            ms=round(ms, 4), fraction_of_copy=round(frac, 3), bytes=nb,
                            flops=FLOPS_PER_ELEM[d] * m * n)  # fmt: skip
            cells = "".join(f"{row[k][0]:8.4f}{row[k][1]:6.2f}  " for k in
                            (("fwd", "gpu"), ("fwd", "bench"), ("fwd+bwd", "gpu"), ("fwd+bwd", "bench")))  # fmt: skip
            print(f"{m}x{n:<7}{name:<9}{cells}", flush=True)
        torch.cuda.empty_cache()


def main(argv=None) -> int:
    ap = parser(__doc__, "kernel_only")
    ap.add_argument("--hidden", default="", help="widths at 32768 rows (default: all)")
    ap.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--no-compile", action="store_true", help="without torch.compile")
    args = ap.parse_args(argv)
    began = start(args)
    if began is None:
        return 0
    shapes = [(2048, 4096)] + [(M, h) for h in (1024, 2048, 4096, 8192, 16384)]
    if args.hidden:
        shapes = [(M, int(h)) for h in args.hidden.split(",")]
    dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[args.dtype]
    kernel_only(*began, shapes, () if args.no_compile else (1024, 4096, 16384), dtype)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
