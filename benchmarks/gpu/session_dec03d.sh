#!/usr/bin/env bash
# 2026-12-03, call 4 (issues 15/16): (1) the ceilings afresh with the chained HBM kernels at
# 4 x L2 (device.measure.CHAINED_KERNELS), the recorded traces' ops checked against them, and
# fresh traces of the planted healthy / fp32_matmul / unfused_chain loops (whose ops ran
# above their roof) analysed with the same call's ceilings; (2) CUDA-graph captures recorded
# by diagnose (launch_bound_graphed, compiled GPT-2 with reduce-overhead); (3) HF Llama:
# plain timer, diagnose with CUPTI torn down at its last stop (the default now) and with
# TEARDOWN_CUPTI=0 (as before): do the steps after the capture run as fast as before it?
# Products: ceilings.json, roofline.txt, over_roof.txt, steps.txt, fixtures.tgz,
# llama.tgz, gpt2ro.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/gpu_work; rm -rf "$W"; mkdir -p "$W"
COLUMNS=120 timeout 200 python -m membound roofline --refresh --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - t0 )) s"; tail -22 "$DEST/roofline.txt"
python - "$DEST/ceilings.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["device"]["ceilings"]["memory_sweep"]
for fig in ("memory_bandwidth", "read_mix_bandwidth"):
    print(fig, {k: round(v / 1e12, 3) for k, v in s[fig].items()})
PY
mkdir -p "$W/fx"
for f in h200_fp32_matmul h200_healthy h200_real_gpt2_compiled h200_real_gpt2_compiled_run2 h200_real_gpt2_compiled_run3 h200_unfused_chain h200_real_gpt2_run8 h200_real_hf_trainer_llama_run4; do
  ln -s "$PWD/tests/fixtures/$f" "$W/fx/$f"; done
timeout 200 python benchmarks/check_over_roof.py "$DEST/ceilings.json" --fixtures "$W/fx" > "$DEST/over_roof.txt" 2>&1
echo "over-roof (fixtures) rc=$? in $(( $(date +%s) - t0 )) s"; tail -14 "$DEST/over_roof.txt"
for s in healthy fp32_matmul unfused_chain launch_bound_graphed; do
  timeout 90 python -m membound diagnose --no-annotate --out "$W/fresh/h200_$s" --ceilings "$DEST/ceilings.json" \
    -- python "examples/planted/$s.py" > "$W/$s.log" 2>&1
  echo "diagnose $s rc=$? in $(( $(date +%s) - t0 )) s"; grep -i "capture\|above" "$W/$s.log" | head -4
done
timeout 100 python benchmarks/check_over_roof.py "$DEST/ceilings.json" --fixtures "$W/fresh" >> "$DEST/over_roof.txt" 2>&1
echo "over-roof (fresh) rc=$?"; tail -6 "$DEST/over_roof.txt"
ls -la "$W/fresh/h200_launch_bound_graphed"
S=examples/real/hf_trainer_llama.py
timer() { timeout 90 python $S --steps 30 --warmup-steps 5 2>/dev/null | grep MEMBOUND_TRUTH | cut -c1-400; }
echo "timer1 $(timer)" >> "$DEST/steps.txt"
for v in teardown keep; do
  envs=(); [ $v = keep ] && envs=(TEARDOWN_CUPTI=0)
  env "${envs[@]}" timeout 150 python -m membound diagnose --wait 8 --warmup 2 --steps 5 --no-annotate \
    --out "$W/llama_$v" --json "$W/llama_$v/report.json" --ceilings "$DEST/ceilings.json" \
    -- python $S --steps 26 --warmup-steps 0 > "$W/llama_$v.log" 2>&1
  echo "diagnose llama $v rc=$? in $(( $(date +%s) - t0 )) s"
  python -c "import json,sys; m=json.load(open('$W/llama_$v/capture.json')); print('$v', m.get('cupti_teardown'), json.dumps(m['step_times_ms']))" >> "$DEST/steps.txt"
done
echo "timer2 $(timer)" >> "$DEST/steps.txt"
cat "$DEST/steps.txt"
if [ "$(( $(date +%s) - t0 ))" -lt 330 ]; then
  timeout 200 python -m membound diagnose --no-annotate --wait 8 --warmup 2 --steps 3 --out "$W/fresh2/h200_real_gpt2_reduce_overhead" \
    --ceilings "$DEST/ceilings.json" -- python examples/real/gpt2_compiled.py --mode reduce-overhead --steps 16 --warmup-steps 0 > "$W/gpt2ro.log" 2>&1
  echo "diagnose gpt2 reduce-overhead rc=$? in $(( $(date +%s) - t0 )) s"; tail -3 "$W/gpt2ro.log"; ls -la "$W/fresh2/"*
fi
rm -f "$W"/*/*/annotated* 2>/dev/null
tar -C "$W" -czf "$DEST/fixtures.tgz" fresh 2>/dev/null
tar -C "$W" -czf "$DEST/llama.tgz" llama_teardown llama_keep 2>/dev/null
tar -C "$W" -czf "$DEST/gpt2ro.tgz" fresh2 2>/dev/null
ls -la "$DEST"
echo "session done in $(( $(date +%s) - t0 )) s"
