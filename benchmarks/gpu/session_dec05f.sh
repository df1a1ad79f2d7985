#!/usr/bin/env bash
# Prepared 2026-12-05 (third session, no device lent), ~6 min: issue 15, what torch.compile
# does to the loops where membound's compile prediction missed. Out of sample, compile
# measured -1.77 ms/step on the DCGAN (predicted 4.24), 3.05 on the timm ViT (predicted
# 11.4) and 32.06 on the T5 (predicted 16.4). No trace of a compiled run of these loops
# exists, so no rule can say why. This call records one per loop under membound diagnose
# (the compiled step unprofiled and profiled, busy, idle causes, kernels per step, top ops)
# and keeps each trace as a tgz (a CPU fixture candidate; the working tree has ~5 MB left).
# Products: <script>_compiled.json/.log/.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
run() {  # name, timeout, script and its flags
  local name=$1 limit=$2; shift 2
  local r0=$(date +%s)
  timeout "$limit" python -m membound diagnose --wait 12 --steps 5 --no-annotate --out "/tmp/$name" \
    --json "$DEST/$name.json" -- python "$@" > "$DEST/$name.log" 2>&1
  echo "$name rc=$? in $(( $(date +%s) - r0 )) s"
  python benchmarks/report_brief.py "$DEST/$name.json" --ops 10
  tar -czf "$DEST/$name.tgz" -C /tmp "$name" 2>/dev/null
}
run dcgan_compiled 170 examples/real/dcgan.py --compile --steps 40 --warmup-steps 0
run t5_compiled 220 examples/real/t5_seq2seq.py --torch-compile --steps 40 --warmup-steps 0
run vit_compiled 190 examples/real/vit_timm.py --compile --steps 40 --warmup-steps 0
echo "session done in $(( $(date +%s) - t0 )) s"
