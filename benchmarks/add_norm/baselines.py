"""Fused residual add + dropout + LayerNorm vs eager, torch.compile and liger-kernel.

Rows (`results/add_norm/baselines.csv`, or `--csv`): variant, op, direction, dtype, rows, hidden, bytes, flops, ms, GB/s,
fraction_of_copy (copy bandwidth measured in the same run), speedup_vs_eager/compile (all by
do_bench, the host in the loop), gpu_ms and gpu_fraction_of_copy (CUDA-graph replay: the
GPU's time alone; small and mid shapes are bound by the host's launch and autograd cost).

Bytes are the issue's minimal counts: fused forward reads x and residual and writes y and s
(4 tensors), fused backward reads dy and s and writes dx (3 tensors); plain norm forward 2
tensors, backward 3. (With dropout and a residual that needs grad, the backward must also
write dresidual != dx: 4 tensors, so the reachable fraction of fwd+bwd is 7/8.)

The baseline function has membound's semantics: s = dropout(x) + r; y = layer_norm(s);
returns (y, s). Each shape is verified against eager (dropout off) before it is timed.

    PYTHONPATH=src python benchmarks/add_norm/baselines.py [--shapes small] [--configs] [--run N]
    PYTHONPATH=src python benchmarks/add_norm/baselines.py --dtypes bf16,fp32 --lean  # GPU script
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from _common import (
    P,
    bench_ms,
    copy_bandwidth,
    eager_fused,
    kernels_always,
    membound_fused,
    open_csv,
    parser,
)

from membound.nn.functional import add_norm

P_DROP = P
# shorter than the harness default: ~150 timings must fit the GPU script's time budget
# (run 1 timed out at 110 s with 10/50 ms: do_bench's L2 flush per rep adds ~1/3 on top)
# (run 2 timed out at 65 s with 25 ms: the GPU script now gives the whole bf16 table ~85 s)
TIMING = {"warmup_ms": 3, "rep_ms": 10}
# the small shape first: it is cheap and a timeout must not cut it
FULL = [(2048, 4096)] + [(32768, h) for h in (1024, 2048, 4096, 8192, 16384)]
#: torch.compile's fwd+bwd baseline (a second, backward compile) only at these widths
COMPILE_BWD_H = (4096, 16384)
SHAPES = {
    "full": FULL,
    "small": [(2048, 4096), (32768, 4096)],
    "tiny": [(64, 256)],  # CPU smoke test of this script (TRITON_INTERPRET=1)
    "none": [],  # only --configs
}
DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}


def _liger():
    try:
        from liger_kernel.ops.layer_norm import LigerLayerNormFunction
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction
    except Exception:
        return None
    return {
        "layer": lambda x, w, b: LigerLayerNormFunction.apply(x, w, b, 1e-5),
        "rms": lambda x, w, b: LigerRMSNormFunction.apply(x, w, 1e-5),
    }


def plain_fns(norm: str, compiled: bool, liger):
    if norm == "layer":
        eager = lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)
        mb = lambda x, w, b: add_norm(x, w, b, eps=1e-5)
    else:
        eager = lambda x, w, b: F.rms_norm(x, (x.shape[-1],), w, 1e-5)
        mb = lambda x, w, b: add_norm(x, w, None, norm="rms", eps=1e-5)
    fns = {"membound": mb, "eager": eager}
    if compiled:
        fns["compile"] = torch.compile(eager, dynamic=False)
    if liger is not None:
        fns["liger"] = liger[norm]
    return fns


def _timed(fn, args, dy, direction) -> tuple[float, float | None]:
    """(ms with the host in the loop (do_bench), GPU ms (CUDA-graph replay, None where the
    call cannot be captured or there is no GPU)) of forward (grad-enabled, as in training) or
    forward+backward. The backward uses autograd.grad: no .grad accumulation kernels
    inflating every variant's time. The two differ where the host's launch and autograd
    cost exceeds the GPU's work (small and mid shapes): the first is what an eager training
    loop sees, the second what the kernels move (and what a CUDA-graphed step sees)."""
    if direction == "fwd":

        def step():
            fn(*args)
    else:
        leaves = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

        def step():
            out = fn(*args)
            y = out[0] if isinstance(out, tuple) else out
            torch.autograd.grad(y, leaves, dy, allow_unused=True)

    ms = bench_ms(step, **TIMING)
    gpu = None
    if dy.is_cuda:
        from membound.device.timing import cuda_graph_median_ms

        try:
            gpu = cuda_graph_median_ms(step, reps=10, samples=5)  # as --kernel-only
        except Exception as e:  # noqa: BLE001 - not capturable: leave the column empty
            print(f"no GPU time for {getattr(fn, '__name__', fn)}: {type(e).__name__}", flush=True)
            torch.cuda.synchronize()
    return ms, gpu


def _verify(fns, args, plain: bool) -> str | None:
    """Compare every variant with eager (dropout off); None if all agree."""
    want = fns["eager"](*args) if plain else fns["eager"](*args, 0.0)
    want = want[0] if isinstance(want, tuple) else want
    for name, fn in fns.items():
        got = fn(*args) if plain else fn(*args, 0.0)
        # again: membound's second call per shape takes the cached direct launch
        got = fn(*args) if plain else fn(*args, 0.0)
        got = got[0] if isinstance(got, tuple) else got
        err = (got.float() - want.float()).abs().max().item()
        rel = 2e-2 if want.dtype == torch.bfloat16 else 1e-3  # one bf16 ulp is 2**-8 relative
        if not err <= rel * max(1.0, want.float().abs().max().item()):
            return f"{name} differs from eager by {err:.3g}"
    return None


def bench_shape(out, copy_bw, dev, dtype_name, M, N, compiled, liger, table, lean=False):
    dtype = DTYPES[dtype_name]
    el = torch.tensor([], dtype=dtype).element_size()
    x = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True)
    r = torch.randn(M, N, device=dev, dtype=dtype, requires_grad=True)
    w = torch.randn(N, device=dev, dtype=dtype, requires_grad=True)
    b = torch.randn(N, device=dev, dtype=dtype, requires_grad=True)
    dy = torch.randn(M, N, device=dev, dtype=dtype)
    groups = [("add+dropout+layer", {"membound": membound_fused, "eager": eager_fused}, False)]
    from membound.nn import add_norm_op

    if dev == "cuda" and M * N <= add_norm_op.EAGER_MAX_ELEMS:  # size rule chose eager ops
        groups[0][1]["mb_kernel"] = kernels_always(membound_fused)
    if compiled:
        # static shapes per shape (as a fixed-shape training run would see); a fresh cache per
        # shape so recompile limits never silently fall back to eager
        torch._dynamo.reset()
        groups[0][1]["compile"] = torch.compile(eager_fused, dynamic=False)
    if dtype_name == "bf16" and not lean:
        for norm in ("layer", "rms"):
            groups.append(
                (f"{norm}norm", plain_fns(norm, compiled and norm == "layer", liger), True)
            )
    elif dtype_name == "bf16" and liger is not None:  # lean: plain LN / RMSNorm vs liger, fwd
        for norm in ("layer", "rms"):
            groups.append((f"{norm}norm", plain_fns(norm, False, liger), True))
    for op, fns, plain in groups:
        args = (x, w, b) if plain else (x, r, w, b)
        problem = _verify(fns, args, plain)
        if problem:
            print(f"SKIP {op} {dtype_name} {M}x{N}: {problem}", flush=True)
            continue
        call_args = args if plain else (*args, P_DROP)
        fwd_tensors, bwd_tensors = (2, 3) if plain else (4, 3)
        for direction, tensors in (("fwd", fwd_tensors), ("fwd+bwd", fwd_tensors + bwd_tensors)):
            nbytes = tensors * M * N * el + 2 * N * el
            ms = {}
            for name, fn in fns.items():
                if direction != "fwd" and (
                    (name == "compile" and N not in COMPILE_BWD_H) or (lean and plain)
                ):
                    continue
                try:
                    ms[name] = _timed(fn, call_args, dy, direction)
                except Exception as e:  # one failing baseline must not stop the run
                    print(f"FAIL {name} {op} {direction}: {type(e).__name__}: {e}", flush=True)
            host = {k: v[0] for k, v in ms.items()}
            for name, (t, gpu) in ms.items():
                gbs = nbytes / (t / 1e3) / 1e9
                row = out.add(
                    variant=name, op=op, direction=direction, dtype=dtype_name, rows=M, hidden=N,
                    bytes=nbytes, flops=(8 if direction == "fwd" else 20) * M * N, ms=round(t, 5),
                    **{"GB/s": round(gbs, 1)},
                    fraction_of_copy=round(gbs * 1e9 / copy_bw, 3),
                    speedup_vs_eager=round(host["eager"] / t, 2) if "eager" in host else "",
                    speedup_vs_compile=round(host["compile"] / t, 2) if "compile" in host else "",
                    gpu_ms=round(gpu, 5) if gpu else "",
                    gpu_fraction_of_copy=round(nbytes / (gpu / 1e3) / copy_bw, 3) if gpu else "",
                )  # fmt: skip
                table.append(row)
                print(_fmt(row), flush=True)
            if dev == "cuda":
                torch.cuda.synchronize()


def _fwd_call(cfg, x, w, b, r, p=P_DROP):
    from membound.kernels.add_norm import add_norm_fwd

    return add_norm_fwd(x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=p, seed=1, config=cfg)


def _bwd_call(cfg, dy, s, mean, rstd, w):
    from membound.kernels.add_norm import add_norm_bwd

    return add_norm_bwd(
        dy, None, s, mean, rstd, w, is_rms=False, dropout_p=P_DROP, seed=1, want_dweight=True,
        want_dbias=True, dres_dtype=dy.dtype, config=cfg,
    )  # fmt: skip


def bench_configs(copy_bw, dev, widths=(1024, 4096, 16384), M=32768) -> list[str]:
    """Forward/backward launch-config variants (bf16, residual + dropout): the numbers to
    choose defaults in kernels/add_norm/config.py from one run. Returns printable lines."""
    from membound.kernels.add_norm import LaunchConfig, bwd_config, fwd_config

    lines = [f"launch-config variants (bf16, {M} rows, residual+dropout): ms, fraction of copy"]
    for N in widths:
        x, r, dy = (torch.randn(M, N, device=dev, dtype=torch.bfloat16) for _ in range(3))
        w, b = torch.randn(N, device=dev), torch.randn(N, device=dev)
        bn = max(8, 1 << (N - 1).bit_length())
        f0, b0 = fwd_config(M, N), bwd_config(M, N)
        # most informative first: the script's timeout may cut the tail (~1.5 s compile each).
        # Run 3 tests the rule "8 elements per thread (one 16-byte bf16 vector), many warps
        # resident": one tile at 4096 with 16/8/4 elements per thread (w8/w16/w32), more
        # programs per SM; the one-tile kernel at 8192+ with 16 warps and 32 warps
        bm = 1 if f0.chunked else f0.block_m
        one = functools.partial(LaunchConfig, bm, bn, chunked=False)
        fwd = {"default": f0, "default_nodrop": f0}
        if N <= 4096:  # default: one tile, 16 warps (8 elements per thread)
            fwd["w8"] = one(num_warps=8, programs_per_sm=2)
            fwd["w32"] = one(num_warps=32, programs_per_sm=2)
            fwd["w16_p4"] = one(num_warps=16, programs_per_sm=4)
        else:  # default: chunks of 4096, 8 warps, 8 programs/SM
            fwd["one_tile_w16"] = one(num_warps=16, programs_per_sm=2)
            fwd["one_tile_w32"] = one(num_warps=32, programs_per_sm=2)
            fwd["chunked4096_w16_p4"] = LaunchConfig(1, 4096, 16, True, 4)
            fwd["chunked2048_w8_p8"] = LaunchConfig(1, 2048, 8, True, 8)
            fwd["chunked4096_w8_p4"] = LaunchConfig(1, 4096, 8, True, 4)
        bwd = {"default": b0}
        if not b0.chunked and b0.num_warps * 2 <= 32:
            bwd[f"w{b0.num_warps * 2}_p{max(1, b0.programs_per_sm // 2)}"] = LaunchConfig(
                b0.block_m, bn, b0.num_warps * 2, False, max(1, b0.programs_per_sm // 2)
            )
        _, s, mean, rstd = _fwd_call(f0, x, w, b, r)
        nbytes = 4 * M * N * 2  # fwd: x, r read, y, s written; bwd: dy, s read, dx, dres written
        for direction, variants in (("fwd", fwd), ("bwd", bwd)):
            for name, cfg in variants.items():
                call = (
                    functools.partial(
                        _fwd_call, cfg, x, w, b, r, 0.0 if "nodrop" in name else P_DROP
                    )
                    if direction == "fwd"
                    else functools.partial(_bwd_call, cfg, dy, s, mean, rstd, w)
                )
                try:
                    t = bench_ms(call, **TIMING)
                    frac = nbytes / (t / 1e3) / copy_bw
                    c = f"bm{cfg.block_m} bn{cfg.block_n} w{cfg.num_warps} pps{cfg.programs_per_sm} st{cfg.num_stages}"
                    lines.append(f"  {direction} H={N:<6} {name:<21}{t:9.4f} ms {frac:6.3f}  {c}")
                except Exception as e:
                    lines.append(f"  {direction} H={N} {name}: {type(e).__name__}: {e}")
                print(lines[-1], flush=True)
    return lines


_HEAD = f"{'op':<18}{'dir':<8}{'dtype':<6}{'rows':>6}{'H':>6} {'variant':<9}{'ms':>9}{'copy%':>7}{'x eager':>8}{'x comp':>8}"


def _fmt(r) -> str:
    gpu = r.get("gpu_fraction_of_copy")
    return (
        f"{r['op']:<18}{r['direction']:<8}{r['dtype']:<6}{r['rows']:>6}{r['hidden']:>6} "
        f"{r['variant']:<9}{r['ms']:>9.4f}{100 * r['fraction_of_copy']:>6.1f}%"
        f"{r['speedup_vs_eager']!s:>8}{r['speedup_vs_compile']!s:>8}"
        + (f"  gpu {r['gpu_ms']:.4f} {100 * gpu:5.1f}%" if gpu else "")
    )


def print_table(rows) -> None:
    print("\n" + _HEAD)
    for r in rows:
        print(_fmt(r))


def main(argv=None) -> int:
    ap = parser(__doc__, "baselines")
    ap.add_argument("--shapes", choices=sorted(SHAPES), default="full")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile baselines")
    ap.add_argument("--configs", action="store_true", help="also time launch-config variants")
    ap.add_argument(
        "--lean",
        action="store_true",
        help="GPU-script mode: fused op + plain LN/RMSNorm fwd vs liger",
    )
    args = ap.parse_args(argv)
    tiny = not torch.cuda.is_available()  # CPU smoke test: tiny sizes only
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cpu" and args.shapes not in ("tiny", "none"):
        print("baselines.py needs a CUDA device (or --shapes tiny to smoke-test on CPU).")
        return 0
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    liger = _liger()
    print("liger-kernel:", "importable" if liger else "not importable (rows skipped)")
    out = open_csv(args)
    print(_HEAD)
    table: list[dict] = []
    for dtype_name in args.dtypes.split(","):
        for M, N in SHAPES[args.shapes]:
            try:
                bench_shape(
                    out, copy_bw, dev, dtype_name, M, N, not args.no_compile, liger, table,
                    args.lean,
                )  # fmt: skip
            except Exception as e:
                print(f"FAIL shape {dtype_name} {M}x{N}: {type(e).__name__}: {e}", flush=True)
            if dev == "cuda":
                torch.cuda.empty_cache()
    config_lines = []
    if args.configs:
        widths, rows = ((64, 256), 64) if tiny else ((4096, 8192, 16384), 32768)
        config_lines = bench_configs(copy_bw, dev, widths, rows)
    print_table(table)
    print("\n" + "\n".join(config_lines))
    print(f"\nCSV: {args.csv}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
