#!/usr/bin/env bash
# Prepared 2026-12-04 (late; no device was lent that session) for the next session: issue 15.
# 1. The prefetcher fix of that session (flatten no longer leaves batches in a reference
#    cycle): the GPU test that forks DataLoader workers after prefetching, whose collector
#    used to free the prefetcher's device tensors in the child and die.
# 2. Does membound.data.prefetch trail DataLoader(pin_memory=True)? It ran after pin_memory
#    in every earlier call while the machine drifted 9-15% between baselines. Now in rounds
#    (bench_truth --rounds 3: forward, backward, forward, a baseline between rounds, each run
#    paired with the baseline at its place), with the prefetcher's copy threads at its
#    default (8 on 16 cores), 1 and 2. No diagnose.
# Products: pytest_prefetch_gpu.txt; truth.sh's in $DEST/rounds (truth.csv, bench.log, tgz).
source "$(dirname "$0")/_session.sh"
timeout 120 python -m pytest -q tests/data/test_prefetch_gpu.py >"$DEST/pytest_prefetch_gpu.txt" 2>&1
echo "prefetch gpu tests rc=$? at $(( $(date +%s) - t0 )) s"; tail -3 "$DEST/pytest_prefetch_gpu.txt"
OUT="$DEST/rounds" TRUTH_BUDGET_S=$(( 530 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes pin-memory,pin-mem,membound-prefetch,membound-prefetch-t1,membound-prefetch-t2 --no-diagnose --rounds 3" \
  bash benchmarks/gpu/truth.sh lightning_fit,vit_timm 2>&1 | grep -v "^\[truth\].*start" | tail -60
echo "session done in $(( $(date +%s) - t0 )) s"
