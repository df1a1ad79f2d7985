#!/usr/bin/env bash
# Prepared 2026-12-05 (third session, no device lent), ~5 min: issue 15's profiler overhead.
# The timeline pass records every CUDA runtime and driver API call; membound reads only the
# launches, memcpys, memsets and syncs. `trace.cupti_api.keep_launches` switches the others
# off through CUPTI's per-function switches (`diagnose --api-records launches`). Does it
# lower the step's overhead, and does the timeline stay whole?
# 1. the GPU test of the filter (every kernel keeps its launch record, the rest is gone);
# 2. benchmarks/probe_cupti_kinds.py on four launch-dense scripts, 3 rounds of: plain, the
#    timeline pass as it is (cuda), with the filter (launches), without any API record
#    (noapi: the floor), membound's capture as it is and with the filter;
# 2b. benchmarks/probe_pageable_cupti.py: a 38.5 MB pageable copy with and without the profiler;
# 3. the timm ViT (+34% on 2026-12-05) under diagnose, api records all vs launches.
# Products: cupti.jsonl (summaries), cupti_<script>.log, vit_<mode>.json/.log.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
timeout 120 python -m pytest -m gpu tests/trace/test_cupti_api.py tests/trace/test_profiler_cost.py -q -p no:cacheprovider 2>&1 | tail -4
# does CUPTI slow the driver's staged pageable copy? (the ViT's ran at 3.6-4.4 GB/s profiled)
timeout 60 python benchmarks/probe_pageable_cupti.py 2>&1 | tail -5
probe() {  # one script, 3 rounds of the variants
  local s=$1 r0=$(date +%s)
  timeout 130 python benchmarks/probe_cupti_kinds.py --script "$s" --window 8 --rounds 3 \
    --variants plain,cuda,launches,noapi,membound,membound_launches --out "$DEST/cupti.jsonl" \
    -- --warmup-steps 6 > "$DEST/cupti_$s.log" 2>&1
  echo "probe $s rc=$? in $(( $(date +%s) - r0 )) s"
  grep -E 'probe_cupti_kinds|"trace"|Error' "$DEST/cupti_$s.log" | cut -c1-400 | head -8
  python - "$DEST/cupti_$s.log" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("PROBE_SUMMARY "):
        s = json.loads(line[len("PROBE_SUMMARY "):])["summary"]
        print({v: (d["median_ms"], f"{d['overhead']:+.1%}") for v, d in s.items()})
PY
}
# the most wanted first: the call may be cut at 600 s
probe vit_timm
probe dcgan
for mode in all launches; do
  r0=$(date +%s)
  timeout 100 python -m membound diagnose --api-records $mode --wait 12 --steps 5 --no-annotate \
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
  # did the filter hold through the schedule's warm-up into the recorded steps?
  python - /tmp/vit_$mode/trace.json.gz <<'PY'
import collections, gzip, json, sys
from membound.trace.kineto_names import api_kept
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
calls = collections.Counter(e["name"] for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver"))
print("api records", sum(calls.values()), "unread kinds kept:",
      {n: c for n, c in calls.items() if not api_kept(n)})
PY
done
probe t5_seq2seq
probe gpt2
echo "session done in $(( $(date +%s) - t0 )) s"
