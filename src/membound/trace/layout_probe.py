"""After `membound diagnose`'s script ends: time the trace's NCHW interpolations again in
channels_last, here, and keep both in the capture meta.

What channels_last saves on an interpolation is not its gap to the memory roof. The
backward scatters each output element into the smaller input with an atomic add; on NCHW
a warp's threads add into the same few addresses, on channels_last into as many channels.
How much faster that makes it depends on the shape: on the H200, DeepLabV3's (torchvision's
segmentation reference, fp16 AMP) upsample backward took 16.4 ms a step at 0% of its roof,
so `memory-bound-op` predicted 16.3 ms for channels_last, which measured 11.3 and 10.0
(`examples/real/segmentation_tv.py`, 2026-12-04). Its two shapes differ: the classifier's
8 x 21 x 60 x 60 -> 480 x 480 (1.6 ms a call) and the pooled ASPP branch's 8 x 256 x 1 x 1
-> 60 x 60 (13.2 ms a call: every output element adds into one pixel per channel).

So `memory-bound-op` on an interpolation (`analysis.rules.memory`) predicts channels_last
from this measurement where there is one: each call's recorded time times 1 - (its shape's
channels_last time / NCHW time) here. It runs when the ops pass recorded an interpolation
with a 4-D NCHW input that owns kernel time: in a process of its own, after the script (it
never takes time from the steps membound timed), each such (op, shape, dtype) of the most
kernel time (at most `MAX_KEYS`) is timed in both layouts. A failure is a note in the meta,
never a failed diagnose.

    python -m membound.trace.layout_probe --keys '[{"name": ..., "dims": [...], ...}]'
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from membound.dtypes import PROBED_FLOATS, probed_float
from membound.trace import meta_probe

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "layout_cost"
#: how a note on a missing measurement begins
LABEL = "channels_last not measured"
#: seconds the probe may take: CUDA start-up, then well under a second of kernels a key
TIMEOUT_S = 60.0
#: (op, shape, dtype) keys timed, those of the most kernel time first
MAX_KEYS = 6
#: the 2-D interpolations whose kernels have an NHWC path: op -> (mode, backward)
UPSAMPLE_2D = {
    "aten::upsample_nearest2d": ("nearest", False),
    "aten::_upsample_nearest_exact2d": ("nearest_exact", False),
    "aten::upsample_bilinear2d": ("bilinear", False),
    "aten::upsample_bicubic2d": ("bicubic", False),
    "aten::upsample_nearest2d_backward": ("nearest", True),
    "aten::_upsample_nearest_exact2d_backward": ("nearest_exact", True),
    "aten::upsample_bilinear2d_backward": ("bilinear", True),
    "aten::upsample_bicubic2d_backward": ("bicubic", True),
}
#: timed calls of each layout (after `WARMUP`); the median is kept
REPS, WARMUP = 9, 3


def key_of(name: str, dims: Any, types: Any, concrete: Any, strides: Any = None) -> dict | None:
    """The probe's key of one recorded interpolation call: {name, dims, dtype, output_size,
    input_size (backward), align_corners (bilinear, bicubic)}; None when it is not a 2-D
    interpolation on a 4-D NCHW input (rows and planes contiguous) of a dtype the probe takes, or its sizes
    were not recorded (an output given by scale factors)."""
    if name not in UPSAMPLE_2D or not isinstance(dims, list) or not dims:
        return None
    mode, backward = UPSAMPLE_2D[name]
    shape = dims[0]
    if not isinstance(shape, list) or len(shape) != 4 or not all(type(d) is int for d in shape):
        return None
    if min(shape) <= 0:
        return None
    n, c, h, w = shape
    if strides and isinstance(strides, list) and strides[0] not in (None, []):
        # NCHW rows and planes; the batch stride may be larger (a slice of a concatenation's
        # gradient: the ASPP pooled branch's), channels_last (channel stride 1) is not
        if list(strides[0])[1:] != [h * w, w, 1] and c > 1:
            return None
    dtype = probed_float(types[0] if isinstance(types, list) and types else None)
    concrete = concrete if isinstance(concrete, list) else []
    out = meta_probe.int_list(concrete[1], positive=True) if len(concrete) > 1 else None
    if dtype is None or out is None or len(out) != 2:
        return None
    key: dict[str, Any] = {"name": name, "dims": shape, "dtype": dtype, "output_size": out}
    at = 2
    if backward:
        size = meta_probe.int_list(concrete[2], positive=True) if len(concrete) > 2 else None
        if size is None or len(size) != 4 or size[:2] != [n, c] or [h, w] != out:
            return None
        key["input_size"] = size
        at = 3
    if mode in ("bilinear", "bicubic"):
        flag = concrete[at] if len(concrete) > at else ""
        if flag not in ("True", "False"):
            return None
        key["align_corners"] = flag == "True"
    return key


def keys_of(trace) -> list[dict[str, Any]]:
    """The interpolation keys of `trace`'s op calls that launched kernels, the most kernel
    time first (at most `MAX_KEYS`), each with its `device_ms` in the trace (the kernels
    launched inside its calls) and `calls`."""
    found: dict[str, dict[str, Any]] = {}
    for name, dims, types, concrete, strides, kernel_ms in meta_probe.innermost_calls(
        trace, UPSAMPLE_2D
    ):
        key = key_of(name, dims, types, concrete, strides)
        if key is None:
            continue
        tag = json.dumps(key, sort_keys=True)
        entry = found.setdefault(tag, {**key, "device_ms": 0.0, "calls": 0})
        entry["device_ms"] += kernel_ms
        entry["calls"] += 1
    ranked = sorted(found.values(), key=lambda e: -e["device_ms"])[:MAX_KEYS]
    for e in ranked:
        e["device_ms"] = round(e["device_ms"], 4)
    return ranked


def _op(key: dict[str, Any]):
    """The aten overload a key names, and its arguments after the tensor."""
    import torch

    backward = UPSAMPLE_2D[key["name"]][1]
    op = getattr(torch.ops.aten, key["name"].removeprefix("aten::")).default
    args: list[Any] = [key["output_size"]]
    if backward:
        args.append(key["input_size"])
    if "align_corners" in key:
        args.append(key["align_corners"])
    return op, [*args, None, None]  # scales_h, scales_w: the sizes decide


def measure(keys: list[dict[str, Any]], device: str = "cuda") -> dict[str, Any]:
    """{"ops": [key + {"nchw_ms", "channels_last_ms", "max_abs_diff"}]}: the median time of
    each key's op on a contiguous (NCHW) and a channels_last input here, and how far apart
    their results are (the same op either way)."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    out = []
    for key in keys:
        op, args = _op(key)
        dtype = getattr(torch, key["dtype"])
        x = torch.randn(key["dims"], device=device, dtype=dtype)
        row = dict(key)
        results = {}
        for fmt, name in (
            (torch.contiguous_format, "nchw"),
            (torch.channels_last, "channels_last"),
        ):
            t = x.contiguous(memory_format=fmt)
            last: dict[str, Any] = {}

            def run(t=t, last=last, op=op, args=args):
                last["y"] = op(t, *args)

            row[f"{name}_ms"] = round(meta_probe.median_ms(run, device, WARMUP, REPS), 5)
            results[name] = last["y"].float()
        row["max_abs_diff"] = float((results["nchw"] - results["channels_last"]).abs().max())
        out.append(row)
        del x, results
    return {"ops": out, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}


def ratios(meta: Any) -> dict[tuple, float]:
    """{(op name, input dims, dtype): channels_last ms / NCHW ms} measured here, from a
    capture meta (`META_KEY`); empty when not measured. A ratio above 1 (channels_last
    slower) is kept: a remedy can cost time."""
    got = meta.get(META_KEY) if isinstance(meta, dict) else None
    ops = got.get("ops") if isinstance(got, dict) else None
    out: dict[tuple, float] = {}
    for row in ops if isinstance(ops, list) else []:
        try:
            nchw, cl = float(row["nchw_ms"]), float(row["channels_last_ms"])
            key = (str(row["name"]), tuple(int(d) for d in row["dims"]), str(row["dtype"]))
        except (KeyError, TypeError, ValueError):
            continue
        if nchw > 0 and cl >= 0:
            out[key] = cl / nchw
    return out


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Find the trace's NCHW interpolations, time them in both layouts, and keep the result
    in the capture meta at `meta_path` under `META_KEY`; returns one sentence saying what
    happened."""
    nothing = "no NCHW interpolation with kernel time recorded: channels_last not measured."
    meta, _, result, said = meta_probe.measure_keys(
        meta_path, LABEL, META_KEY, keys_of, "membound.trace.layout_probe", nothing, timeout, run
    )
    if said is not None:
        return said
    meta_probe.keep(Path(meta_path), meta, META_KEY, result)
    parts = [
        f"{row['name'].removeprefix('aten::')} {'x'.join(map(str, row['dims']))} "
        f"{row['nchw_ms']:.3g} -> {row['channels_last_ms']:.3g} ms"
        for row in result["ops"]
        if isinstance(row, dict) and {"name", "dims", "nchw_ms", "channels_last_ms"} <= set(row)
    ]
    return "measured channels_last on the trace's interpolations here: " + "; ".join(parts) + "."


def _valid(key: Any) -> bool:
    """A key `measure` can run: a known op, 4 positive dims, a dtype it takes, the sizes."""
    if not isinstance(key, dict) or key.get("name") not in UPSAMPLE_2D:
        return False
    dims, out = key.get("dims"), key.get("output_size")
    ok = isinstance(dims, list) and len(dims) == 4 and all(type(d) is int and d > 0 for d in dims)
    ok = ok and key.get("dtype") in PROBED_FLOATS and isinstance(out, list) and len(out) == 2
    if UPSAMPLE_2D[key["name"]][1]:
        ok = ok and isinstance(key.get("input_size"), list) and len(key["input_size"]) == 4
    return ok


def main(argv: list[str] | None = None) -> int:
    return meta_probe.keys_main(
        argv, __doc__.split("\n\n")[0], _valid, measure,
        "interpolation keys (name, dims, dtype, sizes)",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
