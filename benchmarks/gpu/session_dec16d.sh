#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session), one call of ~8 min on whichever card comes:
# on an H200 issue 16's owed same-call check (session_dec11a.sh, SESSION_S=${SESSION_S:-480});
# on another card session_dec16c.sh (autocast's host work measured, and the T5's tf32 and
# bf16 timed against it).
d="$(dirname "$0")"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  SESSION_S=${SESSION_S:-480} exec bash "$d/session_dec11a.sh"
fi
exec bash "$d/session_dec16c.sh"
