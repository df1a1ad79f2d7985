#!/usr/bin/env bash
# 2026-12-05 (fourth session; it replaces session_dec05e.sh), one call of <= 600 s, the
# measurements in the order they matter:
# 1. the timeline pass's API filter on the ViT (+34% overhead on 2026-12-05): probe_cupti_kinds
#    (plain, cuda, launches, noapi, membound, membound_launches; 3 rounds in one process);
# 2. the ViT under diagnose, --api-records all against launches (overhead, steps, findings);
# 3. the same probe on the DCGAN;
# 4. the GPU tests of the filter and the profiler-cost probe; the pageable-copy probe;
# 5. the probe on the scripts in $EXTRA_PROBES, if any (e.g. "t5_seq2seq gpt2").
# ROUNDS (default 3) sets the probe's rounds.
# Products: cupti.jsonl, cupti_<script>.log, vit_<mode>.json/.log.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
probe() {  # one script, 3 rounds of the variants
  local s=$1 r0=$(date +%s)
  timeout 150 python benchmarks/probe_cupti_kinds.py --script "$s" --window 8 --rounds "${ROUNDS:-3}" \
    --variants plain,cuda,launches,noapi,membound,membound_launches --out "$DEST/cupti.jsonl" \
    -- --warmup-steps 6 > "$DEST/cupti_$s.log" 2>&1
  echo "probe $s rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E '"trace"|Error' "$DEST/cupti_$s.log" | cut -c1-300 | head -8
  python - "$DEST/cupti_$s.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("PROBE_SUMMARY "):
        s = json.loads(line[len("PROBE_SUMMARY "):])["summary"]
        print({v: (d["median_ms"], f"{d['overhead']:+.1%}") for v, d in s.items()})
PY
}
probe vit_timm
for mode in all launches; do
  r0=$(date +%s)
  timeout 110 python -m membound diagnose --api-records $mode --wait 12 --steps 5 --no-annotate \
    --out /tmp/vit_$mode --json "$DEST/vit_$mode.json" -- python examples/real/vit_timm.py \
    --steps 40 --warmup-steps 0 > "$DEST/vit_$mode.log" 2>&1
  echo "vit api-records $mode rc=$? in $(( $(date +%s) - r0 )) s"
  python - "$DEST/vit_$mode.json" /tmp/vit_$mode/capture.json <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); s = r["steps"]
m = json.load(open(sys.argv[2])).get("api_records") or {}
print("unprofiled", s.get("unprofiled_median_ms"), "profiled", s.get("profiled_median_ms"),
      "overhead", r.get("profiler_overhead_fraction"), "busy", r.get("gpu_busy_fraction"),
      "steps", [round(p["wall_ms"], 1) for p in s["per_step"]],
      "filter", {k: v for k, v in m.items() if not k.endswith("_kept")})
print("top", [(f["code"], round(f["time_lost_ms_per_step"], 2)) for f in r["findings"][:4]])
PY
  python - /tmp/vit_$mode/trace.json.gz <<'PY'
import collections, gzip, json, sys
from membound.trace.kineto_names import api_kept
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
calls = collections.Counter(e["name"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver"))
print("api records", sum(calls.values()), "unread kinds kept:",
      {n: c for n, c in calls.items() if not api_kept(n)})
PY
done
echo "at $(( $(date +%s) - t0 )) s"
probe dcgan
echo "at $(( $(date +%s) - t0 )) s"
timeout 90 python -m pytest -m gpu tests/trace/test_cupti_api.py tests/trace/test_profiler_cost.py -q -p no:cacheprovider 2>&1 | tail -4
timeout 45 python benchmarks/probe_pageable_cupti.py 2>&1 | tail -5
for s in ${EXTRA_PROBES:-}; do probe "$s"; done
echo "session done in $(( $(date +%s) - t0 )) s"
