#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one call (~6-9 min, any card). On an H200 first:
# issue 16's roofline refresh (under 60 s) and every recorded H200 fixture checked against
# the ceilings it measures. Then, in the time left: the ConvNeXt's in-sample fixes on another
# host (examples/real/convnext_amp.py: the EMA as one foreach op, the fused AdamW, both
# together - do they add up? - and bf16 without the scaler), baselines and diagnose in the
# same call.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06h; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  refresh_ceilings $W/ceilings.json $W/roofline.txt; head -24 $W/roofline.txt
  timeout 200 python benchmarks/check_over_roof.py $W/ceilings.json --top 15 \
    > $W/over_roof_fixtures.txt 2>&1
  echo "recorded H200 fixtures rc=$? at $(( $(date +%s) - t0 )) s"; tail -18 $W/over_roof_fixtures.txt
fi
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
if [ "$left" -gt 150 ]; then
  OUT=$W/truth TRUTH_BUDGET_S=$left \
    TRUTH_ARGS="--fixes ema-foreach,fused-adamw,ema-foreach+fused-adamw,bf16 --no-top-remedy" \
    bash benchmarks/gpu/truth.sh convnext_amp 2>&1 | grep -A30 "^== convnext" | tail -30
else echo "convnext skipped: $left s left"; fi
tar -czf "$DEST/dec06h.tgz" -C /tmp dec06h
echo "session done in $(( $(date +%s) - t0 )) s"
