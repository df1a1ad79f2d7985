#!/usr/bin/env bash
# Prepared 2026-12-06 (eleventh session) for one short call (~4 min, any card): is membound's
# overhead on the ConvNeXt (+30% under diagnose in the truth call, +9.5% for the same capture
# in benchmarks/probe_cupti_kinds.py on another machine) the capture's or the machine's? Both
# in one call: `membound diagnose` of examples/real/convnext_amp.py (its phases' steps from
# capture.json), then the probe's windows on the same loop.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06c; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
r0=$(date +%s)
timeout 150 python -m membound diagnose --wait 8 --warmup 2 --steps 5 --no-analyze \
  --out $W/diag -- python examples/real/convnext_amp.py --steps 40 --warmup-steps 0 > $W/diagnose.log 2>&1
echo "diagnose rc=$? in $(( $(date +%s) - r0 )) s"; tail -3 $W/diagnose.log
python - "$W/diag" <<'PY'
import json, statistics, sys, pathlib
c = json.loads((pathlib.Path(sys.argv[1]) / "capture.json").read_text())
st, th = c["step_times_ms"], c.get("thread_per_step") or {}
for k in ("unprofiled", "profiled", "after"):
    v = st.get(k) or []
    t = th.get(k) or {}
    print(k, round(statistics.median(v), 2) if v else None, [round(x, 1) for x in v],
          "cpu", t.get("cpu_ms_median"), "launchers", t.get("launchers_cpu_ms_median"))
PY
r0=$(date +%s)
timeout 90 python benchmarks/probe_cupti_kinds.py --script convnext_amp --window 6 --rounds 3 \
  --variants plain,membound_launches --out $W/cupti.jsonl -- --warmup-steps 6 \
  > $W/probe.log 2>&1
echo "probe rc=$? in $(( $(date +%s) - r0 )) s"; grep -A6 PROBE_SUMMARY $W/probe.log | grep -v PROBE_SUMMARY
rm -rf $W/diag/*.gz
tar -czf "$DEST/dec06c.tgz" -C /tmp dec06c
echo "session done in $(( $(date +%s) - t0 )) s"
