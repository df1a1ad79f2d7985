#!/usr/bin/env bash
# 2026-12-03, call 9: (1) issue 16, why ops run above every pass even by the kernel clock:
# benchmarks/probe_chain_roof.py (L2 holding the producer's output, or the data); (2) issue 15,
# truth by intervention on compiled GPT-2: reduce-overhead and log-every-100 against the
# baseline, with membound's predictions now that CUDA-graph replays are costed.
# Products: chain_roof.jsonl, and truth.sh's (truth.csv, bench.log, env.txt, truth-*.tgz).
source "$(dirname "$0")/_session.sh"
timeout 120 python benchmarks/probe_chain_roof.py --out "$DEST/chain_roof.jsonl" 2>&1 | tail -20
echo "probe rc=$? in $(( $(date +%s) - t0 )) s"
OUT="$DEST" TRUTH_ARGS="--fixes reduce-overhead,log-every-100" TRUTH_BUDGET_S=330 \
  bash benchmarks/gpu/truth.sh gpt2_compiled 2>&1 | tail -40
echo "session done in $(( $(date +%s) - t0 )) s"
