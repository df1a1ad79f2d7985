#!/usr/bin/env bash
# 2026-12-02 (third session), call 2: the matmul ceilings with burst timings and the deep-k
# shape (`membound roofline`, as JSON: the new CPU fixture), the GPU timing tests, then
# truth by intervention with those ceilings: eager GPT-2's bf16 storage and compile, and
# compiled GPT-2's CUDA graphs (its top finding in call 1 was launch-bound).
# Products under $OUT: ceilings.json, roofline.txt, tests.log, truth-*/ from truth.sh.
source "$(dirname "$0")/_session.sh"
MEMBOUND_CACHE_DIR=/tmp/mb-cache COLUMNS=130 timeout 150 python -m membound roofline --refresh \
  --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - t0 )) s"; head -20 "$DEST/roofline.txt"
[ -s "$DEST/ceilings.json" ] && cp "$DEST/ceilings.json" benchmarks/results/h200_ceilings.json
timeout 60 python -m pytest -m gpu tests/device/test_timing.py -q -p no:cacheprovider > "$DEST/tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$DEST/tests.log"
OUT="$DEST/truth-a" TRUTH_ARGS="--fixes bf16-weights,compile" TRUTH_BUDGET_S=220 \
  bash benchmarks/gpu/truth.sh gpt2 | grep -v "^\[truth\] .*start"
OUT="$DEST/truth-b" TRUTH_ARGS="--fixes reduce-overhead" TRUTH_BUDGET_S=190 \
  bash benchmarks/gpu/truth.sh gpt2_compiled | grep -v "^\[truth\] .*start"
echo "session done in $(( $(date +%s) - t0 )) s"
