#!/usr/bin/env bash
# membound roofline on the GPU (budget <= 90 s): full ceilings table + chart, GPU tests,
# LayerNorm 32768x4096 placed on the roofline. Outputs under $GPU_OUT/roofline/.
set +e
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
OUT_DIR="${GPU_OUT:-/tmp/gpu_out}/roofline"
mkdir -p "$OUT_DIR"
# a private cache so this run measures afresh and leaves the user's cache alone
export MEMBOUND_CACHE_DIR="$OUT_DIR/cache"

echo "== 1. membound roofline --refresh"
t0=$(date +%s.%N)
COLUMNS=120 python -m membound roofline --refresh --json "$OUT_DIR/ceilings.json" --plot "$OUT_DIR/roofline.png" 2>&1 | tee "$OUT_DIR/roofline_cli.txt"
rc_cli=${PIPESTATUS[0]}
t_cli=$(python -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
t0=$(date +%s.%N)
python -m membound roofline --plot "$OUT_DIR/roofline.svg" > /dev/null 2>&1  # cached: must be quick
t_cached=$(python -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
echo "cli rc=$rc_cli wall=${t_cli}s (cached re-run ${t_cached}s)"

echo "== 2. GPU tests"
t0=$(date +%s)
python -m pytest -q -m gpu tests/device tests/test_roofline.py -p no:cacheprovider 2>&1 | tee "$OUT_DIR/pytest_gpu.txt" | tail -15
rc_tests=${PIPESTATUS[0]}
t_tests=$(( $(date +%s) - t0 ))

echo "== 3. LayerNorm 32768x4096 on the roofline"
t0=$(date +%s)
python benchmarks/bench_roofline.py --csv "$OUT_DIR/layernorm.csv" 2>&1 | tee "$OUT_DIR/layernorm.txt"
rc_ln=${PIPESTATUS[0]}
t_ln=$(( $(date +%s) - t0 ))

echo
echo "==== roofline summary"
python - "$OUT_DIR/ceilings.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))["device"]["ceilings"]
except Exception as exc:
    print("no ceilings.json:", exc); raise SystemExit
ds = d.get("datasheet") or {}
def frac(k, v):
    return f" ({v / ds[k]:.0%} of sheet)" if ds.get(k) else ""
print(f"{d['name']}: measured in {d['seconds']:.1f} s; copy {d['memory_bandwidth']/1e12:.2f} TB/s{frac('memory_bandwidth', d['memory_bandwidth'])}, read {d['read_bandwidth']/1e12:.2f} TB/s")
print("TFLOP/s: " + ", ".join(f"{k} {v/1e12:.0f}{frac(k, v)}" for k, v in sorted(d["flops"].items(), key=lambda kv: kv[1])))
for t in d["transfers"]:
    print(f"  {t['direction']} {t['memory']:8} nb={t['non_blocking']!s:5} {t['bandwidth']/1e9:6.1f} GB/s host blocked {t['host_blocked_fraction']:6.1%}")
for n in d.get("notes", []):
    print("  note:", n)
PY
tail -4 "$OUT_DIR/layernorm.txt" | cut -c1-160
echo "cli rc=$rc_cli (${t_cli}s, cached ${t_cached}s)  gpu-tests rc=$rc_tests (${t_tests}s): $(tail -1 "$OUT_DIR/pytest_gpu.txt" | cut -c1-80)  layernorm rc=$rc_ln (${t_ln}s)"
