"""Where add_norm's host time goes: per-call microseconds of launch paths on a tiny tensor.

Rows: an almost-empty Triton kernel with add_norm's argument count (normal `kernel[grid]`
launch vs the cached direct launch of `membound.kernels._launch`), the raw fwd launcher
`add_norm_fwd`, the full `add_norm` (no grad; grad; forward+backward), each with the direct
launch on and off, and the eager chain (dropout, add, layer_norm). Time = wall clock of
`n` back-to-back calls then one synchronize, divided by n: at this size the GPU work is ~µs,
so it measures the host cost per call. The last line suggests `EAGER_MAX_ELEMS`. Rows: variant,
us_per_call (bytes and FLOPs: the add_norm problem's, empty for the no-op kernel).

    PYTHONPATH=src python benchmarks/add_norm/launch_overhead.py [--run N] [--csv out.csv]
"""

from __future__ import annotations

import sys
import time

import torch
import torch.nn.functional as F
from _common import open_csv, parser, work


def _per_call_us(fn, n: int) -> float:
    for _ in range(20):
        fn()
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    sync()
    best = float("inf")
    for _ in range(3):  # best of 3: other processes on the host only add time
        t0 = time.perf_counter_ns()
        for _ in range(n):
            fn()
        sync()
        best = min(best, (time.perf_counter_ns() - t0) / n / 1e3)
    return best


def main(argv=None) -> int:
    ap = parser(__doc__, "launch_overhead")
    ap.add_argument("-n", type=int, default=300)
    args = ap.parse_args(argv)
    import triton
    import triton.language as tl

    from membound.kernels import _launch
    from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd
    from membound.nn import add_norm_op
    from membound.nn.functional import add_norm

    @triton.jit
    def _noop(X, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17,
              a18, C1: tl.constexpr, C2: tl.constexpr, C3: tl.constexpr, C4: tl.constexpr,
              C5: tl.constexpr, C6: tl.constexpr):  # fmt: skip
        if tl.program_id(0) == 0:
            tl.store(X, a1 + C1)

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    out = open_csv(args)
    rows = []
    xs = torch.zeros(16, device=dev)
    tens = [torch.zeros(16, device=dev) for _ in range(8)]
    noop_args = (xs, 1, 2, *tens, 3, 4, 5, 6, 7, 8, 0.5, 1e-5)
    noop_c = dict(C1=1, C2=2, C3=3, C4=4, C5=5, C6=6)

    shape = (8, 1024)

    def record(name, us):
        rows.append((name, us))
        # the add_norm problem's work (the no-op kernel's does not count)
        if "noop" in name:
            problem = dict(rows="", hidden="", dtype="", bytes="", flops="")
        else:
            problem = dict(rows=shape[0], hidden=shape[1], dtype="bfloat16", **_cost(name, shape))
        out.add(variant=name, op="launch", us_per_call=round(us, 2), **problem)
        print(f"  launch {name:<34}{us:8.1f} us/call", flush=True)

    record("triton noop normal kernel[grid]", _per_call_us(
        lambda: _noop[(1,)](*noop_args, **noop_c, num_warps=1), args.n))  # fmt: skip
    _launch.clear()
    record("triton noop direct (cached)", _per_call_us(
        lambda: _launch.launch(_noop, (1,), noop_args, noop_c, 1, 1), args.n))  # fmt: skip
    print(f"  launch direct path stats: {_launch.stats} (direct 0: fell back to normal)")
    x, r = (torch.randn(shape, device=dev, dtype=torch.bfloat16) for _ in range(2))
    w, b = torch.ones(1024, device=dev), torch.zeros(1024, device=dev)
    xg, rg = x.clone().requires_grad_(), r.clone().requires_grad_()
    wg, bg = w.clone().requires_grad_(), b.clone().requires_grad_()
    eager_max = add_norm_op.EAGER_MAX_ELEMS
    add_norm_op.EAGER_MAX_ELEMS = -1  # always the kernels here

    def fb():
        y, s = add_norm(xg, wg, bg, residual=rg, dropout_p=0.1, prenorm=True)
        torch.autograd.grad((y, s), (xg, rg, wg, bg), (x, x))

    for direct in (True, False):
        _launch.ENABLED = direct
        tag = "direct" if direct else "normal"
        record(f"add_norm_fwd launcher ({tag})", _per_call_us(
            lambda: add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=0.1,
                                 seed=1), args.n))  # fmt: skip
        record(
            f"add_norm no grad ({tag})",
            _per_call_us(
                lambda: add_norm(x, w, b, residual=r, dropout_p=0.1, prenorm=True), args.n
            ),
        )
        record(
            f"add_norm grad fwd ({tag})",
            _per_call_us(
                lambda: add_norm(xg, wg, bg, residual=rg, dropout_p=0.1, prenorm=True), args.n
            ),
        )
        record(f"add_norm fwd+bwd ({tag})", _per_call_us(fb, args.n // 2))
    _launch.ENABLED = True
    # where the backward's host time goes (run 2: fwd+bwd 860 us vs grad fwd 108 us): the
    # launcher alone and _bwd_impl alone on this thread, without autograd
    y0, s0, mean0, rstd0 = add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False,
                                        dropout_p=0.1, seed=1)  # fmt: skip
    record("add_norm_bwd launcher (direct)", _per_call_us(
        lambda: add_norm_bwd(x, None, s0, mean0, rstd0, w, is_rms=False, dropout_p=0.1, seed=1,
                             want_dweight=True, want_dbias=True, dres_dtype=x.dtype), args.n))  # fmt: skip
    seed_t = torch.tensor([1, 1], dtype=torch.int64)
    record("_bwd_impl (no autograd)", _per_call_us(
        lambda: add_norm_op._bwd_impl(x, None, s0, mean0, rstd0, w, seed_t, 0.1, False, True, True,
                               True, False, x.dtype, x.dtype, torch.float32), args.n))  # fmt: skip
    import threading

    # a Python backward runs on autograd's device thread and needs the GIL: other live Python
    # threads (compile workers, ...) can make it wait up to the switch interval
    print(f"  python threads {threading.active_count()}, switch interval {sys.getswitchinterval()}")
    if torch.cuda.is_available():  # the CPU and CUDA ops of 10 fwd+bwd calls, top 12
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                fb()
            torch.cuda.synchronize()
        print("=== profile: 10 x add_norm fwd+bwd (kernels), by CPU total")
        table = prof.key_averages().table(
            sort_by="cpu_time_total", row_limit=14, max_name_column_width=48
        )
        print(table)
        print("=== end profile")
    add_norm_op.EAGER_MAX_ELEMS = 1 << 40  # always the eager path
    record(
        "add_norm grad fwd (eager ops)",
        _per_call_us(
            lambda: add_norm(xg, wg, bg, residual=rg, dropout_p=0.1, prenorm=True), args.n
        ),
    )
    record("add_norm fwd+bwd (eager ops)", _per_call_us(fb, args.n // 2))
    add_norm_op.EAGER_MAX_ELEMS = eager_max

    wh, bh = (t.detach().to(x.dtype).requires_grad_() for t in (wg, bg))

    def eager():  # parameters in the activation dtype: F.layer_norm wants one dtype
        s = F.dropout(xg, 0.1) + rg
        return F.layer_norm(s, (1024,), wh, bh, 1e-5), s

    def eager_fb():
        y, s = eager()
        torch.autograd.grad((y, s), (xg, rg, wh, bh), (x, x))

    record("eager dropout+add+layer_norm fwd", _per_call_us(eager, args.n))
    record("eager fwd+bwd", _per_call_us(eager_fb, args.n // 2))
    d = dict(rows)
    kern, comp = d["add_norm fwd+bwd (direct)"], d["add_norm fwd+bwd (eager ops)"]
    # the kernel moves ~7 tensors at ~4 TB/s; the composite ~14 at ~2.5 TB/s effective:
    # below the size where the host cost difference equals the GPU time saved, use eager
    gap_us = kern - comp
    elems = max(0.0, gap_us * 1e-6 / (14 * 2 / 2.5e12 - 7 * 2 / 4e12)) if gap_us > 0 else 0
    print(f"  suggested EAGER_MAX_ELEMS ~ {int(elems)} (now {eager_max}); host gap {gap_us:.1f} us")
    return 0


def _cost(name: str, shape) -> dict:
    """bytes and FLOPs of the add_norm call `name` times (the fused problem: residual, weight,
    bias, dropout; the backward alone when the name says so)."""
    direction = "fwd+bwd" if "fwd+bwd" in name else "bwd" if "bwd" in name else "fwd"
    tensors = {"fwd": 4, "bwd": 4, "fwd+bwd": 7}[direction]
    return work(*shape, 2, tensors, direction)


if __name__ == "__main__":
    raise SystemExit(main())
