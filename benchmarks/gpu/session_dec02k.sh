#!/usr/bin/env bash
# 2026-12-02 (third session), call 4: the norm what-if out of sample. The GPU test of
# nn.host_cost, then truth by intervention on eager GPT-2 for membound's own norm fixes
# (fused-add-norm, swap-norms): diagnose measures the norm kernels' cost after the script
# and the report predicts each fix from the replay before either is timed.
source "$(dirname "$0")/_session.sh"
timeout 90 python -m pytest -m gpu tests/nn/test_host_cost.py -q -p no:cacheprovider > "$DEST/tests.log" 2>&1
echo "tests rc=$? in $(( $(date +%s) - t0 )) s"; tail -3 "$DEST/tests.log"
OUT="$DEST/truth" TRUTH_ARGS="--fixes fused-add-norm,swap-norms" TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-200}" \
  bash benchmarks/gpu/truth.sh gpt2 | grep -v "^\[truth\] .*start\|^\[truth.sh\]\|^-rw\|^total\|^drwx"
rm -f "$DEST"/truth/env.txt
echo "session done in $(( $(date +%s) - t0 )) s"
