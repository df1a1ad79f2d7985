#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-third session), one call of ~9.5 min on whichever card comes:
# - on an H200: session_dec11a.sh, issue 16's owed same-call check (roofline --refresh timed,
#   three real loops diagnosed with those ceilings, no op above its roof);
# - on any other card: issue 15's untimed top remedy, compile, on the DDPM U-Net and
#   EfficientNet-B0 (membound's top remedy on both, never timed), beside channels_last:
#   session_dec14a.sh with SKIP_CLS=1 CONV_FIXES=${CONV_FIXES:-compile,channels-last}.
# Products: those of the script it runs.
d="$(dirname "$0")"
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  exec bash "$d/session_dec11a.sh"
fi
SKIP_CLS=1 CONV_FIXES="${CONV_FIXES:-compile,channels-last}" exec bash "$d/session_dec14a.sh"
