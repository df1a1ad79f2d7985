#!/usr/bin/env bash
# 2026-12-05 (fifth session), one call of ~6 min, the short measurements first:
# 1. issue 16: `membound roofline --refresh` with the cast fp32 -> bf16 among the 2:1 pass's
#    kernels (session_dec05c.sh's first half; its ViT warm-up pair ran on the H100 already).
#    Then, on the CPU, benchmarks/check_over_roof.py over every recorded trace.
# 2. issue 15: the corrected matmul host probe (session_dec05g.sh): TF32 / bf16 autocast
#    host time per nn.Linear call against fp32, for T5's TF32 miss.
# 3. issue 15: the compiled DCGAN under diagnose (session_dec05f.sh's first loop): compile
#    measured -1.77 ms/step there against 4.24 predicted.
# Products: ceilings.json, roofline.txt, matmul_host.jsonl, dcgan_compiled.json/.log/.tgz.
source "$(dirname "$0")/_session.sh"
export MEMBOUND_CACHE_DIR=/tmp/mbcache
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
refresh_ceilings "$DEST/ceilings.json" "$DEST/roofline.txt"
cat "$DEST/roofline.txt" | head -60
r0=$(date +%s)
timeout 200 python benchmarks/probe_matmul_host.py > "$DEST/matmul_host.jsonl" 2> "$DEST/matmul_host.err"
echo "probe_matmul_host rc=$? in $(( $(date +%s) - r0 )) s"
cat "$DEST/matmul_host.jsonl"; tail -3 "$DEST/matmul_host.err"
r0=$(date +%s)
timeout 170 python -m membound diagnose --wait 12 --steps 5 --no-annotate --out /tmp/dcgan_compiled \
  --json "$DEST/dcgan_compiled.json" -- python examples/real/dcgan.py --compile --steps 40 \
  --warmup-steps 0 > "$DEST/dcgan_compiled.log" 2>&1
echo "dcgan_compiled rc=$? in $(( $(date +%s) - r0 )) s"
python benchmarks/report_brief.py "$DEST/dcgan_compiled.json" --ops 10
tar -czf "$DEST/dcgan_compiled.tgz" -C /tmp dcgan_compiled 2>/dev/null
echo "session done in $(( $(date +%s) - t0 )) s"
