#!/usr/bin/env bash
# Prepared 2026-12-07 (nineteenth session), one call of ~9 min on any card: three of that
# session's open truth questions, each fix paired with baselines in rounds (bench_truth
# --rounds), because single pairs on those hosts drifted more than the figures in question.
# 1. t5_seq2seq: TF32 and HF's torch_compile=True. The script passes tf32=False, which
#    transformers reads as "keep TF32 off", yet on the H100 the compiled step (31.0 ms) was
#    shorter than the eager fp32 matmuls alone (33.2): the truth line's "matmul" (recorded
#    since 2026-12-07) says which precision the compiled run had.
# 2. efficientnet_amp: the EMA's foreach lerp and torch's foreach RMSprop. Predicted 16.9-18.3
#    and 25.0-25.7 on three hosts; measured 10.2-17.2 and 13.3-21.0, the last call's
#    baselines 9.3% apart (drifting 170 -> 155 ms across the fixes).
# 3. gpt2_compiled: logging every 100 steps. host-sync's replay said 3.65 and 1.49 ms/step on
#    two traces of the same loop and machine; 1.16 and 1.07 measured.
# Products: truth_dec12a.csv, dec12a.tgz (logs, traces, the truth lines).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec12a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
# SPECS: "script fixes rounds" triples in order
IFS=';' read -ra specs <<< "${SPECS:-t5_seq2seq tf32,torch-compile 2;efficientnet_amp ema-foreach,torch-rmsprop 2;gpt2_compiled log-every-100 2}"
for spec in "${specs[@]}"; do
  set -- $spec
  left=$(( S - ($(date +%s) - t0) - 15 ))
  if [ $left -lt 120 ]; then echo "$1 skipped: $left s left"; continue; fi
  OUT=$W/truth_$1 TRUTH_BUDGET_S=$left \
    TRUTH_ARGS="--no-top-remedy --fixes $2 --rounds $3" \
    bash benchmarks/gpu/truth.sh $1 > $W/truth_$1.log 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - t0 )) s"
  grep -A16 "^== " $W/truth_$1.log | grep -v "^\[truth\]"
  # the precision each run of this script trained with (T5: did torch_compile turn TF32 on?)
  for f in "${GPU_OUT:-/tmp/gpu_out}"/truth-work/logs/$1.*.log; do
    echo "$(basename $f): $(grep -ho '"matmul": {[^}]*}' $f | tail -1)"
  done
done
cat $W/truth_*/truth.csv > "$DEST/truth_dec12a.csv" 2>/dev/null
tar -czf "$DEST/dec12a.tgz" -C /tmp dec12a
echo "session done in $(( $(date +%s) - t0 )) s"
