#!/usr/bin/env bash
# 2026-12-02 (second session), call 1: GPU tests (nn after 9c87767, device with the read-mix
# pass), the full ceilings with the read-mix pass, the host cost of membound's norm kernels,
# then benchmarks/probe_cupti_kinds.py on the three launch-dense real scripts (which CUPTI
# record kinds the timeline pass's overhead comes from). Products under $OUT.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR="$DEST/cache"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv; nproc; } >"$DEST/env.txt" 2>&1
t0=$(date +%s)
timeout 150 python -m pytest -m gpu tests/nn tests/device -q -p no:cacheprovider 2>&1 | tee "$DEST/tests.log" | tail -6
echo "tests $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
COLUMNS=120 timeout 90 python -m membound roofline --refresh --json "$DEST/ceilings.json" 2>&1 | tee "$DEST/roofline.txt" | head -40
echo "roofline $(( $(date +%s) - t0 )) s"; t0=$(date +%s)
timeout 60 python benchmarks/probe_norm_host.py 2>&1 | tee "$DEST/norm_host.jsonl" | cut -c1-400
echo "norm_host $(( $(date +%s) - t0 )) s"
for s in gpt2 hf_trainer_llama gpt2_compiled; do
  t0=$(date +%s)
  timeout 170 python benchmarks/probe_cupti_kinds.py --script "$s" --window 6 --rounds 3 --out "$DEST/cupti.jsonl" -- --warmup-steps 6 > "$DEST/cupti_$s.log" 2>&1
  echo "probe $s rc=$? $(( $(date +%s) - t0 )) s"; grep -E '^\{|PROBE_SUMMARY|Error|error' "$DEST/cupti_$s.log" | cut -c1-600 | tail -30
done
echo "done $(date -u)"
