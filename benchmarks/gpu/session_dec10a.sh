#!/usr/bin/env bash
# Prepared 2026-12-06 (seventeenth session), one call of ~9 min on any card.
# 1. On an H200 only: `membound roofline --refresh` (issue 16: within 60 s); the over-roof
#    check of the recorded H200 fixtures against these ceilings runs afterwards on the CPU
#    (`python benchmarks/check_over_roof.py <ceilings.json> --glob "h200_*/trace.json.*"`).
# 2. membound.data.prefetch's two producers against the loader's own pin_memory, paired in
#    rounds (issue 15: membound's fix must not trail the framework's switch; on the H200 it
#    trailed pin_memory on Lightning in 5 of 6 calls): `membound-prefetch` with its producer
#    thread, `membound-prefetch-inline` with none (the training thread queues the copies).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec10a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if [ -z "$SKIP_ROOF" ] && grep -q H200 $W/gpu.txt; then  # SKIP_ROOF=1: after session_dec11a
  refresh_ceilings $W/ceilings.json $W/roofline.txt 120; head -40 $W/roofline.txt
  cp $W/ceilings.json "$DEST/h200_ceilings.json" 2>/dev/null
fi
timeout 120 python -m pytest -q -p no:cacheprovider tests/data/test_prefetch_gpu.py 2>&1 | tail -4
echo "prefetch GPU tests at $(( $(date +%s) - t0 )) s"
R=${ROUNDS:-3}  # rounds per script (ROUNDS=2 on a short call)
# SPECS: "script rounds" pairs in order, e.g. SPECS="segmentation_tv 2,lightning_fit 1"
IFS=, read -ra specs <<< "${SPECS:-lightning_fit $R,segmentation_tv $R,vit_timm 2}"
for spec in "${specs[@]}"; do
  set -- $spec
  left=$(( S - ($(date +%s) - t0) - 15 ))
  if [ $left -lt 90 ]; then echo "$1 skipped: $left s left"; continue; fi
  # since 2026-12-06 membound-prefetch is the inline producer behind these worker loaders
  # (producer="auto"), so the thread is the second variant (run on the H100 that day: inline)
  other=${OTHER_PRODUCER:-membound-prefetch-thread}
  fixes=pin-memory,membound-prefetch,$other
  [ "$1" = vit_timm ] && fixes=pin-mem,membound-prefetch,$other
  OUT=$W/truth_$1 TRUTH_BUDGET_S=$left \
    TRUTH_ARGS="--no-diagnose --no-top-remedy --fixes $fixes --rounds $2" \
    bash benchmarks/gpu/truth.sh $1 > $W/truth_$1.log 2>&1
  echo "$1 rc=$? at $(( $(date +%s) - t0 )) s"
  grep -A14 "^== " $W/truth_$1.log | grep -v "^\[truth\]"
done
cat $W/truth_*/truth.csv > "$DEST/truth_dec10a.csv" 2>/dev/null
tar -czf "$DEST/dec10a.tgz" -C /tmp dec10a
echo "session done in $(( $(date +%s) - t0 )) s"
