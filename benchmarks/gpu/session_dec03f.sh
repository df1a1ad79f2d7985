#!/usr/bin/env bash
# 2026-12-03, call 6 (issue 15): the profiler's overhead on eager GPT-2 and HF Llama with
# kineto's own TEARDOWN_CUPTI (unset: what membound leaves) against TEARDOWN_CUPTI=0 (what
# call 5 ran, GPT-2 +49% while profiled), each between plain-timer runs. Product: steps.txt.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/gpu_work; rm -rf "$W"; mkdir -p "$W"
for S in gpt2 hf_trainer_llama; do
  if [ $S = gpt2 ]; then D=(--wait 6 --warmup 2 --steps 3); N=16; else D=(--wait 8 --warmup 2 --steps 5); N=26; fi
  timer() { timeout 120 python examples/real/$S.py --steps 30 --warmup-steps 5 2>/dev/null | grep MEMBOUND_TRUTH | python -c "import json,sys; d=json.loads(sys.stdin.read().split(' ',1)[1]); print(d['step_ms'], d['step_ms_median'])"; }
  echo "$S timer1 $(timer)" >> "$DEST/steps.txt"
  for v in unset keep unset2; do
    envs=(MEMBOUND_X=1); [ $v = keep ] && envs=(TEARDOWN_CUPTI=0)
    env "${envs[@]}" timeout 170 python -m membound diagnose "${D[@]}" --no-analyze --out "$W/${S}_$v" \
      -- python examples/real/$S.py --steps $N --warmup-steps 0 > "$W/${S}_$v.log" 2>&1
    python -c "
import json, statistics as st
m = json.load(open('$W/${S}_$v/capture.json')); t = m['step_times_ms']
b = st.median(t['unprofiled'][1:]); p = st.median(t['profiled'])
print('$S $v', m.get('cupti_teardown'), 'before', round(b, 2), 'profiled', round(p, 2), f'overhead {p / b - 1:+.1%}', 'after', t['after'] and round(st.median(t['after']), 2), json.dumps(t))" >> "$DEST/steps.txt" 2>&1
    echo "$S $v done in $(( $(date +%s) - t0 )) s"
  done
  echo "$S timer2 $(timer)" >> "$DEST/steps.txt"
  if [ "$(( $(date +%s) - t0 ))" -gt 330 ]; then break; fi
done
cat "$DEST/steps.txt"
echo "session done in $(( $(date +%s) - t0 )) s"
