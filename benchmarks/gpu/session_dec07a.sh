#!/usr/bin/env bash
# Prepared 2026-12-06 (fourteenth session) for one call (~9 min, any card).
# 1. On an H200 only: issue 16's roofline refresh (under 60 s) with every recorded H200 fixture
#    checked against it (`card_roof_check`).
# 2. Any card (this replaces session_dec06n.sh, prepared in the thirteenth session and never
#    run): does running under `membound diagnose` slow a loop before any profiling starts?
#    On the detection reference's second call (2026-12-06), membound's own unprofiled steps
#    were 13.8% slower than the plain runs. The script runs plain and under diagnose with a
#    wait longer than the run (hooks and step timer on, the profiler never started),
#    alternated, each timed by the script's own plain timer.
# 3. On an H200: timm's ViT with --cuda-graphs (graph_step predicted 8-11 ms/step, untimed).
#    On an H100: compile out of sample for its new replay (analysis/compile_whatif.py, built
#    this session on the recorded fixtures): DeepLabV3's compile, never timed, then the
#    detection loop's (dynamic=True), its one launch-bound remedy, if the budget allows.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec07a; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
if grep -q H200 $W/gpu.txt; then
  card_roof_check $W "$(cat $W/gpu.txt)" $(( 560 - ($(date +%s) - t0) ))
fi
ARGS="--steps 40 --warmup-steps 60"
for r in 1 2; do
  python examples/real/detection_tv.py $ARGS > $W/plain$r.log 2>&1
  echo "plain$r $(grep -o '"step_ms": [0-9.]*' $W/plain$r.log) at $(( $(date +%s) - t0 )) s"
  python -m membound diagnose --wait 100000 --no-analyze --out $W/dg$r -- \
    python examples/real/detection_tv.py $ARGS > $W/hooked$r.log 2>&1
  echo "hooked$r $(grep -o '"step_ms": [0-9.]*' $W/hooked$r.log) at $(( $(date +%s) - t0 )) s"
done
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
if grep -q H200 $W/gpu.txt; then
  OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes cuda-graphs --no-top-remedy" \
    bash benchmarks/gpu/truth.sh vit_timm 2>&1 | grep -A30 "^== vit" | tail -30
elif [ "$left" -gt 150 ]; then
  OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes compile --no-top-remedy" \
    bash benchmarks/gpu/truth.sh segmentation_tv,detection_tv 2>&1 | grep -A20 "^== " | tail -40
else echo "part 3 skipped: $left s left"; fi
rm -rf $W/dg1 $W/dg2
tar -czf "$DEST/dec07a.tgz" -C /tmp dec07a
echo "session done in $(( $(date +%s) - t0 )) s"
