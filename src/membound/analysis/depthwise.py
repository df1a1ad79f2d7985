"""Depthwise convolutions under fp16 autocast: what bf16's predicted saving leaves out.

bf16 in place of fp16 is predicted from what it removes (the GradScaler's sync, fp32 work that
autocast leaves): the same kernels at the same speed otherwise. Depthwise convolutions break
that. PyTorch picks their backend in `ConvParams::use_cudnn_depthwise` (ATen's
Convolution.cpp): channels_last ones go to cuDNN, contiguous (NCHW) ones only in fp16 and
within its shape conditions; every other runs on PyTorch's own kernels (`conv_depthwise2d`).
So in bf16 every NCHW depthwise convolution leaves cuDNN. timm's EfficientNet-B0 recipe under fp16 autocast
(`examples/real/efficientnet_amp.py`, H100, 2026-12-06: 16 depthwise convolutions a step, 13
of them on cuDNN) lost 33.06 ms of a 149 ms step with bf16, where 3.88 was predicted; a
ConvNeXt-T recipe (18 7 x 7 depthwise convolutions a step, all on cuDNN in fp16) saved 12.87 and
14.63 with bf16 where 9.20 and 10.49 were predicted. A trace of the fp16 run cannot say how its
depthwise convolutions would run on PyTorch's own kernels, so where nothing measured them
membound says so beside the prediction instead of guessing; where `trace.dtype_probe` timed
them in bf16 after the script, `analysis.dtype_whatif` prices the change instead.
"""

from __future__ import annotations

import numpy as np

from membound.analysis.op_calls import call_column

#: the input dtype autocast's fp16 gives a convolution
HALF = "c10::Half"


def is_depthwise(dims) -> bool:
    """A convolution's recorded input shapes hold a depthwise weight ([C, 1, kh, kw], C > 1)
    and an activation of C channels."""
    shapes = [tuple(d) for d in (dims or ()) if isinstance(d, (list, tuple)) and len(d) == 4]
    for w in shapes:
        if w[1] == 1 and w[0] > 1 and any(x != w and x[1] == w[0] for x in shapes):
            return True
    return False


def fp16_depthwise(ctx) -> dict | None:
    """{"calls_per_step", "cudnn_forward_per_step", "own_forward_per_step", "ms_per_step"} of
    the depthwise convolutions (forward and backward) run in fp16, from the ops pass's calls;
    None where there is none."""
    calls = ctx.calls
    if not len(calls):
        return None
    names = call_column(calls, "name")
    conv = np.flatnonzero(np.char.find(names.astype(str), "conv") >= 0)
    if not len(conv):
        return None
    dims, dtypes = call_column(calls, "dims"), call_column(calls, "dtypes")
    mine = [
        int(i) for i in conv.tolist()
        if dtypes[i] and dtypes[i][0] == HALF and is_depthwise(dims[i])
    ]  # fmt: skip
    if not mine:
        return None
    forward = [i for i in mine if names[i] != "aten::convolution_backward"]
    cudnn = sum(1 for i in forward if names[i] == "aten::cudnn_convolution")
    device = call_column(calls, "device_us")
    return {
        "calls_per_step": ctx.per_op_step(len(mine)),
        "cudnn_forward_per_step": ctx.per_op_step(cudnn),
        "own_forward_per_step": ctx.per_op_step(len(forward) - cudnn),
        "ms_per_step": ctx.per_op_step(float(device[mine].sum()) / 1e3),
    }


def bf16_note(ctx) -> str | None:
    """One line where bf16 is a remedy and the step runs depthwise convolutions in fp16
    (`fp16_depthwise`): bf16's prediction leaves their change out."""
    found = fp16_depthwise(ctx)
    if found is None:
        return None
    return (
        f"bf16 in place of fp16 is predicted without the depthwise convolutions' change: "
        f"{found['calls_per_step']:.0f} a step run in fp16 ({found['ms_per_step']:.2f} ms/step, "
        f"forward and backward; {found['cudnn_forward_per_step']:.0f} forward on cuDNN, "
        f"{found['own_forward_per_step']:.0f} on PyTorch's own kernels), and in bf16 PyTorch "
        "runs NCHW depthwise convolutions on its own kernels only (its cuDNN depthwise path "
        "takes fp16 or channels_last): the change can go either way, so time it, or pair it "
        "with channels_last (on an H100, timm's EfficientNet-B0 lost 33 ms/step with bf16 in "
        "NCHW; a ConvNeXt-T saved more than predicted)"
    )
