#!/usr/bin/env bash
# 2026-12-03, call 11 (issue 16): the ceilings with every HBM burst call starting on a clean
# L2 (after a 2xL2 read: dirty lines' write-back no longer shares its traffic), and fresh
# traces on them.
# What it runs: fresh_roof.sh (the earlier form of this file, in git, ran it inline).
exec bash "$(dirname "$0")/fresh_roof.sh" "$@"
