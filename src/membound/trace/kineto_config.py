"""kineto options torch.profiler has no argument for, given through the file `KINETO_CONFIG`
names.

kineto (torch.profiler's tracer, linked into libtorch) reads that file at every trace's start
(`ActivityProfilerProxy::prepareTrace`: its options override the defaults), and reads the
variable's value once, at the process's first trace. So an option set here applies to a
capture when no trace ran in the process before it; `membound diagnose` runs the script in
its own interpreter and starts its capture with the script, so its timeline pass is the
first. Where the user already points `KINETO_CONFIG` at a file, its lines are kept and ours
follow them.

The option membound can ask for: `CUPTI_PER_THREAD_BUFFER_ENABLED` (CUDA 12.3 on), CUPTI's
activity records kept per thread instead of in one buffer every launching thread fills
(kineto leaves it off). On an H100 HF T5 (2026-12-05) the timeline pass's cost fell on the
autograd thread, about 20 us per backward launch against 3 us per launch on a loop with one
launching thread; whether per-thread buffers remove it is what
`benchmarks/gpu/session_overhead.sh` measures. Until it has, the capture's default leaves
kineto's alone (`defaults.CUPTI_BUFFERS`).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

#: the environment variable kineto reads its config file's path from
ENV = "KINETO_CONFIG"
#: kineto's option for CUPTI's per-thread activity buffers
PER_THREAD_BUFFERS = "CUPTI_PER_THREAD_BUFFER_ENABLED"
#: the file written beside the capture's trace
FILE_NAME = "kineto.conf"


def request(
    options: dict[str, str],
    folder: str | os.PathLike,
    environ: MutableMapping[str, str] | None = None,
) -> dict[str, Any]:
    """Write `options` to `folder/kineto.conf`, after the lines of the file `KINETO_CONFIG`
    already names (if any), and point `KINETO_CONFIG` at it. Returns what the capture meta
    keeps: {"options", "file", "user_file" (the file that was named before, or None)}; a file
    that cannot be read or written leaves the variable as it was, and says why."""
    env = os.environ if environ is None else environ
    user = env.get(ENV) or None
    out: dict[str, Any] = {"options": dict(options), "file": None, "user_file": user}
    lines: list[str] = []
    try:
        if user:
            lines = Path(user).read_text().splitlines()
        path = Path(folder) / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            "".join(f"{line}\n" for line in lines + [f"{k}={v}" for k, v in options.items()])
        )
    except OSError as exc:
        out["why"] = f"{type(exc).__name__}: {exc}"
        return out
    env[ENV] = str(path)
    out["file"] = str(path)
    return out
