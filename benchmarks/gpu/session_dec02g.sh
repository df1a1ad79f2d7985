#!/usr/bin/env bash
# 2026-12-02 (second session), call 3: the ceilings with every HBM pass the best of its
# kernels (device.measure.HBM_KERNELS) as JSON (a CPU fixture), the GPU tests of device/,
# then truth by intervention for torch.compile on the fp32 ResNet-50 (run 3 had no budget
# left for it). Products under $OUT: ceilings.json, roofline.txt, tests.log, truth.sh's.
source "$(dirname "$0")/_session.sh"
MEMBOUND_CACHE_DIR=/tmp/mb-cache COLUMNS=130 timeout 120 python -m membound roofline --refresh \
  --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - t0 )) s"; head -16 "$DEST/roofline.txt"
timeout 120 python -m pytest -m gpu tests/device -q -p no:cacheprovider > "$DEST/tests.log" 2>&1
echo "tests rc=$?"; tail -2 "$DEST/tests.log"
TRUTH_ARGS="--fixes compile --extra-baselines 1" TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-300}" \
  bash benchmarks/gpu/truth.sh resnet50_fp32
