#!/usr/bin/env bash
# 2026-12-04 (evening), call 2: issue 15/16.
# 1. probe_upsample: bilinear upsampling's backward (DeepLabV3's 16.4 ms/step op) NCHW against
#    channels_last and compiled.
# 2. the DeepLabV3 script diagnosed with --channels-last: where its 11.3 ms/step saving went.
# 3. truth runs of the three worker-fed pageable loaders (Lightning, timm ViT, DeepLabV3) with
#    pinning and membound.data.prefetch: diagnose now measures a worker batch's release cost
#    (trace/loader_probe.py) and pageable-copy counts the GPU idle beside the copies.
# Products: upsample.jsonl, seg_channels_last.json (+ its log); truth.sh's in $DEST/pin.
source "$(dirname "$0")/_session.sh"
timeout 120 python benchmarks/probe_upsample.py > "$DEST/upsample.jsonl" 2>"$DEST/upsample.err"
echo "upsample probe rc=$? at $(( $(date +%s) - t0 )) s"; cat "$DEST/upsample.jsonl"; tail -2 "$DEST/upsample.err"
timeout 150 python -m membound diagnose --json "$DEST/seg_channels_last.json" --out /tmp/seg_cl --ceilings benchmarks/results/h200_ceilings.json \
  -- python examples/real/segmentation_tv.py --channels-last --steps 15 > "$DEST/seg_channels_last.log" 2>&1
echo "diagnose channels_last rc=$? at $(( $(date +%s) - t0 )) s"; tail -25 "$DEST/seg_channels_last.log"
OUT="$DEST/pin" TRUTH_BUDGET_S=$(( 560 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes pin-memory,membound-prefetch,pin-mem,channels-last" \
  bash benchmarks/gpu/truth.sh segmentation_tv,lightning_fit,vit_timm 2>&1 | grep -v "^\[truth\].*start" | tail -75
echo "session done in $(( $(date +%s) - t0 )) s"
