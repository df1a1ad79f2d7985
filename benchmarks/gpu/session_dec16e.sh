#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session) for the last ~3 min of device time. On an H200:
# `membound roofline --refresh` alone, timed (issue 16: within 60 s), its ceilings and table
# written straight under $OUT; the recorded H200 fixtures are then checked against them here
# on the CPU (`python benchmarks/check_over_roof.py <ceilings.json>`). On another card: the
# after-the-script probe of autocast's host work (trace.profiler_cost) three times, to see
# how it varies on one host. Products: gpu.txt, ceilings.json, roofline.txt or probe.txt.
source "$(dirname "$0")/_session.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
if grep -q H200 "$DEST/gpu.txt"; then
  refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt" 100; head -40 "$DEST/roofline.txt"
else
  for i in 1 2 3; do timeout 40 python -m membound.trace.profiler_cost launches 2>/dev/null | tee -a "$DEST/probe.txt"; done
fi
echo "session done in $(( $(date +%s) - t0 )) s"
