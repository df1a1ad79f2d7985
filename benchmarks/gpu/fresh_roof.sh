#!/usr/bin/env bash
# Ops against ceilings measured in the same device call (issue 16: no op above its roof?):
# the GPU timing tests, `membound roofline --refresh` (timed: issue 16 wants it under 60 s),
# then fresh diagnose traces of the planted loops (their ops pass: --steps 30), eager and
# compiled GPT-2 placed on those ceilings, and `benchmarks/check_over_roof.py` over them.
# The session_dec03{g,h,k}.sh calls ran this, each on that call's ceilings code.
# Products: ceilings.json, roofline.txt, over_roof.txt, fresh.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/gpu_work; rm -rf "$W"; mkdir -p "$W/fresh"
python -m pytest -q -p no:cacheprovider tests/device/test_timing.py -m gpu 2>&1 | tail -2
r0=$(date +%s)
COLUMNS=120 timeout 200 python -m membound roofline --refresh --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? took $(( $(date +%s) - r0 )) s (command, start to end)"; grep -i "memory\|read\|write\|bf16" "$DEST/roofline.txt" | head -12
for s in healthy fp32_matmul fp32_storage memory_bound_op unfused_chain blocking_copy; do
  timeout 90 python -m membound diagnose --no-annotate --wait 4 --warmup 1 --steps 4 --out "$W/fresh/h200_$s" \
    --ceilings "$DEST/ceilings.json" -- python "examples/planted/$s.py" --steps 30 > "$W/$s.log" 2>&1
  echo "diagnose $s rc=$? in $(( $(date +%s) - t0 )) s ops=$(ls "$W/fresh/h200_$s" | grep -c ops)"
done
for s in gpt2 gpt2_compiled; do
  timeout 150 python -m membound diagnose --no-annotate --wait 6 --warmup 2 --steps 3 --out "$W/fresh/h200_real_$s" \
    --ceilings "$DEST/ceilings.json" -- python examples/real/$s.py --steps 16 --warmup-steps 0 > "$W/$s.log" 2>&1
  echo "diagnose $s rc=$? in $(( $(date +%s) - t0 )) s"
done
timeout 150 python benchmarks/check_over_roof.py "$DEST/ceilings.json" --fixtures "$W/fresh" --top 25 > "$DEST/over_roof.txt" 2>&1
python -c "
import json; m = json.load(open('$W/fresh/h200_real_gpt2_compiled/capture.json')); print('kernel_args', len(m.get('kernel_args') or {}))"
echo "over-roof (fresh) rc=$?"; tail -40 "$DEST/over_roof.txt"
tar -C "$W" -czf "$DEST/fresh.tgz" fresh 2>/dev/null
ls -la "$DEST"
echo "session done in $(( $(date +%s) - t0 )) s"
