#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-second session), one call of ~4 min on any card: the fixed
# variants that the dtype/layout what-ifs mispredicted in session_dec14a, diagnosed so that
# their kernels can be compared op by op with the baselines' traces of that call:
#   ddpm_unet --channels-last (-13.07 ms/step measured, +4.52 predicted: the convolutions got
#     faster in the probe, so something else got slower), efficientnet_amp --bf16 (-29.37
#     measured, -15.20 predicted), classification_tv --channels-last (13.92, what-if 6.83).
# Probes off (--no-norm-probe): only the timeline and the ops pass are wanted.
# Products: dec15a.tgz (the traces and the diagnose logs), this script's log.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec15a; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
for spec in "ddpm_unet --channels-last" "efficientnet_amp --bf16" "classification_tv --channels-last"; do
  set -- $spec; name=$1_${2#--}; r0=$(date +%s)
  timeout 150 python -m membound diagnose --wait 8 --warmup 2 --steps 4 --no-annotate --no-norm-probe \
    --out $W/$name --json $W/$name/report.json -- python examples/real/$1.py --steps 24 --warmup-steps 0 $2 \
    > $W/$name.log 2>&1
  echo "$name rc=$? in $(( $(date +%s) - r0 )) s"; grep -m3 "unprofiled\|step " $W/$name.log | cut -c1-200
done
tar czf "$DEST/dec15a.tgz" -C /tmp dec15a
echo "session done in $(( $(date +%s) - t0 )) s"
