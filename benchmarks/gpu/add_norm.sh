#!/usr/bin/env bash
# add_norm on the H200 (at most ~240 s): GPU tests (70 s), main benchmark bf16 (65 s), launch
# overhead (20 s), launch-config variants (43 s), main benchmark fp32 (20 s), precision
# experiment (18 s); then the config-variant, launch-overhead and summary tables.
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
timeout 70 python -m pytest -q -m gpu -p no:cacheprovider tests/kernels tests/nn --maxfail=8 \
  > "$OUTDIR/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "^(FAILED|ERROR)" "$OUTDIR/tests.log" | cut -c1-160
tail -n 1 "$OUTDIR/tests.log" | cut -c1-200

echo "=== bench_add_norm bf16 (eager, torch.compile, liger if importable)"
timeout 65 python benchmarks/bench_add_norm.py --dtypes bf16 --csv "$OUTDIR/bench_add_norm.csv" \
  > "$OUTDIR/bench_add_norm.log" 2>&1
echo "bench bf16 rc=$? $(el)"
grep -E "^(SKIP|FAIL|copy|liger)" "$OUTDIR/bench_add_norm.log" | cut -c1-200

echo "=== launch overhead (host us per call, tiny tensor)"
timeout 20 python benchmarks/bench_add_norm_launch.py --csv "$OUTDIR/launch.csv" \
  > "$OUTDIR/launch.log" 2>&1
echo "launch rc=$? $(el)"

echo "=== launch-config variants"
timeout 43 python benchmarks/bench_add_norm.py --shapes none --configs \
  --csv "$OUTDIR/configs_unused.csv" > "$OUTDIR/configs.log" 2>&1
echo "configs rc=$? $(el)"
grep -E "^  (fwd|bwd)" "$OUTDIR/configs.log" | awk '!seen[$0]++' > "$OUTDIR/configs.txt"

echo "=== bench_add_norm fp32 (as many shapes as fit)"
timeout 20 python benchmarks/bench_add_norm.py --dtypes fp32 --csv "$OUTDIR/bench_add_norm.csv" \
  > "$OUTDIR/bench_add_norm_fp32.log" 2>&1
echo "bench fp32 rc=$? $(el)"

echo "=== bench_precision"
timeout 18 python benchmarks/bench_precision.py --csv "$OUTDIR/bench_precision.csv" \
  > "$OUTDIR/bench_precision.log" 2>&1
echo "precision rc=$? $(el)"
grep -vE "^CSV" "$OUTDIR/bench_precision.log" | cut -c1-200

echo "=== launch-config variants (ms, fraction of copy; fwd 4 tensors, bwd 4 tensors)"
cat "$OUTDIR/configs.txt"
echo "=== launch overhead (us per call; host-bound at this size)"
grep -E "^  (launch|suggested)" "$OUTDIR/launch.log" || tail -n 5 "$OUTDIR/launch.log"
echo "=== summary $(el): fraction of copy bandwidth; speedup vs eager/compile"
python - "$OUTDIR/bench_add_norm.csv" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError:
    sys.exit("no bench_add_norm.csv")
get = {(r["op"], r["direction"], r["dtype"], r["rows"], r["hidden"], r["variant"]): r for r in rows}
shapes = sorted({(r["dtype"], int(r["rows"]), int(r["hidden"])) for r in rows})
print(f"{'dtype':<5}{'rows':>6}{'H':>6} | fwd mb  eag  cmp  xE   xC | f+b mb  eag  cmp  xE   xC | LN fwd mb liger | ms fwd mb")
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
    print(line + f" | {ms}")
PY
echo "targets (bf16): fwd >= 0.85, fwd+bwd >= 0.70 of copy. total $(el)"
