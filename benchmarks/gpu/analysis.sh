#!/usr/bin/env bash
# Trace analysis on a real GPU (≤ 60 s): record two small traces — a planted pageable copy +
# per-step .item() (expect pageable-copy / host-sync findings) and a healthy bf16 matmul loop
# (expect no finding above 10% of a step) — then run `membound analyze` on each and check the
# GPU-busy fraction against an independent union of GPU intervals.
# Run from the repo root: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/analysis.sh
set +e
OUT="${GPU_OUT:-/tmp/gpu_out}/analysis"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-src}"
LOG="$OUT/log.txt"
: > "$LOG"

echo "== record traces" | tee -a "$LOG"
timeout 120 python - "$OUT" >>"$LOG" 2>&1 <<'PY'
import sys, torch
from torch.profiler import profile, ProfilerActivity, schedule
out = sys.argv[1]
dev = "cuda"

def record(name, step_fn, steps=6):
    sched = schedule(wait=1, warmup=1, active=steps)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                 schedule=sched, on_trace_ready=lambda p: p.export_chrome_trace(f"{out}/{name}.json")) as prof:
        for _ in range(steps + 2):
            step_fn()
            prof.step()
    torch.cuda.synchronize()
    print("recorded", name)

# planted: pageable fp32 batch (38.5 MB), small conv-free MLP, .item() each step
x_host = torch.randn(64, 3 * 224 * 224)
model = torch.nn.Sequential(torch.nn.Linear(3 * 224 * 224, 256), torch.nn.LayerNorm(256), torch.nn.ReLU(),
                            torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
def planted():
    x = x_host.to(dev, non_blocking=True)
    loss = model(x).float().pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    loss.item()
record("planted_pageable", planted)

# healthy: bf16 matmuls queued back to back, no host sync inside the step
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
def healthy():
    for _ in range(8):
        c = a @ b
record("healthy_bf16", healthy)
PY
echo "record rc=$?" | tee -a "$LOG"

RESULTS="$OUT/summary.tsv"
printf "trace\tanalyze_rc\tanalyze_s\tsteps\tstep_ms\tgpu_busy\tindependent_busy\tfindings\n" > "$RESULTS"
for name in planted_pageable healthy_bf16; do
  T="$OUT/$name.json"
  [ -f "$T" ] || { printf "$name\tmissing\n" >> "$RESULTS"; continue; }
  gzip -kf "$T"
  start=$(date +%s.%N)
  timeout 120 python -m membound analyze "$T.gz" --json "$OUT/$name.report.json" --html "$OUT/$name.html" \
      --annotate "$OUT/$name.annotated.json.gz" >> "$LOG" 2>&1
  rc=$?
  secs=$(python -c "print(round($(date +%s.%N)-$start,1))")
  python - "$T" "$OUT/$name.report.json" "$name" "$rc" "$secs" >> "$RESULTS" 2>>"$LOG" <<'PY'
import json, sys
trace, report, name, rc, secs = sys.argv[1:]
doc = json.load(open(trace))
ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if str(e.get("name", "")).startswith("ProfilerStep#"))
gpu = sorted((e["ts"], e["ts"] + e["dur"]) for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
r = json.load(open(report))
lo = steps[0][0]; hi = r["steps"]["per_step"][-1]["end_us"]
busy, cs, ce = 0.0, None, None
for s, e in gpu:
    s, e = max(s, lo), min(e, hi)
    if e <= s: continue
    if ce is None or s > ce:
        if ce is not None: busy += ce - cs
        cs, ce = s, e
    else:
        ce = max(ce, e)
if ce is not None: busy += ce - cs
codes = ",".join(f'{f["code"]}:{f["time_lost_ms_per_step"]:.2f}ms/{f["share_of_step"]:.0%}' for f in r["findings"]) or "none"
print(f'{name}\t{rc}\t{secs}\t{r["steps"]["count"]}\t{r["steps"]["median_step_ms"]:.2f}\t{r["gpu_busy_fraction"]:.3f}\t{busy / (hi - lo):.3f}\t{codes}')
PY
done
echo "== membound analyze output (tail)"; tail -n 60 "$LOG"
echo "== summary (gpu_busy must match independent_busy within 1%; planted expects pageable-copy, healthy none above 10%)"
column -t -s $'\t' "$RESULTS" 2>/dev/null || cat "$RESULTS"
