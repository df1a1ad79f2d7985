#!/usr/bin/env bash
# 2026-12-05 (seventh session), one call (~8 min) on whichever card comes:
# 1. the GPU tests of the step clock's GPU clock and of the capture (pytest -m gpu);
# 2. a loop that never syncs (examples/planted/healthy.py) under diagnose: the unprofiled
#    step on the GPU's clock beside the host's;
# 3. issue 15, the GPU what-if's host floor: the T5 (HF Seq2SeqTrainer) under diagnose, now
#    with the autograd threads' CPU time beside the training thread's, then its TF32 and bf16
#    fixes, paired with baselines (bench_truth); the BERT the same where the budget allows.
# Ceilings: the H100's of 2026-12-05 (benchmarks/results/h100_ceilings_2026-12-05o.json).
# Products: one tarball, o.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/o; mkdir -p $W/healthy
C=benchmarks/results/h100_ceilings_2026-12-05o.json
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader | tee $W/gpu.txt
r0=$(date +%s)
timeout 150 python -m pytest -q -m gpu -p no:cacheprovider tests/trace/test_step_clock_gpu.py \
  tests/trace/test_capture.py tests/trace/test_marks.py > $W/pytest_gpu.txt 2>&1
echo "pytest gpu rc=$? in $(( $(date +%s) - r0 )) s"; tail -3 $W/pytest_gpu.txt
r0=$(date +%s)
timeout 60 python -m membound diagnose --ceilings $C --no-annotate --wait 8 --warmup 2 --steps 4 \
  --out $W/healthy --json $W/healthy/report.json -- examples/planted/healthy.py > $W/healthy.log 2>&1
echo "healthy rc=$? in $(( $(date +%s) - r0 )) s"
python - <<PY
import json
r = json.load(open("$W/healthy/report.json"))["steps"]
print({k: r.get(k) for k in ("unprofiled_median_ms", "unprofiled_clock", "unprofiled_host_median_ms",
                             "profiled_median_ms", "unprofiled_after_median_ms")})
m = json.load(open("$W/healthy/capture.json"))
print("gpu", m.get("gpu_step_times_ms")); print("host", m.get("step_times_ms"))
PY
grep -m2 "unprofiled" $W/healthy.log
budget=$(( ${TOTAL_S:-540} - ($(date +%s) - t0) - 30 ))
OUT=$W/t5 TRUTH_BUDGET_S=$(( budget > 230 ? 230 : budget )) \
  TRUTH_ARGS="--fixes tf32,bf16 --ceilings $C" bash benchmarks/gpu/truth.sh t5_seq2seq 2>&1 \
  | grep -v "^\[truth\].*start" | tail -24
budget=$(( ${TOTAL_S:-540} - ($(date +%s) - t0) - 30 ))
if [ "$budget" -gt 150 ]; then
  OUT=$W/bert TRUTH_BUDGET_S=$budget TRUTH_ARGS="--fixes tf32,bf16 --ceilings $C" \
    bash benchmarks/gpu/truth.sh bert_finetune 2>&1 | grep -v "^\[truth\].*start" | tail -22
else
  echo "BERT skipped: $budget s left"
fi
find $W -name "trace.ops.json.gz" -size +20M -delete
tar -czf "$DEST/o.tgz" -C /tmp o
echo "session done in $(( $(date +%s) - t0 )) s"
