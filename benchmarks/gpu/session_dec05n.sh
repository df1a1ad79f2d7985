#!/usr/bin/env bash
# 2026-12-05 (sixth session), the budget's last ~4 min on whichever card comes:
# 1. issue 16: `membound roofline --refresh`, now with each step's seconds (step_seconds) and,
#    on an H200, the cast fp32 -> bf16 in the 2:1 pass;
# 2. issue 15: the T5 under diagnose, for the training thread's CPU a step (median, by phase)
#    beside the GPU what-if's host floor (bf16/TF32 predicted 15.96 ms/step, measured 2.65
#    and 4.55 on the H200).
# Products: one tarball, n.tgz (ceilings.json, roofline.txt, t5.json, t5.log, t5 capture.json).
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
W=/tmp/n; mkdir -p $W
nvidia-smi --query-gpu=name --format=csv,noheader
refresh_ceilings $W/ceilings.json $W/roofline.txt 100; grep -m1 "took" $W/roofline.txt
python -c "import json,sys; c=json.load(open('$W/ceilings.json'))['device']['ceilings']; print(c.get('step_seconds')); print({k: round(v/1e12,3) for k,v in c.get('memory_sweep',{}).get('read_mix_bandwidth',{}).items()})"
left=$(( ${TOTAL_S:-230} - ($(date +%s) - t0) - 15 ))
if [ "$left" -gt 60 ]; then
  r0=$(date +%s)
  timeout $left python -m membound diagnose --ceilings $W/ceilings.json --no-annotate --wait 10 --steps 4 \
    --stop-after-capture --out $W/t5 --json $W/t5.json -- python examples/real/t5_seq2seq.py \
    --steps 40 --warmup-steps 0 > $W/t5.log 2>&1
  echo "t5 rc=$? in $(( $(date +%s) - r0 )) s"
  python benchmarks/report_brief.py $W/t5.json --ops 3
  python -c "import json; m=json.load(open('$W/t5/capture.json')); print(m.get('thread_per_step')); print(m.get('step_times_ms'))"
fi
rm -f $W/t5/trace.ops.json.gz
tar -czf "$DEST/n.tgz" -C /tmp n
echo "session done in $(( $(date +%s) - t0 )) s"
