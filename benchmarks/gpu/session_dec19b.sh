#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fifth session), one short call (~2-6 min), any card:
# 1. benchmarks/probe_busy_profiler.py three times (fresh processes): the timeline pass's
#    profiler cost per launch with the GPU idle and with it busy, for plain launches and a
#    small MLP's forward-backward (why a GPU-paced trace records more host work than the loop
#    has, tests/analysis/test_host_work_2026_12_07_h100.py);
# 2. on an H200 with time left: issue 16's same-call check (`membound roofline --refresh`,
#    timed, and every recorded H200 fixture against those ceilings: h200_roof_check).
# Products: gpu.txt, busy_profiler.jsonl, and on an H200 ceilings.json, roofline.txt,
# over_roof_fixtures.txt.
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-400}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
for i in 1 2 3; do
  timeout 90 python benchmarks/probe_busy_profiler.py --rounds 7 2>/dev/null | tee -a "$DEST/busy_profiler.jsonl"
done
left=$(( S - ($(date +%s) - t0) ))
h200_roof_check "$DEST" "$(cat "$DEST/gpu.txt")" $left
echo "session done in $(( $(date +%s) - t0 )) s"
