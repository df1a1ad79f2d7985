"""membound's defaults, in one place (the CLI's help texts quote these)."""

from __future__ import annotations

#: a capture skips WAIT steps unprofiled (compilation, autotuning, allocator growth),
#: profiles WARMUP more without keeping them (profiler start-up), then records STEPS
CAPTURE_WAIT = 1
CAPTURE_WARMUP = 2
CAPTURE_STEPS = 8

#: where `membound diagnose` and `membound demo` write, relative to the working directory
DIAGNOSE_OUT = "membound-out"
DEMO_OUT = "membound-demo"
