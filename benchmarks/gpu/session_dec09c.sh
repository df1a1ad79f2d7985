#!/usr/bin/env bash
# Prepared 2026-12-06 (sixteenth session) for the session's last call (~7 min, any card).
# On an H200: issue 16's roofline refresh with every H200 fixture checked against it first.
# Then the EfficientNet-B0's two per-parameter loops again (`--ema-foreach`, `--torch-rmsprop`),
# now predicted by the rules changed after its first call (the optimizer's loop apart from the
# EMA's, steps aligned in `analysis.kernel_map`): a check of those rules on another host; on
# what is left, `examples/real/wav2vec2_ctc.py` out of sample (`--quick`: its core fixes).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec09c; mkdir -p $W
S=${SESSION_S:-420}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
# SKIP_ROOF=1 leaves the roofline out (session_dec10a.sh measures it, and the over-roof
# check runs on the CPU afterwards)
if [ -z "${SKIP_ROOF:-}" ] && grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" 260
fi
left=$(( S - ($(date +%s) - t0) - 20 ))
if [ $left -gt 100 ]; then
  OUT=$W/truth_e TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes ema-foreach,torch-rmsprop --no-top-remedy" \
    bash benchmarks/gpu/truth.sh efficientnet_amp > $W/truth_e.log 2>&1
  echo "efficientnet rc=$? at $(( $(date +%s) - t0 )) s"
fi
left=$(( S - ($(date +%s) - t0) - 20 ))
if [ $left -gt 200 ]; then
  OUT=$W/truth_w TRUTH_BUDGET_S=$(( left > 260 ? 240 : left - 20 )) TRUTH_ARGS="--quick" \
    bash benchmarks/gpu/truth.sh wav2vec2_ctc > $W/truth_w.log 2>&1
  echo "wav2vec2 rc=$? at $(( $(date +%s) - t0 )) s"
fi
for f in $W/truth_w.log $W/truth_e.log; do [ -f $f ] && grep -A16 "^== " $f | grep -v "^\[truth\]"; done
tar -czf "$DEST/dec09c.tgz" -C /tmp dec09c
echo "session done in $(( $(date +%s) - t0 )) s"
