"""Process-wide facts about membound's own capture that code in other layers reads.

`timeline_pass` is True while `membound diagnose` runs its GPU-only timeline pass (trace/
capture.py sets it): the profiler is on but records no CPU ops, so code that would make
itself visible to the profiler's ops pass (membound's fused norms call their custom ops
then, whose recorded arguments give them an exact cost) must stay on its cheapest path.
"""

from __future__ import annotations

import contextlib
import warnings

timeline_pass = False

#: torch's warning, once per process, when a profiler that keeps no events across cycles
#: starts a cycle (`torch.profiler.profile.prepare_trace`), as a `warnings` filter's
#: message: membound's profilers (the roofline's kernel clock, the capture's two passes) are
#: one cycle each and read every event, so they keep it out of the user's output
CYCLE_WARNING = r".*Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def no_cycle_warning():
    """`CYCLE_WARNING` kept out of the output while a one-cycle profiler runs (torch 2.11
    warned at the first of the kernel clock's profilers, 2026-12-07)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=CYCLE_WARNING)
        yield
