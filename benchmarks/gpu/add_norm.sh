#!/usr/bin/env bash
# add_norm on the H200 (at most ~235 s): GPU tests (75 s; tests/nn has no GPU tests), main
# benchmark bf16 --lean (85 s), launch overhead + profiler table (25 s), launch-config
# variants (47 s); then the config-variant, launch-overhead and summary tables.
# Run from anywhere: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/add_norm.sh
set +e
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUTDIR="${GPU_OUT:-/tmp/gpu_out}/add_norm"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/bench_add_norm.csv "$OUTDIR"/bench_precision.csv "$OUTDIR"/launch.csv
t0=$(date +%s)
el() { echo "($(( $(date +%s) - t0 ))s)"; }

echo "=== gpu tests"
timeout 75 python -m pytest -q -m gpu -p no:cacheprovider tests/kernels --maxfail=8 --durations=5 \
  > "$OUTDIR/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "^(FAILED|ERROR)" "$OUTDIR/tests.log" | cut -c1-160
tail -n 1 "$OUTDIR/tests.log" | cut -c1-200

echo "=== bench_add_norm bf16 --lean (small shape first; eager, compile, membound, liger LN fwd)"
timeout 85 python benchmarks/bench_add_norm.py --dtypes bf16 --lean \
  --csv "$OUTDIR/bench_add_norm.csv" > "$OUTDIR/bench_add_norm.log" 2>&1
echo "bench bf16 rc=$? $(el)"
grep -E "^(SKIP|FAIL|copy|liger)" "$OUTDIR/bench_add_norm.log" | cut -c1-200

echo "=== launch overhead (host us per call, tiny tensor; + profiler table of fwd+bwd)"
timeout 25 python benchmarks/bench_add_norm_launch.py -n 200 --csv "$OUTDIR/launch.csv" \
  > "$OUTDIR/launch.log" 2>&1
echo "launch rc=$? $(el)"

echo "=== launch-config variants (H = 4096, 8192, 16384)"
timeout 47 python benchmarks/bench_add_norm.py --shapes none --configs \
  --csv "$OUTDIR/configs_unused.csv" > "$OUTDIR/configs.log" 2>&1
echo "configs rc=$? $(el)"
grep -E "^  (fwd|bwd)" "$OUTDIR/configs.log" | awk '!seen[$0]++' > "$OUTDIR/configs.txt"
# fp32 table and bench_precision: measured in runs 1-2, left out to fit the time budget

echo "=== launch-config variants (ms, fraction of copy; fwd 4 tensors, bwd 4 tensors)"
cat "$OUTDIR/configs.txt"
echo "=== launch overhead (us per call; host-bound at this size)"
grep -E "^  (launch|suggested|python)" "$OUTDIR/launch.log" || tail -n 5 "$OUTDIR/launch.log"
echo "--- profiler, 10 x fwd+bwd (top by CPU total)"
sed -n '/^=== profile/,/^=== end profile/p' "$OUTDIR/launch.log" | head -n 24 | cut -c1-150
echo "=== summary $(el): fraction of copy bandwidth; speedup vs eager/compile"
python - "$OUTDIR/bench_add_norm.csv" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError:
    sys.exit("no bench_add_norm.csv")
get = {(r["op"], r["direction"], r["dtype"], r["rows"], r["hidden"], r["variant"]): r for r in rows}
shapes = sorted({(r["dtype"], int(r["rows"]), int(r["hidden"])) for r in rows})
print(f"{'dtype':<5}{'rows':>6}{'H':>6} | fwd mb  eag  cmp  xE   xC | f+b mb  eag  cmp  xE   xC | LN fwd mb liger | ms fwd mb | kernel-only fwd f+b")
for dt, m, h in shapes:
    line = f"{dt:<5}{m:>6}{h:>6} |"
    for d in ("fwd", "fwd+bwd"):
        k = ("add+dropout+layer", d, dt, str(m), str(h))
        f = lambda v: f"{float(get[k + (v,)]['fraction_of_copy']):4.2f}" if k + (v,) in get else "  - "
        mb = get.get(k + ("membound",), {})
        line += f" {f('membound')} {f('eager')} {f('compile')} {mb.get('speedup_vs_eager', '-'):>4} {mb.get('speedup_vs_compile', '-'):>4} |"
    k = ("layernorm", "fwd", dt, str(m), str(h))
    for v in ("membound", "liger"):
        line += f" {float(get[k + (v,)]['fraction_of_copy']):4.2f}" if k + (v,) in get else "   -"
    ms = get.get(("add+dropout+layer", "fwd", dt, str(m), str(h), "membound"), {}).get("ms", "-")
    kk = ("add+dropout+layer", "fwd", dt, str(m), str(h), "mb_kernel")
    kb = ("add+dropout+layer", "fwd+bwd", dt, str(m), str(h), "mb_kernel")
    kern = " ".join(f"{float(get[k]['fraction_of_copy']):4.2f}" if k in get else "-" for k in (kk, kb))
    print(line + f" | {ms} | {kern}")
PY
echo "targets (bf16): fwd >= 0.85, fwd+bwd >= 0.70 of copy. total $(el)"
