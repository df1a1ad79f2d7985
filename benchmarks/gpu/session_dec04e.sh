#!/usr/bin/env bash
# 2026-12-04, call 5: issue 15, the tabular MLP again after its input-starved finding got the
# workers remedy (single-process DataLoader): workers and membound's prefetch against a
# prediction made before they are timed, with two extra baselines (its host is noisy: the
# first run's baselines differed by 13%).
# Products: truth.sh's in $DEST/tab.
source "$(dirname "$0")/_session.sh"
OUT="$DEST/tab" TRUTH_BUDGET_S=150 TRUTH_ARGS="--fixes num-workers-4,membound-prefetch,batch-index --extra-baselines 1" \
  bash benchmarks/gpu/truth.sh tabular_mlp 2>&1 | tail -22
echo "session done in $(( $(date +%s) - t0 )) s"
