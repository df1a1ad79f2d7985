#!/usr/bin/env bash
# Prepared 2026-12-06 (fifteenth session) for a short call (~2-3 min) on what device time is
# left: on an H200, issue 16's roofline refresh (under 60 s) with every recorded H200 fixture
# checked against the ceilings it measures (`card_roof_check`); on any other card it stops at
# once (the H100's figures were taken in the twelfth and fourteenth sessions).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec08c; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" ${SESSION_S:-240}
  tar -czf "$DEST/dec08c.tgz" -C /tmp dec08c
else
  echo "not an H200: nothing to do"
fi
echo "session done in $(( $(date +%s) - t0 )) s"
