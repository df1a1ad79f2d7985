"""Cost the optimizer calls whose TensorLists the profiler recorded without shapes: fused
Adam/AdamW and the `_foreach_*` ops over a real model's parameters. What they visit is known
from autograd instead: every parameter that gets a gradient passes its `AccumulateGrad` node
once per backward, with its shape and dtype (`parameters`). `analysis.ops.join_calls` calls
`cost_fused_adam` and `cost_foreach_lists` on its per-call columns, in place.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from membound.analysis import intervals as iv
from membound.cost.registry import read_bytes_of
from membound.dtypes import itemsize, trace_dtype
from membound.trace.model import Trace

#: the ops whose TensorList arguments' dtype a trace leaves out and their kernels name
FOREACH = "aten::_foreach_"


#: fused Adam/AdamW steps: their TensorList arguments (params, grads, exp_avgs, exp_avg_sqs,
#: max_exp_avg_sqs, state_steps) record no shapes
FUSED_ADAM = ("aten::_fused_adamw_", "aten::_fused_adam_")
#: per parameter element: params, grads, exp_avgs, exp_avg_sqs read; params and both moments
#: written (amsgrad adds max_exp_avg_sqs, read and written); FLOPs of the update, roughly
ADAM_PASSES, AMSGRAD_PASSES, ADAM_FLOPS = 7, 2, 12
#: of those passes, the reads: the four tensors (amsgrad: + max_exp_avg_sqs)
ADAM_READS, AMSGRAD_READS = 4, 1
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"


def cost_fused_adam(trace, windows, cpu_index, names, known, nbytes, reads, flops, compute,
                     family, device_us, first_kernel_us=None):  # fmt: skip
    """Cost the fused Adam/AdamW calls from the parameters they update, in place.

    The profiler records no shapes for a TensorList, but every parameter that gets a gradient
    passes autograd's `AccumulateGrad` once per backward, with its shape and dtype. Over the
    analysed steps each parameter's AccumulateGrad runs steps x micro-batches times, so the
    greatest common divisor of the per-shape counts is that product (a shape held by one
    parameter shows it; a shape several share is a multiple) and the parameters' elements P
    are the counted elements over it: H200 fixtures give 168.31 M for the HF Llama and 124.48
    M for GPT-2, the counts those scripts print. A step of fused Adam then moves
    `ADAM_PASSES` x P elements of the parameters' dtype (amsgrad: 2 more passes, read from its
    recorded flag), `ADAM_READS` passes of them read (amsgrad: 1 more); the steps' total is
    shared among the calls by their device time, as a model with two parameter groups updates
    them in two calls whose split is not recorded. The steps are those whose window holds an
    Adam call's first kernel (`first_kernel_us`): an ops pass whose last window ends before
    its optimizer ran (compiled GPT-2 with CUDA graphs, H200: 3 windows, 2 with an update)
    would otherwise be charged an update it did not run (120% of the HBM roof).
    Without AccumulateGrad events, or steps to count, the calls stay uncosted."""
    adam = np.flatnonzero(np.isin(names, FUSED_ADAM) & ~known)
    if not len(adam) or windows is None or not len(windows[0]):
        return
    found = parameters(trace, windows)
    if found is None:
        return
    params = float(sum(math.prod(shape) * n for shape, _, n in found))
    size = max(itemsize(dt) for _, dt, n in found)
    w0, w1 = (np.asarray(w, dtype=np.float64) for w in windows)
    steps = len(w0)
    if first_kernel_us is not None:
        t = np.asarray(first_kernel_us, dtype=np.float64)[adam]
        k = np.searchsorted(w0, t, side="right") - 1
        held = (k >= 0) & (t < w1[np.maximum(k, 0)])
        steps = len(np.unique(k[held])) or steps
    cpu = trace.cpu
    passes = np.full(len(adam), ADAM_PASSES, dtype=np.float64)
    read_passes = np.full(len(adam), ADAM_READS, dtype=np.float64)
    for k, i in enumerate(cpu_index[adam].tolist()):
        if _amsgrad(trace, int(cpu.shape[i])):
            passes[k] += AMSGRAD_PASSES
            read_passes[k] += AMSGRAD_READS
    time = device_us[adam]
    share = time / time.sum() if time.sum() > 0 else np.full(len(adam), 1.0 / len(adam))
    total = params * steps
    nbytes[adam] = total * share * passes * size
    reads[adam] = total * share * read_passes * size
    flops[adam] = total * share * ADAM_FLOPS
    compute[adam] = "fp32_vector"
    family[adam] = "optimizer"
    known[adam] = True


def parameters(trace: Trace, windows) -> list[tuple[tuple[int, ...], str, int]] | None:
    """The model's parameters that got a gradient, as (shape, dtype, how many), from the
    `AccumulateGrad` nodes of the analysed steps (`windows`): each parameter's runs once per
    backward, so the greatest common divisor of the per-shape counts is the backwards run
    (a shape held by one parameter shows it; a shape several share is a multiple). None
    without such nodes, or where one's shape or dtype cannot be read."""
    cpu = trace.cpu
    acc = trace.name_ids(lambda n: n == ACCUMULATE_GRAD)
    sel = np.isin(cpu.name, acc) & (cpu.shape >= 0)
    w0, w1 = (np.asarray(w, dtype=np.float64) for w in windows)
    sel &= iv.inside(cpu.ts, w0, w1)
    counts: Counter = Counter(cpu.shape[sel].tolist())
    if not counts:
        return None
    per_backward = math.gcd(*counts.values())
    out: dict[tuple, int] = {}
    for sid, c in counts.items():
        dims, types, _ = trace.shapes[sid]
        shape = dims[0] if dims and isinstance(dims[0], list) else None
        dt = trace_dtype(types[0]) if types else None
        if shape is None or dt is None or not all(isinstance(d, int) for d in shape):
            return None  # a parameter the count cannot read
        key = (tuple(shape), dt)
        out[key] = out.get(key, 0) + c // per_backward
    return [(shape, dt, n) for (shape, dt), n in out.items()]


#: elements each block of a multi_tensor_apply kernel visits (ATen's kChunkSize): a
#: `_foreach_*` call's launches have one block per chunk of each tensor of its lists
FOREACH_CHUNK = 65536


def cost_foreach_lists(trace, windows, cpu_index, names, known, nbytes, reads, flops, compute,
                        family, blocks, kernel_name, fn):  # fmt: skip
    """Cost, in place, the `_foreach_*` calls whose TensorLists the trace recorded empty
    (the profiler leaves out a long list's shapes: every optimizer over a real model's
    parameters, ViT-B's 152 tensors or BERT's 201) from the parameters they visit.

    A call's multi_tensor_apply kernels have one block per `FOREACH_CHUNK` elements of each
    tensor (`blocks`: their sum per call), and the parameters are known from autograd
    (`parameters`). A call covers a group of parameters when its blocks are that group's
    chunks: all of them, or an optimizer's two usual groups, the matrices (decayed) and the
    vectors (biases and norm weights, not). On the H200's recorded traces every call of the
    ViT's and Lightning's foreach AdamW/SGD matched all parameters (1421 and 227 blocks),
    and BERT's two groups 1671 and 124. A match says the sizes only where some tensor of
    the group spans more than one chunk; where each is one chunk (BERT's vectors, 124
    blocks for 124 tensors), a list of as many scalars matches as well (HF Llama's fused
    AdamW increments 17 step counters, and its vectors are 17): such a call is taken for the
    vectors only where a call of the same op matched the matrices (the op runs once per
    group of a two-group optimizer), else it stays uncosted, as does any whose blocks match
    no group or two. The lists' dtype is the one
    their kernel names (`formulas.foreach.list_dtypes_of`). `kernel_name`: per call, the
    name id of one of its multi_tensor_apply kernels (-1: none); `fn`: the cost model
    (`membound.cost.cost_of`, or the stub a test gives `ops._cost_fn`)."""
    cand = np.flatnonzero(~known & (blocks > 0) & (kernel_name >= 0))
    # names are tested on those calls only: a big trace has millions of calls
    cand = cand[[str(names[k]).startswith(FOREACH) for k in cand.tolist()]]
    if not len(cand) or windows is None or not len(windows[0]):
        return
    found = parameters(trace, windows)
    if not found:
        return
    from membound.cost.formulas.foreach import list_dtypes_of

    def group(keep) -> tuple[list[tuple[int, ...]], int, int]:
        shapes = [shape for shape, _, n in found if keep(shape) for _ in range(n)]
        chunks = sum(-(-math.prod(s) // FOREACH_CHUNK) if math.prod(s) else 0 for s in shapes)
        return shapes, chunks, len(shapes)

    groups = {
        "all": group(lambda s: True),
        "matrices": group(lambda s: len(s) >= 2),
        "vectors": group(lambda s: len(s) <= 1),
    }
    memo: dict[tuple, Any] = {}
    cpu = trace.cpu
    hit_of: dict[int, str] = {}
    for k in cand.tolist():
        hits = [g for g, (_, chunks, n) in groups.items() if chunks == int(blocks[k]) and n]
        if len(hits) == 1:
            hit_of[k] = hits[0]
    per_group = {str(names[k]) for k, g in hit_of.items() if g == "matrices"}
    for k, i in zip(cand.tolist(), cpu_index[cand].tolist(), strict=True):
        hit = hit_of.get(k)
        if hit is None:
            continue  # no group, or two
        if groups[hit][1] <= groups[hit][2] and not (
            hit == "vectors" and str(names[k]) in per_group
        ):
            continue  # the count pins only how many tensors
        sid = int(cpu.shape[i])
        if sid < 0:
            continue
        dims, types, concrete = trace.shapes[sid]
        dims, types = list(dims or []), list(types or [])
        lists = [j for j, t in enumerate(types) if t == "TensorList"]
        if not lists or any(j >= len(dims) or dims[j] != [] for j in lists):
            continue  # recorded shapes: costed from them already (or not readable)
        name = str(names[k])
        dtypes = list_dtypes_of(name, [trace.names[int(kernel_name[k])]])
        if dtypes is None:
            continue
        key = (name, sid, hit, dtypes)
        if key not in memo:
            shapes = [list(s) for s in groups[hit][0]]
            filled = [shapes if j in lists else d for j, d in enumerate(dims)]
            try:
                cost = fn(name, filled, types, concrete, None, list_dtypes=dtypes)
            except Exception:  # a formula that cannot read them: no cost, not a crash
                cost = None
            ok = cost is not None and cost.family != "unknown" and getattr(cost, "exact", True)
            if ok and name.removeprefix(FOREACH).rstrip("_") == "addcmul" and len(lists) >= 3:
                cost = _one_read_of_the_factors(cost, groups[hit][0], dtypes)
            memo[key] = cost if ok else None
        cost = memo[key]
        if cost is None:
            continue
        nbytes[k], reads[k], flops[k] = float(cost.bytes), read_bytes_of(cost), float(cost.flops)
        compute[k], family[k], known[k] = cost.compute, cost.family, True


def _one_read_of_the_factors(cost, shapes, dtypes):
    """`cost` of an `_foreach_addcmul_(state, tensor1, tensor2)` over the parameters with
    the two factor lists read once: the trace cannot tell whether they are one list, and
    every torch optimizer that calls it over its parameters passes the gradients twice
    (Adam/AdamW's `exp_avg_sq += (1 - beta2) * grad * grad`, RMSprop's and Adagrad's too),
    whose second read finds the same lines. Read apart, the ViT's and BERT's AdamW (H200)
    ran it at 116% of the HBM roof, against 75-89% for the same optimizer's other foreach
    ops. Minimal bytes, as every cost: one list less is the least such a call moves."""
    import dataclasses

    dt = dtypes if isinstance(dtypes, str) else dtypes[1]
    once = float(sum(math.prod(s) for s in shapes)) * itemsize(dt)
    reads = None if cost.read_bytes is None else cost.read_bytes - once
    return dataclasses.replace(cost, bytes=cost.bytes - once, read_bytes=reads)


#: position of `amsgrad` among _fused_adam(w)_'s arguments (self, grads, exp_avgs,
#: exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay, eps, amsgrad, ...)
_AMSGRAD_ARG = 11


def _amsgrad(trace, sid: int) -> bool:
    """The call's recorded `amsgrad` flag (False when not recorded)."""
    if sid < 0:
        return False
    concrete = trace.shapes[sid][2]
    return bool(concrete) and len(concrete) > _AMSGRAD_ARG and concrete[_AMSGRAD_ARG] == "True"
