#!/usr/bin/env bash
# Prepared 2026-12-06 (thirteenth session) for one call (~8-9 min, any card). First the
# whole-step CUDA graph of lstm_lm.py and mnist_cnn.py through the shared _common.capture_step
# (refactored after their last calls). Then, on an H200: issue 16's roofline refresh with every
# recorded H200 fixture checked against it, and timm's ViT with --cuda-graphs, where graph_step
# is predicted at 8-11 ms/step and untimed. On an H100 instead (the ConvNeXt's fixes it ran
# here before were timed on a second host in the thirteenth session): DeepLabV3's compile and
# channels_last on another host, where compile's replay under-predicted compile by ~5 ms on
# the fourteenth session's host (9.50 against 14.43 and 15.06).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06j; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
for s in lstm_lm mnist_cnn; do
  timeout 90 python examples/real/$s.py --cuda-graphs --steps 40 --warmup-steps 5 \
    > $W/graphs_$s.log 2>&1; echo "$s --cuda-graphs rc=$?"; grep -v "^Train\|^step\|^| " $W/graphs_$s.log | tail -2 | cut -c1-240
done
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
  left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
  OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes cuda-graphs,membound-prefetch --no-top-remedy" \
    bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep -A30 "^== vit" | tail -30
else
  left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
  OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes compile,channels-last,pin-memory" \
    bash benchmarks/gpu/truth.sh segmentation_tv 2>&1 | grep -A30 "^== segm" | tail -30
fi
tar -czf "$DEST/dec06j.tgz" -C /tmp dec06j
echo "session done in $(( $(date +%s) - t0 )) s"
