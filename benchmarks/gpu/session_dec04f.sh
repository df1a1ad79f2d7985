#!/usr/bin/env bash
# 2026-12-04 (evening), call 1: issue 15. Two probes, then a script written this session.
# 1. probe_op_overhead: does a GPU-only profiler slow CPU-side ATen ops (the tabular loop's
#    per-row collate), during and after it?
# 2. probe_loader_host: what a worker-fed batch costs the training thread, pageable against
#    pinned (the Lightning and ViT pinning savings above what pageable-copy predicted).
# 3. out of sample: examples/real/segmentation_tv.py (torchvision's segmentation reference:
#    DeepLabV3-ResNet50, fp16 AMP, 8 workers, no pin_memory), diagnosed and timed with each fix.
# Products: op_overhead.jsonl, loader_host.jsonl; truth.sh's in $DEST/seg.
source "$(dirname "$0")/_session.sh"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv
timeout 60 python benchmarks/probe_op_overhead.py > "$DEST/op_overhead.jsonl" 2>"$DEST/op_overhead.err"
echo "op probe rc=$? at $(( $(date +%s) - t0 )) s"; cat "$DEST/op_overhead.jsonl"
timeout 120 python benchmarks/probe_loader_host.py > "$DEST/loader_host.jsonl" 2>"$DEST/loader_host.err"
echo "loader probe rc=$? at $(( $(date +%s) - t0 )) s"; cat "$DEST/loader_host.jsonl"; tail -3 "$DEST/loader_host.err"
OUT="$DEST/seg" TRUTH_BUDGET_S=$(( 540 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes pin-memory,membound-prefetch,channels-last,log-every-100,bf16" \
  bash benchmarks/gpu/truth.sh segmentation_tv 2>&1 | tail -45
echo "session done in $(( $(date +%s) - t0 )) s"
