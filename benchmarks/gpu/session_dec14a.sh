#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-first session), one call of ~9.5 min on any card:
# 1. examples/real/classification_tv.py, out of sample (torchvision's classification recipe
#    on JPEG files, 16 workers): a smoke run (it also writes the JPEG folder once), then
#    bench_truth with CLS_FIXES (default: the two worker counts, AMP and channels_last).
# 2. the convolutions timed again after the script (trace.dtype_probe, new this session) put
#    to the test on the two conv nets whose bf16 prediction missed: the DDPM U-Net (fp32, TF32
#    convolutions: bf16 11.38 measured, 6.22 predicted) and timm's EfficientNet-B0 under fp16
#    autocast (bf16 lost 33.06, 3.88 predicted), each with bf16 and channels_last.
# Every diagnose's dtype_cost (the probe's times) and the report's what-ifs are printed.
# Short call: SKIP_CLS=1 (the conv nets alone), CONV_SCRIPTS, CONV_FIXES, SESSION_S.
# Products (three files): truth_cls.csv, truth_conv.csv, dec14a.tgz (both calls' logs, traces
# and bench.log, this script's own log).
source "$(dirname "$0")/_session.sh"
W=/tmp/dec14a; mkdir -p $W
S=${SESSION_S:-560}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt
echo "cores: $(nproc)"
probed() {  # the probe's times and the what-ifs of every kept diagnose under $1
  python - "$1" <<'PY'
import json, pathlib, sys
for cap in sorted(pathlib.Path(sys.argv[1]).glob("*/capture.json")):
    meta = json.loads(cap.read_text()); got = meta.get("dtype_cost") or {}
    print(f"== {cap.parent.name}: dtype_cost {'error: ' + got['error'] if 'error' in got else ''}")
    for r in got.get("ops", [])[:40]:
        shape = "x".join(map(str, r.get("input") or r.get("a") or []))
        w = "x".join(map(str, r.get("weight") or r.get("b") or []))
        print(f"  {r['op']:13s} {r.get('dtype')} {shape} * {w} cl={r.get('channels_last')} "
              + " ".join(f"{k}={r[k]:.3f}" for k in ("ms", "bf16_ms", "channels_last_ms",
                                                      "channels_last_bf16_ms") if k in r) + (" errors=" + json.dumps(r["errors"])[:160] if "errors" in r else ""))
    rep = cap.parent / "report.json"
    if rep.is_file():
        rj = json.loads(rep.read_text()); g = rj.get("gpu_whatif") or {}
        for k in ("bf16_kernels", "channels_last_kernels", "bf16_channels_last_kernels"):
            if k in g: print(f"  {k}: {json.dumps(g[k])}")
        for f in rj.get("findings", []):
            if f["code"] == "tf32-matmul": print(f"  tf32-matmul: {f['time_lost_ms_per_step']:.2f} {json.dumps(f['evidence'])[:300]}")
        print("  remedies: " + ", ".join(f"{r['remedy']} {r['saving_ms_per_step']:.2f}" for r in rj.get("remedies", [])[:8]))
PY
}
if [ -z "$SKIP_CLS" ]; then  # SKIP_CLS=1: the conv nets alone (a short call)
r0=$(date +%s)
timeout 150 python examples/real/classification_tv.py --steps 4 --warmup-steps 3 > $W/smoke.log 2>&1
echo "smoke rc=$? in $(( $(date +%s) - r0 )) s: $(grep -o 'MEMBOUND_TRUTH.*' $W/smoke.log | cut -c1-300)"
tail -3 $W/smoke.log
left=$(( S - ($(date +%s) - t0) - ${CONV_S:-190} ))  # kept for the two conv nets
OUT=$W/truth_cls TRUTH_BUDGET_S=$left \
  TRUTH_ARGS="--fixes ${CLS_FIXES:-workers-24,workers-8,amp,channels-last} ${CLS_ARGS:-}" \
  bash benchmarks/gpu/truth.sh classification_tv > $W/truth_cls.log 2>&1
echo "classification_tv rc=$? at $(( $(date +%s) - t0 )) s"
grep -A20 "^== " $W/truth_cls.log | grep -v "^\[truth\]"
probed /tmp/gpu_out/truth-work/traces
fi
left=$(( S - ($(date +%s) - t0) - 15 ))
OUT=$W/truth_conv TRUTH_BUDGET_S=$left TRUTH_ARGS="--fixes ${CONV_FIXES:-bf16,channels-last} --no-top-remedy" \
  bash benchmarks/gpu/truth.sh ${CONV_SCRIPTS:-ddpm_unet,efficientnet_amp} > $W/truth_conv.log 2>&1
echo "conv nets rc=$? at $(( $(date +%s) - t0 )) s"
grep -A20 "^== " $W/truth_conv.log | grep -v "^\[truth\]"
probed /tmp/gpu_out/truth-work/traces
cp $W/truth_cls/truth.csv "$DEST/truth_cls.csv" 2>/dev/null
cp $W/truth_conv/truth.csv "$DEST/truth_conv.csv" 2>/dev/null
tar -czf "$DEST/dec14a.tgz" -C /tmp dec14a
echo "session done in $(( $(date +%s) - t0 )) s"
