#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-seventh session) for the session's last ~3 min of device time.
# On an H200, issue 16's owed check first (as session_dec16e.sh: the roofline refresh timed,
# its ceilings under $DEST; the recorded H200 fixtures are checked against them on the CPU
# with benchmarks/check_over_roof.py). Then, on any card, benchmarks/probe_cupti_teardown.py:
# do the steps after membound's capture run slower because kineto leaves CUPTI on
# (TEARDOWN_CUPTI unset against "1", alternated, each a fresh `membound diagnose`)?
# Products: gpu.txt, ceilings.json and roofline.txt (H200), teardown.jsonl.
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-170}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
if grep -q H200 "$DEST/gpu.txt"; then
  refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt" 100; head -30 "$DEST/roofline.txt"
fi
left=$(( S - ($(date +%s) - t0) - 10 ))
timeout $(( left > 20 ? left : 20 )) python benchmarks/probe_cupti_teardown.py \
  --scripts "${SCRIPTS:-lstm_lm,ddpm_unet}" --rounds "${ROUNDS:-2}" --budget-s $(( left - 30 )) \
  | tee "$DEST/teardown.jsonl"
echo "session done in $(( $(date +%s) - t0 )) s"
