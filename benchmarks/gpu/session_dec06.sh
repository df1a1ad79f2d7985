#!/usr/bin/env bash
# Prepared 2026-12-06 (ninth session) for the next call (<= 9 min, any card; the roofline
# part only on an H200):
# 1. benchmarks/probe_turnaround.py (~1 min): the GPU's gap between queued kernels with and
#    without the profiler. The replay packs queued kernels end to end; the DDPM U-Net's sync
#    prediction (5.06 vs 1.28 measured, H100) needs the gap, and the trace's own gap broke the
#    GPT-2's. If the unprofiled turnaround is well below the traced gap, the replay can take
#    the measured one (the probe's, on the machine) instead of the trace's.
# 2. the LSTM word-language model under diagnose, now that the model's zero_grad marks its
#    steps (it recorded nothing on 2026-12-06: no optimizer, no DataLoader), with its fixes.
# 3. on an H200 with time left: the roofline refresh (issue 16's 60 s) and every recorded
#    H200 fixture checked against it.
# Every product in one tarball: dec06.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
r0=$(date +%s)
if [ -z "$SKIP_TURNAROUND" ]; then  # SKIP_TURNAROUND=1 where session_dec06b.sh measured it
  timeout 120 python benchmarks/probe_turnaround.py > $W/turnaround.jsonl 2> $W/turnaround.err
  echo "turnaround rc=$? in $(( $(date +%s) - r0 )) s"; cat $W/turnaround.jsonl; tail -3 $W/turnaround.err
fi
OUT=$W/truth TRUTH_BUDGET_S=150 bash benchmarks/gpu/truth.sh lstm_lm 2>&1 \
  | grep -A30 "^== lstm" | tail -30
h200_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
tar -czf "$DEST/dec06.tgz" -C /tmp dec06
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
