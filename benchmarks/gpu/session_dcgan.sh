#!/usr/bin/env bash
# Prepared 2026-12-04 (late; no device was lent that session) for a later session: issue 15,
# out of sample. examples/real/dcgan.py (PyTorch's examples/dcgan loop: two optimizers a step,
# five numbers read from the GPU a step, 2 workers, no pin_memory, fp32) was written before
# any rule was changed for it. Its diagnose report is made before the fixes run (bench_truth);
# every fix in two rounds of alternating order, each paired with the baseline at its place.
# Products: truth.sh's in $DEST/dcgan (truth.csv, bench.log, the kept trace for a fixture).
source "$(dirname "$0")/_session.sh"
OUT="$DEST/dcgan" TRUTH_BUDGET_S=$(( 530 - ($(date +%s) - t0) )) TRUTH_ARGS="--rounds 2" \
  bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep -v "^\[truth\].*start" | tail -50
echo "session done in $(( $(date +%s) - t0 )) s"
