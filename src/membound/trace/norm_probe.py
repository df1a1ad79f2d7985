"""After `membound diagnose`'s script ends: measure what membound's norm kernels would cost
here, at the norm shape the trace recorded, and keep it in the capture meta.

Whether `membound.swap_norms` / `FusedAdd*` save step time depends on the host: their kernels
take ~55% of ATen's GPU time, but each call costs 2-3x its host time (H200, 12288 x 768:
411 against 154 us per fwd+bwd on one host, 543 against 251 on another,
benchmarks/results/probe_norm_host_2026-12-02b.jsonl), and on eager GPT-2 FusedAddLayerNorm
saved 2.36 ms/step on the first host and cost 19.93 on the second. The analysis replays the
loop with those costs (`analysis.norm_whatif`); this measures them on the machine the loop ran
on: `python -m membound.nn.host_cost` in a process of its own (after the script, so it never
takes GPU or host time from the steps membound timed), with a timeout. A failure is a note in
the meta, never a failed diagnose.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from membound.dtypes import probed_float
from membound.trace import meta_probe

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "norm_host_cost"
#: how a note on a missing measurement begins
LABEL = "norm host cost not measured"
#: seconds the probe may take: CUDA start-up, Triton's first compile of each kernel (~10-20 s
#: cold), then < 2 s of GPU work
TIMEOUT_S = 60.0
#: the ops that compute a norm, lowest level first: where both a composite and the op it
#: calls were recorded, the lower one counts (each call once)
NORM_OPS = {
    "aten::native_layer_norm": "layer",
    "aten::_fused_rms_norm": "rms",
    "aten::layer_norm": "layer",
    "aten::rms_norm": "rms",
}
_LOW = ("aten::native_layer_norm", "aten::_fused_rms_norm")
_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
#: ops whose 16-bit inputs beside an fp32 norm show autocast (the norm runs in fp32 under it)
_MATMULS = ("aten::mm", "aten::addmm", "aten::bmm", "aten::linear", "aten::matmul")


def norm_shape(trace) -> dict[str, Any] | None:
    """The norm shape of the recorded op calls that moves the most bytes (calls x rows x
    hidden x itemsize: a norm is memory-bound, its time follows its bytes): {kind, rows,
    hidden, dtype, autocast, calls}; None when no norm op with shapes was recorded."""
    cpu, names, shapes = trace.cpu, trace.names, trace.shapes
    if not len(cpu) or not shapes:
        return None
    code = {n: i for i, n in enumerate(names) if n in NORM_OPS or n in _MATMULS}
    wanted = [code[n] for n in NORM_OPS if n in code]
    if not wanted:
        return None
    low = [code[n] for n in _LOW if n in code]
    has_low = {NORM_OPS[names[c]] for c in low if ((cpu.name == c) & (cpu.shape >= 0)).any()}
    groups: dict[tuple, int] = {}
    for c in wanted:
        kind = NORM_OPS[names[c]]
        if kind in has_low and c not in low:
            continue  # the composite of a recorded lower op
        for s in cpu.shape[(cpu.name == c) & (cpu.shape >= 0)].tolist():
            dims, types, _ = shapes[s]
            if not dims or not isinstance(dims[0], list) or len(dims[0]) < 1:
                continue
            dtype = probed_float(types[0] if types else None)
            if dtype is None or not all(isinstance(d, int) for d in dims[0]):
                continue
            rows, hidden = math.prod(dims[0][:-1]), dims[0][-1]
            if rows > 0 and hidden > 0:
                key = (kind, rows, hidden, dtype)
                groups[key] = groups.get(key, 0) + 1
    if not groups:
        return None
    (kind, rows, hidden, dtype), calls = max(
        groups.items(), key=lambda kv: kv[1] * kv[0][1] * kv[0][2] * _BYTES[kv[0][3]]
    )
    autocast = False
    if dtype == "float32":
        for n in _MATMULS:
            if n in code:
                for s in cpu.shape[(cpu.name == code[n]) & (cpu.shape >= 0)].tolist():
                    types = shapes[s][1] or []
                    if types and types[0] in ("c10::BFloat16", "c10::Half"):
                        autocast = True
                        break
            if autocast:
                break
    return {
        "kind": kind, "rows": int(rows), "hidden": int(hidden), "dtype": dtype,
        "autocast": autocast, "calls": int(calls),
    }  # fmt: skip


def probe_command(shape: dict[str, Any]) -> list[str]:
    """The host_cost command line for `norm_shape`'s result."""
    cmd = [sys.executable, "-m", "membound.nn.host_cost", "--rows", str(shape["rows"])]
    cmd += ["--hidden", str(shape["hidden"]), "--kind", shape["kind"], "--dtype", shape["dtype"]]
    return cmd + (["--autocast"] if shape.get("autocast") else [])


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Find the norm shape in the capture's ops pass (or its trace), measure it, and keep
    the result in the capture meta at `meta_path` under `META_KEY`; returns one sentence
    saying what happened (a failure is said in it and kept in the meta as a note)."""
    path = Path(meta_path)
    where = ("ops_trace", "trace")
    what = "no trace with op shapes"
    meta, shape, said = meta_probe.read_beside(
        path, LABEL, META_KEY, where, what, norm_shape, shape=None
    )
    if said is not None:
        return said
    if shape is None:
        return "no LayerNorm/RMSNorm op with shapes recorded: norm host cost not measured."
    result, why = meta_probe.run_json(probe_command(shape), timeout, run)
    if why is not None:
        return _keep(path, meta, shape, why)
    result["shape"] = shape
    meta_probe.keep(path, meta, META_KEY, result)
    return (
        f"measured membound's norm kernels at {shape['rows']} x {shape['hidden']} "
        f"{shape['dtype']}: host {result['membound']['host_us']:.0f} us per fwd+bwd against "
        f"ATen's {result['aten']['host_us']:.0f}."
    )


def _keep(path: Path, meta: dict, shape, why: str) -> str:
    """Keep why there is no measurement in the meta (its notes, and `META_KEY`)."""
    return meta_probe.keep_failure(path, meta, META_KEY, LABEL, why, shape=shape)
