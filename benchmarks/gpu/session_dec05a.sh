#!/usr/bin/env bash
# 2026-12-05 (second session), first device call (~9 min): issue 15.
# 1. Which half of membound.data.prefetch trails DataLoader(pin_memory=True) on the timm ViT:
#    pin_memory alone, the prefetcher alone (stages pageable batches into its pinned pool,
#    copies on its side stream) and both (the loader pins, the prefetcher only copies), two
#    rounds, with the diagnose run (its reported step against the baselines).
# 2. DCGAN and T5 under diagnose again, now that diagnose waits the warm-up twice plus 2
#    steps by default: is membound's unprofiled step within 5% of the plain timer's, and
#    what does the profiler add? One fix each, so the call has its baselines.
# Products: truth.sh's in $DEST/{pinsplit,dcgan,t5}.
source "$(dirname "$0")/_session.sh"
OUT="$DEST/pinsplit" TRUTH_BUDGET_S=230 \
  TRUTH_ARGS="--fixes pin-mem,membound-prefetch,pin-mem+membound-prefetch --no-top-remedy --rounds 2" \
  bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep -v "^\[truth\].*start" | tail -30
OUT="$DEST/dcgan" TRUTH_BUDGET_S=130 TRUTH_ARGS="--fixes pin-memory --no-top-remedy" \
  bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep -v "^\[truth\].*start" | tail -25
OUT="$DEST/t5" TRUTH_BUDGET_S=$(( 545 - ($(date +%s) - t0) )) TRUTH_ARGS="--fixes swap-norms --no-top-remedy" \
  bash benchmarks/gpu/truth.sh t5_seq2seq 2>&1 | grep -v "^\[truth\].*start" | tail -25
echo "session done in $(( $(date +%s) - t0 )) s"
