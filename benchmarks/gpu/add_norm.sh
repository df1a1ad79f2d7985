#!/usr/bin/env bash
# add_norm on the H200 (at most 240 s): GPU tests (70 s), the main benchmark (110 s), launch-config
# variants (35 s), the precision experiment (25 s); then a compact summary (last lines of the log).
# Run from anywhere: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/add_norm.sh
set +e
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUTDIR="${GPU_OUT:-/tmp/gpu_out}/add_norm"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/bench_add_norm.csv "$OUTDIR"/bench_precision.csv
t0=$(date +%s)

echo "=== gpu tests"
timeout 70 python -m pytest -q -m gpu -p no:cacheprovider tests/kernels tests/nn --maxfail=5 \
  > "$OUTDIR/tests.log" 2>&1
echo "tests rc=$? ($(( $(date +%s) - t0 ))s)"; tail -n 4 "$OUTDIR/tests.log" | cut -c1-200

echo "=== bench_add_norm (eager, torch.compile, liger if importable)"
timeout 110 python benchmarks/bench_add_norm.py --csv "$OUTDIR/bench_add_norm.csv" \
  > "$OUTDIR/bench_add_norm.log" 2>&1
echo "bench rc=$? ($(( $(date +%s) - t0 ))s)"
grep -E "^(SKIP|FAIL|copy|liger)" "$OUTDIR/bench_add_norm.log" | cut -c1-200

echo "=== launch-config variants"
timeout 35 python benchmarks/bench_add_norm.py --shapes none --configs \
  --csv "$OUTDIR/configs_unused.csv" > "$OUTDIR/configs.log" 2>&1
echo "configs rc=$? ($(( $(date +%s) - t0 ))s)"
grep -E "^  (fwd|bwd)" "$OUTDIR/configs.log" | awk '!seen[$0]++' > "$OUTDIR/configs.txt"
cat "$OUTDIR/configs.txt"

echo "=== bench_precision"
timeout 25 python benchmarks/bench_precision.py --csv "$OUTDIR/bench_precision.csv" \
  > "$OUTDIR/bench_precision.log" 2>&1
echo "precision rc=$? ($(( $(date +%s) - t0 ))s)"
grep -vE "^CSV" "$OUTDIR/bench_precision.log" | cut -c1-200

echo "=== summary ($(( $(date +%s) - t0 ))s): fraction of copy bandwidth; speedup vs eager/compile"
python - "$OUTDIR/bench_add_norm.csv" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except OSError:
    sys.exit("no bench_add_norm.csv")
get = {(r["op"], r["direction"], r["dtype"], r["rows"], r["hidden"], r["variant"]): r for r in rows}
shapes = sorted({(r["dtype"], int(r["rows"]), int(r["hidden"])) for r in rows})
print(f"{'dtype':<5}{'rows':>6}{'H':>6} | fwd mb  eag  cmp  xE   xC | f+b mb  eag  cmp  xE   xC | LN fwd mb liger")
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
    print(line)
PY
echo "targets (bf16): fwd >= 0.85, fwd+bwd >= 0.70 of copy. total $(( $(date +%s) - t0 ))s"
