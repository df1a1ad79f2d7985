#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fifth session), one call of ~8 min on an H100 (or an H200):
# 1. truth by intervention on the BERT fine-tune with `membound diagnose --sleeping-syncs`
#    (bench_truth's --diagnose-args): TF32 and bf16 timed plain beside the baselines, the
#    diagnose run's syncs sleeping, so the profiler's host cost is read from the threads' CPU
#    (`trace.sync_mode`). Before: TF32 predicted 8.80-21.50 ms/step where it saved 27.8-32.9;
# 2. what sleeping syncs cost host-paced loops as run: session_dec19c.sh's alternating runs
#    on the DCGAN and the LSTM, in the time left.
# Products: truth.csv, dec19d.tgz (the truth logs and traces), sleeping_syncs.txt, gpu.txt.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec19d; mkdir -p $W
S=${SESSION_S:-480}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
OUT=$W/truth TRUTH_BUDGET_S=${TRUTH_S:-250} \
  TRUTH_ARGS="--fixes tf32,bf16 --no-top-remedy --diagnose-args=--sleeping-syncs" \
  bash benchmarks/gpu/truth.sh bert_finetune > $W/truth.log 2>&1
truth_products $? $W dec19d
left=$(( S - ($(date +%s) - t0) ))
[ $left -gt 60 ] && SESSION_S=$left SCRIPTS="${SCRIPTS:-dcgan lstm_lm}" OUT="$DEST" \
  bash benchmarks/gpu/session_dec19c.sh
echo "session done in $(( $(date +%s) - t0 )) s"
