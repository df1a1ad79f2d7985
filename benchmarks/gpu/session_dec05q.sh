#!/usr/bin/env bash
# 2026-12-05 (seventh session), the budget's last ~5 min: issue 15's GPU what-if host floor.
# Call o found no autograd thread (its first boundary, a DataLoader's, came before the first
# backward); the clock now looks at its first four boundaries. The T5 (HF Seq2SeqTrainer)
# under diagnose with the training thread's and the autograd threads' CPU a step, then TF32
# and bf16 paired with baselines (bench_truth). Products: one tarball, q.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/q; mkdir -p $W
C=benchmarks/results/h100_ceilings_2026-12-05o.json
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
OUT=$W/t5 TRUTH_BUDGET_S=$(( ${TOTAL_S:-330} - 60 )) \
  TRUTH_ARGS="--fixes tf32,bf16 --ceilings $C" bash benchmarks/gpu/truth.sh t5_seq2seq 2>&1 \
  | grep -v "^\[truth\].*start" | tail -24
mkdir -p $W/x && tar -xzf $W/t5/truth-t5_seq2seq.tgz -C $W/x
python - <<PY
import json
r = json.load(open("$W/x/traces/t5_seq2seq/report.json"))
print(r["gpu_whatif"])
print(json.load(open("$W/x/traces/t5_seq2seq/capture.json"))["thread_per_step"])
PY
tar -czf "$DEST/q.tgz" -C /tmp q
echo "session done in $(( $(date +%s) - t0 )) s"
