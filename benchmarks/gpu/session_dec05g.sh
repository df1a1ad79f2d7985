#!/usr/bin/env bash
# Prepared 2026-12-05 (fourth session, no device lent), ~2 min: issue 15, T5's TF32/bf16
# miss (4.55 and 2.65 ms/step measured, 15.9 predicted by the GPU what-if, whose floor is
# the host's work as recorded in fp32). Does a TF32 or bf16-autocast matmul cost the host
# more per call than an fp32 one (benchmarks/probe_matmul_host.py)? If so, the what-if
# should add that host time to every matmul launch it replays for those remedies.
# Product: matmul_host.jsonl.
source "$(dirname "$0")/_session.sh"
timeout 240 python benchmarks/probe_matmul_host.py > "$DEST/matmul_host.jsonl" 2> "$DEST/matmul_host.err"
echo "probe_matmul_host rc=$? in $(( $(date +%s) - t0 )) s"
cat "$DEST/matmul_host.jsonl"; tail -3 "$DEST/matmul_host.err"
