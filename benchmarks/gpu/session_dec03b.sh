#!/usr/bin/env bash
# 2026-12-03, call 2 (issues 15/16): as call 1, with the chained ReLU passes and the fixed probe.: the ceilings measured afresh with the HBM kernels also
# timed in bursts (device.measure: does a memory op's roof hold once the roof is timed the
# way short kernels run?), the GPU tests of nn.host_cost and device.timing, the host-cost
# probe of a LayerNorm under autocast (autograd.grad probing, not .grad accumulation), then
# truth by intervention on eager GPT-2 for membound's norm fixes (the what-if out of sample
# again, with the corrected probe). Products: ceilings.json, roofline.txt, tests.log,
# host_cost.txt, truth/ (truth.csv, bench.log, truth-gpt2.tgz).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
COLUMNS=120 timeout 200 python -m membound roofline --refresh --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - t0 )) s"; tail -25 "$DEST/roofline.txt"
timeout 120 python -m pytest -m gpu tests/nn/test_host_cost.py tests/device/test_timing.py tests/device/test_measure.py -q -p no:cacheprovider > "$DEST/tests.log" 2>&1
echo "tests rc=$? in $(( $(date +%s) - t0 )) s"; tail -3 "$DEST/tests.log"
timeout 60 python -m membound.nn.host_cost --rows 12288 --hidden 768 --kind layer --dtype float32 --autocast > "$DEST/host_cost.txt" 2>&1
echo "host_cost rc=$? in $(( $(date +%s) - t0 )) s"; tail -12 "$DEST/host_cost.txt"
OUT="$DEST/truth" TRUTH_ARGS="--fixes fused-add-norm,swap-norms" TRUTH_BUDGET_S="${TRUTH_BUDGET_S:-210}" \
  bash benchmarks/gpu/truth.sh gpt2 | grep -v "^\[truth\] .*start\|^\[truth.sh\]\|^-rw\|^total\|^drwx"
rm -f "$DEST"/truth/env.txt
echo "session done in $(( $(date +%s) - t0 )) s"
