#!/usr/bin/env bash
# 2026-12-04, call 1: out of sample. Two training scripts written this session, never seen by
# membound's rules (examples/real/tabular_mlp.py, vit_timm.py), diagnosed and then timed with
# each fix, before any rule is changed for them (issue 15). First, issue 16's matmul data
# probe: does the bf16 rate depend on the operands' values (ReLU'd halves of zeros)?
# Products: $DEST/matmul_data.jsonl; truth.sh's in $DEST/oos.
source "$(dirname "$0")/_session.sh"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw,power.limit --format=csv
timeout 90 python benchmarks/probe_matmul_data.py --out "$DEST/matmul_data.jsonl" 2>&1 | tail -30
echo "probe rc=$? at $(( $(date +%s) - t0 )) s"
OUT="$DEST/oos" TRUTH_BUDGET_S=$(( 500 - ($(date +%s) - t0) )) \
  bash benchmarks/gpu/truth.sh tabular_mlp,vit_timm 2>&1 | tail -60
echo "session done in $(( $(date +%s) - t0 )) s"
