"""The 16384 backward while other kernels hold SMs (as NCCL's do during a DDP backward).

`hogs` one-thread sleep kernels on side streams, launched just before it, each holding an SM's
slot for `hog_ms`. The SM-pair kernel needs both programs of a pair resident; a program whose
partner waits behind a hog spins, then sums the partner's half itself. Wall time of the call
(events) for: the default (the Gluon kernel where it runs: one program per SM, no partner),
the pair kernel (default spin, and 2**20 reloads before the fallback: knob `pair_spin`) and
the split backward (no pairing), each alone and behind hogs. Run 33: pair 1.70 -> 3.03-3.11 ms
behind 8 hogs of 2 or 20 ms, split 1.97 -> 2.30-2.34; a cooperative launch (tried in runs
32-33) changed nothing. Rows: variant, hogs, hog_ms, ms, correct.

    PYTHONPATH=src python benchmarks/add_norm/contention.py --run 56
"""

from __future__ import annotations

import statistics

import torch
from _common import M, P, backward, fused_problem, parser, same, saved_forward, start, work


def contention(csv, N=16384, hogs=8, hog_ms=(0.2, 2.0, 20.0)):
    from membound.kernels.add_norm import Knobs, bwd_config, configured

    x, r, dy, w, _ = fused_problem(N)
    s, mean, rstd = saved_forward(x, r, w, None, bias=False)

    def call(cfg):
        return backward(dy, s, mean, rstd, w, P, cfg, (torch.float32,) * 3)()

    # calibrate the sleep kernel: cycles per ms of wall time
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda._sleep(1000)
    a.record()
    torch.cuda._sleep(10_000_000)
    b.record()
    torch.cuda.synchronize()
    cycles_per_ms = 10_000_000 / a.elapsed_time(b)
    print(f"  sleep kernel: {cycles_per_ms / 1e3:.0f} M cycles per s")
    streams = [torch.cuda.Stream() for _ in range(hogs)]
    ref = call(None)
    spin = Knobs().pair_spin
    pair = bwd_config(M, N)
    cost = work(M, N, 2, 4, "bwd")
    for name, cfg, sp in (("default", None, spin), ("pair", pair, spin),
                          ("pair spin20", pair, 1 << 20),
                          ("split", bwd_config(M, N, None), spin)):  # fmt: skip
        with configured(pair_spin=sp):
            try:
                ok = same(call(cfg), ref)
            except Exception as e:  # noqa: BLE001 - one variant failing must not stop
                print(f"  contention {name}: {type(e).__name__}: {str(e)[:120]}")
                continue
            for hog in (0.0, *hog_ms):
                times = []
                for _ in range(3):
                    torch.cuda.synchronize()
                    if hog:
                        for st in streams:
                            with torch.cuda.stream(st):
                                torch.cuda._sleep(int(hog * cycles_per_ms))
                    a = torch.cuda.Event(enable_timing=True)
                    b = torch.cuda.Event(enable_timing=True)
                    a.record()
                    call(cfg)
                    b.record()
                    torch.cuda.synchronize()
                    times.append(a.elapsed_time(b))
                ms = statistics.median(times)
                print(f"  contention {name:<10} hogs {hogs} x {hog:4.0f} ms: {ms:8.3f} ms"
                      f"{'' if ok else '  WRONG'}")  # fmt: skip
                csv.add(part="contention", rows=M, hidden=N, dtype="bfloat16", variant=name,
                        hogs=hogs, hog_ms=hog, ms=round(ms, 3), correct=ok, **cost)  # fmt: skip


def main(argv=None) -> int:
    args = parser(__doc__, "contention").parse_args(argv)
    began = start(args)
    if began is not None:
        contention(began[0])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
