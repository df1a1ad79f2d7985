"""After `membound diagnose`'s script ends: time the trace's convolutions and matmuls again
in bf16 (and NCHW convolutions in channels_last), here, and keep the times in the capture
meta.

What bf16 autocast saves on a convolution that already ran on TF32 tensor cores (cuDNN's
default, `torch.backends.cudnn.allow_tf32`) is not the ratio of the two ceilings. On the H200
(2026-12-02..05, `benchmarks/results/truth.csv`) AMP saved a channels-first ResNet-50 4.8-5.5
ms/step, where its TF32 convolutions ran about 26 ms/step and the ceilings' ratio (bf16 twice
TF32) would have predicted 14-17, and channels_last with AMP saved 18-26 (cuDNN's 16-bit
kernels favour NHWC; on NCHW tensors they may transpose, which was not measured here). On an H100 the DDPM U-Net's TF32
convolutions (30.8 ms/step) gave bf16 11.4 ms/step in all, where the findings, which did not
count them, predicted 6.2. How much faster a convolution runs in bf16 depends on its shape,
its layout and the kernels cuDNN picks for them on this GPU, so it is measured.

The same holds for the other changes that swap a convolution's kernels: fp16 autocast's
depthwise convolutions leave cuDNN in bf16 (`analysis.depthwise`: timm's EfficientNet-B0 lost
33 ms of a 149 ms step to bf16 on an H100), and channels_last, which inductor picks for the
convolutions of a compiled conv net, made the DDPM U-Net's fp32 step 12.9 ms slower there.

The norms between a conv net's convolutions change with them (`NORMS`): a bf16 BatchNorm
leaves cuDNN, and a GroupNorm in channels_last is copied to NCHW and back. They are timed
too, forward and backward, a GroupNorm in channels_last with those copies.

`keys_of(trace)` finds the calls of the ops below that launched kernels, one key per (op,
dtype, shapes, arguments, layout), the most kernel time first (at most `MAX_KEYS`
convolutions and matmuls, and `MAX_NORM_KEYS` norms).
`measure` times each key's op on random tensors of its shapes as recorded (TF32 allowed as
the trace's convolutions recorded it, an fp32 matmul with TF32 on), in bf16, and an NCHW
convolution in channels_last too, in a process of its own after the script (it never
takes time from the steps membound timed). `ratios_of(of(meta), variant)` gives a variant's
time over the recorded one per key; `tf32-matmul` (`analysis.rules.matmul`) reads bf16's over fp32's.
A failure is a note in the meta, never a failed diagnose.

    python -m membound.trace.dtype_probe --keys '[{"op": ..., ...}]'
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from membound.dtypes import probed_float
from membound.trace import meta_probe

_ints = meta_probe.int_list

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "dtype_cost"
#: how a note on a missing measurement begins
LABEL = "convolutions in bf16 not measured"
#: seconds the probe may take: CUDA start-up, cuDNN's choice of kernels, then a second or
#: two of kernels
TIMEOUT_S = 90.0
#: keys timed, those of the most kernel time first
MAX_KEYS = 16
#: timed calls of each dtype (after `WARMUP`); the median is kept
REPS, WARMUP = 7, 3

CONV_FWD = "aten::cudnn_convolution"
#: PyTorch's own depthwise kernel, where cuDNN does not take the shape or dtype
DEPTHWISE_FWD = "aten::_conv_depthwise2d"
CONV_BWD = "aten::convolution_backward"
#: op name -> the key's "op": the convolutions and matmuls
MATMULS = {
    CONV_FWD: "conv", DEPTHWISE_FWD: "conv", CONV_BWD: "conv_backward",
    "aten::mm": "mm", "aten::addmm": "mm", "aten::bmm": "bmm",
}  # fmt: skip
#: the norms a conv net runs between its convolutions, whose kernels the same changes swap:
#: PyTorch sends a bf16 BatchNorm to its own kernels, not cuDNN's (timm's EfficientNet-B0
#: under bf16 on an H100, 2026-12-07: its BatchNorms went from 45.7 to 64.4 ms/step), and
#: CUDA's GroupNorm has no channels_last kernel (its input is copied to NCHW and its output
#: back by the next convolution: the DDPM U-Net in channels_last ran 248 more copies a step,
#: 16.4 ms, and lost 13.07 ms/step where its convolutions alone predicted a 4.52 saving)
NORMS = {
    "aten::cudnn_batch_norm": "bn", "aten::native_batch_norm": "bn",
    "aten::cudnn_batch_norm_backward": "bn_backward",
    "aten::native_batch_norm_backward": "bn_backward",
    "aten::native_group_norm": "gn", "aten::native_group_norm_backward": "gn_backward",
}  # fmt: skip
#: the norms' key "op"s
NORM_OPS = frozenset(NORMS.values())
#: op name -> the key's "op", every op the probe takes
OPS = {**MATMULS, **NORMS}
#: norm keys timed beside the `MAX_KEYS` convolution and matmul keys
MAX_NORM_KEYS = 12


def _int(text: Any) -> int | None:
    try:
        return int(text) if isinstance(text, str) and text.strip().lstrip("-").isdigit() else None
    except ValueError:
        return None


def _bool(text: Any) -> bool | None:
    return {"True": True, "False": False}.get(text) if isinstance(text, str) else None


def _shape(dims: Any, n: int | None = None) -> list[int] | None:
    ok = isinstance(dims, list) and dims and all(type(d) is int and d > 0 for d in dims)
    return list(dims) if ok and (n is None or len(dims) == n) else None


def _channels_last(dims: list[int], strides: Any) -> bool:
    """A 4-D tensor whose channel stride is 1 (and has more than one channel)."""
    return (
        isinstance(strides, list)
        and len(strides) == 4
        and len(dims) == 4
        and dims[1] > 1
        and strides[1] == 1
    )


def key_of(name: str, dims: Any, types: Any, concrete: Any, strides: Any = None) -> dict | None:
    """The probe's key of one recorded call: {"op", the shapes and arguments it takes, and
    "channels_last" for a convolution}; None when it is not a call of a probed op in one
    float dtype (fp32, fp16 or bf16) with its shapes and arguments recorded."""
    op = OPS.get(name)
    if op is None or not isinstance(dims, list) or not isinstance(types, list):
        return None
    concrete = concrete if isinstance(concrete, list) else []
    strides = strides if isinstance(strides, list) else []

    def arg(i: int, parse):
        return parse(concrete[i]) if len(concrete) > i else None

    if name in NORMS:
        return _norm_key(name, op, dims, types, concrete, strides)

    floats = {
        probed_float(t) for t, d in zip(types, dims, strict=False) if isinstance(d, list) and d
    }
    if len(floats) != 1 or None in floats:
        return None
    dtype = floats.pop()
    if name == DEPTHWISE_FWD:
        # (input, weight, kernel_size, bias, stride, padding, dilation): one group a channel
        x, w = (_shape(dims[i], 4) if len(dims) > i else None for i in (0, 1))
        stride, padding, dilation = arg(4, _ints), arg(5, _ints), arg(6, _ints)
        if None in (x, w, stride, padding, dilation):
            return None
        return {
            "op": op, "dtype": dtype, "input": x, "weight": w, "stride": stride, "padding": padding,
            "dilation": dilation, "groups": x[1],
            "channels_last": _channels_last(x, strides[0] if strides else None),
            "benchmark": None, "allow_tf32": True,
        }  # fmt: skip
    if op == "conv":
        x, w = (_shape(dims[i], 4) if len(dims) > i else None for i in (0, 1))
        padding, stride, dilation = arg(2, _ints), arg(3, _ints), arg(4, _ints)
        groups, benchmark, allow_tf32 = arg(5, _int), arg(6, _bool), arg(8, _bool)
        if None in (x, w, padding, stride, dilation, groups) or groups < 1:
            return None
        return {
            "op": op, "dtype": dtype, "input": x, "weight": w, "stride": stride, "padding": padding,
            "dilation": dilation, "groups": groups,
            "channels_last": _channels_last(x, strides[0] if strides else None),
            "benchmark": bool(benchmark), "allow_tf32": allow_tf32 is not False,
        }  # fmt: skip
    if op == "conv_backward":
        g, x, w = (_shape(dims[i], 4) if len(dims) > i else None for i in (0, 1, 2))
        bias = arg(3, _ints)
        stride, padding, dilation = arg(4, _ints), arg(5, _ints), arg(6, _ints)
        transposed, output_padding = arg(7, _bool), arg(8, _ints)
        groups, mask = arg(9, _int), concrete[10] if len(concrete) > 10 else None
        mask = json.loads(mask.lower()) if isinstance(mask, str) and mask.startswith("[") else None
        if None in (g, x, w, stride, padding, dilation, transposed, output_padding, groups):
            return None
        if not (isinstance(mask, list) and len(mask) == 3 and all(type(m) is bool for m in mask)):
            return None
        return {
            "op": op, "dtype": dtype, "grad_output": g, "input": x, "weight": w, "bias_sizes": bias,
            "stride": stride, "padding": padding, "dilation": dilation,
            "transposed": transposed, "output_padding": output_padding, "groups": groups,
            "output_mask": mask, "channels_last": _channels_last(x, strides[1] if len(strides) > 1 else None),
            "benchmark": None,
        }  # fmt: skip
    a, b = (dims[1], dims[2]) if name == "aten::addmm" and len(dims) > 2 else dims[:2]
    n = 3 if op == "bmm" else 2
    a, b = _shape(a, n), _shape(b, n)
    if a is None or b is None or a[-1] != b[-2]:
        return None
    return {"op": op, "dtype": dtype, "a": a, "b": b}


def _norm_key(name: str, op: str, dims: list, types: list, concrete: list, strides: list):
    """A BatchNorm or GroupNorm call's key: {"op", "dtype" (the input's), "input" (its
    shape: a channel dimension and more), "params" (the weight's dtype: fp32 under
    autocast), "training" (BatchNorm), "groups" (GroupNorm), "channels_last"}; None
    without them."""
    # where the input is: native BatchNorm's backward takes the gradient first
    at = (
        1 if name in ("aten::native_batch_norm_backward", "aten::native_group_norm_backward") else 0
    )
    x = _shape(dims[at]) if len(dims) > at else None
    dtype = probed_float(types[at]) if len(types) > at else None
    # the weight: after the input (forward), after input, grad, (mean, rstd) (backward)
    w_at = {"bn": 1, "gn": 1, "bn_backward": 2, "gn_backward": 4}[op]
    params = probed_float(types[w_at]) if len(types) > w_at and _shape(dims[w_at], 1) else None
    if x is None or len(x) < 3 or dtype is None or params not in (dtype, "float32"):
        return None
    key: dict[str, Any] = {"op": op, "dtype": dtype, "input": x, "params": params}
    if op == "bn":
        training = _bool(concrete[5]) if len(concrete) > 5 else None
        if training is None:
            return None
        key["training"] = training
    elif op == "bn_backward":
        key["training"] = True  # the backward of a BatchNorm that normalised by the batch's
    else:
        g_at = 6 if op == "gn" else 8  # (input, weight, bias, N, C, HxW, group, eps)
        groups = _int(concrete[g_at]) if len(concrete) > g_at else None
        if groups is None or groups < 1 or x[1] % groups:
            return None
        key["groups"] = groups
    key["channels_last"] = _channels_last(x, strides[at] if len(strides) > at else None)
    return key


def tag(key: dict[str, Any]) -> str:
    """A key's identity (its JSON, sorted), without what the trace adds to it."""
    return json.dumps(
        {k: v for k, v in key.items() if k not in ("device_ms", "calls")}, sort_keys=True
    )


def keys_of(trace) -> list[dict[str, Any]]:
    """The probe's keys of `trace`'s calls that launched kernels, the most kernel time
    first (at most `MAX_KEYS` convolutions and matmuls, then `MAX_NORM_KEYS` norms), each
    with its `device_ms` in the trace (the kernels launched inside its calls) and `calls`.
    The innermost of nested probed calls is the one taken."""
    found: dict[str, dict[str, Any]] = {}
    for name, dims, types, concrete, strides, kernel_ms in meta_probe.innermost_calls(trace, OPS):
        key = key_of(name, dims, types, concrete, strides)
        if key is None:
            continue
        entry = found.setdefault(tag(key), {**key, "device_ms": 0.0, "calls": 0})
        entry["device_ms"] += kernel_ms
        entry["calls"] += 1
    # a call that records no cuDNN search flag (the backward, PyTorch's depthwise kernel)
    # takes the cuDNN forwards' (`torch.backends.cudnn.benchmark`, one for the process)
    bench = any(e.get("benchmark") for e in found.values())
    merged: dict[str, dict[str, Any]] = {}
    for e in found.values():
        if e["op"].startswith("conv") and e.get("benchmark") is None:
            e["benchmark"] = bench
        got = merged.setdefault(tag(e), e)
        if got is not e:  # the same key once its flag is known
            got["device_ms"] += e["device_ms"]
            got["calls"] += e["calls"]
    found = merged
    ranked = sorted(found.values(), key=lambda e: -e["device_ms"])
    ranked = [e for e in ranked if e["op"] not in NORM_OPS][:MAX_KEYS] + [
        e for e in ranked if e["op"] in NORM_OPS
    ][:MAX_NORM_KEYS]
    for e in ranked:
        e["device_ms"] = round(e["device_ms"], 4)
    return ranked


def _run(key: dict[str, Any], dtype, device: str, channels_last: bool | None = None):
    """A function running the key's op once on tensors of `dtype` made here, in the key's
    layout (`channels_last` None) or the one given."""
    import torch

    cl = key.get("channels_last") if channels_last is None else channels_last
    fmt = torch.channels_last if cl else torch.contiguous_format

    def t(shape):
        x = torch.randn(shape, device=device, dtype=dtype)
        return x.contiguous(memory_format=fmt) if len(shape) == 4 else x

    if key["op"] in NORM_OPS:
        return _norm_run(key, dtype, device, fmt if cl else None)
    if key["op"] == "conv":
        x, w = t(key["input"]), t(key["weight"])
        return lambda: torch.ops.aten.convolution(
            x, w, None, key["stride"], key["padding"], key["dilation"], False, [0, 0],
            key["groups"],
        )  # fmt: skip
    if key["op"] == "conv_backward":
        g, x, w = t(key["grad_output"]), t(key["input"]), t(key["weight"])
        return lambda: torch.ops.aten.convolution_backward(
            g, x, w, key["bias_sizes"], key["stride"], key["padding"], key["dilation"],
            key["transposed"], key["output_padding"], key["groups"], key["output_mask"],
        )  # fmt: skip
    a, b = t(key["a"]), t(key["b"])
    return (lambda: torch.bmm(a, b)) if key["op"] == "bmm" else (lambda: torch.mm(a, b))


def _norm_run(key: dict[str, Any], dtype, device: str, channels_last):
    """A function running a norm key once: the forward (`F.batch_norm`/`F.group_norm`, which
    pick cuDNN's kernels or PyTorch's for the dtype and layout as the model's call did), or
    its backward (`torch.autograd.grad` of one recorded forward). The parameters are fp32
    where the recorded ones were (autocast leaves them so), else of `dtype`; with fp32
    parameters and a 16-bit input the forward runs under autocast in that dtype, which
    leaves a BatchNorm's input as it is and runs a GroupNorm in fp32 (the input cast up).
    In channels_last (`channels_last`: that memory format), a GroupNorm's output, and its
    backward's input gradient and an NCHW tensor of its size (the next convolution's saved
    input), are copied back to channels_last, as the next convolution does with them."""
    import torch
    import torch.nn.functional as F

    shape, c = key["input"], key["input"][1]
    params = torch.float32 if key.get("params") == "float32" else dtype
    backward = key["op"].endswith("_backward")
    mixed = params != dtype and dtype in (torch.float16, torch.bfloat16)

    def t(dims, grad=False):
        x = torch.randn(dims, device=device, dtype=dtype)
        x = x.contiguous(memory_format=channels_last) if channels_last is not None else x
        return x.requires_grad_(grad)

    x = t(shape, backward)
    w = torch.rand(c, device=device, dtype=params).add_(0.5).requires_grad_(backward)
    b = torch.randn(c, device=device, dtype=params).requires_grad_(backward)
    if key["op"].startswith("bn"):
        mean = torch.zeros(c, device=device, dtype=params)
        var = torch.ones(c, device=device, dtype=params)

        def fwd():
            return F.batch_norm(x, mean, var, w, b, training=key["training"], eps=1e-5)
    else:

        def fwd():
            y = F.group_norm(x, key["groups"], w, b, eps=1e-5)
            return y if channels_last is None else y.contiguous(memory_format=channels_last)

    if mixed:
        plain = fwd

        def fwd():
            with torch.autocast(torch.device(device).type, dtype=dtype):
                return plain()

    if not backward:
        return fwd
    y = fwd()
    g = torch.randn_like(y)  # of the output's dtype (fp32 from autocast's GroupNorm), layout
    copied = key["op"] == "gn_backward" and channels_last is not None
    saved = torch.randn(shape, device=device, dtype=y.dtype) if copied else None

    def bwd():
        dx = torch.autograd.grad(y, (x, w, b), g, retain_graph=True)[0]
        if copied:
            # the next convolution's backward copies the gradient it gets, and the NCHW
            # input it saved, to channels_last (the DDPM U-Net's trace: about two copies in
            # each convolution backward after a GroupNorm)
            dx = dx.contiguous(memory_format=channels_last)
            saved.contiguous(memory_format=channels_last)
        return dx

    return bwd


def variants(key: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """(row field, dtype, layout: None as recorded, True channels_last) a key is timed in:
    as recorded ("ms"); in bf16 unless it ran in bf16 ("bf16_ms"); and a 4-D NCHW
    convolution of more than one channel also in channels_last, as recorded and in bf16
    ("channels_last_ms", "channels_last_bf16_ms")."""
    dtype = key.get("dtype", "float32")
    out: list[tuple[str, str, bool | None]] = [("ms", dtype, None)]
    if dtype != "bfloat16":
        out.append(("bf16_ms", "bfloat16", None))
    layout = key["op"].startswith("conv") or key["op"] in NORM_OPS
    x = key.get("input") or []
    if layout and len(x) == 4 and not key.get("channels_last") and x[1] > 1:
        out.append(("channels_last_ms", dtype, True))
        if dtype != "bfloat16":
            out.append(("channels_last_bf16_ms", "bfloat16", True))
    return out


#: the fields `measure` adds to a key
TIMES = ("ms", "bf16_ms", "channels_last_ms", "channels_last_bf16_ms", "errors")


def measure(keys: list[dict[str, Any]], device: str = "cuda") -> dict[str, Any]:
    """{"ops": [key + its `variants`' median ms], "device"}: each key's op timed here as
    recorded (TF32 as the key says for a convolution, on for an fp32 matmul: the calls
    `tf32-matmul` counts ran on tensor cores), in bf16, and an NCHW convolution in
    channels_last too."""
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    out = []
    for key in keys:
        torch.backends.cudnn.benchmark = bool(key.get("benchmark"))
        torch.backends.cudnn.allow_tf32 = bool(key.get("allow_tf32", True))
        torch.backends.cuda.matmul.allow_tf32 = True
        row = {k: v for k, v in key.items() if k not in ("device_ms", "calls")}
        for field_, dtype, layout in variants(key):
            try:
                fn = _run(key, getattr(torch, dtype), device, layout)
                row[field_] = round(meta_probe.median_ms(fn, device, WARMUP, REPS), 5)
            except (RuntimeError, ValueError) as exc:  # one shape or dtype the GPU refuses
                row.setdefault("errors", {})[field_] = f"{type(exc).__name__}: {exc}"[:200]
        out.append(row)
        if device == "cuda":
            torch.cuda.empty_cache()
    return {"ops": out, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu"}


def of(meta: Any) -> dict | None:
    """The measurement a capture meta keeps (`META_KEY`), or None (none, or a failure)."""
    got = meta.get(META_KEY) if isinstance(meta, dict) else None
    return got if isinstance(got, dict) and isinstance(got.get("ops"), list) else None


def ratios_of(
    got: Any, variant: str = "bf16_ms", dtype: str | None = "float32"
) -> dict[str, float]:
    """{`tag(key)`: the `variant`'s ms / the recorded ms} of a measurement (`measure`'s
    result) for keys recorded in `dtype` (None: any); empty when not measured. A ratio above
    1 (the variant slower) is kept: a remedy can cost time."""
    ops = got.get("ops") if isinstance(got, dict) else None
    out: dict[str, float] = {}
    for row in ops if isinstance(ops, list) else []:
        if not isinstance(row, dict) or "op" not in row:
            continue
        if dtype is not None and row.get("dtype") != dtype:
            continue
        try:
            base, other = float(row["ms"]), float(row[variant])
        except (KeyError, TypeError, ValueError):
            continue
        if base > 0 and other > 0:
            out[tag({k: v for k, v in row.items() if k not in TIMES})] = other / base
    return out


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Find the trace's convolutions, matmuls and norms, time them as recorded, in bf16 and in
    channels_last (`variants`), and keep the result in the capture meta at `meta_path` under
    `META_KEY`; returns one sentence saying what happened."""
    nothing = "no convolution, matmul or norm with kernel time recorded: bf16 not measured."
    meta, keys, result, said = meta_probe.measure_keys(
        meta_path, LABEL, META_KEY, keys_of, "membound.trace.dtype_probe", nothing, timeout, run
    )
    if said is not None:
        return said
    total = sum(k["device_ms"] for k in keys)
    result["trace_device_ms"] = round(total, 4)
    meta_probe.keep(Path(meta_path), meta, META_KEY, result)
    rows = [r for r in result["ops"] if isinstance(r, dict) and r.get("ms") and r.get("bf16_ms")]
    base = sum(float(r["ms"]) for r in rows)
    bf16 = sum(float(r["bf16_ms"]) for r in rows)
    return (
        f"measured the trace's {len(result['ops'])} convolution/matmul/norm shapes of the most "
        f"kernel time again here: one call of each not in bf16 took {base:.3g} ms in all as "
        f"recorded, {bf16:.3g} in bf16."
    )


def _valid(key: Any) -> bool:
    """A key `measure` can run: a probed op and the shapes it needs."""
    if not isinstance(key, dict) or key.get("op") not in set(OPS.values()):
        return False
    need = {
        "conv": ("input", "weight", "stride", "padding", "dilation", "groups"),
        "conv_backward": ("grad_output", "input", "weight", "stride", "padding", "dilation",
                          "transposed", "output_padding", "groups", "output_mask"),
        "mm": ("a", "b"),
        "bmm": ("a", "b"),
        "bn": ("input", "training"), "bn_backward": ("input", "training"),
        "gn": ("input", "groups"), "gn_backward": ("input", "groups"),
    }[key["op"]]  # fmt: skip
    return all(k in key for k in need)


def main(argv: list[str] | None = None) -> int:
    return meta_probe.keys_main(
        argv, __doc__.split("\n\n")[0], _valid, measure,
        "convolution or matmul keys (op, shapes)",
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
