#!/usr/bin/env bash
# Multi-GPU diagnose (issue 7) on a machine with 2+ GPUs. Run from the repo root:
#   PYTHONPATH=src GPU_OUT=/some/dir bash benchmarks/gpu/multigpu.sh
# 1. the GPU<->GPU ceiling: peer copy cuda:0->1 and the NCCL all-reduce bus bandwidth (NVLS
#    off) at 4, 16, 64 and 256 MiB (one process group; each collective is compared with the
#    figure at the smallest size at or above its own), cached so the diagnoses below use it;
# 2. `membound diagnose --nproc-per-node 2` on examples/distributed/straggler.py (rank 1
#    sleeps 20 ms per step: expect straggler-rank, rank 1, ~20 ms/step) and on
#    examples/distributed/exposed_allreduce.py (201 M params, batch 1: expect
#    exposed-communication on top, all-reduce bus bandwidth vs the measured ceiling);
#    then the straggler folder again through `membound analyze`;
# 3. with time left: `membound roofline --quick` (its two new GPU<->GPU steps) and the
#    GPU-marked tests of tests/distributed.
# Products: $GPU_OUT/multigpu/{interconnect.json,roofline.json,reports/<scenario>.json,
# <scenario>/{trace.rank*.json.gz,capture.rank*.json,log.txt},summary.csv}. The rank traces are
# small (30-90 KB): check them in as tests/fixtures/h200x2_<scenario>/ (the first run's are there;
# tests/distributed/test_h200x2_traces.py asserts their numbers). summary.csv has the columns
# of benchmarks/results/multigpu.csv. Budget: <= 4 minutes.
set +e
cd "$(dirname "$0")/../.." || exit 1
export PYTHONPATH="${PYTHONPATH:-src}" PYTHONUNBUFFERED=1
# required on the shared multi-GPU machines, before anything starts NCCL
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT="${GPU_OUT:-/tmp/gpu_out}/multigpu"
mkdir -p "$OUT/reports"  # reports apart from the rank-trace folders, which hold traces only
# a private cache: the interconnect figures measured here are the ones the reports use
export MEMBOUND_CACHE_DIR="$OUT/cache"
START=$(date +%s)

NGPU=$(python -c "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)" 2>/dev/null)
NGPU=${NGPU:-0}
echo "[multigpu] GPUs: $NGPU"
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
head -5 "$OUT/topo.txt"

left() { echo $(( 235 - ($(date +%s) - START) )); }  # seconds left of the 4-minute budget

if [ "$NGPU" -ge 2 ]; then
  t0=$(date +%s)
  # the GPU<->GPU figures are steps of `membound roofline` (quick: two all-reduce sizes)
  timeout 60 python -m membound roofline --quick --refresh --json "$OUT/interconnect.json" \
    > "$OUT/interconnect.log" 2>&1
  echo "[multigpu] interconnect: rc=$? in $(( $(date +%s) - t0 ))s"
  tail -12 "$OUT/interconnect.log"

  # scenario : script : script args
  for spec in "straggler:straggler.py:--steps 30 --sleep-ms 20" \
              "exposed:exposed_allreduce.py:--steps 30"; do
    name=${spec%%:*}; rest=${spec#*:}; script=${rest%%:*}; sargs=${rest#*:}
    dir="$OUT/$name"; rm -rf "$dir"; mkdir -p "$dir"
    t0=$(date +%s)
    # 4 unprofiled + 2 warm-up steps absorb NCCL set-up and allocator growth; 6 recorded
    # shellcheck disable=SC2086
    timeout 75 python -m membound diagnose --nproc-per-node 2 --wait 4 --warmup 2 --steps 6 \
      --out "$dir" --json "$OUT/reports/$name.json" -- "examples/distributed/$script" $sargs \
      > "$dir/log.txt" 2>&1
    echo "[multigpu] $name: rc=$? in $(( $(date +%s) - t0 ))s; $(ls "$dir" | tr '\n' ' ')"
    grep -E "straggler|exposed-comm|allreduce|membound diagnose:" "$dir/log.txt" | head -12 | cut -c1-200
  done
  # the same folder through `membound analyze` (the merged report from the files alone)
  timeout 20 python -m membound analyze "$OUT/straggler" --quiet \
    --json "$OUT/reports/straggler.analyze.json" > "$OUT/analyze.log" 2>&1
  echo "[multigpu] analyze folder: rc=$?"

  # the two GPU<->GPU steps inside `membound roofline` (optional: only with time left)
  if [ "$(left)" -gt 60 ]; then
    t0=$(date +%s)
    timeout $(( $(left) - 30 )) python -m membound roofline --quick --refresh \
      --json "$OUT/roofline.json" > "$OUT/roofline.log" 2>&1
    echo "[multigpu] roofline --quick: rc=$? in $(( $(date +%s) - t0 ))s"
    python - "$OUT/roofline.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:
    print("  no roofline.json:", exc); sys.exit()
c = (d.get("device") or {}).get("ceilings") or d.get("ceilings") or d.get("device") or {}
print("  interconnect in ceilings:", c.get("interconnect"))
print("  notes:", [n for n in c.get("notes", []) if "p2p" in n or "allreduce" in n])
PY
  else
    echo "[multigpu] roofline --quick: skipped (time budget)"
  fi
else
  echo "[multigpu] fewer than 2 GPUs: the interconnect and the 2-rank NCCL runs are skipped"
fi

if [ "$(left)" -gt 25 ]; then
  timeout $(( $(left) - 5 )) python -m pytest -q -p no:cacheprovider tests/distributed -m gpu \
    > "$OUT/pytest_gpu.txt" 2>&1
  echo "[multigpu] pytest -m gpu tests/distributed: rc=$? $(tail -1 "$OUT/pytest_gpu.txt")"
else
  echo "[multigpu] pytest -m gpu: skipped (time budget)"
fi

python - "$OUT" <<'PY'
import csv, json, os, sys

out = sys.argv[1]
ic = {}
try:
    ic = json.load(open(os.path.join(out, "interconnect.json")))
except Exception:
    pass
gbs = lambda x: round(x / 1e9, 1) if x else None
print(f"\ninterconnect: peer copy {gbs(ic.get('peer_copy_bandwidth'))} GB/s, "
      f"all-reduce bus {gbs(ic.get('allreduce_bus_bandwidth'))} GB/s "
      f"({ic.get('allreduce_bytes')} B on {ic.get('allreduce_ranks')} ranks) {ic.get('notes') or ''}")
sweep = ic.get("allreduce_bus_bandwidth_by_size") or {}
print("  all-reduce bus GB/s by size: " + ", ".join(
    f"{int(k) >> 20} MiB {gbs(v)}" for k, v in sorted(sweep.items(), key=lambda kv: int(kv[0]))))
rows = []
for name, expect in (("straggler", "straggler-rank"), ("exposed", "exposed-communication")):
    row = dict(scenario=name, expected=expect, top_finding="no report", ms_lost_per_step="",
               share_of_step="", straggler_rank="", held_back_ms_per_step="",
               others_wait_ms_per_step="", step_ms_rank0_rank1="", gpu_busy="",
               collective="", bytes_per_call="", calls_per_step="", transfer_ms="", bus_gbs="",
               ceiling_gbs="", ceiling_bytes="", fraction_of_ceiling="", ok=False)
    try:
        d = json.load(open(os.path.join(out, "reports", name + ".json")))
    except Exception:
        rows.append(row); continue
    row["top_finding"] = "none"
    fs = d.get("findings") or []
    if fs:
        row.update(top_finding=fs[0]["code"],
                   ms_lost_per_step=round(fs[0]["time_lost_ms_per_step"], 3),
                   share_of_step=round(fs[0]["share_of_step"], 3))
    r = d.get("ranks") or {}
    st = r.get("stragglers") or []
    if st:
        row.update(straggler_rank=st[0]["rank"],
                   held_back_ms_per_step=round(st[0]["held_back_ms_per_step"], 3),
                   others_wait_ms_per_step=round(st[0]["others_wait_ms_per_step"], 3))
    pr = r.get("per_rank") or []
    row["step_ms_rank0_rank1"] = "/".join(f"{p['median_step_ms']:.2f}" for p in pr)
    row["gpu_busy"] = "/".join(
        "-" if p["gpu_busy_fraction"] is None else f"{p['gpu_busy_fraction']:.0%}" for p in pr)
    ar = next((c for c in r.get("collectives") or [] if c["collective"] == "allreduce"), None)
    if ar:
        r1 = lambda x, n=1: x if x is None else round(x, n)
        row.update(collective="allreduce", bytes_per_call=ar["bytes_per_call"],
                   calls_per_step=ar["calls_per_step"], transfer_ms=r1(ar["transfer_ms"], 4),
                   bus_gbs=r1(ar["bus_bandwidth_gbs"]), ceiling_gbs=r1(ar["ceiling_gbs"]),
                   ceiling_bytes=ar.get("ceiling_bytes"),
                   fraction_of_ceiling=r1(ar["fraction_of_ceiling"], 3))
    row["ok"] = row["top_finding"] == expect and (
        name != "straggler" or row["straggler_rank"] == 1)
    rows.append(row)
with open(os.path.join(out, "summary.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader(); w.writerows(rows)
cols = list(rows[0])
print(" | ".join(cols))
for row in rows:
    print(" | ".join(str(row[c]) for c in cols))
PY
echo "[multigpu] total $(( $(date +%s) - START ))s"
