#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one short call (~5 min, any card): graph_step where
# it is predicted large and untimed: examples/real/vit_timm.py --cuda-graphs (timm's ViT-B/16,
# bf16, the whole step captured once and replayed) against its baselines, with diagnose, in
# one call. Every product in one tarball: dec06i.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06i; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
OUT=$W/truth TRUTH_BUDGET_S=${TRUTH_BUDGET_S:-330} \
  TRUTH_ARGS="--fixes ${VIT_FIXES:-cuda-graphs} --no-top-remedy" \
  bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep -A30 "^== vit" | tail -30
grep -v "^step " "${GPU_OUT:-/tmp/gpu_out}/truth-work/logs/vit_timm.cuda-graphs.log" 2>/dev/null | tail -8
tar -czf "$DEST/dec06i.tgz" -C /tmp dec06i
echo "session done in $(( $(date +%s) - t0 )) s"
