#!/usr/bin/env bash
# 2026-12-03, call 3 (issue 15): where membound's norm spends its host time (cProfile and
# torch.profiler over fwd+bwd, benchmarks/probe_norm_host_profile.py), then the norm what-if
# out of sample on HF's Llama (RMSNorm written out as ~8 ops): truth by intervention for
# swap_norms. Products: norm_host_profile.jsonl, truth/ (truth.csv, bench.log, the tgz).
source "$(dirname "$0")/_session.sh"
timeout 150 python benchmarks/probe_norm_host_profile.py > "$DEST/norm_host_profile.jsonl" 2> "$DEST/norm_host_profile.err"
echo "profile rc=$? in $(( $(date +%s) - t0 )) s"; cut -c1-600 "$DEST/norm_host_profile.jsonl"; tail -3 "$DEST/norm_host_profile.err"
OUT="$DEST/truth" TRUTH_ARGS="--fixes swap-norms" TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-260}" \
  bash benchmarks/gpu/truth.sh hf_trainer_llama | grep -v "^\[truth\] .*start\|^\[truth.sh\]\|^-rw\|^total\|^drwx"
rm -f "$DEST"/truth/env.txt
echo "session done in $(( $(date +%s) - t0 )) s"
