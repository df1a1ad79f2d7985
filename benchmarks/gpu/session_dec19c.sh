#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fifth session), one call of ~6-8 min, any card: what making
# CUDA syncs sleep costs a loop as run (MEMBOUND_BLOCKING_SYNC=1, examples/real/_common.py).
# With syncs sleeping, the threads' CPU is their host work, so the profiler's host cost is
# the launchers' CPU profiled less unprofiled even where the GPU paces the step (the BERT
# fine-tune, 2026-12-07: +17.45 ms/step, where spinning syncs showed none). Before a capture
# could make syncs sleep, the loops as run must not change: per script, plain and sleeping
# runs alternate twice (ABAB), each --steps 30 after --warmup-steps 10, so a host that
# drifts during the call shows as a difference between the two A runs.
# SCRIPTS: space-separated examples/real names. Products: sleeping_syncs.txt.
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-450}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
for name in ${SCRIPTS:-dcgan lstm_lm t5_seq2seq ddpm_unet}; do
  for round in 1 2; do
    for bs in "" 1; do
      left=$(( S - ($(date +%s) - t0) - 10 ))
      if [ $left -lt 40 ]; then echo "$name skipped: $left s left"; continue; fi
      MEMBOUND_BLOCKING_SYNC=$bs timeout $(( left < 120 ? left : 120 )) python examples/real/$name.py \
        --steps 30 --warmup-steps 10 2>&1 | grep MEMBOUND_TRUTH | python -c "
import json, sys
line = sys.stdin.read()
if 'MEMBOUND_TRUTH' not in line:
    print('$name round $round ${bs:+sleeping}: no result'); raise SystemExit
d = json.loads(line.split('MEMBOUND_TRUTH', 1)[1].lstrip(': '))
print('$name round $round ${bs:+sleeping}'.ljust(34), 'step', d['step_ms'], 'median', d['step_ms_median'],
      'thread', d.get('thread', {}).get('cpu_ms'), 'autograd', d.get('autograd_cpu_ms'), d.get('blocking_sync', ''))
" | tee -a "$DEST/sleeping_syncs.txt"
    done
  done
done
echo "session done in $(( $(date +%s) - t0 )) s"
