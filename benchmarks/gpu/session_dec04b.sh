#!/usr/bin/env bash
# 2026-12-04, call 2: out of sample, the third script written this session
# (examples/real/bert_finetune.py: BERT-base with Accelerate at its defaults, fp32), diagnosed
# and timed with each fix before any rule is changed for it (issue 15).
# Products: truth.sh's in $DEST/oos.
source "$(dirname "$0")/_session.sh"
OUT="$DEST/oos" TRUTH_BUDGET_S=420 bash benchmarks/gpu/truth.sh bert_finetune 2>&1 | tail -40
echo "session done in $(( $(date +%s) - t0 )) s"
