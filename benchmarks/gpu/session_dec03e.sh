#!/usr/bin/env bash
# 2026-12-03, call 5 (issues 15/16): (1) the ceilings afresh, then fresh diagnose traces of
# the planted loops (with their ops pass: --steps 30) and eager GPT-2 placed on them: any op
# above its roof when trace and ceilings come from one machine in one call? (2) HF Llama,
# CUPTI kept (membound's default now, TEARDOWN_CUPTI=0) against torn down (=1), between two
# plain-timer runs: the steps after the capture against those before it.
# Products: ceilings.json, roofline.txt, over_roof.txt, steps.txt, fresh.tgz, llama.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/gpu_work; rm -rf "$W"; mkdir -p "$W/fresh"
COLUMNS=120 timeout 200 python -m membound roofline --refresh --json "$DEST/ceilings.json" > "$DEST/roofline.txt" 2>&1
echo "roofline rc=$? in $(( $(date +%s) - t0 )) s"; grep -i "memory\|read\|write\|bf16" "$DEST/roofline.txt" | head -12
for s in healthy fp32_matmul fp32_storage memory_bound_op unfused_chain blocking_copy; do
  timeout 90 python -m membound diagnose --no-annotate --wait 4 --warmup 1 --steps 4 --out "$W/fresh/h200_$s" \
    --ceilings "$DEST/ceilings.json" -- python "examples/planted/$s.py" --steps 30 > "$W/$s.log" 2>&1
  echo "diagnose $s rc=$? in $(( $(date +%s) - t0 )) s ops=$(ls "$W/fresh/h200_$s" | grep -c ops)"
done
timeout 150 python -m membound diagnose --no-annotate --wait 6 --warmup 2 --steps 3 --out "$W/fresh/h200_real_gpt2" \
  --ceilings "$DEST/ceilings.json" -- python examples/real/gpt2.py --steps 16 --warmup-steps 0 > "$W/gpt2.log" 2>&1
echo "diagnose gpt2 rc=$? in $(( $(date +%s) - t0 )) s"
if [ "$(( $(date +%s) - t0 ))" -lt 200 ]; then
  timeout 150 python -m membound diagnose --no-annotate --wait 6 --warmup 2 --steps 3 --out "$W/fresh/h200_real_gpt2_compiled" \
    --ceilings "$DEST/ceilings.json" -- python examples/real/gpt2_compiled.py --steps 16 --warmup-steps 0 > "$W/gpt2c.log" 2>&1
  echo "diagnose gpt2_compiled rc=$? in $(( $(date +%s) - t0 )) s"
fi
timeout 150 python benchmarks/check_over_roof.py "$DEST/ceilings.json" --fixtures "$W/fresh" > "$DEST/over_roof.txt" 2>&1
echo "over-roof (fresh) rc=$?"; tail -12 "$DEST/over_roof.txt"
S=examples/real/hf_trainer_llama.py
timer() { timeout 90 python $S --steps 30 --warmup-steps 5 2>/dev/null | grep MEMBOUND_TRUTH | python -c "import json,sys; d=json.loads(sys.stdin.read().split(' ',1)[1]); print(d['step_ms'], d['step_ms_median'])"; }
echo "timer1 $(timer)" >> "$DEST/steps.txt"
for v in keep teardown; do
  envs=(MEMBOUND_X=1); [ $v = teardown ] && envs=(TEARDOWN_CUPTI=1)
  env "${envs[@]}" timeout 150 python -m membound diagnose --wait 8 --warmup 2 --steps 5 --no-annotate \
    --out "$W/llama_$v" --json "$W/llama_$v/report.json" --ceilings "$DEST/ceilings.json" \
    -- python $S --steps 26 --warmup-steps 0 > "$W/llama_$v.log" 2>&1
  echo "diagnose llama $v rc=$? in $(( $(date +%s) - t0 )) s"
  python -c "
import json, statistics as st
m = json.load(open('$W/llama_$v/capture.json')); t = m['step_times_ms']
r = json.load(open('$W/llama_$v/report.json'))
print('$v', m.get('cupti_teardown'), 'before', round(st.median(t['unprofiled'][1:]), 2), 'profiled', round(st.median(t['profiled']), 2), 'after', round(st.median(t['after']), 2), 'report', r['steps'].get('unprofiled_median_ms'), r.get('profiler_overhead_fraction'), json.dumps(t))" >> "$DEST/steps.txt" 2>&1
done
echo "timer2 $(timer)" >> "$DEST/steps.txt"
cat "$DEST/steps.txt"
tar -C "$W" -czf "$DEST/fresh.tgz" fresh 2>/dev/null
tar -C "$W" -czf "$DEST/llama.tgz" llama_keep llama_teardown 2>/dev/null
ls -la "$DEST"
echo "session done in $(( $(date +%s) - t0 )) s"
