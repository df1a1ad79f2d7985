#!/usr/bin/env bash
# 2026-12-05 (sixth session), one call of ~7 min on whichever card comes; every product in
# one tarball (a call brings back at most 8 files):
# 1. `membound roofline --refresh`, then the compiled and the eager DCGAN under diagnose with
#    those ceilings, and check_over_roof over both traces (the H100 call before found four
#    inductor kernels of the compiled DCGAN at 105-113% of the same call's HBM roof: inputs
#    of 33.5 MB, each inside the 50 MB L2, in calls of 67-134 MB);
# 2. the capture's floor on the timm ViT: probe_cupti_kinds, 5 rounds, kernel records off too
#    (the DCGAN's, 5 rounds on the H100: +3.9% for membound's capture, +0.6% without kernels).
# Products: session.log, same.tgz (ceilings.json, roofline.txt, <name>/ traces and reports,
# over_roof.txt, cupti.jsonl, cupti_vit.log).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/same; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
refresh_ceilings $W/ceilings.json $W/roofline.txt; head -16 $W/roofline.txt | tail -12
diag() {  # name, timeout, script and flags
  local name=$1 limit=$2; shift 2
  local r0=$(date +%s)
  timeout "$limit" python -m membound diagnose --ceilings $W/ceilings.json --no-annotate --wait 12 \
    --steps 5 --out "$W/$name" --json "$W/$name/report.json" -- python "$@" > "$W/$name.log" 2>&1
  echo "$name rc=$? in $(( $(date +%s) - r0 )) s"
  python benchmarks/report_brief.py "$W/$name/report.json" --ops 6
}
diag dcgan_compiled 170 examples/real/dcgan.py --compile --steps 40 --warmup-steps 0
diag dcgan 100 examples/real/dcgan.py --steps 40 --warmup-steps 0
timeout 100 python benchmarks/check_over_roof.py $W/ceilings.json --fixtures $W \
  --glob "*/trace.json.gz" --top 8 > $W/over_roof.txt 2>&1
echo "check_over_roof rc=$?"; cat $W/over_roof.txt
left=$(( ${TOTAL_S:-450} - ($(date +%s) - t0) ))
if [ "$left" -gt 100 ]; then
  r0=$(date +%s)
  timeout $(( left - 20 )) python benchmarks/probe_cupti_kinds.py --script vit_timm --window 8 \
    --rounds 5 --variants plain,cuda,launches,noapi,nokernel,membound_launches --out $W/cupti.jsonl \
    -- --warmup-steps 6 > $W/cupti_vit.log 2>&1
  echo "probe vit_timm rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E "^PROBE_SUMMARY" $W/cupti_vit.log | cut -c1-1500
else
  echo "probe skipped: $left s left"
fi
tar -czf "$DEST/same.tgz" -C /tmp same
ls -la "$DEST"
echo "session done in $(( $(date +%s) - t0 )) s"
