#!/usr/bin/env bash
# Prepared 2026-12-06 (twelfth session) for one short call (~3 min, any card): why did
# membound's unprofiled steps of examples/real/mnist_cnn.py (13.44 ms, the 41 steps before the
# capture) run 46% over the plain timer's (8.24, 10.12) while the steps after the capture took
# 9.13? The loop is paced by its one loader worker. Plain runs timing the first steps against
# later ones, then diagnose with the default wait and with a long one, alternating.
source "$(dirname "$0")/_session.sh"
W=/tmp/dec06f; mkdir -p $W
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
plain() {  # $1: label, then the script's arguments
  local label=$1; shift
  python examples/real/mnist_cnn.py "$@" 2>&1 | grep MEMBOUND_TRUTH | python -c "
import json,sys; d=json.loads(sys.stdin.read().split(' ',1)[1])
print('$label', 'step_ms', d['step_ms'], 'median', d['step_ms_median'], 'min', d['step_ms_min'], 'max', d['step_ms_max'])"
}
diag() {  # $1: label, $2: --wait
  local r0=$(date +%s)
  timeout 150 python -m membound diagnose --wait $2 --warmup 2 --steps 5 --no-analyze \
    --no-norm-probe --out $W/$1 -- python examples/real/mnist_cnn.py --steps 200 \
    --warmup-steps 0 > $W/$1.log 2>&1
  python - "$W/$1" "$1" <<'PY'
import json, statistics, sys, pathlib
c = json.loads((pathlib.Path(sys.argv[1]) / "capture.json").read_text())
st = c["step_times_ms"]
u = st.get("unprofiled") or []
print(sys.argv[2], {k: round(statistics.median(v), 2) for k, v in st.items() if v},
      "unprofiled by tens:", [round(statistics.median(u[i:i + 10]), 2) for i in range(0, len(u), 10)])
PY
  echo "  ($(( $(date +%s) - r0 )) s)"
}
plain first40 --warmup-steps 0 --steps 40
plain after60 --warmup-steps 60 --steps 40
diag diag_wait42 42
plain first40b --warmup-steps 0 --steps 40
diag diag_wait120 120
plain after60b --warmup-steps 60 --steps 40
rm -rf $W/diag_*/*.gz
tar -czf "$DEST/dec06f.tgz" -C /tmp dec06f
echo "session done in $(( $(date +%s) - t0 )) s"
