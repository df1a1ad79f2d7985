#!/usr/bin/env bash
# Prepared 2026-12-06 (fifteenth session) for one call (~9.5 min, any card).
# 1. On an H200 only: issue 16's roofline refresh (under 60 s) with every recorded H200 fixture
#    checked against it (`card_roof_check`).
# 2. Any card: a fused optimizer (`--fused-optimizer`: SGD or AdamW with fused=True), timed on
#    five scripts where no call had timed one: DeepLabV3 (fp16 + GradScaler + SGD: the scaler's
#    inf check is a sync a fused optimizer removes), the DDPM U-Net, BERT, timm's ViT and the fp32
#    ResNet-50. Only the ConvNeXt had timed one (10.91 and 9.08 ms/step saved, 0.90 and 1.67
#    predicted). The tables are written to files, not printed: the fused-optimizer what-if was
#    written before they were read (sealed results).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec08a; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
fi
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes fused-optimizer --no-top-remedy" \
  bash benchmarks/gpu/truth.sh segmentation_tv,ddpm_unet,bert_finetune,vit_timm,resnet50_fp32 \
  > $W/truth_out.log 2>&1
echo "truth.sh rc=$? at $(( $(date +%s) - t0 )) s; runs: $(grep -c ' ok ' $W/truth_out.log) ok lines"
grep -o "^== [a-z0-9_]*" $W/truth_out.log | tr '\n' ' '; echo
tar -czf "$DEST/dec08a.tgz" -C /tmp dec08a
echo "session done in $(( $(date +%s) - t0 )) s"
