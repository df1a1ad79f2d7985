#!/usr/bin/env bash
# Prepared 2026-12-05 (second session; the device time ran out before it ran), ~4 min:
# 1. issue 16: `membound roofline --refresh` with the cast fp32 -> bf16 among the 2:1 pass's
#    kernels (device/measure.py HBM_KERNELS): does the 2:1 roof rise, does the command stay
#    under 60 s? Then, on this machine's CPU, `benchmarks/check_over_roof.py` over every
#    recorded trace with the new ceilings (the products: ceilings.json, roofline.txt).
# 2. issue 15, the profiler's overhead on the timm ViT (+34% on 2026-12-05, its five profiled
#    steps 77.5, 74.2, 70.2, 68.2, 64.6 ms against 52 unprofiled: falling step by step):
#    the same diagnose with 6 profiler warm-up steps instead of 2. If the recorded steps are
#    then near the last of those five, the warm-up is what the default should change.
# Products: ceilings.json, roofline.txt, vit_w6.json, vit_w6.log.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
r0=$(date +%s)
COLUMNS=120 timeout 120 python -m membound roofline --refresh --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - r0 )) s (command, start to end)"
grep -i "bandwidth" "$DEST/roofline.txt" | head -6
python - "$DEST/ceilings.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["device"]["ceilings"]
print({k: round(v / 1e12, 3) for k, v in c["memory_sweep"]["read_mix_bandwidth"].items()})
PY
for w in 2 6; do
  r0=$(date +%s)
  timeout 110 python -m membound diagnose --wait 12 --warmup $w --steps 5 --no-annotate --out /tmp/vit_w$w \
    --json "$DEST/vit_w$w.json" --ceilings "$DEST/ceilings.json" -- python examples/real/vit_timm.py --steps 40 \
    --warmup-steps 0 > "$DEST/vit_w$w.log" 2>&1
  echo "vit warmup $w rc=$? in $(( $(date +%s) - r0 )) s"
  python - "$DEST/vit_w$w.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["steps"]
print("unprofiled", s.get("unprofiled_median_ms"), "profiled", s.get("profiled_median_ms"),
      "steps", [round(p["wall_ms"], 1) for p in s["per_step"]])
PY
done
echo "session done in $(( $(date +%s) - t0 )) s"
