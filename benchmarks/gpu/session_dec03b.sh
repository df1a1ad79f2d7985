#!/usr/bin/env bash
# 2026-12-03, call 2 (issues 15/16): session_dec03a.sh run again, after its two fixes: the
# chained ReLU passes were timed (since dropped: within 0.3% of the re-read form) and the norm
# probe returns gradients with allow_unused (call 1's probe failed, so diagnose had no host
# cost). Products as session_dec03a.sh's.
exec bash "$(dirname "$0")/session_dec03a.sh" "$@"
