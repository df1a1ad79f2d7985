#!/usr/bin/env bash
# Prepared 2026-12-04 (late; no device was lent that session) for a later session: issue 15,
# out of sample. Two scripts written before any rule was changed for them:
# - examples/real/dcgan.py (PyTorch's examples/dcgan loop: two optimizers a step, five numbers
#   read from the GPU a step, 2 workers, no pin_memory, fp32): every fix in two rounds of
#   alternating order, each paired with the baseline at its place;
# - examples/real/t5_seq2seq.py (run_summarization.py's Seq2SeqTrainer on a t5-small-sized
#   T5, fp32 by default): bf16, TF32, swap_norms on T5LayerNorm, no NaN filter (compile left
#   out here: its inductor compile would not fit the call; should it be the report's top
#   remedy, bench_truth adds it last and it runs only if the budget still has room).
# Each diagnose report is made before the fixes run (bench_truth). Products: truth.sh's in
# $DEST/dcgan and $DEST/t5 (truth.csv, bench.log, the kept traces for fixtures: convert their
# ops passes with benchmarks/fixture_xz.py).
source "$(dirname "$0")/_session.sh"
OUT="$DEST/dcgan" TRUTH_BUDGET_S=240 TRUTH_ARGS="--rounds 2" \
  bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep -v "^\[truth\].*start" | tail -40
OUT="$DEST/t5" TRUTH_BUDGET_S=$(( 530 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes bf16,tf32,swap-norms,no-nan-inf-filter" \
  bash benchmarks/gpu/truth.sh t5_seq2seq 2>&1 | grep -v "^\[truth\].*start" | tail -30
echo "session done in $(( $(date +%s) - t0 )) s"
