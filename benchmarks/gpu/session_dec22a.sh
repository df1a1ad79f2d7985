#!/usr/bin/env bash
# Prepared 2026-12-08 (twenty-eighth session) for a short call (~6-7 min, any card): where
# the capture's cost lands on the HF Trainer Llama, the one of issue 15's six scripts still
# over the 10% target (+21.3% on an H100 that morning: the launching threads' CPU 43.87 ms a
# step slept, 55.43 profiled, the autograd thread +9.93 and the training thread +1.63).
# benchmarks/probe_cupti_kinds.py in one process, windows of 6 steps interleaved, 3 rounds:
#   plain     no profiler
#   cuda      torch.profiler's CUDA-only pass, every API record
#   noapi     without any API record (kernel, memcpy and memset records only)
#   launches  membound's per-function filter (trace.cupti_api)
#   launches_nodriver  that filter with the driver kind off too (a measurement only: the
#             kernels launched through the driver alone, cuBLASLt's and cuDNN's among them,
#             then have no launch record)
#   membound_launches  membound's whole capture with that filter (what diagnose runs)
# Read: noapi near plain -> the API records are the cost; noapi near cuda -> the kernel
# records are; membound_launches well above launches -> membound's own machinery is.
# Then the LSTM LM (+52% on 2026-12-07's H100), the same variants, if the call's time allows.
# Products: gpu.txt, cupti.jsonl, cupti_<script>.log.
source "$(dirname "$0")/_session.sh"
S=${SESSION_S:-400}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$DEST/gpu.txt"
V=${VARIANTS:-plain,cuda,noapi,launches,launches_nodriver,membound_launches}
for s in ${SCRIPTS:-hf_trainer_llama lstm_lm}; do
  left=$(( S - ($(date +%s) - t0) - 10 ))
  if [ $left -lt 90 ]; then echo "$s skipped: $left s left"; continue; fi
  r0=$(date +%s)
  timeout $(( left < 200 ? left : 200 )) python benchmarks/probe_cupti_kinds.py --script $s \
    --window 6 --rounds 3 --variants $V --out "$DEST/cupti.jsonl" -- --warmup-steps 6 \
    > "$DEST/cupti_$s.log" 2>&1
  echo "probe $s rc=$? in $(( $(date +%s) - r0 )) s"
  grep -A12 PROBE_SUMMARY "$DEST/cupti_$s.log" | grep -v PROBE_SUMMARY
  grep -iE "error|Traceback" "$DEST/cupti_$s.log" | head -3
done
echo "session done in $(( $(date +%s) - t0 )) s"
