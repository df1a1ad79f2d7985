#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fifth session), one call of ~8 min on an H100 (or an H200): is
# the host work a diagnose trace records in a GPU-bound loop the host work of the loop as run?
# The BERT fine-tune's fp32 trace replays to 41 ms/step of host work where TF32 (same launches)
# ran 30.2 ms/step; the DDPM's fp32 trace to 68 where bf16 ran 60.1. On one host:
# 1. plain-timer runs of each variant twice: as the user runs it, and with
#    MEMBOUND_BLOCKING_SYNC=1 (syncs sleep, so the training thread's CPU is its host work);
#    every run also reports its autograd threads' CPU (backward's host work);
# 2. `membound diagnose` of each variant (the traces and reports kept).
# SPECS: "script|flags" items, comma-separated. Products: dec19a.tgz (logs, traces, reports).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/dec19a; mkdir -p $W
S=${SESSION_S:-500}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
IFS=, read -ra specs <<< "${SPECS:-bert_finetune|,bert_finetune|--tf32,ddpm_unet|,ddpm_unet|--bf16}"
for spec in "${specs[@]}"; do
  name=${spec%%|*}; flags=${spec#*|}; tag=$name$(echo "$flags" | tr -d ' -')
  left=$(( S - ($(date +%s) - t0) - 20 ))
  if [ $left -lt 60 ]; then echo "$tag skipped: $left s left"; continue; fi
  for bs in "" 1; do
    MEMBOUND_BLOCKING_SYNC=$bs timeout $(( left / 3 )) python examples/real/$name.py --steps 15 \
      --warmup-steps 5 $flags 2>&1 | grep MEMBOUND_TRUTH > $W/$tag.plain$bs.txt
    python - "$W/$tag.plain$bs.txt" "$tag${bs:+ blocking}" <<'PY'
import json, sys
try:
    d = json.loads(open(sys.argv[1]).read().split("MEMBOUND_TRUTH", 1)[1].lstrip(": "))
except Exception as exc:
    print(sys.argv[2], "no result:", exc); raise SystemExit
print(f"{sys.argv[2]}: step {d['step_ms']} median {d['step_ms_median']} thread "
      f"{d.get('thread', {}).get('cpu_ms')} process {d.get('process', {}).get('cpu_ms')} "
      f"autograd {d.get('autograd_cpu_ms')} {d.get('blocking_sync', '')}")
PY
  done
done
for spec in "${specs[@]}"; do
  name=${spec%%|*}; flags=${spec#*|}; tag=$name$(echo "$flags" | tr -d ' -')
  left=$(( S - ($(date +%s) - t0) - 20 ))
  if [ $left -lt 70 ]; then echo "$tag diagnose skipped: $left s left"; continue; fi
  r0=$(date +%s)
  timeout $left python -m membound diagnose --wait 8 --warmup 2 --steps 4 --no-annotate \
    --no-norm-probe --out $W/$tag --json $W/$tag/report.json -- \
    python examples/real/$name.py --steps 26 --warmup-steps 0 $flags > $W/$tag.log 2>&1
  echo "$tag diagnose rc=$? in $(( $(date +%s) - r0 )) s"; grep -m2 "unprofiled" $W/$tag.log | cut -c1-200
  grep -m1 "GPU what-if" -A4 $W/$tag.log | cut -c1-200
  tar czf "$DEST/dec19a.tgz" -C /tmp dec19a
done
echo "session done in $(( $(date +%s) - t0 )) s"
