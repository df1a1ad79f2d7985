#!/usr/bin/env bash
# 2026-12-03 (fourth session), call 4: why membound's unprofiled step of the HF Trainer Llama
# was 26% above the plain timer in call 1. (1) benchmarks/probe_wait_overhead.py again, its
# waiting-profiler variant now importing the script's helpers; (2) the diagnose run as
# bench_truth makes it (--wait 8), and with --wait 16, each printing membound's step times
# (capture.json) beside the script's own timer.
source "$(dirname "$0")/_session.sh"
timeout 150 python benchmarks/probe_wait_overhead.py examples/real/hf_trainer_llama.py \
  --steps 30 --warmup-steps 5 | tee "$DEST/wait_overhead.jsonl"
for w in ${HF_WAITS:-8 16}; do
  out="/tmp/hfdiag$w"; rm -rf "$out"
  timeout 120 python -m membound diagnose --wait $w --warmup 2 --steps 5 --no-annotate \
    --out "$out" --json "$out/report.json" --ceilings benchmarks/results/h200_ceilings.json \
    -- python examples/real/hf_trainer_llama.py --steps $(( w + 18 )) --warmup-steps 0 \
    > "$out.log" 2>&1
  echo "diagnose --wait $w rc=$?"
  grep -h MEMBOUND_TRUTH "$out.log" | cut -c1-60,400-700
  python - "$out" <<'PY' | tee "$DEST/hf_wait$w.json"
import json, sys
m = json.load(open(sys.argv[1] + "/capture.json"))
r = json.load(open(sys.argv[1] + "/report.json"))
print(json.dumps({"step_times_ms": m.get("step_times_ms"), "unprofiled_median_ms": r["steps"].get("unprofiled_median_ms"),
                  "findings": [(f["code"], round(f["time_lost_ms_per_step"], 2)) for f in r["findings"][:4]]}))
PY
done
echo "session done in $(( $(date +%s) - t0 )) s"
