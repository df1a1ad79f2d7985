#!/usr/bin/env bash
# Prepared 2026-12-04 (late; no device was lent that session) for the next session: issue 15.
# 1. trace/layout_probe.py on the GPU: the recorded DeepLabV3 interpolations timed in both
#    layouts (its GPU test).
# 2. DeepLabV3 (segmentation_tv) under diagnose, whose after-script probes now include the
#    layout probe: channels_last predicted from the measured NCHW/channels_last times of its
#    interpolations (the gap to the roof predicted 16.3 ms/step; channels_last measured 11.3
#    and 10.0), with pin_memory and membound.data.prefetch, in two rounds.
# 3. ResNet-50 with timm's prefetch loader: compile, its top remedy, never timed before.
# Products: pytest_layout_gpu.txt; truth.sh's in $DEST/seg and $DEST/r50p (traces kept).
source "$(dirname "$0")/_session.sh"
timeout 120 python -m pytest -q tests/trace/test_layout_probe.py >"$DEST/pytest_layout_gpu.txt" 2>&1
echo "layout gpu tests rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 "$DEST/pytest_layout_gpu.txt"
OUT="$DEST/seg" TRUTH_BUDGET_S=230 \
  TRUTH_ARGS="--fixes channels-last,pin-memory,membound-prefetch --rounds 2" \
  bash benchmarks/gpu/truth.sh segmentation_tv 2>&1 | grep -v "^\[truth\].*start" | tail -40
OUT="$DEST/r50p" TRUTH_BUDGET_S=$(( 530 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes compile,channels-last" \
  bash benchmarks/gpu/truth.sh resnet50_prefetch 2>&1 | grep -v "^\[truth\].*start" | tail -30
echo "session done in $(( $(date +%s) - t0 )) s"
