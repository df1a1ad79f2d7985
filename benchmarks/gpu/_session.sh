# Sourced by the session_*.sh scripts, first thing: the repo root as working directory, its
# source tree on PYTHONPATH, $DEST (= $OUT, where the device call collects products) made,
# and t0 for their timings. Errors do not stop a session: each step reports its own rc.
set +e
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DEST="${OUT:-/tmp/gpu_out}"
mkdir -p "$DEST"
t0=$(date +%s)
# `membound roofline --refresh` into the ceilings JSON $1 and its table $2, killed after $3 s
# (default 120); says its rc and the command's seconds (issue 16: under 60 s on the H200).
refresh_ceilings() {
  local r0=$(date +%s)
  COLUMNS=120 timeout "${3:-120}" python -m membound roofline --refresh --json "$1" > "$2" 2>&1
  echo "roofline rc=$? in $(( $(date +%s) - r0 )) s (command, start to end)"
}
# On an H200 with more than 220 s of the call left ($3: the seconds left), the roofline refresh
# into $1/ceilings.json and every recorded H200 fixture checked against it
# ($1/over_roof_fixtures.txt); else one line saying why not ($2: the GPU's line).
h200_roof_check() {
  if grep -q H200 <<< "$2" && [ "$3" -gt 220 ]; then
    refresh_ceilings $1/ceilings.json $1/roofline.txt; head -24 $1/roofline.txt
    timeout $(( $3 - 100 )) python benchmarks/check_over_roof.py $1/ceilings.json --top 15 \
      > $1/over_roof_fixtures.txt 2>&1
    echo "recorded H200 fixtures rc=$?"; tail -18 $1/over_roof_fixtures.txt
  else echo "roofline skipped: $3 s left, $2"; fi
}
# On any card with more than 220 s of the call left ($3): the roofline refresh into
# $1/ceilings.json and every recorded fixture of that card (h200_* on an H200, h100_* on an
# H100) checked against it ($1/over_roof_fixtures.txt); else one line saying why not ($2: the
# GPU's line).
card_roof_check() {
  local card=""
  grep -q H200 <<< "$2" && card=h200
  grep -q H100 <<< "$2" && card=h100
  if [ -n "$card" ] && [ "$3" -gt 220 ]; then
    refresh_ceilings $1/ceilings.json $1/roofline.txt; head -30 $1/roofline.txt
    timeout $(( $3 - 100 )) python benchmarks/check_over_roof.py $1/ceilings.json --top 15 \
      --glob "${card}_*/trace.json.*" > $1/over_roof_fixtures.txt 2>&1
    echo "recorded $card fixtures rc=$?"; tail -18 $1/over_roof_fixtures.txt
  else echo "roofline skipped: $3 s left, $2"; fi
}
# Per kept diagnose under $1: the after-the-script probe's host costs (the profiler's per call,
# autocast's per kernel) and the GPU what-if's curve, autocast charge, host floor and kernels.
host_costs() {
  python - "$1" <<'PY'
import json, pathlib, sys
for cap in sorted(pathlib.Path(sys.argv[1]).glob("*/capture.json")):
    m = json.loads(cap.read_text()); print(cap.parent.name, json.dumps(m.get("profiler_host_cost")))
    rep = cap.parent / "report.json"
    if rep.is_file():
        g = json.loads(rep.read_text()).get("gpu_whatif") or {}
        print("  curve", g.get("saving_ms"), "autocast_host_ms", g.get("autocast_host_ms"),
              "floor", g.get("host_cpu_floor_ms"), "kernels", g.get("kernels_per_step"))
PY
}
# After `truth.sh` ran into $2/truth (its log $2/truth.log) with exit code $1: the rc, the
# tables, the host costs of the kept traces, and the products ($DEST/truth.csv and
# $DEST/$3.tgz with $2 and the traces), then the session's time.
truth_products() {
  echo "truth rc=$1 at $(( $(date +%s) - t0 )) s"
  grep -A20 "^== " "$2/truth.log" | grep -v "^\[truth\]"
  host_costs /tmp/gpu_out/truth-work/traces
  cp "$2/truth/truth.csv" "$DEST/truth.csv" 2>/dev/null
  tar czf "$DEST/$3.tgz" -C /tmp "$(basename "$2")" /tmp/gpu_out/truth-work/traces 2>/dev/null
  echo "session done in $(( $(date +%s) - t0 )) s"
}
