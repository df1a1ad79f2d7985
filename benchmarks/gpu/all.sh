#!/usr/bin/env bash
# One device call, many areas: `bash benchmarks/gpu/all.sh roofline add_norm data diagnose`.
# Each area script writes under $GPU_OUT/<area>/; everything is tarred into $OUT/results.tgz
# (the device tool returns at most 8 files). A failing area never stops the others.
# MEMBOUND_BENCH_RUN=<n> (exported to every benchmark) stamps the CSV rows with the run.
set +e
cd "$(dirname "$0")/../.."
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
export GPU_OUT="${GPU_OUT:-/tmp/gpu_out}"
mkdir -p "$GPU_OUT"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)"
  python3 -c "import orjson" 2>&1 | tail -1
} > "$GPU_OUT/env.txt" 2>&1
cat "$GPU_OUT/env.txt"
for area in "$@"; do
  limit="${AREA_TIMEOUT:-300}"
  start=$(date +%s)
  timeout "$limit" bash "benchmarks/gpu/$area.sh" > "$GPU_OUT/$area.log" 2>&1
  rc=$?
  echo "=== $area rc=$rc $(( $(date +%s) - start ))s"
  tail -n "${TAIL_LINES:-25}" "$GPU_OUT/$area.log" | cut -c1-220
done
# one tarball per call, named by its areas, so two calls in one device command keep both
[ -n "$OUT" ] && tar czf "$OUT/results-$(IFS=-; echo "$*").tgz" -C "$GPU_OUT" . && ls -la "$OUT"
