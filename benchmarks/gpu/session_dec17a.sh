#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session) for the next one, one call of ~9 min on any
# card: bf16's prediction on the loops whose host paces it, now that `membound diagnose`
# measures autocast's host work on the machine (trace.profiler_cost.autocast_cost, where a
# constant 0.4 launches a kernel stood): the HF T5 with tf32 and bf16 (its --tf32 run died on
# torch 2.11 reading the legacy TF32 flag until examples/real/_common.py's tf32_flag), and the
# DDPM U-Net with bf16 (11.38, 12.52, 8.82 and 2.23 ms/step saved on four H100 hosts).
# Products: truth.csv, dec17a.tgz (logs, traces, the probe lines).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec17a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
timeout 60 python -m membound.trace.profiler_cost launches 2>/dev/null | tee -a $W/probe.txt
left=$(( S - ($(date +%s) - t0) - 15 ))
OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes ${FIXES:-tf32,bf16} --no-top-remedy" \
  bash benchmarks/gpu/truth.sh ${SCRIPTS:-t5_seq2seq,ddpm_unet} > $W/truth.log 2>&1
truth_products $? $W dec17a
