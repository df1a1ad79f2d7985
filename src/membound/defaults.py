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
#: which CUDA API calls the timeline pass records (`trace.cupti_api`): only those the
#: timeline reads (the default), or all of them. Measured on an H100 host (2026-12-05,
#: benchmarks/probe_cupti_kinds.py, medians of 3 windows of 8 steps in one process, the
#: windows of one variant spread +-15%): DCGAN, membound's capture +47.9% -> +28.2% over the
#: plain step, the bare CUDA-only profiler +35.1% -> +28.7%; the timm ViT under `membound
#: diagnose`, +32% -> +19% (one run each); the ViT's probe windows too noisy to order. A
#: recorded timeline with those calls removed gives the same findings
#: (tests/trace/test_cupti_api.py)
API_RECORDS = ("launches", "all")
#: where CUPTI keeps the timeline pass's activity records (`trace.kineto_config`): in the one
#: buffer every launching thread fills, as kineto does by default, or per thread. On an H100
#: (2026-12-06) per-thread buffers did not lower the step's growth under membound's filter
#: (docs/capture.md): kineto's default stays the default
CUPTI_BUFFERS = ("shared", "per-thread")
#: `membound diagnose --syncs`: how the run's CUDA syncs wait (`trace.sync_mode`), default
#: first. sleep-profiled since 2026-12-07 (H100, `benchmarks/gpu/session_dec20a.sh`): the
#: driver switched a live context's syncs to sleeping and back (a 19 ms GPU-paced step: the
#: thread's CPU 19.16 -> 0.57 -> 19.25 ms, the step 19.16 -> 19.69 -> 19.25), the BERT
#: fine-tune's TF32 and bf16 came within (28.95 predicted, 34.52 saved; 21.91, 23.41; with
#: spinning syncs 21.50 against 32.87), and the LSTM LM's steps with sleeping syncs took what
#: its spinning ones did (4.55, 4.54 ms); the loop's own reported steps spin either way
SYNC_MODES = ("sleep-profiled", "spin", "sleep")

#: where `membound diagnose` and `membound demo` write, relative to the working directory
DIAGNOSE_OUT = "membound-out"
DEMO_OUT = "membound-demo"
