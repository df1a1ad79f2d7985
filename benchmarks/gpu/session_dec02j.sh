#!/usr/bin/env bash
# 2026-12-02 (third session), call 3: out-of-sample truth for the bf16_storage remedy as
# committed in 281eb94 (its prediction made before these runs): eager and compiled GPT-2
# with --bf16-weights; and the burst timer's GPU test after its queue spin grew to 1 ms.
# Runs from benchmarks/gpu/clean_src.tgz (the committed tree) when present, so that work
# in progress in the checkout does not run. Products under $OUT: tests.log, truth-{a,b}/.
source "$(dirname "$0")/_session.sh"
[ -f benchmarks/gpu/clean_src.tgz ] && tar xzf benchmarks/gpu/clean_src.tgz && echo "clean tree unpacked"
timeout 60 python -m pytest -m gpu tests/device/test_timing.py -q -p no:cacheprovider > "$DEST/tests.log" 2>&1
echo "tests rc=$?"; tail -3 "$DEST/tests.log"
OUT="$DEST/truth-a" TRUTH_ARGS="--fixes bf16-weights" TRUTH_BUDGET_S=140 \
  bash benchmarks/gpu/truth.sh gpt2 | grep -v "^\[truth\] .*start"
OUT="$DEST/truth-b" TRUTH_ARGS="--fixes bf16-weights" TRUTH_BUDGET_S=180 \
  bash benchmarks/gpu/truth.sh gpt2_compiled | grep -v "^\[truth\] .*start"
rm -f "$DEST"/truth-*/env.txt
echo "session done in $(( $(date +%s) - t0 )) s"
