#!/usr/bin/env bash
# Prepared 2026-12-05 (sixth session) for the next call, best on an H200 (~9 min):
# 1. issue 16, the same-call roofline check on the H200: `membound roofline --refresh` (the
#    cast fp32 -> bf16 in the 2:1 pass, never timed on an H200; the per-step seconds), then
#    planted loops and the compiled DCGAN under `membound diagnose` with those ceilings, then
#    benchmarks/check_over_roof.py over those traces and over every recorded H200 fixture;
# 2. issue 15, the T5's bf16/TF32 miss (15.96 ms/step predicted, 2.65 and 4.55 measured once
#    each on the H200): bench_truth's tf32, bf16 and torch-compile fixes in two rounds, the
#    diagnose run now carrying the training thread's CPU a step (median) beside the GPU
#    what-if's floor. Skipped when less than 200 s are left.
# Every product in one tarball (a call brings back at most 8 files): next.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/next; mkdir -p $W/same
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee $W/gpu.txt
refresh_ceilings $W/ceilings.json $W/roofline.txt; head -20 $W/roofline.txt
mkdir -p $W/same/dcgan_compiled
for s in healthy fp32_storage unfused_chain memory_bound_op small_block fp32_matmul; do
  mkdir -p $W/same/$s; r0=$(date +%s)
  timeout 45 python -m membound diagnose --ceilings $W/ceilings.json --no-annotate --wait 2 --warmup 2 \
    --steps 4 --stop-after-capture --out $W/same/$s --json $W/same/$s/report.json -- \
    examples/planted/$s.py > $W/same/$s.log 2>&1
  echo "$s rc=$? in $(( $(date +%s) - r0 )) s"
done
r0=$(date +%s)
timeout 170 python -m membound diagnose --ceilings $W/ceilings.json --no-annotate --wait 12 --steps 5 \
  --out $W/same/dcgan_compiled --json $W/same/dcgan_compiled/report.json -- python \
  examples/real/dcgan.py --compile --steps 40 --warmup-steps 0 > $W/same/dcgan_compiled.log 2>&1
echo "dcgan_compiled rc=$? in $(( $(date +%s) - r0 )) s"
timeout 100 python benchmarks/check_over_roof.py $W/ceilings.json --fixtures $W/same \
  --glob "*/trace.json.gz" --top 10 > $W/over_roof_same.txt 2>&1
echo "same-call check rc=$?"; tail -14 $W/over_roof_same.txt
if grep -q H200 $W/gpu.txt; then
  timeout 200 python benchmarks/check_over_roof.py $W/ceilings.json --top 10 > $W/over_roof_fixtures.txt 2>&1
  echo "recorded H200 fixtures rc=$?"; tail -14 $W/over_roof_fixtures.txt
fi
budget=$(( ${TOTAL_S:-560} - ($(date +%s) - t0) - 40 ))
if [ "$budget" -gt 200 ]; then
  OUT=$W/t5 TRUTH_BUDGET_S=$budget TRUTH_ARGS="--fixes tf32,bf16,torch-compile --rounds 2" \
    bash benchmarks/gpu/truth.sh t5_seq2seq 2>&1 | grep -v "^\[truth\].*start" | tail -30
else
  echo "T5 truth skipped: $budget s left"
fi
find $W -name "trace.ops.json.gz" -size +20M -delete
tar -czf "$DEST/next.tgz" -C /tmp next
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
