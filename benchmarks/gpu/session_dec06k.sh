#!/usr/bin/env bash
# Prepared 2026-12-06 (thirteenth session) for one call (~6-9 min, any card):
# examples/real/cifar_resnet18.py (kuangliu/pytorch-cifar's main.py), out of sample: its
# baselines, diagnose and every fix in one call. Then, on an H200 with time left, issue 16's
# roofline refresh and the recorded H200 fixtures checked against it.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06k; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
nproc
OUT=$W/truth TRUTH_BUDGET_S=${TRUTH_BUDGET_S:-380} bash benchmarks/gpu/truth.sh cifar_resnet18 2>&1 \
  | grep -A34 "^== cifar" | tail -34
grep -v "^ \[\|^step \|^$" "${GPU_OUT:-/tmp/gpu_out}/truth-work/logs/cifar_resnet18.baseline-1.log" 2>/dev/null | tail -4 | cut -c1-400
h200_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
tar -czf "$DEST/dec06k.tgz" -C /tmp dec06k
echo "session done in $(( $(date +%s) - t0 )) s"
