#!/usr/bin/env bash
# membound demo on the GPU: both live demos, timed (budget: under 3 minutes on an H200).
# Run from the repo root: PYTHONPATH=src GPU_OUT=<dir> bash benchmarks/gpu/demo.sh
set +e
cd "$(dirname "$0")/../.."
OUT="${GPU_OUT:-/tmp/gpu_out}/demo"
mkdir -p "$OUT"
export PYTHONPATH="${PYTHONPATH:-src}" PYTHONUNBUFFERED=1
echo "== demo: $(date -u +%T) $(python -c 'import torch;print(torch.__version__, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no cuda")')"
start=$(date +%s.%N)
COLUMNS=140 timeout 300 python -m membound demo --out "$OUT" 2>&1 | tee "$OUT/demo.log"
rc=${PIPESTATUS[0]}
end=$(date +%s.%N)
secs=$(python -c "print(f'{$end-$start:.1f}')")
echo "== compare (before/after JSONs of the input-pipeline demo)"
COLUMNS=140 python -m membound compare "$OUT/input-pipeline/a-pageable.json" "$OUT/input-pipeline/c-prefetch.json" 2>&1 | tee "$OUT/compare.txt"
COLUMNS=140 python -m membound compare "$OUT/input-pipeline/b-pinned.json" "$OUT/input-pipeline/d-prefetch-u8.json" 2>&1 | tee -a "$OUT/compare.txt"
echo "== files"; find "$OUT" -type f | sort | xargs ls -la
du -sh "$OUT"
echo "== demo summary: rc=$rc wall=${secs}s (budget 180 s); see $OUT/demo.log, images under $OUT/"
