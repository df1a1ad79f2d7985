#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one call (~6 min, any card): examples/real/
# mnist_cnn.py (PyTorch's examples/mnist: a small CNN, a one-worker pinned loader with
# per-item PIL transforms, Adadelta), out of sample, written after host-bound and graph_step
# were built from the LSTM and measured before any rule is changed for it: baselines,
# diagnose, and every fix (workers, membound's prefetcher, the whole step in a CUDA graph,
# logging less, compile). Every product in one tarball: dec06e.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06e; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
python examples/real/mnist_cnn.py --cuda-graphs --steps 30 --warmup-steps 2 2>&1 | tail -1 | cut -c1-200
OUT=$W/truth TRUTH_BUDGET_S=${TRUTH_BUDGET_S:-420} bash benchmarks/gpu/truth.sh mnist_cnn 2>&1 \
  | grep -A32 "^== mnist" | tail -32
tar -czf "$DEST/dec06e.tgz" -C /tmp dec06e
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
