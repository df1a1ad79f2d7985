#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-second session), one short call (~4 min) on any card: the DDPM
# U-Net with bf16 and channels-last again, its GroupNorms timed in channels_last with the
# copies its convolutions' backward makes too (trace.dtype_probe._norm_run: the gradient and
# the saved NCHW input) and in bf16 under autocast (GroupNorm in fp32).
# Products: as session_dec14a's (truth_conv.csv, dec14a.tgz).
SKIP_CLS=1 CONV_SCRIPTS=${CONV_SCRIPTS:-ddpm_unet} SESSION_S=${SESSION_S:-230} \
  exec bash "$(dirname "$0")/session_dec14a.sh"
