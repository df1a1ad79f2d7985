"""What a fix saves where a worker-bound loader sets the loop's pace.

Where worker processes build the batches beside the step and cannot keep up
(`rules.input_starved.WORKER_BOUND_MB_S`), the training thread waits for every batch: the
step is the workers' period, not its own work. A fix that shortens the step's own work
(fewer launches, less host work, fewer syncs, faster kernels) then only lengthens that wait,
by up to all of it: alone it saves what it removes beyond the wait. Out of sample on an H100
(2026-12-06, PyTorch's MNIST example, one worker, 7.67 ms/step of wait in a 13.44 ms step,
`tests/fixtures/h100_real_mnist_cnn_oos1`): the whole-step CUDA graph, predicted 2.31
ms/step, saved 0.42; compile, predicted 1.48, lost 0.67; logging less, predicted 0.25, saved
1.28 (the baselines were 20% apart). Not where the wait is the batch's handing over (large
pageable batches, `worker_bound` false): on the Lightning fits of `examples/real` pinning
saved as much as predicted, or more, with 0.9-1.6 ms/step of wait beside it.
"""

from __future__ import annotations

#: the findings whose fixes recover the loader's wait itself (not paced by it)
INPUT_CODES = frozenset({"input-starved", "pageable-copy", "blocking-copy"})


def behind(saving_ms: float, wait_ms: float) -> float:
    """A signed change of the step's own work (`saving_ms`) behind a loader that keeps the
    training thread waiting `wait_ms` a step: moved toward 0 by the wait (a saving only beyond
    it, a loss only beyond the slack it leaves)."""
    if saving_ms > 0:
        return max(saving_ms - wait_ms, 0.0)
    return min(saving_ms + wait_ms, 0.0)


def loader_wait_ms(findings) -> float | None:
    """ms per step the training thread waits for a worker-bound loader (its
    `input-starved` finding's), or None."""
    for f in findings:
        ev = f.evidence or {}
        if f.code == "input-starved" and ev.get("worker_bound"):
            saving = float(f.time_lost_ms_per_step or 0.0)
            return saving if saving > 0.0 else None
    return None


def behind_loader(findings: list, step_ms: float | None) -> tuple[list, str | None]:
    """`findings` with every finding a worker-bound loader paces (all but the input ones)
    cut by the loader's wait, each as if fixed alone (`evidence["unpaced_ms_per_step"]`
    keeps what it was); those left with nothing are dropped and named in the note (None
    where no loader paces the loop)."""
    wait = loader_wait_ms(findings)
    if wait is None:
        return findings, None
    kept, dropped = [], []
    for f in findings:
        if f.code in INPUT_CODES:
            kept.append(f)
            continue
        lost = float(f.time_lost_ms_per_step or 0.0)
        left = lost - wait
        if not left > 0.0:
            dropped.append(f"{f.code} {lost:.2f}")
            continue
        f.evidence = {**(f.evidence or {}), "unpaced_ms_per_step": lost}
        if lost > 0:
            f.share_of_step *= left / lost
        f.time_lost_ms_per_step = left
        if step_ms:
            f.expected_step_ms_after_fix = step_ms - left
        kept.append(f)
    note = (
        f"the loader's workers set the pace (the training thread waits {wait:.2f} ms a step "
        "for batches they cannot build faster): a fix of the step's own work saves only what "
        "it removes beyond that wait, so until the loader keeps up "
        + (f"these save nothing: {', '.join(dropped)} ms/step without the loader" if dropped
           else "each finding below is cut by it")
    )  # fmt: skip
    return kept, note
