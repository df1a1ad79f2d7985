#!/usr/bin/env bash
# Prepared 2026-12-05 (second session) for a later one, ~6 min: issue 15, the DCGAN's top
# remedy. Its report puts compile first (6.0 ms/step predicted on 2026-12-05; measured -1.8
# the day before) and cuda_graphs second (5.5, never timed). One call: diagnose, then compile,
# compile with reduce-overhead (CUDA graphs) and pin_memory, in two rounds against paired
# baselines. Products: truth.sh's in $DEST/dcgan (kept traces: a fixture h200_real_dcgan_oos3).
source "$(dirname "$0")/_session.sh"
OUT="$DEST/dcgan" TRUTH_BUDGET_S=520 TRUTH_ARGS="--fixes compile,reduce-overhead,pin-memory --rounds 2" \
  bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep -v "^\[truth\].*start" | tail -40
echo "session done in $(( $(date +%s) - t0 )) s"
