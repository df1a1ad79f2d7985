#!/usr/bin/env bash
# Prepared 2026-12-06 (eighteenth session), one call of ~9 min, best on an H200 (issue 16's
# last owed check; on another card it checks that card the same way):
# 1. `membound roofline --refresh` (issue 16: within 60 s on the H200), timed;
# 2. in the same call, with those ceilings, `membound diagnose` of three real loops through
#    bench_truth (--quick, one cheap fix each, traces kept): the compiled GPT-2 (inductor's
#    kernels and extern mm(out=)), the T5 (where.self_out, 100.2% of the H100's roof before
#    `cost.out_args`) and the timm ViT (its fp32 residual-gradient add_ in L2);
# 3. check_over_roof over those traces against the same call's ceilings: issue 16's "no op
#    above its roof". Products: ceilings.json, truth_dec11a.csv, dec11a.tgz (roofline.txt,
#    over_roof_samecall.txt, logs, traces).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/dec11a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
refresh_ceilings $W/ceilings.json $W/roofline.txt 120; head -30 $W/roofline.txt
cp $W/ceilings.json "$DEST/ceilings.json" 2>/dev/null
# SPECS: "script fix" pairs in order
IFS=, read -ra specs <<< "${SPECS:-t5_seq2seq tf32,vit_timm pin-mem,gpt2_compiled log-every-100}"
for spec in "${specs[@]}"; do
  set -- $spec
  left=$(( S - ($(date +%s) - t0) - 60 ))  # 60 s kept for the check and the tarball
  if [ $left -lt 90 ]; then echo "$1 skipped: $left s left"; continue; fi
  r0=$(date +%s)
  python benchmarks/bench_truth.py --only "$1" --fixes "$2" --quick --no-top-remedy \
    --ceilings $W/ceilings.json --keep-traces $W/traces --csv $W/truth.csv \
    --budget-s $left > $W/$1.log 2>&1
  echo "$1 rc=$? in $(( $(date +%s) - r0 )) s"
  grep -A12 "^== " $W/$1.log | grep -v "^\[truth\]"
done
timeout 50 python benchmarks/check_over_roof.py $W/ceilings.json --fixtures $W/traces \
  --glob "*/trace.json.gz" --top 10 > $W/over_roof_samecall.txt 2>&1
echo "check_over_roof (same call) rc=$?"; cat $W/over_roof_samecall.txt
cp $W/truth.csv "$DEST/truth_dec11a.csv" 2>/dev/null
tar -czf "$DEST/dec11a.tgz" -C /tmp dec11a
echo "session done in $(( $(date +%s) - t0 )) s"
