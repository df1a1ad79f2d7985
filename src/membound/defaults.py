"""membound's defaults, in one place (the CLI's help texts quote these)."""

from __future__ import annotations

#: a capture runs WAIT steps unprofiled (the first warms up: compilation, autotuning,
#: allocator growth; membound's step timer times the others), profiles WARMUP more without
#: keeping them (profiler start-up), records STEPS, then times up to STEPS more unprofiled
CAPTURE_WAIT = 6
CAPTURE_WARMUP = 2
CAPTURE_STEPS = 8
#: on a GPU, steps recorded after those with CPU ops and shapes, for the roofline alone
#: (`trace.capture`: the timeline pass records GPU activity only)
CAPTURE_OP_STEPS = 3
#: which CUDA API calls the timeline pass records (`trace.cupti_api`): all of them (the
#: default until a GPU run shows the lighter mode lowers the overhead), or only those the
#: timeline reads
API_RECORDS = ("all", "launches")

#: where `membound diagnose` and `membound demo` write, relative to the working directory
DIAGNOSE_OUT = "membound-out"
DEMO_OUT = "membound-demo"
