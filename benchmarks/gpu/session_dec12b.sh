#!/usr/bin/env bash
# Prepared 2026-12-07 (nineteenth session), one call of ~9 min on any card: compile's
# over-prediction on GPU-heavy AMP conv nets (issue 15). On the H100 the ConvNeXt-T's compile
# was predicted 25.51 ms/step and saved 12.26; the DDPM U-Net's 15.45 against 10.57. The
# replay (`analysis.compile_whatif`) cannot be checked kernel by kernel without a trace of
# the compiled run, so each script here gets:
# 1. bench_truth with compile in rounds (the eager diagnose trace kept, compile timed twice
#    against paired baselines);
# 2. `membound diagnose` of the same script with --compile (the compiled trace kept): which
#    kernels inductor left, fused or as they were, and their time.
# Products: truth_dec12b.csv, dec12b.tgz (logs, both traces per script).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec12b; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
IFS=, read -ra scripts <<< "${SCRIPTS:-convnext_amp,ddpm_unet}"
for s in "${scripts[@]}"; do
  left=$(( S - ($(date +%s) - t0) - 15 ))
  if [ $left -lt 200 ]; then echo "$s skipped: $left s left"; continue; fi
  # the compiled trace first: it needs ~100 s, the rounds take what is left
  r0=$(date +%s)
  timeout $(( left / 3 )) python -m membound diagnose --wait 14 --warmup 2 --steps 3 \
    --no-annotate --out $W/compiled_$s --json $W/compiled_$s/report.json \
    -- python examples/real/$s.py --compile --steps 44 --warmup-steps 0 \
    > $W/compiled_$s.log 2>&1
  echo "$s compiled diagnose rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E "^[0-9]+ steps|top:|costed" $W/compiled_$s.log | head -4
  left=$(( S - ($(date +%s) - t0) - 15 ))
  OUT=$W/truth_$s TRUTH_BUDGET_S=$left \
    TRUTH_ARGS="--no-top-remedy --fixes compile --rounds 2" \
    bash benchmarks/gpu/truth.sh $s > $W/truth_$s.log 2>&1
  echo "$s rc=$? at $(( $(date +%s) - t0 )) s"
  grep -A16 "^== " $W/truth_$s.log | grep -v "^\[truth\]"
done
cat $W/truth_*/truth.csv > "$DEST/truth_dec12b.csv" 2>/dev/null
tar -czf "$DEST/dec12b.tgz" -C /tmp dec12b
echo "session done in $(( $(date +%s) - t0 )) s"
