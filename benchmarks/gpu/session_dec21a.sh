#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-seventh session) for the session's last ~3 min of device time.
# On an H200, issue 16's owed check first (as session_dec16e.sh: the roofline refresh timed,
# its ceilings under $DEST; the recorded H200 fixtures are checked against them on the CPU
# with benchmarks/check_over_roof.py). Then, on any card, benchmarks/probe_cupti_teardown.py:
# do the steps after membound's capture run slower because kineto leaves CUPTI on
# (TEARDOWN_CUPTI unset against "1", alternated, each a fresh `membound diagnose`)?
# With SESSION_S above ~330, the time left after the probe goes to session_dec20a.sh's truth
# groups (`--syncs sleep-profiled`, now the default), by default the GPU-paced loops whose
# GPU-only fixes the spinning captures under-predicted: the ConvNeXt's bf16 (14.63 saved,
# 10.49 predicted; 12.87, 9.20), the Lightning fit's bf16-mixed (5.10, 0.50), and the T5 again
# (its twenty-seventh-session host drifted 15%).
# Products: gpu.txt, ceilings.json and roofline.txt (H200), gpu_tests.txt, teardown.jsonl,
# and dec20a's.
# A full call: `SESSION_S=560 bash benchmarks/gpu/session_dec21a.sh`.
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-170}
PROBE_S=${PROBE_S:-150}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
if grep -q H200 "$DEST/gpu.txt"; then
  refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt" 100; head -30 "$DEST/roofline.txt"
fi
# the CUDA tests of the capture and diagnose (the sleep-profiled default of membound.profile
# among them, written 2026-12-07 without a GPU)
timeout 90 python -m pytest -q -p no:cacheprovider -m gpu tests/trace/test_capture.py \
  tests/commands/test_diagnose.py 2>&1 | tail -15 | tee "$DEST/gpu_tests.txt"
left=$(( S - ($(date +%s) - t0) - 10 ))
[ $left -gt $PROBE_S ] && left=$PROBE_S
timeout $(( left > 20 ? left : 20 )) python benchmarks/probe_cupti_teardown.py \
  --scripts "${SCRIPTS:-lstm_lm,ddpm_unet}" --rounds "${ROUNDS:-2}" --budget-s $(( left - 30 )) \
  | tee "$DEST/teardown.jsonl"
left=$(( S - ($(date +%s) - t0) ))
if [ $left -gt 170 ]; then
  SKIP_ROOF=1 SESSION_S=$left \
    TRUTH_GROUPS="${TRUTH_GROUPS:-convnext_amp:bf16,compile lightning_fit:bf16-mixed t5_seq2seq:tf32,bf16}" \
    bash "$(dirname "$0")/session_dec20a.sh"
fi
echo "session done in $(( $(date +%s) - t0 )) s"
