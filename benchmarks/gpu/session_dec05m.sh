#!/usr/bin/env bash
# 2026-12-05 (sixth session), one call of ~7 min on whichever card comes:
# 1. the GPU tests of the capture and the step clock (each step's own thread CPU time, new
#    this session) and of diagnose;
# 2. issue 15's truth on the Lightning fit with the launches default and the new thread CPU
#    figures (bench_truth; its fixes against paired baselines).
# Products: pytest_gpu.txt, and truth.sh's under $DEST/lightning.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
r0=$(date +%s)
timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/trace/test_capture.py \
  tests/trace/test_step_clock.py tests/commands/test_diagnose.py > "$DEST/pytest_gpu.txt" 2>&1
echo "gpu tests rc=$? in $(( $(date +%s) - r0 )) s"; tail -5 "$DEST/pytest_gpu.txt"
budget=$(( ${TOTAL_S:-440} - ($(date +%s) - t0) - 40 ))
if [ "$budget" -gt 150 ]; then
  OUT="$DEST/lightning" TRUTH_BUDGET_S=$budget bash benchmarks/gpu/truth.sh lightning_fit 2>&1 \
    | grep -v "^\[truth\].*start" | tail -40
else
  echo "truth skipped: $budget s left"
fi
echo "session done in $(( $(date +%s) - t0 )) s"
