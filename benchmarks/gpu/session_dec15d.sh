#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-second session) for the last ~4 min of device time, on an H200
# (issue 16's owed check, in its smallest form): `membound roofline --refresh`, timed, then
# every recorded H200 fixture checked against those ceilings, one line a trace as it goes
# (check_over_roof --progress), each written straight under $OUT so that a call cut short
# keeps what it did. Products: gpu.txt, ceilings.json, roofline.txt, over_roof.txt.
source "$(dirname "$0")/_session.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt" 90; head -30 "$DEST/roofline.txt"
python benchmarks/check_over_roof.py "$DEST/ceilings.json" --progress --top 10 > "$DEST/over_roof.txt" 2>&1
echo "check rc=$? at $(( $(date +%s) - t0 )) s"; tail -14 "$DEST/over_roof.txt"
