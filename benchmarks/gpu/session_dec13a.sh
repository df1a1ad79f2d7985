#!/usr/bin/env bash
# Prepared 2026-12-07 (twentieth session), one call of ~9 min on any card:
# 1. examples/real/classification_tv.py, out of sample (torchvision's classification recipe on
#    JPEG files, 16 workers decoding and augmenting on the host's cores): a smoke run (it also
#    writes the JPEG folder once), then bench_truth with its core fixes and membound's top
#    remedy, the diagnose trace kept. Written before it was measured and before any rule was
#    changed for it.
# 2. with the time left (at least 215 s; none with SKIP_DEC12B=1), session_dec12b's first spec: bf16 on the DDPM U-Net
#    whose convolutions run TF32 (a diagnose of the bf16 run beside the rounds).
# Products: truth_cls/ (truth.csv, bench.log, the tarball of logs and traces), dec12b's.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec13a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
echo "cores: $(nproc)"
r0=$(date +%s)
timeout 150 python examples/real/classification_tv.py --steps 4 --warmup-steps 3 > $W/smoke.log 2>&1
echo "smoke rc=$? in $(( $(date +%s) - r0 )) s: $(grep -o 'MEMBOUND_TRUTH.*' $W/smoke.log | cut -c1-300)"
tail -3 $W/smoke.log
left=$(( S - ($(date +%s) - t0) - 230 ))  # ~230 s kept for the DDPM's bf16
# SKIP_DEC12B=1: the whole call for the script (its default fixes take more than ~330 s)
{ [ -n "$SKIP_DEC12B" ] || [ $left -lt 240 ]; } && left=$(( S - ($(date +%s) - t0) - 15 ))
OUT=$DEST/truth_cls TRUTH_BUDGET_S=$left TRUTH_ARGS="${CLS_ARGS:-}" \
  bash benchmarks/gpu/truth.sh classification_tv > $W/truth_cls.log 2>&1
echo "classification_tv rc=$? at $(( $(date +%s) - t0 )) s"
grep -A20 "^== " $W/truth_cls.log | grep -v "^\[truth\]"
left=$(( S - ($(date +%s) - t0) ))
if [ -z "$SKIP_DEC12B" ] && [ $left -ge 215 ]; then
  SESSION_S=$left SPECS="${SPECS:-ddpm_unet|bf16|--bf16}" bash benchmarks/gpu/session_dec12b.sh
else echo "dec12b skipped: $left s left"; fi
tar -czf "$DEST/dec13a.tgz" -C /tmp dec13a
echo "session done in $(( $(date +%s) - t0 )) s"
