#!/usr/bin/env bash
# Prepared 2026-12-06 (thirteenth session) for one call (~8-9 min, any card):
# examples/real/detection_tv.py (torchvision's detection reference, Faster R-CNN) again, out of
# sample, with 100 warm-up steps (the first call's 10 left each new image shape's slow first
# steps in the window): baselines, diagnose and every fix. Then, in the time left, the compile
# probe at two depths.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06m; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
OUT=$W/truth TRUTH_BUDGET_S=${TRUTH_BUDGET_S:-420} bash benchmarks/gpu/truth.sh detection_tv 2>&1 \
  | grep -A32 "^== detection" | tail -32
grep -v "^step \|^$" "${GPU_OUT:-/tmp/gpu_out}/truth-work/logs/detection_tv.baseline-1.log" 2>/dev/null | tail -4 | cut -c1-300
left=$(( ${SESSION_S:-565} - ($(date +%s) - t0) ))
if [ "$left" -gt 60 ]; then
  timeout $(( left - 15 )) python benchmarks/probe_compile_host.py --steps 100 --depths 2,8 \
    --out $W/compile_host.jsonl 2>&1 | grep "^==\|Error\|error" | tail -8
else echo "compile probe skipped: $left s left"; fi
tar -czf "$DEST/dec06m.tgz" -C /tmp dec06m
echo "session done in $(( $(date +%s) - t0 )) s"
