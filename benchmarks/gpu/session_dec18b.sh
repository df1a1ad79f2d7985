#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fourth session), one call of ~8 min on an H100: the fixed
# variants the predictions missed most on the H100 (session_dec18a), diagnosed, so that their
# traces say what the model left out, each beside a plain-timer pair (baseline, then fix):
# - the BERT fine-tune with --tf32: 32.87 ms/step saved, 21.50 predicted; the replay's host
#   work (41 ms/step in the eager trace) put the step after the fix at 41, the plain timer 30.2;
# - the ResNet-50 fp32 with --compile: 24.69 saved, 35.04 predicted;
# - the ConvNeXt AMP with --compile: 12.26 saved, 25.51 predicted (2026-12-06).
# SPECS: "script|flags" items, comma-separated. Products: dec18b.tgz (logs, traces, reports).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/dec18b; mkdir -p $W
S=${SESSION_S:-500}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
IFS=, read -ra specs <<< "${SPECS:-bert_finetune|--tf32,resnet50_fp32|--compile,convnext_amp|--compile}"
for spec in "${specs[@]}"; do
  name=${spec%%|*}; flags=${spec#*|}; tag=$name$(echo "$flags" | tr -d ' -')
  left=$(( S - ($(date +%s) - t0) - 20 ))
  if [ $left -lt 100 ]; then echo "$tag skipped: $left s left"; continue; fi
  r0=$(date +%s)
  for v in base fix; do
    f=""; [ $v = fix ] && f="$flags"
    timeout $(( left / 3 )) python examples/real/$name.py --steps 15 --warmup-steps 5 $f 2>&1 \
      | grep MEMBOUND_TRUTH > $W/$tag.$v.txt  # whole: step_ms comes late in the line
    echo "$tag $v: $(grep -o '"step_ms": [0-9.]*' $W/$tag.$v.txt)"
  done
  left=$(( S - ($(date +%s) - t0) - 20 ))
  timeout $left python -m membound diagnose --wait 8 --warmup 2 --steps 4 --no-annotate \
    --no-norm-probe --out $W/$tag --json $W/$tag/report.json -- \
    python examples/real/$name.py --steps 26 --warmup-steps 0 $flags > $W/$tag.log 2>&1
  echo "$tag diagnose rc=$? in $(( $(date +%s) - r0 )) s"; grep -m2 "unprofiled" $W/$tag.log | cut -c1-200
  tar czf "$DEST/dec18b.tgz" -C /tmp dec18b
done
echo "session done in $(( $(date +%s) - t0 )) s"
