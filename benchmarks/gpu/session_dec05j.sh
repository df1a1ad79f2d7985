#!/usr/bin/env bash
# 2026-12-05 (fifth session), one call of <= 590 s on whichever card comes (machines were
# scarce: most starts failed):
# - on an H200, first issue 16's `membound roofline --refresh` with the cast candidate
#   (session_dec05c.sh's first half, ~60 s), then the DCGAN truth below on a smaller budget;
# - on either card, issue 15's DCGAN top remedy: compile and compile with reduce-overhead
#   against paired baselines, two rounds (session_dec05d.sh without pin-memory, which measured
#   1.10 ms/step on 2026-12-05 and is not in question).
# TOTAL_S (default 560): the call's seconds; under 300 left for the DCGAN, compile alone runs,
# under 150 none.
# Products: ceilings.json, roofline.txt (H200 only); truth.sh's in $DEST/dcgan.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $gpu"
total=${TOTAL_S:-560}
budget=$(( total - 40 ))
if echo "$gpu" | grep -q H200; then
  refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt"
  head -60 "$DEST/roofline.txt"
  budget=$(( total - ($(date +%s) - t0) - 40 ))
fi
fixes=compile,reduce-overhead
[ "$budget" -lt 300 ] && fixes=compile
if [ "$budget" -lt 150 ]; then
  echo "DCGAN truth skipped: $budget s left"
else
  echo "DCGAN truth: budget $budget s, fixes $fixes"
  OUT="$DEST/dcgan" TRUTH_BUDGET_S=$budget TRUTH_ARGS="--fixes $fixes --rounds 2" \
    bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep -v "^\[truth\].*start" | tail -40
fi
echo "session done in $(( $(date +%s) - t0 )) s"
