#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fifth session) for the next H100 call (~8-9 min): truth by
# intervention with the syncs made to sleep where membound measures host work, on the
# GPU-paced loops whose GPU-only fixes measured more than the replay's all-kernels-gone saving
# (the host floor too high, the profiler's host cost hidden by the step; docs/capture.md): the
# DDPM U-Net's bf16 (8.82 saved, 0.00 predicted on one host) and the T5's TF32 (22.25 saved,
# 21.18 at most). On the BERT fine-tune `--sleeping-syncs` took TF32 from 19.51 to 29.42
# predicted (33.88 saved) and bf16 from 7.44 to 17.35 (16.60;
# tests/analysis/test_truth_2026_12_07f_h100.py).
# Twenty-sixth session: first `benchmarks/probe_ctx_flags.py` (does cuCtxSetFlags switch a live
# context's syncs?), then the groups with `--syncs $SYNCS` (default sleep-profiled: the loop's
# own unprofiled steps spin, 3 steps added to the wait and the passes sleep), the BERT first: its
# answer with the whole run sleeping is known; then the LSTM LM (4-7 ms steps, a sync each:
# sleeping syncs cost it up to 26%, so its profiled step shows what sleep-profiled costs).
# TRUTH_GROUPS (not GROUPS: bash keeps the user's group ids there): "script:fixes" items, space-separated, each one truth.sh group in this call's time.
# Products: ctx_flags.json, truth_<script>.csv and dec20a_<script>.tgz per group (logs and
# traces: fixtures).
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-520}
SYNCS=${SYNCS:-sleep-profiled}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
# Twenty-seventh session: on an H200, issue 16's owed check first (as session_dec16e.sh: the
# refresh timed, its ceilings under $DEST; the recorded H200 fixtures checked against them on
# the CPU afterwards with benchmarks/check_over_roof.py); the groups take the time left.
if grep -q H200 "$DEST/gpu.txt" && [ -z "${SKIP_ROOF:-}" ]; then
  refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt" 100; head -40 "$DEST/roofline.txt"
fi
timeout 60 python benchmarks/probe_ctx_flags.py | tee "$DEST/ctx_flags.json"
for item in ${TRUTH_GROUPS:-bert_finetune:tf32,bf16 lstm_lm:log-every-200 ddpm_unet:bf16,tf32 t5_seq2seq:tf32,bf16}; do
  name=${item%%:*}; fixes=${item#*:}
  left=$(( S - ($(date +%s) - t0) - 20 ))
  if [ $left -lt 150 ]; then echo "$name skipped: $left s left"; continue; fi
  W=/tmp/dec20a_$name; rm -rf $W /tmp/gpu_out/truth-work; mkdir -p $W
  OUT=$W/truth TRUTH_BUDGET_S=$(( left - 40 )) \
    TRUTH_ARGS="--fixes $fixes --no-top-remedy --diagnose-args=--syncs=$SYNCS" \
    bash benchmarks/gpu/truth.sh $name > $W/truth.log 2>&1
  echo "$name truth rc=$? at $(( $(date +%s) - t0 )) s"
  grep -A20 "^== " $W/truth.log | grep -v "^\[truth\]"
  host_costs /tmp/gpu_out/truth-work/traces
  grep -ho '"sleeping_syncs[a-z_]*": [^,]*' /tmp/gpu_out/truth-work/traces/*/capture.json
  cp $W/truth/truth.csv "$DEST/truth_$name.csv" 2>/dev/null
  tar czf "$DEST/dec20a_$name.tgz" -C /tmp "$(basename $W)" gpu_out/truth-work/traces 2>/dev/null
done
echo "session done in $(( $(date +%s) - t0 )) s"
