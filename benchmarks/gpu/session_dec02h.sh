#!/usr/bin/env bash
# 2026-12-02 (third session), call 1: why recorded bf16 matmuls beat the matmul ceiling
# (probe_matmul_roof.py), membound's norm host cost on this host (probe_norm_host.py), then
# truth by intervention for compiled GPT-2's top remedy, bf16 storage (--bf16-weights), never
# measured before. Products under $OUT: probe_matmul_roof.jsonl, probe_norm_host.jsonl,
# truth.sh's.
source "$(dirname "$0")/_session.sh"
timeout 150 python benchmarks/probe_matmul_roof.py --out "$DEST/probe_matmul_roof.jsonl" > "$DEST/probe_matmul_roof.log" 2>&1
echo "matmul probe rc=$? in $(( $(date +%s) - t0 )) s"
timeout 60 python benchmarks/probe_norm_host.py > "$DEST/probe_norm_host.jsonl" 2>&1
echo "norm probe rc=$? in $(( $(date +%s) - t0 )) s"
TRUTH_ARGS="${TRUTH_ARGS:---fixes bf16-weights}" TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-380}" \
  bash benchmarks/gpu/truth.sh "${TRUTH_GROUP:-gpt2_compiled}"
