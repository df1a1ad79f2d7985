#!/usr/bin/env bash
# 2026-12-03 (fourth session), call 3: truth by intervention on the two ResNet-50 loops with
# today's queued-gap timeline (fp32: autocast, channels_last, compile; the pageable
# prefetcher: pinning, membound.data.prefetch, channels_last).
# Products: truth.sh's in $DEST.
source "$(dirname "$0")/_session.sh"
OUT="$DEST" TRUTH_BUDGET_S=520 \
  TRUTH_ARGS="--fixes amp,channels-last,compile,pin-mem,membound-prefetch" \
  bash benchmarks/gpu/truth.sh resnet50_prefetch,resnet50_fp32 2>&1 | tail -45
echo "session done in $(( $(date +%s) - t0 )) s"
