#!/usr/bin/env bash
# 2026-12-02, call 1: the GPU tests of device/timing.py's refactor (2ffa206, never run on a
# GPU), then benchmarks/probe_capture_overhead.py (why the timeline pass slowed the fp32
# ResNet-50 by 25% in one truth run). Products under $OUT: tests.log, probe.jsonl, env.txt.
source "$(dirname "$0")/_session.sh"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv; } >"$DEST/env.txt" 2>&1
timeout 200 python -m pytest -m gpu tests/device tests/test_roofline.py -q -p no:cacheprovider 2>&1 | tee "$DEST/tests.log" | tail -15
timeout 200 python benchmarks/probe_capture_overhead.py --steps 15 2>&1 | tee "$DEST/probe.jsonl"
echo "done $(date -u)"
