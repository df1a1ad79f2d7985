#!/usr/bin/env bash
# 2026-12-05 (sixth session), one call of ~8 min on whichever card comes:
# 1. issue 16, the same-day roofline check: `membound roofline --refresh` on this card, then
#    planted and compiled loops recorded under `membound diagnose` in the same call, then
#    benchmarks/check_over_roof.py over those traces with those ceilings (the recorded H200
#    traces exceed a later day's ceilings by 0.07-0.85%: does a same-call roof hold?);
# 2. issue 15, the compiled DCGAN under diagnose (one of those loops): compile measured -0.7 to
#    -2.2 ms/step on four calls against 3.8-4.2 predicted, and no trace of it exists;
# 3. issue 15, the capture's floor on the DCGAN: probe_cupti_kinds with 5 rounds, kernel
#    records off too (`nokernel`), for the <= 10% overhead target.
# Products: ceilings.json, roofline.txt, traces/<name>.tgz, <name>.json/.log, over_roof.txt,
#   cupti.jsonl, cupti_dcgan.log.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt"
head -40 "$DEST/roofline.txt"
mkdir -p /tmp/same/ "$DEST/traces"
diag() {  # name, timeout, diagnose flags..., --, script and flags
  local name=$1 limit=$2; shift 2
  local r0=$(date +%s)
  timeout "$limit" python -m membound diagnose --ceilings "$DEST/ceilings.json" --no-annotate \
    --out "/tmp/same/$name" --json "$DEST/$name.json" "$@" > "$DEST/$name.log" 2>&1
  echo "$name rc=$? in $(( $(date +%s) - r0 )) s"
  tar -czf "$DEST/traces/$name.tgz" -C /tmp/same "$name" 2>/dev/null
}
for s in memory_bound_op unfused_chain fp32_storage small_block healthy host_sync launch_bound; do
  diag "$s" 45 --wait 2 --warmup 2 --steps 4 --stop-after-capture -- "examples/planted/$s.py"
done
diag dcgan_compiled 170 --wait 12 --steps 5 -- python examples/real/dcgan.py --compile --steps 40 --warmup-steps 0
python benchmarks/report_brief.py "$DEST/dcgan_compiled.json" --ops 10
r0=$(date +%s)
timeout 120 python benchmarks/check_over_roof.py "$DEST/ceilings.json" --fixtures /tmp/same \
  --glob "*/trace.json.gz" --top 15 > "$DEST/over_roof.txt" 2>&1
echo "check_over_roof rc=$? in $(( $(date +%s) - r0 )) s"; cat "$DEST/over_roof.txt" | tail -25
left=$(( ${TOTAL_S:-570} - ($(date +%s) - t0) ))
if [ "$left" -gt 100 ]; then
  r0=$(date +%s)
  timeout $(( left - 15 )) python benchmarks/probe_cupti_kinds.py --script dcgan --window 8 --rounds 5 \
    --variants plain,cuda,launches,noapi,nokernel,membound_launches --out "$DEST/cupti.jsonl" \
    -- --warmup-steps 6 > "$DEST/cupti_dcgan.log" 2>&1
  echo "probe dcgan rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E "^PROBE_SUMMARY" "$DEST/cupti_dcgan.log" | cut -c1-1500
else
  echo "probe skipped: $left s left"
fi
echo "session done in $(( $(date +%s) - t0 )) s"
