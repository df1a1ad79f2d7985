#!/usr/bin/env bash
# membound.data on the GPU: GPU tests of tests/data, then the input-pipeline benchmark.
# Run from the repo root:  PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/data.sh
# Budget: under 2 minutes (timeouts: tests 30 s, bench 75 s, core retry 15 s).
# Each part is independent: one failing does not stop the next.
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="${PYTHONPATH:-src}" PYTHONUNBUFFERED=1
OUT="${GPU_OUT:-/tmp/gpu_out}/data"
mkdir -p "$OUT"
echo "== data: $(date -u +%H:%M:%S) nvidia-smi" | tee "$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$OUT/nvidia-smi.txt" 2>&1
python -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name() if torch.cuda.is_available() else 'NO CUDA')" 2>&1 | tee -a "$OUT/summary.txt"

echo "== part 1: tests/data (GPU tests run here; CPU ones too) $(date -u +%H:%M:%S)"
timeout 30 python -m pytest -q -p no:cacheprovider tests/data --junitxml="$OUT/tests.xml" >"$OUT/tests.log" 2>&1
echo "tests rc=$? :: $(tail -n 1 "$OUT/tests.log")" | tee -a "$OUT/summary.txt"
grep -E "^(FAILED|ERROR)" "$OUT/tests.log" | head -20 | tee -a "$OUT/summary.txt"

echo "== part 2: bench_input_pipeline $(date -u +%H:%M:%S)"
rm -rf "$OUT/input_pipeline.csv" "$OUT/traces"
# --trace-dir keeps each variant's profiled window (gzipped chrome traces, a few hundred KB
# each): the H2D columns are computed from their gpu_memcpy records.
timeout 75 python benchmarks/bench_input_pipeline.py --csv "$OUT/input_pipeline.csv" \
  --trace-dir "$OUT/traces" >"$OUT/bench.log" 2>&1
rc=$?
echo "bench rc=$rc" | tee -a "$OUT/summary.txt"
if [ $rc -ne 0 ]; then
  # Retry once without the DataLoader/timm variants, so at least the core comparison exists.
  timeout 15 python benchmarks/bench_input_pipeline.py --csv "$OUT/input_pipeline_core.csv" \
    --only a-pageable,c-prefetch,d-prefetch-u8,starved >"$OUT/bench_core.log" 2>&1
  echo "bench core retry rc=$?" | tee -a "$OUT/summary.txt"
  tail -n 14 "$OUT/bench_core.log" >>"$OUT/summary.txt"
fi

echo "== summary $(date -u +%H:%M:%S)"
grep -E "^device" "$OUT/bench.log" | tee -a "$OUT/summary.txt"
sed -n '/^case /,$p' "$OUT/bench.log" | tee -a "$OUT/summary.txt"
# No final table (bench killed by its timeout)? The per-variant lines printed as it went.
grep -qE "^case " "$OUT/bench.log" || grep -E "^  (fed|starved) " "$OUT/bench.log" | tee -a "$OUT/summary.txt"
grep -E "starved loader alone|CHECK|FAILED|profiler failed|timm not installed" "$OUT/bench.log" \
  | head -12 | tee -a "$OUT/summary.txt"
du -sh "$OUT/traces" 2>/dev/null | tee -a "$OUT/summary.txt"
echo "== data done $(date -u +%H:%M:%S)" | tee -a "$OUT/summary.txt"
