#!/usr/bin/env bash
# 2026-12-04, call 4: issue 15, the timeline profiler's host cost per CUDA call measured on
# the machine (trace/profiler_cost.py, three times standalone and its GPU test), then BERT-base
# fp32 again with TF32 and bf16: diagnose now measures that cost after the script and the GPU
# what-if takes it off where the GPU hid it; predictions made before the fixes are timed.
# Products: profiler_cost.jsonl; truth.sh's in $DEST/bert.
source "$(dirname "$0")/_session.sh"
for i in 1 2 3; do timeout 60 python -m membound.trace.profiler_cost >> "$DEST/profiler_cost.jsonl"; done
cat "$DEST/profiler_cost.jsonl"
python -m pytest -q -p no:cacheprovider -m gpu tests/trace/test_profiler_cost.py 2>&1 | tail -2
OUT="$DEST/bert" TRUTH_BUDGET_S=$(( 300 - ($(date +%s) - t0) )) TRUTH_ARGS="--fixes tf32,bf16" \
  bash benchmarks/gpu/truth.sh bert_finetune 2>&1 | tail -22
grep -h "profiler" /tmp/gpu_out/truth-work/logs/bert_finetune.diagnose.log | head -3
echo "session done in $(( $(date +%s) - t0 )) s"
