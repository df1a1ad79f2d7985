"""Which op calls run outside the model's forward and backward: the work of the training
loop itself (an EMA of the weights, gradient clipping, the optimizer, input preparation,
metrics), which `torch.compile(model)` and autocast do not reach.

Why (issue 15, DDPM U-Net on an H100, 2026-12-06): the loop's per-parameter EMA
(`targ.mul_(rate).add_(src, ...)` after the optimizer step, 163 chains a step) was the top
pattern of the `unfused-chain` finding, whose remedy is `torch.compile(model)`; compile
never reaches that loop, and the EMA's own fix (one `torch._foreach_lerp_`) saved 0.82
ms/step.

Autograd tells the model's work apart. A backward call runs inside a backward node
(`OpCall.backward`), and a forward op shares its sequence number with the backward node it
recorded (`OpCall.seq`): a forward call whose number some backward call carries is the
model's, if it is the last to record that number (`_forward_of_model`: the ops before the
one that makes a node record its number too). The sequence number alone does not separate
the rest: with grad mode on, the EMA's in-place ops carry one too, but no backward node ever
runs with it. Position does: a call neither backward nor carried, whose latest such model
call before it in host time is a backward one (or that has none before it), runs after
backward and before the next forward. A call between two forward calls (a mask, a timestep
embedding computed without grad) stays the model's.
"""

from __future__ import annotations

import numpy as np


def outside_model(
    seq: np.ndarray, backward: np.ndarray, host_ts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(outside, pass) per call. `outside` (see the module): not backward, no backward call
    carrying its sequence number, and the model call before it in host time (`host_ts`) a
    backward one, or none. `pass`: how many backward passes began at or before it (a
    backward call after a forward one, or first, begins one), so a caller can tell the
    loop's own work, which comes back after every pass, from the last forward of a trace
    whose backward ran after the trace ended (the same, by position and number, in one pass
    only). All False and 0 when no call is backward (an inference loop, or a trace whose
    backward calls are not marked): nothing tells the model apart then."""
    seq = np.asarray(seq)
    backward = np.asarray(backward, dtype=bool)
    n = len(seq)
    outside = np.zeros(n, dtype=bool)
    passes = np.zeros(n, dtype=np.int64)
    if not n or not backward.any():
        return outside, passes
    order = np.argsort(np.asarray(host_ts), kind="stable")
    model = backward | _forward_of_model(seq, backward, order)
    in_order = model[order]
    # position (in host order) of the latest model call at or before each call; -1: none
    latest = np.maximum.accumulate(np.where(in_order, np.arange(n), -1))
    after_backward = np.where(latest >= 0, backward[order][np.maximum(latest, 0)], True)
    outside[order] = ~in_order & after_backward
    # a backward call whose latest model call before it was not backward (or none) starts
    # a backward pass: `passes` counts those started at or before each call
    bwd = backward[order]
    before = np.concatenate(([False], after_backward[:-1] & (latest[:-1] >= 0)))
    passes[order] = np.cumsum(bwd & ~before)
    return outside, passes


def _forward_of_model(seq: np.ndarray, backward: np.ndarray, order: np.ndarray) -> np.ndarray:
    """The forward calls of the model: not backward, carrying a number some backward call
    carries, and in the last run of calls with that number in host order (`order`) among the
    calls that are not backward.

    An op records the number the next autograd node will get, so the ops before a node is
    made carry it too: with grad mode on, a GradScaler's `_amp_update_scale_` at the end of
    a step carries the number of the next step's first node (a timm ConvNeXt under --amp on
    an H100, 2026-12-06), though the EMA's calls without grad (-1) run between it and that
    node's forward op. The op that makes the node is the last to record the number; ops
    after it record the next one."""
    n = len(seq)
    carried = np.unique(seq[backward & (seq >= 0)])
    forward = ~backward & (seq >= 0) & np.isin(seq, carried)
    if not forward.any():
        return forward
    nb = order[~backward[order]]  # calls that are not backward, in host order
    s = seq[nb]
    run = np.cumsum(np.concatenate(([True], s[1:] != s[:-1])))
    codes, inv = np.unique(s, return_inverse=True)
    last = np.zeros(len(codes), dtype=np.int64)
    np.maximum.at(last, inv, run)
    in_last = np.zeros(n, dtype=bool)
    in_last[nb] = run == last[inv]
    return forward & in_last
