#!/usr/bin/env bash
# 2026-12-02 (second session), call 2: the ceilings with the read-mix pass as JSON (a CPU
# fixture), then truth by intervention on the sync fixes that host-sync now predicts by
# replay (analysis/replay.py), on fresh runs: the predictions come from this code, before
# the fixes are measured. Products under $OUT: ceilings.json, roofline.txt, and truth.sh's.
source "$(dirname "$0")/_session.sh"
MEMBOUND_CACHE_DIR=/tmp/mb-cache COLUMNS=120 timeout 90 python -m membound roofline --refresh \
  --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? $(grep -c . "$DEST/roofline.txt") lines"
TRUTH_ARGS="--fixes log-every-100,no-nan-inf-filter,logging-steps-1000,refresh-rate-100 --extra-baselines 2" \
  TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-470}" bash benchmarks/gpu/truth.sh gpt2,lightning_fit,hf_trainer_llama
