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
