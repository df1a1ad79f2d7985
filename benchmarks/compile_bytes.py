"""What torch.compile did to a loop's GPU work, read from an eager trace and a compiled one
of the same loop: the figures a prediction of compile's saving has to fit.

    PYTHONPATH=src python benchmarks/compile_bytes.py EAGER_TRACE COMPILED_TRACE [--ceilings F]

For each trace, per step: the library kernels inductor calls as they are (matmuls,
convolutions, attention: "extern", with the bytes their calls move), the optimizer's kernels,
and the memory-bound rest (eager ops, or inductor's generated kernels): their time, the bytes
they move, the time those bytes take at each op's roof, and so the share of its roof the rest
runs at, time-weighted. Then what changed. The twenty-third session read the DDPM U-Net
(H100) and GPT-2 (H200) pairs so (`tests/analysis/test_compiled_ddpm.py`): on the DDPM the
rest went from 0.51 to 0.75 of its roof (inductor's own kernels about 0.8) and lost a sixth of
its bytes; on GPT-2 it stayed near 0.55 and lost 43% of its bytes. membound's prediction
(every memory-bound op at its roof, plus the chains' intermediates gone) is near the truth on
GPT-2 and 60% over on the DDPM: the two errors cancel on one and add up on the other.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from membound.analysis import analyze
from membound.analysis.fixes import op_family
from membound.device.ceilings import Ceilings
from membound.trace.capture_meta import timeline_in

#: the op families inductor leaves to a library kernel
EXTERN = ("matmul", "conv", "attention")


def kind_of(row) -> str:
    """ "extern" (a library kernel inductor calls), "optimizer", "memory" (the memory-bound rest,
    eager or generated) or "other"."""
    family = op_family(row.name)
    if family in EXTERN:
        return "extern"
    if family == "optimizer" or "foreach" in row.name or "adam" in row.name.lower():
        return "optimizer"
    return "memory" if row.bound == "memory" else "other"


def split(trace: str | Path, ceilings=None) -> dict[str, Any]:
    """{"step_ms", "steps", kind: {"ms", "gb", "at_roof_ms"}} per step of `trace` (`kind_of`),
    and the memory-bound rest's share of its roof, time-weighted ("reach")."""
    a = analyze(trace, ceilings)
    n = max(len(a.steps), 1)
    out: dict[str, Any] = {"step_ms": a.unprofiled_step_ms or a.median_step_ms, "steps": n}
    for r in a.ops:
        got = out.setdefault(kind_of(r), {"ms": 0.0, "gb": 0.0, "at_roof_ms": 0.0})
        got["ms"] += r.device_ms / n
        got["gb"] += (r.bytes or 0.0) / n / 1e9
        got["at_roof_ms"] += r.device_ms * (r.fraction_of_attainable or 0.0) / n
    rest = out.get("memory")
    if rest and rest["ms"] > 0:
        out["reach"] = rest["at_roof_ms"] / rest["ms"]
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("eager", help="the eager loop's trace (or its folder)")
    p.add_argument("compiled", help="the compiled loop's trace (or its folder)")
    p.add_argument("--ceilings", help="ceilings JSON (default: the trace's own, else datasheet)")
    a = p.parse_args()
    c = Ceilings.load(a.ceilings) if a.ceilings else None
    both = [split(_trace(x), c) for x in (a.eager, a.compiled)]
    print(f"{'':10s} {'eager':>28s} {'compiled':>28s}")
    print(f"{'step':10s} {both[0]['step_ms']:25.2f} ms {both[1]['step_ms']:25.2f} ms")
    for kind in ("extern", "memory", "optimizer", "other"):
        cells = []
        for s in both:
            k = s.get(kind, {"ms": 0.0, "gb": 0.0})
            cells.append(f"{k['ms']:8.2f} ms {k['gb']:8.2f} GB")
        print(f"{kind:10s} {cells[0]:>28s} {cells[1]:>28s}")
    reach = [s.get("reach") for s in both]
    print(f"{'reach':10s} " + " ".join(f"{'-' if r is None else f'{r:.2f}':>28s}" for r in reach))
    e, m = both[0].get("memory"), both[1].get("memory")
    if e and m and e["gb"] > 0:
        print(
            f"the memory-bound rest: {e['ms'] - m['ms']:.2f} ms/step less, "
            f"{1 - m['gb'] / e['gb']:.0%} of its bytes gone"
        )
    return 0


def _trace(path: str) -> Path:
    """A trace file, or the timeline trace membound's capture wrote in a folder
    (`capture_meta.timeline_in`: a fixture's recompressed one too)."""
    p = Path(path)
    return timeline_in(p) if p.is_dir() else p


if __name__ == "__main__":
    raise SystemExit(main())
