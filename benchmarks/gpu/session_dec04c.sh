#!/usr/bin/env bash
# 2026-12-04, call 3: issue 16, the matmul ceilings with the sweep's fastest shape timed again
# on ReLU'd operands, refreshed and set against fresh traces of the same call
# (fresh_roof.sh: planted loops, eager and compiled GPT-2, check_over_roof); then issue 15,
# BERT-base again with TF32 and bf16 only: the GPU what-if's predictions (analysis/gpu_whatif.py)
# on a fresh run, made before the fixes are timed.
# Products: fresh_roof.sh's; truth.sh's in $DEST/bert.
source "$(dirname "$0")/_session.sh"
bash benchmarks/gpu/fresh_roof.sh 2>&1 | tail -60
left=$(( 560 - ($(date +%s) - t0) ))
echo "left for bert: ${left}s"
if [ "$left" -gt 110 ]; then
  OUT="$DEST/bert" TRUTH_BUDGET_S=$(( left - 45 )) TRUTH_ARGS="--fixes tf32,bf16" \
    bash benchmarks/gpu/truth.sh bert_finetune 2>&1 | tail -25
fi
echo "session done in $(( $(date +%s) - t0 )) s"
