#!/usr/bin/env bash
# The device call sends the working tree, 64 MiB at most. Since the ops passes are kept as xz
# (2026-12-04, benchmarks/fixture_xz.py) the tree is about 57 MB and this is not needed; when
# new fixtures push it over again, before a call: `bash benchmarks/gpu/park_fixtures.sh out` moves the largest
# fixture folders (the eager GPT-2 runs and its fused-add-norm run, ~2.4 MB each; no session
# script reads them) and, since 2026-12-07 (twenty-second session: the tree at 75 MB), the
# H100 truth fixtures (h100_real_*, 35 MB; the H100 roof check of `card_roof_check` then
# sees the h100_samecall_* ones alone) to
# $PARK (default /tmp/membound_fixture_park); after it, `... back` returns them. Run here, not
# on the device machine. `git status` shows them deleted while they are parked.
set -e
cd "$(dirname "$0")/../.."
PARK="${PARK:-/tmp/membound_fixture_park}"
case "${1:-}" in
  out)
    mkdir -p "$PARK"
    for f in tests/fixtures/h200_real_gpt2_run{3,4,5,6,7,8,9} tests/fixtures/h200_real_gpt2_fused_add_norm \
        tests/fixtures/h100_real_*; do
      [ -d "$f" ] && mv "$f" "$PARK/"
    done
    git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 ;;
  back)
    for f in "$PARK"/h200_real_gpt2_* "$PARK"/h100_real_*; do
      [ -d "$f" ] && mv "$f" tests/fixtures/
    done
    git status --short tests/fixtures | head -3 ;;
  *) echo "usage: park_fixtures.sh out|back" >&2; exit 2 ;;
esac
