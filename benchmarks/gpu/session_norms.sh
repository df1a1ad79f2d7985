#!/usr/bin/env bash
# One H200 call (issue 15/16): ceilings with the matmul sweep, where a swapped norm's time
# goes (host/GPU), GPT-2 with and without membound's norms (plain timer), and traces of the
# FusedAddLayerNorm GPT-2 loop for CPU fixtures. Products under $OUT.
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="$PWD/src" PYTHONUNBUFFERED=1
O="${OUT:-/tmp/gpu_out}"; mkdir -p "$O"
say() { echo "[session] $(date -u +%H:%M:%S) $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
say roofline
( time python -m membound.cli roofline --refresh --json "$O/ceilings.json" --plot "$O/roofline.png" ) > "$O/roofline.txt" 2>&1
tail -40 "$O/roofline.txt"
say probe
python benchmarks/probe_norm_host.py > "$O/probe.jsonl" 2>&1; cat "$O/probe.jsonl"
python - > "$O/cprofile.txt" 2>&1 <<'PY'
import cProfile, pstats, torch
from membound.nn import FusedAddLayerNorm
m = FusedAddLayerNorm(768, device="cuda"); x = torch.randn(12288, 768, device="cuda", requires_grad=True); g = torch.randn_like(x)
def run(n):
    for _ in range(n):
        with torch.autocast("cuda", torch.bfloat16):
            y = m(x)
        y.backward(g)
    torch.cuda.synchronize()
run(50)
cProfile.run("run(300)", "/tmp/p.out")
pstats.Stats("/tmp/p.out").sort_stats("tottime").print_stats(25)
PY
head -60 "$O/cprofile.txt"
say gpt2 timings
for v in "" "--swap-norms" "--fused-add-norm" ""; do
  python examples/real/gpt2.py --steps 12 --warmup-steps 3 $v 2>&1 | grep -E "MEMBOUND_TRUTH|swap|Error" | sed "s/^/[$v] /"
done
say diagnose gpt2 --fused-add-norm
python -m membound.cli diagnose --wait 4 --warmup 2 --steps 3 --out "$O/gpt2_fan" --json "$O/gpt2_fan/report.json" --format plain --no-annotate -- examples/real/gpt2.py --steps 20 --warmup-steps 3 --fused-add-norm > "$O/gpt2_fan.log" 2>&1
tail -30 "$O/gpt2_fan.log"
say diagnose gpt2 --swap-norms
python -m membound.cli diagnose --wait 4 --warmup 2 --steps 3 --out "$O/gpt2_swap" --json "$O/gpt2_swap/report.json" --format plain --no-annotate -- examples/real/gpt2.py --steps 20 --warmup-steps 3 --swap-norms > "$O/gpt2_swap.log" 2>&1
tail -30 "$O/gpt2_swap.log"
ls -la "$O" "$O"/*/
say done
