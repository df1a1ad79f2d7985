#!/usr/bin/env bash
# Prepared 2026-12-06 (sixteenth session) for one call (~9.5 min, any card).
# On an H200: issue 16's roofline refresh (under 60 s) with every recorded H200 fixture checked
#   against the ceilings it measures (`card_roof_check`), then the fused optimizer timed on the
#   H200 for the first time (ViT, BERT, the fp32 ResNet-50; H100: 3.22, 1.58, 0.28 saved).
# On an H100: the fused optimizer on DeepLabV3 in three rounds (two single runs measured -1.73
#   and 5.16 against 2.64 and 3.08 predicted: the loop's noise, not yet a verdict) and on the
#   ViT in two (baselines 18% apart in the one call).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec09a; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" 300
  SCRIPTS=vit_timm,bert_finetune,resnet50_fp32; ARGS="--fixes fused-optimizer --no-top-remedy"
else
  SCRIPTS=segmentation_tv,vit_timm; ARGS="--fixes fused-optimizer --no-top-remedy --rounds 3"
fi
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="$ARGS" bash benchmarks/gpu/truth.sh $SCRIPTS \
  > $W/truth_out.log 2>&1
echo "truth.sh rc=$? at $(( $(date +%s) - t0 )) s; runs: $(grep -c ' ok ' $W/truth_out.log) ok lines"
grep -o "^== [a-z0-9_]*" $W/truth_out.log | tr '\n' ' '; echo
tar -czf "$DEST/dec09a.tgz" -C /tmp dec09a
echo "session done in $(( $(date +%s) - t0 )) s"
