#!/usr/bin/env bash
# membound diagnose on the H200: every planted-bottleneck script, plus a short trace of a small
# bf16 block for the roofline join test. Run from the repo root:
#   PYTHONPATH=src GPU_OUT=/some/dir bash benchmarks/gpu/diagnose.sh
# Products (small; they become test fixtures): $GPU_OUT/diagnose/<scenario>/{trace.json.gz,
# capture.json,report.json,log.txt}, $GPU_OUT/diagnose/summary.csv. Budget: ~2 minutes.
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="${PYTHONPATH:-src}" PYTHONUNBUFFERED=1
OUT="${GPU_OUT:-/tmp/gpu_out}/diagnose"
mkdir -p "$OUT"
START=$(date +%s)

# scenario (= expected top finding; "none" for healthy/small_block) : script stem
SCENARIOS="pageable-copy:pageable_copy blocking-copy:blocking_copy input-starved:input_starved
host-sync:host_sync launch-bound:launch_bound memory-bound-op:memory_bound_op
unfused-chain:unfused_chain fp32-storage:fp32_storage fp32-matmul:fp32_matmul
healthy:healthy small-block:small_block"

for pair in $SCENARIOS; do
  name=${pair%%:*}; stem=${pair##*:}
  # DIAGNOSE_ONLY="a b": re-record just those scenarios (e.g. after changing their scripts)
  if [ -n "${DIAGNOSE_ONLY:-}" ] && [[ " $DIAGNOSE_ONLY " != *" $name "* ]]; then continue; fi
  dir="$OUT/$name"; mkdir -p "$dir"
  t0=$(date +%s)
  # 2 unprofiled + 2 warm-up steps absorb cuDNN/cuBLAS autotuning and allocator growth;
  # 4 recorded steps keep the traces small; the script is stopped once they are captured.
  timeout 45 python -m membound diagnose --wait 2 --warmup 2 --steps 4 --stop-after-capture \
    --out "$dir" --json "$dir/report.json" -- "examples/planted/$stem.py" >"$dir/log.txt" 2>&1
  rc=$?
  echo "[diagnose] $name: rc=$rc in $(( $(date +%s) - t0 ))s"
  grep -E "^membound diagnose:" "$dir/log.txt" | head -5
done

# The capture's own GPU tests (CUDA activities present, a planted script in-process); ~10 s.
# Skipped when the scenarios already used most of the budget.
t0=$(date +%s)
if [ $(( t0 - START )) -lt 125 ]; then
  timeout 40 python -m pytest -q -p no:cacheprovider -m gpu tests/trace/test_capture.py \
    tests/commands/test_diagnose.py >"$OUT/pytest_gpu.txt" 2>&1
  echo "[diagnose] pytest -m gpu: rc=$? in $(( $(date +%s) - t0 ))s: $(tail -1 "$OUT/pytest_gpu.txt")"
else
  echo "[diagnose] pytest -m gpu: skipped (time budget)"
fi

python - "$OUT" <<'PY'
import csv, json, os, sys

out = sys.argv[1]
rows = []
for name in sorted(os.listdir(out)):
    d = os.path.join(out, name)
    if not os.path.isdir(d):
        continue
    trace = os.path.join(d, "trace.json.gz")
    size_kb = os.path.getsize(trace) / 1024 if os.path.exists(trace) else 0.0
    try:
        meta = json.load(open(os.path.join(d, "capture.json")))
    except Exception:
        meta = {}
    top, lost, share, busy, step_ms = "-", "", "", "", ""
    try:
        rep = json.load(open(os.path.join(d, "report.json")))
        busy = rep.get("gpu_busy_fraction")
        step_ms = (rep.get("steps") or {}).get("median_step_ms")
        fs = rep.get("findings") or []
        if fs:
            top = fs[0]["code"]
            lost = fs[0]["time_lost_ms_per_step"]
            share = fs[0]["share_of_step"]
        else:
            top = "none"
    except Exception:
        top = "no report"
    expected = "none" if name in ("healthy", "small-block") else name
    if name == "healthy":
        ok = top == "none" or (isinstance(share, float) and share <= 0.10)
    elif name == "small-block":
        ok = top != "no report"
    else:
        ok = top == expected
    rows.append(dict(scenario=name, trace_kb=round(size_kb, 1), steps=meta.get("steps_captured"),
                     source=meta.get("step_source"), step_ms=step_ms, gpu_busy=busy, top=top,
                     lost_ms=lost, share=share, ok=ok))
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["scenario"])
    w.writeheader()
    w.writerows(rows)

def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)

print(f"\n{'scenario':<16}{'trace KB':>9}{'steps':>6} {'source':<10}{'step ms':>9}{'busy':>6}  "
      f"{'top finding':<16}{'lost ms':>8}{'share':>7}  ok")
for r in rows:
    print(f"{r['scenario']:<16}{r['trace_kb']:>9}{fmt(r['steps'], 'd'):>6} {str(r['source']):<10}"
          f"{fmt(r['step_ms'], '.2f'):>9}{fmt(r['gpu_busy'], '.0%'):>6}  {r['top']:<16}"
          f"{fmt(r['lost_ms'], '.2f'):>8}{fmt(r['share'], '.0%'):>7}  {'yes' if r['ok'] else 'NO'}")
PY
echo "[diagnose] total $(( $(date +%s) - START ))s"
