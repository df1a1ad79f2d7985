#!/usr/bin/env bash
# One H200 call (issues 15/16), ~4 min: the ceilings measured twice with the L2, write and
# transposed-matmul passes (sweep forward, then reversed: does the shape timed first set the
# matmul ceiling?), then GPT-2 with membound's norms in both dispatch modes against its
# baseline, interleaved (A B C D E A E D C B A) so drift shows. Everything lands in
# $OUT/final.tgz (the device returns at most 8 files).
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
O="${OUT:-/tmp/gpu_out}"; W=/tmp/final; rm -rf "$W"; mkdir -p "$O" "$W"
export MEMBOUND_CACHE_DIR="$W/cache"
say() { echo "[session] $(date -u +%H:%M:%S) $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$W/smi_before.txt" 2>&1
say roofline forward
COLUMNS=120 python -m membound roofline --refresh --json "$W/ceilings_forward.json" > "$W/roofline_forward.txt" 2>&1
tail -30 "$W/roofline_forward.txt"
say roofline reverse
COLUMNS=120 python -m membound roofline --sweep-order reverse --json "$W/ceilings_reverse.json" > "$W/roofline_reverse.txt" 2>&1
tail -30 "$W/roofline_reverse.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$W/smi_after.txt" 2>&1
say gpt2 norm dispatch, interleaved
run() { # label, args
  local label=$1; shift
  python examples/real/gpt2.py --steps 20 --warmup-steps 4 "$@" > "$W/gpt2-$label.log" 2>&1
  echo "[$label] $(grep -o '"step_ms": [0-9.]*' "$W/gpt2-$label.log") $(grep -o '"step_ms_median": [0-9.]*' "$W/gpt2-$label.log")" | tee -a "$W/gpt2_ab.txt"
}
for v in base swap-a fan-k base fan-a swap-k base; do
  case $v in
    base) run base-$SECONDS ;;
    swap-a) run swap-adaptive-$SECONDS --swap-norms ;;
    swap-k) run swap-kernels-$SECONDS --swap-norms --norm-dispatch kernels ;;
    fan-a) run fan-adaptive-$SECONDS --fused-add-norm ;;
    fan-k) run fan-kernels-$SECONDS --fused-add-norm --norm-dispatch kernels ;;
  esac
done
tar czf "$O/final.tgz" -C "$W" --exclude cache .
ls -la "$O"
say done
