"""Where one fwd+bwd's host time goes: per-call microseconds split at our backward's entry and
exit (time to reach it, inside it, back to the caller), with autograd's device threads on and
off, against a trivial Python autograd.Function and plain eager, at 8 x 1024 bf16 (the GPU work
is ~microseconds: host time only).

Rows: variant, threads, fwd_us, to_entry_us, inside_us, exit_us.

    PYTHONPATH=src python benchmarks/add_norm/host.py --run 56
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.nn.functional as F
from _common import P, parser, start, work

ROWS, HIDDEN = 8, 1024


def host(csv, n_iter=200):
    from membound.nn import add_norm_op
    from membound.nn.functional import add_norm

    stamps = []
    orig = add_norm_op.AddNormFunction.backward

    def wrapped(ctx, *g):
        t1 = time.perf_counter_ns()
        out = orig(ctx, *g)
        stamps.append((t1, time.perf_counter_ns()))
        return out

    shape = (ROWS, HIDDEN)
    x, r = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))  # fmt: skip
    w, b = (torch.ones(HIDDEN, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))  # fmt: skip
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            t1 = time.perf_counter_ns()
            out = g * 2
            stamps.append((t1, time.perf_counter_ns()))
            return out

    def ours():
        return add_norm(x, w, b, residual=r, dropout_p=P, prenorm=True)[0], (x, r, w, b)

    def twice():
        return Twice.apply(x), (x,)

    def eager():
        s = F.dropout(x, P) + r
        return F.layer_norm(s, (HIDDEN,), w, b, 1e-5), (x, r, w, b)

    fused = work(ROWS, HIDDEN, 2, 7, "fwd+bwd")
    # a * 2 forward, g * 2 backward: 2 tensors each way, 1 FLOP per element each
    trivial = {"bytes": 4 * ROWS * HIDDEN * 2, "flops": 2 * ROWS * HIDDEN}
    # timing hooks: our backward stamped at entry and exit, the size rule off (the kernels)
    old_max = add_norm_op.EAGER_MAX_ELEMS
    add_norm_op.AddNormFunction.backward = staticmethod(wrapped)
    add_norm_op.EAGER_MAX_ELEMS = -1
    try:
        for label, fn in (("add_norm", ours), ("trivial Function", twice), ("plain eager", eager)):
            for threads in (True, False):
                fwd_us, rows = _time(fn, dy, stamps, threads, n_iter)
                med = [statistics.median(c) for c in zip(*rows, strict=True)]
                tag = "device threads" if threads else "caller thread "
                print(
                    f"  host {label:<17}{tag}: fwd {statistics.median(fwd_us):7.1f} us | bwd: to "
                    f"entry {med[0]:7.1f}, inside {med[1]:7.1f}, exit->return {med[2]:7.1f} us"
                )
                csv.add(part="host", rows=ROWS, hidden=HIDDEN, dtype="bfloat16", variant=label,
                        threads=threads, fwd_us=round(statistics.median(fwd_us), 1),
                        to_entry_us=round(med[0], 1), inside_us=round(med[1], 1),
                        exit_us=round(med[2], 1),
                        **(trivial if fn is twice else fused))  # fmt: skip
    finally:
        add_norm_op.AddNormFunction.backward = staticmethod(orig)
        add_norm_op.EAGER_MAX_ELEMS = old_max


def _time(fn, dy, stamps, threads, n_iter):
    """(forward us per call, [(to entry, inside, exit->return) us per call])."""
    for _ in range(20):
        y, leaves = fn()
        torch.autograd.grad(y, leaves, dy)
    torch.cuda.synchronize()
    stamps.clear()
    fwd_us, rows = [], []
    with torch.autograd.set_multithreading_enabled(threads):
        for _ in range(n_iter):
            ta = time.perf_counter_ns()
            y, leaves = fn()
            t0 = time.perf_counter_ns()
            torch.autograd.grad(y, leaves, dy)
            t3 = time.perf_counter_ns()
            fwd_us.append((t0 - ta) / 1e3)
            if stamps:
                t1, t2 = stamps.pop()
                rows.append(((t1 - t0) / 1e3, (t2 - t1) / 1e3, (t3 - t2) / 1e3))
            else:
                rows.append((float("nan"), float("nan"), (t3 - t0) / 1e3))
            stamps.clear()
    torch.cuda.synchronize()
    return fwd_us, rows


def main(argv=None) -> int:
    args = parser(__doc__, "host").parse_args(argv)
    began = start(args)
    if began is not None:
        host(began[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
