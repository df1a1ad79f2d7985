#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one call (~4 min; ~6 on an H200): examples/real/
# gcn_cora.py (Kipf's pygcn, full-batch on a Cora-sized graph), out of sample: baselines,
# diagnose and every fix (the whole epoch in a CUDA graph, logging less, --fastmode, compile);
# then, on an H200 only, issue 16's roofline refresh and the H200 fixtures checked against it.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06g; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
python examples/real/gcn_cora.py --cuda-graphs --steps 30 --warmup-steps 2 2>&1 | tail -2 | cut -c1-200
OUT=$W/truth TRUTH_BUDGET_S=300 bash benchmarks/gpu/truth.sh gcn_cora 2>&1 \
  | grep -A30 "^== gcn" | tail -30
h200_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
tar -czf "$DEST/dec06g.tgz" -C /tmp dec06g
echo "session done in $(( $(date +%s) - t0 )) s"
