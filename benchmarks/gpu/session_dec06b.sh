#!/usr/bin/env bash
# Prepared 2026-12-06 (tenth session) for one call (<= 9.5 min, any card):
# 1. benchmarks/probe_turnaround.py (~1 min): the GPU's gap between queued kernels with and
#    without the profiler (what the replay needs for the DDPM's sync prediction).
# 2. the new out-of-sample examples/real/convnext_amp.py (timm's --amp loop on a ConvNeXt-T:
#    fp16 + GradScaler, clipping, a ModelEmaV2-style EMA) through bench_truth: baselines,
#    diagnose and its six fixes, in the time left.
# 3. the LSTM under diagnose with one fix, if time is left.
# Every product in one tarball: dec06b.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06b; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
r0=$(date +%s)
timeout 90 python benchmarks/probe_turnaround.py > $W/turnaround.jsonl 2> $W/turnaround.err
echo "turnaround rc=$? in $(( $(date +%s) - r0 )) s"; cat $W/turnaround.jsonl; tail -3 $W/turnaround.err
left=$(( ${SESSION_S:-540} - ($(date +%s) - t0) - 120 ))
OUT=$W/truth TRUTH_BUDGET_S=$left bash benchmarks/gpu/truth.sh convnext_amp 2>&1 | tail -45
# 3. with what is left: the LSTM under diagnose (its steps now marked by the model's zero_grad)
left=$(( ${SESSION_S:-540} - ($(date +%s) - t0) - 45 ))
if [ $left -gt 40 ]; then
  OUT=$W/lstm TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes log-every-200" \
    bash benchmarks/gpu/truth.sh lstm_lm 2>&1 | tail -25
fi
tar -czf "$DEST/dec06b.tgz" -C /tmp dec06b
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
