#!/usr/bin/env bash
# 2026-12-03, call 7 (issue 16): the ceilings with every burst also timed by its kernels'
# own durations (the clock a trace's ops are timed by), and fresh traces placed on them.
# What it runs: fresh_roof.sh (the earlier form of this file, in git, ran it inline).
exec bash "$(dirname "$0")/fresh_roof.sh" "$@"
