#!/usr/bin/env bash
# Prepared 2026-12-05 (eighth session, no device lent) for the next call (~7 min, any card):
# issue 15's overhead target (<= 10%), where the timeline pass's cost lands. On an H100 HF T5
# (2026-12-05) the step grew 30.5 ms under the profiler: +6.0 ms of the training thread's CPU
# and +24.3 of the autograd thread's, about 20 us per backward launch, where the profiler-cost
# probe measures ~3 us per launch on one thread. benchmarks/probe_cupti_kinds.py now reads
# both threads' CPU in every window, so each variant says which thread paid for which CUPTI
# records:
#   cuda      the timeline pass as torch.profiler runs it (every API record)
#   nodriver  without driver API records
#   noapi     without any API record (kernels, memcpys, memsets only)
#   launches  the per-function filter membound applies (trace.cupti_api)
#   membound_launches  membound's whole capture with that filter
# Read: if `launches` costs the autograd thread about what `cuda` does while `noapi` does not,
# CUPTI's interception of the functions the filter switches off (cudaGetDevice and kin, which
# backward calls per node) is the cost, and only dropping API records removes it; if `noapi`
# costs the same too, the kernel records are.
# T5 first (the loop with the cost), then BERT and the eager GPT-2 (backward-heavy, cheaper).
# Every product in one tarball: overhead.tgz.
source "$(dirname "$0")/_session.sh"
W=/tmp/overhead; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
VARIANTS=plain,cuda,nodriver,noapi,launches,membound_launches
for s in t5_seq2seq bert_finetune gpt2; do
  r0=$(date +%s)
  timeout 170 python benchmarks/probe_cupti_kinds.py --script "$s" --window 6 --rounds 3 \
    --variants $VARIANTS --out $W/cupti.jsonl -- --warmup-steps 6 > $W/cupti_$s.log 2>&1
  echo "probe $s rc=$? in $(( $(date +%s) - r0 )) s"
  grep -A8 PROBE_SUMMARY $W/cupti_$s.log | grep -v PROBE_SUMMARY
  grep -iE "error|Traceback" $W/cupti_$s.log | head -3
done
tar -czf "$DEST/overhead.tgz" -C /tmp overhead
ls -la "$DEST"; echo "session done in $(( $(date +%s) - t0 )) s"
