#!/usr/bin/env bash
# Prepared 2026-12-07 (nineteenth session), one call of ~9 min on any card: a fix whose
# prediction misses because the analysis cannot see what the fix does to the kernels, timed
# in rounds beside a diagnose of the fixed run itself, so the what-if can be checked kernel by
# kernel against what ran. Each spec is "script|fix|flags" (the fix's bench_truth name and its
# flags on the script):
# - default, compile on the AMP conv nets: on the H100 the ConvNeXt-T's compile was predicted
#   25.51 ms/step and saved 12.26; the DDPM U-Net's 15.45 against 10.57
#   (`analysis.compile_whatif`);
# - SPECS="ddpm_unet|bf16|--bf16;lightning_fit|bf16-mixed|--precision bf16-mixed": bf16 on
#   fp32 conv nets whose convolutions run TF32 already (cuDNN's default). The DDPM's bf16 was
#   predicted 6.22 and saved 11.38; Lightning's ResNet 0.50 against 5.10. No finding holds the
#   TF32 convolutions (30.9 ms a step of the DDPM's kernels, at 29-34% of the TF32 roof),
#   and what bf16 does to them is the unknown.
# Per spec: 1. `membound diagnose` of the script with the fix's flags (its trace kept);
# 2. bench_truth with that fix in 2 rounds (the eager diagnose trace kept).
# Products: truth_dec12b.csv, dec12b.tgz (logs, both traces per spec).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec12b; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
IFS=';' read -ra specs <<< "${SPECS:-convnext_amp|compile|--compile;ddpm_unet|compile|--compile}"
for spec in "${specs[@]}"; do
  IFS='|' read -r s fix flags <<< "$spec"
  tag=${s}_${fix}
  left=$(( S - ($(date +%s) - t0) - 15 ))
  if [ $left -lt 200 ]; then echo "$tag skipped: $left s left"; continue; fi
  # the fixed run's own trace first (a compiled run needs ~100 s); the rounds take the rest
  r0=$(date +%s)
  mkdir -p $W/fixed_$tag
  timeout $(( left / 3 )) python -m membound diagnose --wait 14 --warmup 2 --steps 3 \
    --no-annotate --out $W/fixed_$tag --json $W/fixed_$tag/report.json \
    -- python examples/real/$s.py $flags --steps 44 --warmup-steps 0 \
    > $W/fixed_$tag.log 2>&1
  echo "$tag fixed-run diagnose rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E "steps · step|top:" $W/fixed_$tag.log | head -3
  left=$(( S - ($(date +%s) - t0) - 15 ))
  OUT=$W/truth_$tag TRUTH_BUDGET_S=$left \
    TRUTH_ARGS="--no-top-remedy --fixes $fix --rounds 2" \
    bash benchmarks/gpu/truth.sh $s > $W/truth_$tag.log 2>&1
  echo "$tag rc=$? at $(( $(date +%s) - t0 )) s"
  grep -A16 "^== " $W/truth_$tag.log | grep -v "^\[truth\]"
done
cat $W/truth_*/truth.csv > "$DEST/truth_dec12b.csv" 2>/dev/null
tar -czf "$DEST/dec12b.tgz" -C /tmp dec12b
echo "session done in $(( $(date +%s) - t0 )) s"
