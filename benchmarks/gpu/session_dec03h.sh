#!/usr/bin/env bash
# 2026-12-03, call 8 (issue 16): the ceilings with the matmul sweep in three layouts (A.T@B:
# a weight gradient's) and HBM passes also on 4x and 8x L2 buffers, and fresh traces on them.
# What it runs: fresh_roof.sh (the earlier form of this file, in git, ran it inline).
exec bash "$(dirname "$0")/fresh_roof.sh" "$@"
