#!/usr/bin/env bash
# 2026-12-03 (fourth session), call 1: issue 15, truth by intervention after the timeline
# told `queued` gaps (before work the GPU already had: its own turnaround) from launch gaps,
# and bench_truth predicts a fix by its remedies together (`remedies.combined`).
# compiled GPT-2 (CUDA graphs, logging less), then the HF Trainer Llama and the Lightning fit
# (membound's swap_norms and prefetch against the frameworks' switches).
# Products: truth.sh's for each group, in $DEST/compiled and $DEST/frameworks.
source "$(dirname "$0")/_session.sh"
OUT="$DEST/compiled" TRUTH_ARGS="--fixes reduce-overhead,log-every-100" TRUTH_BUDGET_S=200 \
  bash benchmarks/gpu/truth.sh gpt2_compiled 2>&1 | tail -22
OUT="$DEST/frameworks" TRUTH_BUDGET_S=$(( 520 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes swap-norms,no-nan-inf-filter,torch-compile,pin-memory,membound-prefetch,refresh-rate-100" \
  bash benchmarks/gpu/truth.sh hf_trainer_llama,lightning_fit 2>&1 | tail -45
echo "session done in $(( $(date +%s) - t0 )) s"
