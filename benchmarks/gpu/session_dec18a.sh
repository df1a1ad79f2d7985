#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-fourth session), one call of ~9 min on any card: the top
# remedies the H100 calls never timed (benchmarks/truth_tally.py --card h100, "unmeasured"),
# through bench_truth, which also times each diagnose report's own top remedy:
# the DCGAN (top remedy prefetch on the H100, cuda_graphs on the H200: membound-prefetch and
# reduce-overhead), the torchvision ResNet-50 in fp32 (channels_last) and the BERT fine-tune
# (tf32; it saved 32.59 ms/step on the H200). Products: truth.csv, dec18a.tgz (logs, traces).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec18a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
left=$(( S - ($(date +%s) - t0) - 20 ))
OUT=$W/truth TRUTH_BUDGET_S=$left \
  TRUTH_ARGS="--fixes ${FIXES:-membound-prefetch,reduce-overhead,channels-last,tf32}" \
  bash benchmarks/gpu/truth.sh ${SCRIPTS:-dcgan,resnet50_fp32,bert_finetune} > $W/truth.log 2>&1
truth_products $? $W dec18a
