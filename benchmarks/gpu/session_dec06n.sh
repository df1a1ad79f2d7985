#!/usr/bin/env bash
# Prepared 2026-12-06 (thirteenth session) for one short call (~2 min, any card): does running
# under `membound diagnose` slow a loop before any profiling starts? On the detection
# reference's second call, membound's own unprofiled steps were 13.8% slower than the plain
# runs (76.7 ms even in the last 100 of them, against 68.7). Here the same script runs plain
# and under diagnose with a wait longer than the run (its hooks and step timer on, the
# profiler never started), alternated, each timed by the script's own plain timer. Then, in
# the time left, the detection loop's compile (torch.compile(model, dynamic=True): launch-bound's
# one remedy once the shapes change from step to step) against its baselines, with diagnose.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06n; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader | tee $W/gpu.txt
ARGS="--steps 40 --warmup-steps 60"
for r in 1 2; do
  python examples/real/detection_tv.py $ARGS > $W/plain$r.log 2>&1
  echo "plain$r $(grep -o '"step_ms": [0-9.]*' $W/plain$r.log) at $(( $(date +%s) - t0 )) s"
  python -m membound diagnose --wait 100000 --no-analyze --out $W/dg$r -- \
    python examples/real/detection_tv.py $ARGS > $W/hooked$r.log 2>&1
  echo "hooked$r $(grep -o '"step_ms": [0-9.]*' $W/hooked$r.log) at $(( $(date +%s) - t0 )) s"
done
left=$(( ${SESSION_S:-560} - ($(date +%s) - t0) - 30 ))
if [ "$left" -gt 240 ]; then
  OUT=$W/truth TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes compile --no-top-remedy" \
    bash benchmarks/gpu/truth.sh detection_tv 2>&1 | grep -A20 "^== detection" | tail -20
else echo "detection compile skipped: $left s left"; fi
tar -czf "$DEST/dec06n.tgz" -C /tmp dec06n
echo "session done in $(( $(date +%s) - t0 )) s"
