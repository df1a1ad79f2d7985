#!/usr/bin/env bash
# add_norm on the H200 (~5 min): GPU tests; host-time split of one fwd+bwd; inference at
# small sizes; launch-config sweeps by GPU time ($SWEEP_FWD / $SWEEP_BWD widths, default
# none); eager / compile / membound by GPU time (CUDA-graph replay) and by do_bench (host
# included); the main benchmark CSV (bf16 and fp32 or $BENCH_DTYPES, --lean: plain
# LN/RMSNorm fwd vs liger; off with SKIP_BENCH=1); Gluon vs SM-pair vs split backward at
# 16384 and the Gluon kernel's knobs;
# the precision experiment (off with SKIP_PRECISION=1). SWEEP_ONLY: variant name prefixes.
# One script per experiment under benchmarks/add_norm/, each CSV under $GPU_OUT/add_norm/ named
# like its script; MEMBOUND_BENCH_RUN=<n> stamps every row with the run number (append them to
# benchmarks/results/ with `python benchmarks/merge_results.py $GPU_OUT/add_norm
# benchmarks/results/add_norm`).
# Run from anywhere: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/add_norm.sh
set +e
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUTDIR="${GPU_OUT:-/tmp/gpu_out}/add_norm"
mkdir -p "$OUTDIR"
rm -f "$OUTDIR"/*.csv
t0=$(date +%s)
el() { echo "($(( $(date +%s) - t0 ))s)"; }
B=benchmarks/add_norm

echo "=== gpu tests"
timeout 90 python -m pytest -q -m gpu -p no:cacheprovider tests/kernels tests/nn \
  tests/device/test_timing.py --maxfail=8 > "$OUTDIR/tests.log" 2>&1
echo "tests rc=$? $(el)"; grep -E "^(FAILED|ERROR)" "$OUTDIR/tests.log" | cut -c1-160
tail -n 1 "$OUTDIR/tests.log" | cut -c1-200

echo "=== host time of one fwd+bwd (8x1024 bf16), split at our backward's entry and exit"
timeout 45 python $B/host.py --csv "$OUTDIR/host.csv" 2>&1 | grep -E "^  host"

echo "=== 16384 backward: default (Gluon) vs SM-pair vs split, bf16 and fp32, dropout 0.1 and 0"
timeout 90 python $B/pair.py --csv "$OUTDIR/pair.csv" 2>&1 | grep -E "^  bwd"

echo "=== the Gluon backward's knobs at 16384 and 12288 (GPU time)"
timeout 90 python $B/gluon.py --csv "$OUTDIR/gluon.csv" 2>&1 | grep -E "^  gluon"

echo "=== inference (no grad) at small sizes: eager ops vs the kernels vs the eager-ops path"
timeout 45 python $B/nograd.py --csv "$OUTDIR/nograd.csv" 2>&1 | grep -vE "^copy"

if [ -n "$SWEEP_FWD$SWEEP_BWD" ]; then
  echo "=== launch-config sweep by GPU time (fwd: $SWEEP_FWD; bwd: $SWEEP_BWD)"
  timeout "${SWEEP_TIMEOUT:-120}" python $B/sweep.py --fwd-widths "${SWEEP_FWD:-0}" \
    --bwd-widths "${SWEEP_BWD:-0}" --only "${SWEEP_ONLY:-}" --csv "$OUTDIR/sweep.csv" \
    > "$OUTDIR/sweep.log" 2>&1
  echo "sweep rc=$? $(el)"; grep -vE "Error" "$OUTDIR/sweep.log" | grep -vE "^copy"
fi

echo "=== GPU time (graph replay) vs do_bench (host included), bf16, fraction of copy"
timeout "${KO_TIMEOUT:-160}" python $B/kernel_only.py --csv "$OUTDIR/kernel_only.csv" > "$OUTDIR/kernel_only.log" 2>&1
echo "kernel-only rc=$? $(el)"; grep -vE "^copy" "$OUTDIR/kernel_only.log"

if [ -z "$SKIP_BENCH" ]; then
echo "=== baselines ${BENCH_DTYPES:=bf16,fp32} --lean (CSV; plain LN and RMSNorm fwd vs liger)"
timeout 200 python $B/baselines.py --dtypes "$BENCH_DTYPES" --lean \
  --csv "$OUTDIR/baselines.csv" > "$OUTDIR/baselines.log" 2>&1
echo "bench rc=$? $(el)"; grep -E "^(SKIP|FAIL|copy|liger|add|layernorm|rmsnorm)" "$OUTDIR/baselines.log" | sort -u | cut -c1-200

fi

if [ -z "$SKIP_PRECISION" ]; then
echo "=== precision experiment (LN 32768x4096)"
timeout 60 python benchmarks/bench_precision.py --csv "$OUTDIR/precision.csv" \
  > "$OUTDIR/precision.log" 2>&1
echo "precision rc=$? $(el)"; tail -n 14 "$OUTDIR/precision.log" | cut -c1-160
fi
echo "total $(el)"
