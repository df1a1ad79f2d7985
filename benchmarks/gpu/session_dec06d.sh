#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one call (~8 min, any card):
# 1. the LSTM word-language model's launch-bound remedy measured: examples/real/lstm_lm.py
#    with --cuda-graphs (the whole step captured once and replayed) against its baseline, and
#    a fresh diagnose run (a new fixture): 70% of the 2.5 ms/step launch-bound finding sits
#    inside cuDNN's RNN calls, which compile keeps (it measured -0.65) and a graph replays;
# 2. issue 16's roofline: `membound roofline --refresh` timed (under 60 s) and every recorded
#    fixture of this card checked against the ceilings it measures (no op above its roof).
# Every product in one tarball: dec06d.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06d; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
python examples/real/lstm_lm.py --cuda-graphs --steps 20 --warmup-steps 2 2>&1 | tail -2 | cut -c1-300
OUT=$W/truth TRUTH_BUDGET_S=200 TRUTH_ARGS="--fixes cuda-graphs,log-every-200" \
  bash benchmarks/gpu/truth.sh lstm_lm 2>&1 | grep -A30 "^== lstm" | tail -30
card_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
tar -czf "$DEST/dec06d.tgz" -C /tmp dec06d
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
