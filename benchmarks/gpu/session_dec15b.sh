#!/usr/bin/env bash
# Prepared 2026-12-07 (twenty-second session), one call of ~9 min on any card: session_dec14a
# again with the probe that times the norms too (BatchNorm and GroupNorm, forward and
# backward, in bf16 and channels_last: trace.dtype_probe.NORMS), so that the same call's
# diagnose predicts channels_last and bf16 with them: classification_tv with amp,
# channels-last and the reference's --compile (its top remedy, never measured), then the DDPM
# U-Net and EfficientNet-B0 with bf16 and channels-last.
# Products: as session_dec14a's (truth_cls.csv, truth_conv.csv, dec14a.tgz).
CLS_FIXES=${CLS_FIXES:-amp,channels-last,compile} CONV_S=${CONV_S:-200} \
  exec bash "$(dirname "$0")/session_dec14a.sh"
