#!/usr/bin/env bash
# 2026-12-04 (evening), call 3: issue 15.
# 1. Why membound's unprofiled step ran 12-19% above the plain timer on the worker-fed loaders
#    (call 2: ViT 51.4 vs 43.2, Lightning 34.6 vs 30.9), while their steps after the capture
#    matched it: probe_wait_overhead times each script alone, under a bare waiting profiler,
#    under membound diagnose with a capture that never starts (hooks, the stepped waiting
#    profiler), and alone again, each by the script's own plain timer.
# 2. Does membound.data.prefetch trail DataLoader(pin_memory=True)? Both again on Lightning and
#    the ViT, no diagnose, three baselines spread among them.
# Products: wait_overhead.jsonl; truth.sh's in $DEST/pf.
source "$(dirname "$0")/_session.sh"
for s in vit_timm lightning_fit; do
  timeout 200 python benchmarks/probe_wait_overhead.py examples/real/$s.py --steps 20 \
    | sed "s/^{/{\"script\": \"$s\", /" >> "$DEST/wait_overhead.jsonl" 2>"$DEST/wait_overhead.$s.err"
  echo "wait probe $s rc=$? at $(( $(date +%s) - t0 )) s"
done
cat "$DEST/wait_overhead.jsonl"
OUT="$DEST/pf" TRUTH_BUDGET_S=$(( 520 - ($(date +%s) - t0) )) \
  TRUTH_ARGS="--fixes pin-memory,membound-prefetch,pin-mem --no-diagnose --extra-baselines 1" \
  bash benchmarks/gpu/truth.sh lightning_fit,vit_timm 2>&1 | grep -v "^\[truth\].*start" | tail -40
echo "session done in $(( $(date +%s) - t0 )) s"
