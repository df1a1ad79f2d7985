"""Process-wide facts about membound's own capture that code in other layers reads.

`timeline_pass` is True while `membound diagnose` runs its GPU-only timeline pass (trace/
capture.py sets it): the profiler is on but records no CPU ops, so code that would make
itself visible to the profiler's ops pass (membound's fused norms call their custom ops
then, whose recorded arguments give them an exact cost) must stay on its cheapest path.
"""

from __future__ import annotations

timeline_pass = False
