#!/usr/bin/env bash
# membound demo on the GPU: both live demos, timed (budget: under 2 minutes on an H200).
# Run from the repo root: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/demo.sh
set +e
cd "$(dirname "$0")/../.."
OUT="${GPU_OUT:-/tmp/gpu_out}/demo"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-src}" PYTHONUNBUFFERED=1
echo "== demo: $(date -u +%T) $(python -c 'import torch;print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda")')"
start=$(date +%s.%N)
COLUMNS=140 timeout 100 python -m membound demo --out "$OUT" 2>&1 | tee "$OUT/demo.log"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
secs=$(python -c "print(f'{$end-$start:.1f}')")
IP="$OUT/input-pipeline"
echo "== compare (before/after JSONs of the input-pipeline demo)"
COLUMNS=140 timeout 20 python -m membound compare "$IP/a-pageable.json" "$IP/c-prefetch.json" 2>&1 | tee "$OUT/compare.txt"
COLUMNS=140 timeout 20 python -m membound compare "$IP/b-dl-pinned.json" "$IP/d-prefetch-u8.json" 2>&1 | tee -a "$OUT/compare.txt"
echo "== files"; find "$OUT" -type f | sort | xargs ls -la
du -sh "$OUT"
echo "== input-pipeline summary (no profiler: wall/step, compute busy; profiled: median step, GPU busy, findings)"
timeout 20 python - "$IP" <<'PY'
import json, sys
from pathlib import Path
ip = Path(sys.argv[1])
try:
    timed = json.loads((ip / "timed.json").read_text())
except Exception as exc:
    timed = {}
    print(f"no timed.json ({exc})")
print(f"compute alone {timed.get('compute_alone_ms', float('nan')):.2f} ms")
print(f"{'variant':15s}{'noprof ms':>10s}{'busy':>6s}{'prof ms':>9s}{'busy':>6s}  findings")
for name in ("a-pageable", "b-dl-pinned", "c-prefetch", "d-prefetch-u8"):
    t = timed.get(name, {})
    try:
        r = json.loads((ip / f"{name}.json").read_text())
        st = r.get("steps", {})
        step, busy = st.get("median_step_ms", float("nan")), r.get("gpu_busy_fraction")
        fnd = ", ".join(f"{f['code']} {f.get('time_lost_ms_per_step', 0):.2f}" for f in r.get("findings", [])[:4])
    except Exception as exc:
        step, busy, fnd = float("nan"), None, f"no report ({exc})"
    b = "   -" if busy is None else f"{busy:6.0%}"
    print(f"{name:15s}{t.get('step_ms', float('nan')):10.2f}{t.get('gpu_busy', float('nan')):6.0%}{step:9.2f}{b}  {fnd}")
PY
echo "== demo summary: rc=$rc wall=${secs}s (budget 120 s); see $OUT/demo.log, images under $OUT/"
