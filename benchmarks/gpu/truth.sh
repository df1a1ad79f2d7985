#!/usr/bin/env bash
# Truth by intervention on the H200: benchmarks/bench_truth.py over the examples/real scripts.
# Run from the repo root, one group of scripts per device call (each fits ~9 minutes; in this
# order, so gpt2's --compile run warms the inductor cache for gpt2_compiled on a warm machine):
#   bash benchmarks/gpu/truth.sh gpt2,resnet50_fp32,resnet50_prefetch    # ~6-7 min
#   bash benchmarks/gpu/truth.sh gpt2_compiled                           # ~7 min (compiles)
#   bash benchmarks/gpu/truth.sh lightning_fit,hf_trainer_llama          # ~5-6 min
#   bash benchmarks/gpu/truth.sh tabular_mlp,vit_timm                    # ~5 min (out of sample)
#   bash benchmarks/gpu/truth.sh bert_finetune                           # ~3.5 min (out of sample)
#   bash benchmarks/gpu/truth.sh segmentation_tv                         # ~2.5 min (out of sample)
#   bash benchmarks/gpu/truth.sh dcgan                                   # ~3 min (out of sample)
#   bash benchmarks/gpu/truth.sh t5_seq2seq                              # ~4 min (out of sample)
#   bash benchmarks/gpu/truth.sh ddpm_unet                               # ~5 min? (out of sample, unmeasured)
#   bash benchmarks/gpu/truth.sh lstm_lm                                 # ~3 min? (out of sample, unmeasured)
# No argument runs all fourteen (more than one call's time: the budget then skips what does not
# fit). TRUTH_ARGS adds bench_truth options (e.g. "--quick", "--fixes compile,amp").
# Products under $OUT (or $GPU_OUT/truth): truth.csv (this call's rows; append them to
# benchmarks/results/truth.csv), bench.log (progress and the tables), env.txt, and
# truth-<group>.tgz with every run's log and the kept traces (trace.json.gz, capture.json,
# report.json and the plain-timer truth.json per script: material for CPU test fixtures).
# Budget: TRUTH_BUDGET_S (default 530 s) for bench_truth, which never starts a run that cannot
# finish inside it; a hard `timeout` 40 s above it backs that up (its SIGTERM makes
# bench_truth kill the run in progress, process group and all, and stop).
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
GROUP="${1:-all}"
DEST="${OUT:-${GPU_OUT:-/tmp/gpu_out}/truth}"
WORK="${GPU_OUT:-/tmp/gpu_out}/truth-work"
BUDGET="${TRUTH_BUDGET_S:-530}"
mkdir -p "$DEST" "$WORK"
rm -rf "$WORK/logs" "$WORK/traces"
START=$(date +%s)
say() { echo "[truth.sh] $(date -u +%H:%M:%S) $*" | tee -a "$DEST/bench.log"; }

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw,memory.used --format=csv
  python -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'NO CUDA')"
  for m in triton torchvision timm lightning transformers accelerate; do
    python -c "import $m; print('$m', $m.__version__)" 2>/dev/null || echo "$m: not importable"
  done
} >"$DEST/env.txt" 2>&1
cat "$DEST/env.txt"

ONLY=()
[ "$GROUP" != "all" ] && ONLY=(--only "$GROUP")
CEIL=()
[ -f benchmarks/results/h200_ceilings.json ] && nvidia-smi -L 2>/dev/null | grep -q H200 \
  && CEIL=(--ceilings benchmarks/results/h200_ceilings.json)
say "group $GROUP, budget ${BUDGET}s, ceilings ${CEIL[*]:-(looked up by membound)}"
# shellcheck disable=SC2086 # TRUTH_ARGS is a list of options on purpose
timeout -k 10 $(( BUDGET + 40 )) python benchmarks/bench_truth.py "${ONLY[@]}" "${CEIL[@]}" \
  --budget-s "$BUDGET" --csv "$DEST/truth.csv" --log-dir "$WORK/logs" \
  --keep-traces "$WORK/traces" ${TRUTH_ARGS:-} 2>&1 | tee -a "$DEST/bench.log"
rc=${PIPESTATUS[0]}
say "bench_truth rc=$rc in $(( $(date +%s) - START ))s"
[ "$rc" -eq 124 ] && say "killed by the hard timeout: the tables printed so far are in bench.log"

du -sh "$WORK/traces" 2>/dev/null | sed 's/^/[truth.sh] traces: /'
tar czf "$DEST/truth-$(echo "$GROUP" | tr ',' '-').tgz" -C "$WORK" logs traces 2>/dev/null
ls -la "$DEST"
say "done in $(( $(date +%s) - START ))s"
