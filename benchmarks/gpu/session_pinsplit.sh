#!/usr/bin/env bash
# 2026-12-05, the session's last ~300 s of device time: which half of membound.data.prefetch
# trails DataLoader(pin_memory=True) on the timm ViT (that day's rounds: pin_memory saved
# 20.0 ms/step, the prefetcher 7.6)? Three fixes in two rounds: pin_memory alone, the
# prefetcher alone (stages pageable batches into its pinned pool, copies on its side stream),
# and both (the loader pins, the prefetcher only copies on its side stream: nothing staged).
# Products: truth.sh's in $DEST/pinsplit.
source "$(dirname "$0")/_session.sh"
OUT="$DEST/pinsplit" TRUTH_BUDGET_S=150 \
  TRUTH_ARGS="--fixes pin-mem,membound-prefetch,pin-mem+membound-prefetch --no-diagnose --rounds 2" \
  bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep -v "^\[truth\].*start" | tail -30
echo "session done in $(( $(date +%s) - t0 )) s"
