#!/usr/bin/env bash
# One H200 call (issue 15/16): the norm probe in both dispatch modes, GPT-2 with membound's
# norms in both modes against its baseline (plain timer, same call), the planted launch-bound
# loop eager and CUDA-graphed (timed and diagnosed), and a diagnosed FusedAddLayerNorm GPT-2
# (kernels forced) for CPU fixtures. Everything lands in $OUT/norms2.tgz (8 files at most
# come back).
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
O="${OUT:-/tmp/gpu_out}"; W=/tmp/norms2; rm -rf "$W"; mkdir -p "$O" "$W"
say() { echo "[session] $(date -u +%H:%M:%S) $*"; }
say probe
python benchmarks/probe_norm_host.py > "$W/probe.jsonl" 2>&1; cut -c1-200 "$W/probe.jsonl"
say gpt2 timings
run() { # label, env, args
  local label=$1; shift; local envs=$1; shift
  env $envs python examples/real/gpt2.py --steps 15 --warmup-steps 3 "$@" > "$W/gpt2-$label.log" 2>&1
  echo "[$label] $(grep -o '"step_ms": [0-9.]*' "$W/gpt2-$label.log") $(grep -o '"step_ms_median": [0-9.]*' "$W/gpt2-$label.log")"
}
run base1 ""
run swap-adaptive "" --swap-norms
run swap-kernels "" --swap-norms --norm-dispatch kernels
run fan-adaptive "" --fused-add-norm
run fan-kernels "" --fused-add-norm --norm-dispatch kernels
run base2 ""
say launch-bound eager vs graphed
for s in launch_bound launch_bound_graphed; do
  (cd examples/planted && python $s.py --steps 200) 2>&1 | tail -1
done
for s in launch_bound launch_bound_graphed; do
  python -m membound.cli diagnose --wait 4 --warmup 2 --steps 4 --out "$W/$s" --json "$W/$s/report.json" --format plain --no-annotate --stop-after-capture -- examples/planted/$s.py --steps 40 > "$W/$s.log" 2>&1
  grep -E "steps ·|^[0-9]\. |computing" "$W/$s.log" | head -8 | sed "s/^/[$s] /"
done
say diagnose gpt2 --fused-add-norm, kernels forced
python -m membound.cli diagnose --wait 4 --warmup 2 --steps 3 --out "$W/gpt2_fan" --json "$W/gpt2_fan/report.json" --format plain --no-annotate --stop-after-capture -- examples/real/gpt2.py --steps 20 --warmup-steps 3 --fused-add-norm --norm-dispatch kernels > "$W/gpt2_fan.log" 2>&1
grep -E "steps ·|^[0-9]\. |costed" "$W/gpt2_fan.log" | head -8
tar czf "$O/norms2.tgz" -C "$W" .
ls -la "$O"; du -sh "$W"/*
say done
