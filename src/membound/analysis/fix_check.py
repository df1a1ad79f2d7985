"""Did the fix save what membound predicted? The prediction check of `membound compare`.

A report ranks fixes by the time each is predicted to save (`analysis.remedies`). A user who
applies one and records the run again has the truth beside the prediction: the unprofiled
step before minus the unprofiled step after (both by membound's own step timer, no profiler).
This module puts the two side by side, in the terms of issue 15's tolerance:
|predicted - measured| <= max(25% of the measured saving, 2 ms).

Which fix was applied is given (`membound compare --fix compile`) or inferred from what the
two reports show changed, and only where the change is unambiguous (`applied_fixes`):

- `compile`: inductor's kernels (`triton_*`) hold at least `INDUCTOR_RISE` more of the GPU op
  time after than before (a compiled DCGAN on an H100: 19% after, none before);
- `bf16`/`bf16_storage`: ops on 16-bit data (bf16 or fp16) hold at least `HALF_RISE` more of
  it (whichever of the two the report before offered);
- `fused_optimizer`: a fused optimizer op (`_fused_adam*`, `_fused_sgd`) appears after and
  the `_foreach_` optimizer ops it replaces are gone;
- `pin_memory` / `prefetch`: `pageable-copy` is gone after; `prefetch` where
  `input-starved` or `blocking-copy` was there before and fell by more than half (the demo's
  prefetcher: blocking-copy 0.70 -> 0.08 ms/step);
- `sync_less`: `host-sync` is gone after and nothing else above was inferred (compile also
  shortens the syncs' wait, so a smaller `host-sync` alone is no sign);
- `graph_step`: `launch-bound` and `host-bound` were both there before and both fell to at
  most half after, without compile (the whole step in one CUDA graph: the LSTM of
  `examples/real` went from 1.60 and 1.34 ms/step to a step at the GPU's own pace);
- `drop_data_parallel`: `data-parallel-one-gpu` was there before and is gone after (the
  wrapper's spans are what the finding reads: `rules.data_parallel`).

channels_last, TF32, CUDA graphs of compiled code and membound's norm kernels leave no such
sign in a report: pass them with `--fix`.

The predicted saving of the fixes applied together is `remedies.combined` over the before
report's findings (each finding counted once, the GPU-work part read through the report's GPU
what-if), as `benchmarks/bench_truth.py` predicts every intervention it times.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from membound.analysis.fixes import FUSED_OPTIMIZERS
from membound.errors import BadInput

#: issue 15's tolerance: |predicted - measured| <= max(TOLERANCE_FRACTION x measured,
#: TOLERANCE_MS)
TOLERANCE_FRACTION, TOLERANCE_MS = 0.25, 2.0
#: inductor's share of the GPU op time must rise by this much for `compile` to be inferred
INDUCTOR_RISE = 0.10
#: the 16-bit ops' share of the GPU op time must rise by this much for bf16 to be inferred
HALF_RISE = 0.30
#: dtype names of 16-bit floating-point data in a report's `ops[].dtypes`
HALF_DTYPES = ("c10::BFloat16", "c10::Half", "BFloat16", "Half", "bfloat16", "half")
#: `prefetch` rather than `pin_memory` where input-starved or blocking-copy fell to at most
#: this share of what it was
PREFETCH_FALL = 0.5
#: `graph_step` where launch-bound and host-bound both fell to at most this share
GRAPH_FALL = 0.5


def within_tolerance(predicted: float | None, measured: float) -> bool:
    """Issue 15's target: |predicted - measured| <= max(25% of measured, 2 ms); no
    prediction counts as 0."""
    return abs((predicted or 0.0) - measured) <= tolerance_ms(measured)


def tolerance_ms(measured: float) -> float:
    return max(TOLERANCE_FRACTION * abs(measured), TOLERANCE_MS)


def as_findings(findings: list[dict]) -> list:
    """A report's findings as objects with the attributes `analysis.remedies` reads (code,
    evidence, time_lost_ms_per_step)."""
    return [
        SimpleNamespace(
            code=f.get("code"),
            evidence=f.get("evidence") if isinstance(f.get("evidence"), dict) else None,
            time_lost_ms_per_step=f.get("time_lost_ms_per_step"),
        )
        for f in findings
    ]


def predicted_saving(report: dict, keys: list[str], step_ms: float | None) -> float:
    """What the report predicts the remedies `keys` save together, ms/step
    (`remedies.combined`); BadInput where a finding's evidence cannot be read."""
    from membound.analysis.remedies import combined

    curve = report.get("gpu_whatif") if isinstance(report.get("gpu_whatif"), dict) else None
    try:
        return float(combined(as_findings(report.get("findings") or []), keys, step_ms, curve))
    except (TypeError, ValueError, KeyError) as exc:
        raise BadInput(
            f"{getattr(report, 'path', None) or 'the report before'} has findings whose "
            f"evidence membound cannot read ({type(exc).__name__}): no prediction to check"
        ) from None


def lost_by_code(report: dict) -> dict[str, float]:
    """Time lost per step by finding code (a code may appear once per op: summed)."""
    out: dict[str, float] = {}
    for f in report.get("findings") or []:
        out[f["code"]] = out.get(f["code"], 0.0) + float(f.get("time_lost_ms_per_step") or 0.0)
    return out


def _share(report: dict, test) -> float | None:
    """Share of the report's GPU op time in the ops `test(op)` picks; None without ops."""
    ops = [o for o in report.get("ops") or [] if isinstance(o, dict)]
    total = sum(float(o.get("device_ms") or 0.0) for o in ops)
    if not total > 0:
        return None
    return sum(float(o.get("device_ms") or 0.0) for o in ops if test(o)) / total


def _inductor(op: dict) -> bool:
    return str(op.get("name", "")).startswith(("triton_", "triton::"))


def _half(op: dict) -> bool:
    dtypes = op.get("dtypes")
    return isinstance(dtypes, list) and any(d in HALF_DTYPES for d in dtypes)


def _has_op(report: dict, parts: tuple[str, ...]) -> bool:
    return any(
        any(p in str(o.get("name", "")) for p in parts)
        for o in report.get("ops") or []
        if isinstance(o, dict)
    )


def _offered(report: dict) -> list[str]:
    return [str(r.get("remedy")) for r in report.get("remedies") or [] if isinstance(r, dict)]


def applied_fixes(before: dict, after: dict) -> list[tuple[str, str]]:
    """(remedy key, what shows it) for each fix the two reports show applied (module
    docstring); [] where none is unambiguous."""
    out: list[tuple[str, str]] = []
    ib, ia = _share(before, _inductor), _share(after, _inductor)
    if ib is not None and ia is not None and ia - ib >= INDUCTOR_RISE:
        out.append(("compile", f"inductor's kernels hold {ia:.0%} of the GPU op time after, "
                               f"{ib:.0%} before"))  # fmt: skip
    hb, ha = _share(before, _half), _share(after, _half)
    if hb is not None and ha is not None and ha - hb >= HALF_RISE:
        key = "bf16_storage" if "bf16_storage" in _offered(before) else "bf16"
        out.append((key, f"ops on 16-bit data hold {ha:.0%} of the GPU op time after, "
                         f"{hb:.0%} before"))  # fmt: skip
    if (
        _has_op(after, FUSED_OPTIMIZERS)
        and not _has_op(before, FUSED_OPTIMIZERS)
        and _has_op(before, ("_foreach_add", "_foreach_lerp", "_foreach_addcdiv"))
    ):
        out.append(("fused_optimizer", "a fused optimizer op appears after"))
    lb, la = lost_by_code(before), lost_by_code(after)
    cb, ca = {c for c, v in lb.items() if v > 0}, {c for c, v in la.items() if v > 0}
    if "pageable-copy" in cb and "pageable-copy" not in ca:
        # the prefetcher also takes the copy off the compute stream and the loader's wait
        # off the step: those fall by more than half where pinning alone leaves them
        fell = sorted(c for c in ("input-starved", "blocking-copy")
                      if c in cb and la.get(c, 0.0) <= PREFETCH_FALL * lb[c])  # fmt: skip
        if fell:
            out.append(("prefetch", f"pageable-copy is gone, {' and '.join(fell)} fell by "
                                    "more than half"))  # fmt: skip
        else:
            out.append(("pin_memory", "pageable-copy is gone"))
    host_idle = ("launch-bound", "host-bound")
    if (
        not any(k == "compile" for k, _ in out)
        and all(c in cb for c in host_idle)
        and all(la.get(c, 0.0) <= GRAPH_FALL * lb[c] for c in host_idle)
    ):
        out.append(("graph_step", "launch-bound and host-bound fell by more than half"))
    if "data-parallel-one-gpu" in cb and "data-parallel-one-gpu" not in ca:
        out.append(("drop_data_parallel", "data-parallel-one-gpu is gone"))
    if not out and "host-sync" in cb and "host-sync" not in ca:
        out.append(("sync_less", "host-sync is gone"))
    return out


def check(before: dict, after: dict, fixes: list[str] | None, measured_ms: float | None,
          basis: str) -> dict[str, Any]:  # fmt: skip
    """The prediction check as plain data: the fixes (given or inferred, with what shows
    them), the saving the report before predicted for them together, the measured saving of
    the step (`measured_ms`, on `basis`), the error and whether it is within tolerance, and
    the report's own top remedy beside it."""
    step = before["steps"].get("unprofiled_median_ms") or before["steps"].get("median_step_ms")
    top = next((r for r in before.get("remedies") or [] if isinstance(r, dict)), None)
    out: dict[str, Any] = {
        "fixes": [],
        "how": None,
        "shown_by": [],
        "predicted_ms": None,
        "measured_ms": measured_ms,
        "basis": basis,
        "error_ms": None,
        "tolerance_ms": None,
        "within_tolerance": None,
        "offered": None,
        "top_remedy": None
        if top is None
        else {"remedy": top.get("remedy"), "saving_ms_per_step": top.get("saving_ms_per_step")},
    }
    if fixes:
        keys, how, shown = list(fixes), "given", []
    else:
        found = applied_fixes(before, after)
        keys, how, shown = [k for k, _ in found], "inferred", [w for _, w in found]
    if not keys:
        return out
    predicted = predicted_saving(before, keys, step)
    offered = _offered(before)
    out.update(fixes=keys, how=how, shown_by=shown, predicted_ms=predicted,
               offered=[k for k in keys if k in offered])  # fmt: skip
    if measured_ms is not None:
        out.update(
            error_ms=predicted - measured_ms,
            tolerance_ms=tolerance_ms(measured_ms),
            within_tolerance=within_tolerance(predicted, measured_ms),
        )
    return out
