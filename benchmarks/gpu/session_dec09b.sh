#!/usr/bin/env bash
# Prepared 2026-12-06 (sixteenth session) for one call (~9.5 min, any card): the scripts written
# out of sample this session (`examples/real/efficientnet_amp.py`, `dlrm.py`, `wav2vec2_ctc.py`),
# each run alone, under `membound diagnose` and with each fix, before any rule was changed for
# them (the predictions are sealed in the call's own diagnose runs). On an H200 the roofline
# refresh and every H200 fixture against it come first (issue 16; `card_roof_check`).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec09b; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" 300
fi
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="${NEW_ARGS:-}" \
  bash benchmarks/gpu/truth.sh ${NEW_SCRIPTS:-dlrm,efficientnet_amp,wav2vec2_ctc} > $W/truth_out.log 2>&1
echo "truth.sh rc=$? at $(( $(date +%s) - t0 )) s"
grep -A14 "^== " $W/truth_out.log | grep -v "^\[truth\]"
tar -czf "$DEST/dec09b.tgz" -C /tmp dec09b
echo "session done in $(( $(date +%s) - t0 )) s"
