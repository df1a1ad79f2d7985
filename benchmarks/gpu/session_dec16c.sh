#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session), one call of ~8 min on any card:
# 1. trace.profiler_cost twice (new: bf16 autocast's host work per kernel, measured on the
#    machine, `autocast_launches_per_kernel`, where gpu_whatif had a constant 0.4);
# 2. the HF T5 with tf32 and bf16 through bench_truth (its diagnose runs that probe, so the
#    bf16 prediction reads the measured figure): on H100 hosts bf16 saved 0.73 and 16.65 where
#    TF32 saved 20.15 and 22.25 (18.61 and 16.02 predicted);
# 3. with the time left, the DDPM U-Net's compiled variant diagnosed (probes off), to compare
#    kernel by kernel with h100_real_ddpm_unet_truth6 (compile saved 9.85, 15.59 predicted).
# Products: truth_t5.csv, dec16c.tgz (logs, traces, probe lines).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec16c; mkdir -p $W
S=${SESSION_S:-500}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
for i in 1 2; do
  timeout 60 python -m membound.trace.profiler_cost launches | tee -a $W/probe.txt
done
left=$(( S - ($(date +%s) - t0) - ${DDPM_S:-130} ))
OUT=$W/truth_t5 TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes ${T5_FIXES:-tf32,bf16} --no-top-remedy" \
  bash benchmarks/gpu/truth.sh t5_seq2seq > $W/truth_t5.log 2>&1
echo "t5 rc=$? at $(( $(date +%s) - t0 )) s"
grep -A20 "^== " $W/truth_t5.log | grep -v "^\[truth\]"
host_costs /tmp/gpu_out/truth-work/traces
cp -r /tmp/gpu_out/truth-work/traces $W/t5_traces 2>/dev/null
cp $W/truth_t5/truth.csv "$DEST/truth_t5.csv" 2>/dev/null
tar czf "$DEST/dec16c.tgz" -C /tmp dec16c
left=$(( S - ($(date +%s) - t0) ))
if [ $left -gt 100 ]; then
  r0=$(date +%s)
  timeout $(( left - 10 )) python -m membound diagnose --wait 8 --warmup 2 --steps 4 --no-annotate \
    --no-norm-probe --out $W/ddpm_compile --json $W/ddpm_compile/report.json -- \
    python examples/real/ddpm_unet.py --steps 26 --warmup-steps 0 --compile > $W/ddpm_compile.log 2>&1
  echo "ddpm_compile rc=$? in $(( $(date +%s) - r0 )) s"; grep -m3 "unprofiled\|step " $W/ddpm_compile.log | cut -c1-200
  tar czf "$DEST/dec16c.tgz" -C /tmp dec16c
else echo "ddpm_compile skipped: $left s left"; fi
echo "session done in $(( $(date +%s) - t0 )) s"
