#!/usr/bin/env bash
# 2026-12-05 (second session), second device call (~9 min): issue 15, does membound.data.prefetch
# now keep up with the framework's own pinning switch? The prefetcher has a worker DataLoader
# pin its own batches (its pin thread) and only copies them on its side stream, the variant
# that saved 19.5/19.6 ms/step on the ViT in the first call against pin_memory's 10.1/21.9.
# Two rounds of pin_memory vs membound.data.prefetch on the four loaders with workers:
# timm ViT, Lightning fit, DCGAN, torchvision segmentation. No diagnose runs.
# Products: truth.sh's in $DEST/{vit,lightning,dcgan,seg}.
source "$(dirname "$0")/_session.sh"
timeout 90 python -m pytest -q -p no:cacheprovider tests/data/test_prefetch_gpu.py tests/data/test_prefetch.py 2>&1 | tail -3
A="--no-diagnose --no-top-remedy --rounds 2"
OUT="$DEST/vit" TRUTH_BUDGET_S=125 TRUTH_ARGS="--fixes pin-mem,membound-prefetch $A" \
  bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep "^  \|\[truth\].*ms/step" | tail -14
OUT="$DEST/lightning" TRUTH_BUDGET_S=130 TRUTH_ARGS="--fixes pin-memory,membound-prefetch $A" \
  bash benchmarks/gpu/truth.sh lightning_fit 2>&1 | grep "^  \|\[truth\].*ms/step" | tail -14
OUT="$DEST/dcgan" TRUTH_BUDGET_S=125 TRUTH_ARGS="--fixes pin-memory,membound-prefetch $A" \
  bash benchmarks/gpu/truth.sh dcgan 2>&1 | grep "^  \|\[truth\].*ms/step" | tail -14
OUT="$DEST/seg" TRUTH_BUDGET_S=$(( 550 - ($(date +%s) - t0) )) TRUTH_ARGS="--fixes pin-memory,membound-prefetch $A" \
  bash benchmarks/gpu/truth.sh segmentation_tv 2>&1 | grep "^  \|\[truth\].*ms/step" | tail -14
echo "session done in $(( $(date +%s) - t0 )) s"
