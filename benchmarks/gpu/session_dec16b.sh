#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session), one call of ~6 min on any card: torch.compile's
# over-predictions on two conv nets, looked at from the compiled side. The DDPM U-Net's compile
# saved 10.57 and 9.85 ms/step on two H100 hosts where 15.45 and 15.59 were predicted
# (session_dec16a), ConvNeXt-T's 12.26 where 25.51 was. Each compiled variant is diagnosed
# (probes off: the timeline and the ops pass are wanted, to compare kernel by kernel with the
# eager fixtures h100_real_ddpm_unet_truth6 and h100_real_convnext_amp_truth1), and ConvNeXt's
# eager loop too, on this host. Products: dec16b.tgz (traces, reports, logs).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec16b; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
for spec in "ddpm_unet --compile" "convnext_amp --compile" "convnext_amp"; do
  set -- $spec; name=$1${2:+_${2#--}}; r0=$(date +%s)
  timeout 200 python -m membound diagnose --wait 8 --warmup 2 --steps 4 --no-annotate --no-norm-probe \
    --out $W/$name --json $W/$name/report.json -- python examples/real/$1.py --steps 26 --warmup-steps 0 $2 \
    > $W/$name.log 2>&1
  echo "$name rc=$? in $(( $(date +%s) - r0 )) s"; grep -m3 "unprofiled\|step " $W/$name.log | cut -c1-200
  tar czf "$DEST/dec16b.tgz" -C /tmp dec16b
done
echo "session done in $(( $(date +%s) - t0 )) s"
