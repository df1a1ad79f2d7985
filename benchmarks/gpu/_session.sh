# Sourced by the session_*.sh scripts, first thing: the repo root as working directory, its
# source tree on PYTHONPATH, $DEST (= $OUT, where the device call collects products) made,
# and t0 for their timings. Errors do not stop a session: each step reports its own rc.
set +e
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
DEST="${OUT:-/tmp/gpu_out}"
mkdir -p "$DEST"
t0=$(date +%s)
