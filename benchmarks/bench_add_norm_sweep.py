"""add_norm launch configurations by GPU time alone, and where the backward's host time goes.

Part 1 (`--sweep`): forward and backward launch-config variants at 32768 rows x H (bf16,
residual + dropout 0.1, bf16 weight/bias), timed with `cuda_graph_median_ms` (CUDA-graph
replay, L2 flushed before each call, flush time subtracted): kernel time without any host
overhead, so configs are compared on what they move. Stage 1 sweeps rows per tile x warps x
programs per SM; stage 2 re-times the best three with PREFETCH (next tile loaded while this
one computes) and without dropout.

Part 2 (`--kernel-only`): eager / torch.compile / membound fwd and fwd+bwd at the benchmark
shapes, GPU time only (graph replay), next to do_bench's host-inclusive figure.

Part 3 (`--host`): per-call host microseconds of one fwd+bwd split at the backward's entry and
exit (time to reach our backward, inside it, back to the caller), with autograd's device
threads on and off, against a trivial Python autograd.Function and plain eager.

    PYTHONPATH=src python benchmarks/bench_add_norm_sweep.py --sweep --kernel-only --host
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_add_norm import P_DROP as P  # noqa: E402
from harness import RESULTS_DIR, CsvRows, bench_ms, copy_bandwidth  # noqa: E402

M = 32768
#: name prefixes of the sweep variants to time (empty: all); `--only`
ONLY: tuple = ()


def _gpu_ms(fn) -> float:
    from membound.device.timing import cuda_graph_median_ms

    return cuda_graph_median_ms(fn, reps=10, samples=5)


def _cands_fwd(N):
    from membound.kernels.add_norm_config import LaunchConfig

    bn = max(8, 1 << (N - 1).bit_length())
    out = {}
    if bn <= 8192:
        for bm in (1, 2, 4, 8):
            if bm * bn > 8192:
                continue
            for w in (4, 8, 16, 32):
                per = bm * bn // (32 * w)
                if not 4 <= per <= 32:
                    continue
                for pps in (0, 2, 4):
                    out[f"bm{bm}_w{w}_p{pps}"] = LaunchConfig(bm, bn, w, False, pps)
    if N >= 8192:
        chunks = [(4096, 8, 8), (4096, 8, 4), (4096, 16, 4), (2048, 8, 8), (8192, 16, 2)]
        chunks += [(2048, 4, 16), (1024, 4, 16), (2048, 16, 4), (1024, 8, 8)]
        for cn, w, pps in chunks:
            out[f"chunk{cn}_w{w}_p{pps}"] = LaunchConfig(1, cn, w, True, pps)
    if bn >= 16384:  # one tile of the whole row (16 or 32 elements per thread)
        for w, pps in ((32, 1), (32, 2), (32, 0), (16, 0), (16, 1), (16, 2)):
            out[f"one_w{w}_p{pps}"] = LaunchConfig(1, bn, w, False, pps)
    return out


def _cands_bwd(N):
    from membound.kernels.add_norm_config import LaunchConfig

    bn = max(8, 1 << (N - 1).bit_length())
    out = {}
    for bm in (1, 2, 4):
        if bm * bn > 16384:
            continue
        for w in (4, 8, 16, 32):
            per = bm * bn // (32 * w)
            if not 8 <= per <= 64:
                continue
            for pps in (1, 2, 4, 8):
                if w * pps > 32:
                    continue
                out[f"bm{bm}_w{w}_p{pps}"] = LaunchConfig(bm, bn, w, False, pps)
    if bn >= 16384:  # the fused chunked kernel: its partial rows read-modify-written in L2
        for cn, w, pps in ((4096, 8, 1), (8192, 16, 1), (2048, 8, 1), (4096, 16, 1),
                           (4096, 8, 2), (8192, 16, 2)):  # fmt: skip
            out[f"rmwchunk{cn}_w{w}_p{pps}"] = LaunchConfig(1, cn, w, True, pps)
    if bn >= 16384:  # split, with the chunked kernel (two passes per row) as the row pass
        for cn, w, pps in ((4096, 8, 1), (4096, 8, 2), (4096, 8, 4), (4096, 16, 1), (4096, 16, 2),
                           (2048, 8, 2), (2048, 8, 4), (2048, 4, 4), (2048, 4, 8), (8192, 16, 1),
                           (8192, 16, 2)):  # fmt: skip
            out[f"splitchunk{cn}_w{w}_p{pps}"] = LaunchConfig(
                1, cn, w, True, pps, split_params=True
            )
    if bn >= 16384:  # split: no accumulators in the row kernel, a second parameter pass
        for w, pps, pf in ((32, 0, False), (16, 0, False), (32, 2, True), (16, 2, True),
                           (32, 1, True)):  # fmt: skip
            out[f"split_w{w}_p{pps}{'_pf' if pf else ''}"] = LaunchConfig(
                1, bn, w, False, pps, prefetch=pf, split_params=True
            )
    if bn >= 16384:  # fused, two programs (SMs) per row exchanging the row sums
        for w, pps in ((16, 1), (32, 1), (8, 2)):
            out[f"pair_w{w}_p{pps}"] = LaunchConfig(1, bn, w, False, pps, pair=True)
    return out


def _same(out, ref) -> bool:
    """Outputs of a variant match the default's (16-bit rounding and reduction order aside)."""
    for a, b in zip(out, ref, strict=True):
        if a is None or b is None:
            if (a is None) != (b is None):
                return False
            continue
        a, b = a.float(), b.float()
        if a.shape != b.shape:
            return False
        if a.numel() == 0:  # RMSNorm's mean
            continue
        if not torch.isfinite(a).all() or (a - b).abs().max() > 2e-2 * (b.abs().max() + 1):
            return False
    return True


def _sweep_width(csv, copy_bw, N, do_fwd, do_bwd, do_ln=False, do_rms=False):
    from dataclasses import replace

    from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd
    from membound.kernels.add_norm_config import bwd_config, fwd_config

    x, r, dy = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    w, b = (torch.randn(N, device="cuda", dtype=torch.bfloat16) for _ in range(2))

    def fwd(cfg, p=P):
        return lambda: add_norm_fwd(
            x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=p, seed=1, config=cfg
        )

    _, s, mean, rstd = add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=P,
                                    seed=1)  # fmt: skip

    def bwd(cfg, p=P):
        return lambda: add_norm_bwd(
            dy, None, s, mean, rstd, w, is_rms=False, dropout_p=p, seed=1,
            want_dweight=True, want_dbias=True, dres_dtype=dy.dtype,
            param_dtypes=(w.dtype, b.dtype, torch.float32), config=cfg,
        )  # fmt: skip

    def ln(cfg, p=0.0):  # LayerNorm alone: reads x, writes y (2 tensors)
        return lambda: add_norm_fwd(
            x, w, b, None, None, eps=1e-5, is_rms=False, store_s=False, config=cfg
        )

    def rms(cfg, p=0.0):  # RMSNorm alone (weight, no bias): reads x, writes y
        return lambda: add_norm_fwd(
            x, w, None, None, None, eps=1e-5, is_rms=True, store_s=False, config=cfg
        )

    for direction, make, cands, default, nbytes in (
        ("fwd", fwd, _cands_fwd(N) if do_fwd else None, fwd_config(M, N), 4 * M * N * 2),
        ("bwd", bwd, _cands_bwd(N) if do_bwd else None, bwd_config(M, N), 4 * M * N * 2),
        ("ln-fwd", ln, _cands_fwd(N) if do_ln else None, fwd_config(M, N, 2, 2), 2 * M * N * 2),
        (
            "rms-fwd",
            rms,
            _cands_fwd(N) if do_rms else None,
            fwd_config(M, N, 2, 2, True),
            2 * M * N * 2,
        ),
    ):
        if cands is None:
            continue
        t_start = time.time()
        res = {}
        refs = {p: make(default, p)() for p in (P, 0.0)}

        def time_one(
            name, cfg, p=P, direction=direction, make=make, res=res, nbytes=nbytes, refs=refs
        ):
            try:
                ok = _same(make(cfg, p)(), refs[p])
                ms = _gpu_ms(make(cfg, p))
            except Exception as e:  # noqa: BLE001 - one variant failing must not stop
                print(f"  {direction} H={N} {name}: {type(e).__name__}: {str(e)[:100]}")
                return
            if not ok:  # fast but wrong must never rank
                print(f"  {direction} H={N} {name}: WRONG outputs (vs the default's)")
                csv.add(part="sweep", direction=direction, hidden=N, variant=name + "+WRONG",
                        ms=round(ms, 4), config=str(cfg))  # fmt: skip
                return
            res[name] = (ms, cfg)
            frac = nbytes / (ms / 1e3) / copy_bw
            csv.add(part="sweep", direction=direction, hidden=N, variant=name, ms=round(ms, 4),
                    fraction_of_copy=round(frac, 3), config=str(cfg))  # fmt: skip

        time_one("DEFAULT", default)
        for name, cfg in cands.items():
            if cfg != default and (not ONLY or name.startswith(ONLY)):
                time_one(name, cfg)
        if not res:
            print(f"{direction} H={N}: no variant ran")
            continue
        ranked = sorted(res.items(), key=lambda kv: kv[1][0])
        for name, (_, cfg) in ranked[:3]:
            if not cfg.chunked and cfg.programs_per_sm > 0:
                time_one(name + "+pf", replace(cfg, prefetch=True))
        best = min(res.items(), key=lambda kv: kv[1][0])
        time_one(best[0] + "+nodrop", best[1][1], 0.0)
        time_one("DEFAULT+nodrop", default, 0.0)
        ranked = sorted(res.items(), key=lambda kv: kv[1][0])
        dflt = res.get("DEFAULT", (float("nan"),))[0]
        print(f"{direction} H={N}: default {dflt:.4f} ms {nbytes / dflt / 1e-3 / copy_bw:.3f}"
              f"  ({len(res)} variants, {time.time() - t_start:.0f}s); best:")  # fmt: skip
        for name, (ms, _) in ranked[:6]:
            print(f"    {name:<24}{ms:8.4f} ms {nbytes / ms / 1e-3 / copy_bw:6.3f}")


def sweep(csv, copy_bw, fwd_widths, bwd_widths, ln_widths=(), rms_widths=()):
    for N in sorted(set(fwd_widths) | set(bwd_widths) | set(ln_widths) | set(rms_widths)):
        _sweep_width(csv, copy_bw, N, N in fwd_widths, N in bwd_widths, N in ln_widths,
                     N in rms_widths)  # fmt: skip
        torch.cuda.empty_cache()


def split_pass(csv, copy_bw, N=16384):
    """The split backward's two kernels apart at 32768 x N: the row kernel alone (no
    parameter gradients wanted: 4 tensors), then the parameter pass's tiling variants (2
    tensors read); the best one is left set in the module for the parts that follow."""
    from membound.kernels import add_norm as K
    from membound.kernels.add_norm_config import bwd_config

    x, r, dy = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    w, b = (torch.randn(N, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    _, s, mean, rstd = K.add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=P,
                                      seed=1)  # fmt: skip
    cfg = bwd_config(M, N)
    el = M * N * 2

    def bwd(want):
        return lambda: K.add_norm_bwd(
            dy, None, s, mean, rstd, w, is_rms=False, dropout_p=P, seed=1, want_dweight=want,
            want_dbias=want, dres_dtype=dy.dtype, param_dtypes=(w.dtype, b.dtype, w.dtype),
            config=cfg,
        )  # fmt: skip

    for label, want, nb in (("row kernel alone", False, 4 * el), ("whole backward", True, 4 * el)):
        ms = _gpu_ms(bwd(want))
        print(f"split H={N} {label:<18}{ms:8.4f} ms {nb / ms / 1e-3 / copy_bw:6.3f} (4 tensors)")
    buf = torch.empty((2, 64, N), device="cuda", dtype=torch.float32)
    res = {}
    for bm, bn, warps in ((16, 128, 4), (32, 128, 4), (16, 256, 4), (32, 256, 8), (8, 512, 4),
                          (16, 512, 8), (64, 64, 4), (32, 64, 4), (8, 256, 4), (64, 128, 8)):  # fmt: skip
        for rp in (8, 16, 32, 64):

            def one(bm=bm, bn=bn, warps=warps, rp=rp):
                K.launch(
                    K._param_partials_kernel, (-(-N // bn), rp),
                    (dy, s, dy, mean, rstd, buf, M, N, -(-M // rp), dy.stride(0), s.stride(0),
                     dy.stride(0)),
                    dict(HAS_DW=True, HAS_DB=True, HAS_DPB=False, IS_RMS=False, BLOCK_M=bm,
                         BLOCK_N=bn), warps, 1,
                )  # fmt: skip

            try:
                ms = _gpu_ms(one)
            except Exception as e:  # noqa: BLE001
                print(f"  split pass bm{bm} bn{bn} w{warps} rp{rp}: {type(e).__name__}")
                continue
            res[(rp, bm, bn, warps)] = ms
            csv.add(part="split_pass", hidden=N, variant=f"bm{bm}_bn{bn}_w{warps}_rp{rp}",
                    ms=round(ms, 4), fraction_of_copy=round(2 * el / ms / 1e-3 / copy_bw, 3))  # fmt: skip
    ranked = sorted(res.items(), key=lambda kv: kv[1])
    print(f"split parameter pass (reads dy, s; GPU time), default {K.SPLIT_ROW_PROGRAMS, K.SPLIT_BLOCK_M, K.SPLIT_BLOCK_N, K.SPLIT_WARPS}:")  # fmt: skip
    dflt = (K.SPLIT_ROW_PROGRAMS, K.SPLIT_BLOCK_M, K.SPLIT_BLOCK_N, K.SPLIT_WARPS)
    for key, ms in ranked[:5] + ([(dflt, res[dflt])] if dflt in res else []):
        print(f"    rp{key[0]} bm{key[1]} bn{key[2]} w{key[3]}  {ms:8.4f} ms "
              f"{2 * el / ms / 1e-3 / copy_bw:6.3f} (2 tensors)")  # fmt: skip
    K.SPLIT_ROW_PROGRAMS, K.SPLIT_BLOCK_M, K.SPLIT_BLOCK_N, K.SPLIT_WARPS = ranked[0][0]
    ms = _gpu_ms(bwd(True))
    print(f"split H={N} whole backward, best pass {ms:8.4f} ms {4 * el / ms / 1e-3 / copy_bw:6.3f}")


def kernel_only(csv, copy_bw, shapes, compile_h, dtype=torch.bfloat16):
    # the main benchmark's functions (the same semantics, called with dropout P)
    from bench_add_norm import _kernels_always, eager_fused, membound_fused
    from membound.nn import _ops

    print(f"{'shape':<12}{'variant':<9}{'fwd gpu':>8}{'frac':>6}{'fwd bench':>10}{'frac':>6}"
          f"{'f+b gpu':>9}{'frac':>6}{'f+b bench':>10}{'frac':>6}")  # fmt: skip
    for m, n in shapes:
        x, r = (torch.randn(m, n, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))  # fmt: skip
        w, b = (torch.randn(n, device="cuda", dtype=dtype, requires_grad=True)
                for _ in range(2))  # fmt: skip
        dy = torch.randn(m, n, device="cuda", dtype=dtype)
        fns = {"eager": eager_fused, "membound": membound_fused}
        if m * n <= _ops.EAGER_MAX_ELEMS:  # the size rule took eager ops: the kernels' figures
            fns["mb_kernel"] = _kernels_always(membound_fused)
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
        timers = {"gpu": _gpu_ms, "bench": lambda c: bench_ms(c, warmup_ms=3, rep_ms=10)}
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
                            ms=round(ms, 4), fraction_of_copy=round(frac, 3))  # fmt: skip
            cells = "".join(f"{row[k][0]:8.4f}{row[k][1]:6.2f}  " for k in
                            (("fwd", "gpu"), ("fwd", "bench"), ("fwd+bwd", "gpu"), ("fwd+bwd", "bench")))  # fmt: skip
            print(f"{m}x{n:<7}{name:<9}{cells}", flush=True)
        torch.cuda.empty_cache()


def nograd_small(csv, copy_bw, shapes=((2048, 4096), (256, 4096), (64, 1024), (8, 1024))):
    """Inference (no grad) at small sizes: eager's ops, the fused kernels (what add_norm runs
    without grad), and the eager-ops path (what the size rule runs with grad), by GPU time
    and by do_bench (best of 3 interleaved rounds: host-bound)."""
    from bench_add_norm import eager_fused
    from membound.nn.functional import add_norm, eager_add_norm

    print(f"{'shape':<11}{'variant':<12}{'gpu ms':>8}{'bench ms':>10}{'frac(bench)':>12}")
    for m, n in shapes:
        x, r = (torch.randn(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        w, b = (torch.randn(n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        a = (x, r, w, b)
        fns = {
            "eager": lambda a=a: eager_fused(*a, P),
            "membound": lambda a=a: add_norm(
                a[0], a[2], a[3], residual=a[1], dropout_p=P, prenorm=True
            ),  # fmt: skip
            "eager_path": lambda a=a: eager_add_norm(
                a[0], a[2], a[3], a[1], None, P, False, 1e-5, a[0].dtype, a[0].dtype
            ),  # fmt: skip
        }
        nb = 4 * m * n * 2
        best = {}
        with torch.no_grad():
            gpu = {k: _gpu_ms(f) for k, f in fns.items()}
            for _ in range(3):
                for k, f in fns.items():
                    ms = bench_ms(f, warmup_ms=3, rep_ms=10)
                    best[k] = min(best.get(k, ms), ms)
        for k in fns:
            frac = nb / (best[k] / 1e3) / copy_bw
            print(f"{m}x{n:<6}{k:<12}{gpu[k]:8.4f}{best[k]:10.4f}{frac:12.3f}", flush=True)
            csv.add(part="nograd_small", rows=m, hidden=n, variant=k, gpu_ms=round(gpu[k], 4),
                    bench_ms=round(best[k], 4), fraction_of_copy=round(frac, 3))  # fmt: skip


def host(csv, n_iter=200):
    """Split one fwd+bwd's host time at our backward's entry and exit."""
    from membound.nn import _ops
    from membound.nn.functional import add_norm

    stamps = []
    orig = _ops.AddNormFunction.backward

    def wrapped(ctx, *g):
        t1 = time.perf_counter_ns()
        out = orig(ctx, *g)
        stamps.append((t1, time.perf_counter_ns()))
        return out

    _ops.AddNormFunction.backward = staticmethod(wrapped)
    shape = (8, 1024)
    x, r = (torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))  # fmt: skip
    w, b = (torch.ones(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(2))  # fmt: skip
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    old = _ops.EAGER_MAX_ELEMS
    _ops.EAGER_MAX_ELEMS = -1

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
        return F.layer_norm(s, (1024,), w, b, 1e-5), (x, r, w, b)

    for label, fn in (("add_norm", ours), ("trivial Function", twice), ("plain eager", eager)):
        for threads in (True, False):
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
            med = [statistics.median(c) for c in zip(*rows, strict=True)]
            tag = "device threads" if threads else "caller thread "
            print(
                f"  host {label:<17}{tag}: fwd {statistics.median(fwd_us):7.1f} us | bwd: to "
                f"entry {med[0]:7.1f}, inside {med[1]:7.1f}, exit->return {med[2]:7.1f} us"
            )
            csv.add(part="host", variant=label, threads=threads,
                    fwd_us=round(statistics.median(fwd_us), 1), to_entry_us=round(med[0], 1),
                    inside_us=round(med[1], 1), exit_us=round(med[2], 1))  # fmt: skip
    _ops.AddNormFunction.backward = staticmethod(orig)
    _ops.EAGER_MAX_ELEMS = old


def _time_checked(csv, copy_bw, nbytes, call, ref, label, **row):
    """GPU time of `call()` after checking its outputs against `ref`: printed after `label`
    and added to `csv` (with `row`; "WRONG" appended to the variant when they differ). A
    variant that fails is reported and skipped: one must not stop the others."""
    try:
        ok = _same(call(), ref)
        ms = _gpu_ms(call)
    except Exception as e:  # noqa: BLE001
        print(f"{label}{type(e).__name__}: {str(e)[:150]}")
        return
    frac = nbytes / ms / 1e-3 / copy_bw
    tag = "" if ok else "  WRONG"
    print(f"{label}{ms:8.4f} ms {frac:6.3f}{tag}")
    row["variant"] += tag.strip()
    csv.add(**row, ms=round(ms, 4), fraction_of_copy=round(frac, 3))


def pair_vs_split(csv, copy_bw, N=16384):
    """The wide-row backwards at 32768 x N by GPU time, bf16 and fp32, with and without
    dropout: the automatic choice (the Gluon kernel for 16-bit rows where it runs), the
    SM-pair kernel (2 programs per row exchanging the row sums) and the split one (row kernel
    without accumulators + parameter pass). Outputs are checked against the pair kernel's."""
    from membound.kernels import add_norm as K
    from membound.kernels.add_norm_config import LaunchConfig, bwd_config

    for dtype in (torch.bfloat16, torch.float32):
        x, r, dy = (torch.randn(M, N, device="cuda", dtype=dtype) for _ in range(3))
        w, b = (torch.randn(N, device="cuda", dtype=dtype) for _ in range(2))
        _, s, mean, rstd = K.add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False,
                                          dropout_p=P, seed=1)  # fmt: skip
        nb = 4 * M * N * dy.element_size()

        def bwd(cfg, p, dy=dy, s=s, mean=mean, rstd=rstd, w=w):
            return lambda: K.add_norm_bwd(
                dy, None, s, mean, rstd, w, is_rms=False, dropout_p=p, seed=1,
                want_dweight=True, want_dbias=True, dres_dtype=dy.dtype,
                param_dtypes=(w.dtype, w.dtype, torch.float32), config=cfg,
            )  # fmt: skip

        default = bwd_config(M, N)
        # DEFAULT: no explicit config (the Gluon kernel where it runs, else the default's)
        variants = {"DEFAULT": None, "pair_w16_p1": LaunchConfig(1, N, 16, False, 1, pair=True),
                    "split": bwd_config(M, 2 * N)}  # fmt: skip
        for p in (P, 0.0):
            ref = bwd(default, p)()
            for name, cfg in variants.items():
                _time_checked(csv, copy_bw, nb, bwd(cfg, p), ref,
                              f"  bwd {str(dtype)[6:]:<9} p={p:<4} {name:<14}",
                              part="pair_vs_split", dtype=str(dtype)[6:], hidden=N, dropout=p,
                              variant=name)  # fmt: skip
        del x, r, dy, s
        torch.cuda.empty_cache()


def gluon_knobs(csv, copy_bw, widths=(16384, 12288)):
    """The Gluon backward's compile-time knobs at 32768 x N bf16 (residual, weight, bias,
    dropout 0.1 and 0), by GPU time, each checked against the pair kernel's outputs: the
    default plan, then its constexprs changed one at a time (db_flip: the dbias partials in
    registers instead of shared memory or back; masked: column masks kept at N = 16384;
    noswizzle: the dbias partials in shared memory unswizzled) and 8/32 warps; the pair
    kernel alongside."""
    import dataclasses

    from membound.kernels import add_norm as K
    from membound.kernels.add_norm_config import bwd_config

    for N in widths:
        x, r, dy = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        w, b = (torch.randn(N, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        _, s, mean, rstd = K.add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False,
                                          dropout_p=P, seed=1)  # fmt: skip
        nb = 4 * M * N * 2
        for p in (P, 0.0):

            def bwd(cfg=None, p=p, dy=dy, s=s, mean=mean, rstd=rstd, w=w):
                return K.add_norm_bwd(
                    dy, None, s, mean, rstd, w, is_rms=False, dropout_p=p, seed=1,
                    want_dweight=True, want_dbias=True, dres_dtype=dy.dtype,
                    param_dtypes=(w.dtype, w.dtype, torch.float32), config=cfg,
                )  # fmt: skip

            ref = bwd(bwd_config(M, N))
            K._PLANS.clear()
            bwd()
            keys = [k for k, v in K._PLANS.items() if k[0] == "bwd" and v.gluon]
            if not keys:
                print(f"  gluon N={N} p={p}: not used here")
                continue
            base = K._PLANS[keys[0]]
            pair_cfg = bwd_config(M, N)
            pair_ms = _gpu_ms(lambda pair_cfg=pair_cfg: bwd(pair_cfg))
            print(f"  gluon N={N:<6} p={p:<4} {'pair':<12}{pair_ms:8.4f} ms "
                  f"{nb / pair_ms / 1e-3 / copy_bw:6.3f}")  # fmt: skip
            csv.add(part="gluon_knobs", hidden=N, dropout=p, variant="pair", ms=round(pair_ms, 4),
                    fraction_of_copy=round(nb / pair_ms / 1e-3 / copy_bw, 3))  # fmt: skip
            dbs = base.row.constexprs["DB_SMEM"]
            knobs = {"default": ({}, None), "db_flip": ({"DB_SMEM": not dbs}, None),
                     "masked": ({"EVEN": False}, None), "w8": ({}, 8), "w32": ({}, 32),
                     "noswizzle": ({"DB_SWIZZLE": False}, None)}  # fmt: skip
            if not dbs:
                knobs.pop("noswizzle")
            for name, (cx, warps) in knobs.items():
                warps = warps or base.row.num_warps
                cx = {**base.row.constexprs, **cx, "NUM_WARPS": warps}
                row = dataclasses.replace(base.row, key=base.row.key + (name,), constexprs=cx,
                                          num_warps=warps)  # fmt: skip
                K._PLANS[keys[0]] = dataclasses.replace(base, row=row)
                _time_checked(csv, copy_bw, nb, bwd, ref, f"  gluon N={N:<6} p={p:<4} {name:<12}",
                              part="gluon_knobs", hidden=N, dropout=p, variant=name)  # fmt: skip
            K._PLANS.clear()
        del x, r, dy, s
        torch.cuda.empty_cache()


def contention(csv, N=16384, hogs=8, hog_ms=(0.2, 2.0, 20.0)):
    """The 16384 backward while other kernels hold SMs (as NCCL's do during a DDP backward):
    `hogs` one-thread sleep kernels on side streams, launched just before it, each holding
    an SM's slot for `hog_ms`. The SM-pair kernel needs both programs of a pair resident;
    a program whose partner waits behind a hog spins, then sums the partner's half itself.
    Wall time of the call (events) for: the default (the Gluon kernel where it runs: one
    program per SM, no partner), the pair kernel (default spin, and 2**20 reloads before
    the fallback) and the split backward (no pairing), each alone and behind hogs.
    Run 33: pair 1.70 -> 3.03-3.11 ms behind 8 hogs of 2 or 20 ms, split 1.97 -> 2.30-2.34;
    a cooperative launch (tried in run 32-33) changed nothing."""
    from membound.kernels import add_norm as K
    from membound.kernels.add_norm_config import bwd_config

    x, r, dy = (torch.randn(M, N, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    w = torch.randn(N, device="cuda", dtype=torch.bfloat16)
    _, s, mean, rstd = K.add_norm_fwd(x, w, None, r, None, eps=1e-5, is_rms=False,
                                      dropout_p=P, seed=1)  # fmt: skip

    def call(cfg):
        return K.add_norm_bwd(dy, None, s, mean, rstd, w, is_rms=False, dropout_p=P, seed=1,
                              want_dweight=True, want_dbias=True, dres_dtype=dy.dtype,
                              config=cfg)  # fmt: skip

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
    spin = K.PAIR_SPIN
    pair = bwd_config(M, N)
    for name, cfg, sp in (("default", None, spin), ("pair", pair, spin),
                          ("pair spin20", pair, 1 << 20),
                          ("split", bwd_config(M, 2 * N), spin)):  # fmt: skip
        K.PAIR_SPIN = sp
        K._PLANS.clear()
        try:
            ok = _same(call(cfg), ref)
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
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                call(cfg)
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b))
            ms = statistics.median(times)
            print(f"  contention {name:<10} hogs {hogs} x {hog:4.0f} ms: {ms:8.3f} ms"
                  f"{'' if ok else '  WRONG'}")  # fmt: skip
            csv.add(part="contention", variant=name, hogs=hogs, hog_ms=hog, ms=round(ms, 3),
                    correct=ok)  # fmt: skip
    K.PAIR_SPIN = spin
    K._PLANS.clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--fwd-widths", default="1024,2048,4096,8192,16384")
    ap.add_argument("--bwd-widths", default="1024,4096,16384")
    ap.add_argument("--ln-widths", default="", help="LayerNorm-alone forward sweep widths")
    ap.add_argument("--rms-widths", default="", help="RMSNorm-alone forward sweep widths")
    ap.add_argument("--kernel-only", action="store_true")
    ap.add_argument("--host", action="store_true")
    ap.add_argument("--nograd", action="store_true", help="inference at small sizes")
    ap.add_argument("--split", action="store_true", help="tune the split backward (16384)")
    ap.add_argument("--pair", action="store_true", help="SM-pair vs split backward (16384)")
    ap.add_argument("--contention", action="store_true", help="16384 backward behind hogs")
    ap.add_argument("--gluon", action="store_true", help="the Gluon backward's knobs")
    ap.add_argument("--ko-hidden", default="", help="kernel-only widths (default: all)")
    ap.add_argument("--ko-dtype", choices=["bf16", "fp32"], default="bf16")
    ap.add_argument("--no-compile", action="store_true", help="kernel-only without compile")
    ap.add_argument("--only", default="", help="sweep: comma-separated variant name prefixes")
    ap.add_argument("--csv", default=str(RESULTS_DIR / "add_norm_sweep.csv"))
    args = ap.parse_args(argv)
    global ONLY
    ONLY = tuple(v for v in args.only.split(",") if v)
    if not torch.cuda.is_available():
        print("bench_add_norm_sweep needs a CUDA device.")
        return 0
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    csv = CsvRows(args.csv)
    if args.host:
        host(csv)
    if args.nograd:
        nograd_small(csv, copy_bw)
    if args.split:
        split_pass(csv, copy_bw)
    if args.pair:
        pair_vs_split(csv, copy_bw)
    if args.contention:
        contention(csv)
    if args.gluon:
        gluon_knobs(csv, copy_bw)
    if args.kernel_only:
        shapes = [(2048, 4096)] + [(M, h) for h in (1024, 2048, 4096, 8192, 16384)]
        if args.ko_hidden:
            shapes = [(M, int(h)) for h in args.ko_hidden.split(",")]
        kernel_only(
            csv, copy_bw, shapes, () if args.no_compile else (1024, 4096, 16384),
            {"bf16": torch.bfloat16, "fp32": torch.float32}[args.ko_dtype],
        )  # fmt: skip
    if args.sweep:
        sweep(
            csv, copy_bw, [int(v) for v in args.fwd_widths.split(",") if int(v) > 0],
            [int(v) for v in args.bwd_widths.split(",") if int(v) > 0],
            [int(v) for v in args.ln_widths.split(",") if v and int(v) > 0],
            [int(v) for v in args.rms_widths.split(",") if v and int(v) > 0],
        )  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
