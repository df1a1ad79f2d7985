#!/usr/bin/env bash
# 2026-12-03 (fourth session), call 2: (1) why the HF Trainer Llama ran 26% slower under
# `membound diagnose` before its capture than alone (call 1: 57.1 ms against 45.4):
# benchmarks/probe_wait_overhead.py; (2) truth by intervention on the Lightning fit
# (pin_memory and membound.data.prefetch, the progress bar) and eager GPT-2 (compile, logging
# less), with today's queued-gap timeline.
# Products: wait_overhead.jsonl, and truth.sh's in $DEST/truth.
source "$(dirname "$0")/_session.sh"
timeout 200 python benchmarks/probe_wait_overhead.py examples/real/hf_trainer_llama.py \
  --steps 30 --warmup-steps 5 > "$DEST/wait_overhead.jsonl"
echo "probe rc=$? in $(( $(date +%s) - t0 )) s"; cat "$DEST/wait_overhead.jsonl"
OUT="$DEST/truth" TRUTH_BUDGET_S=$(( 525 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes compile,log-every-100,pin-memory,membound-prefetch,refresh-rate-100" \
  bash benchmarks/gpu/truth.sh lightning_fit,gpt2 2>&1 | tail -45
echo "session done in $(( $(date +%s) - t0 )) s"
