"""The fix each finding proposes, chosen by the op family it is about and the code around it
(the frameworks the script imported, from the capture meta): one place, so a BatchNorm is
never told to use a LayerNorm module.

Families: the op's aten name decides (`op_family`); a norm "next to a residual add" is one
whose call follows an `aten::add` of the same size on the same thread (`rules.memory`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

#: what a fused optimizer step's op is named (`_fused_adam_`, `_fused_adamw_`, ...): one
#: kernel for the step, which also takes a GradScaler's inf check on the GPU
FUSED_OPTIMIZERS = ("_fused_adam", "_fused_sgd", "_fused_adagrad")
#: (family, what the op's name holds), first match wins
_FAMILIES = (
    ("upsample", ("upsample",)),  # before matmul: "upsample_bilinear2d" holds "linear"
    ("batch_norm", ("batch_norm",)),
    ("layer_norm", ("layer_norm",)),
    ("rms_norm", ("rms_norm",)),
    ("group_norm", ("group_norm",)),
    ("optimizer", ("_foreach_", *FUSED_OPTIMIZERS)),
    (
        "attention",
        ("scaled_dot_product", "flash_attention", "efficient_attention", "_cudnn_attention"),
    ),
    # cuDNN's fused recurrent layers: a library kernel whose time steps run one after another
    ("rnn", ("_cudnn_rnn", "miopen_rnn", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell")),
    ("conv", ("conv",)),
    ("matmul", ("::mm", "addmm", "bmm", "matmul", "linear", "baddbmm")),
    ("softmax", ("softmax",)),
)
NORMS = ("layer_norm", "rms_norm")

BF16 = "store activations in bf16 (torch.autocast('cuda', dtype=torch.bfloat16))"
COMPILE = "torch.compile(model) fuses it with the ops around it"


@functools.lru_cache(maxsize=8192)  # per call of a big trace: names repeat
def op_family(name: str) -> str:
    low = name.lower()
    if low.startswith(("triton_", "triton::")):  # a kernel inductor generated (and fused)
        return "inductor"
    for family, parts in _FAMILIES:
        if any(p in low for p in parts):
            return family
    return "elementwise"


#: said instead of offering membound's norm kernels where the host has no headroom
HOST_LIMITED_NORMS = (
    "membound's fused norm kernels would move fewer bytes here, but each call costs more host "
    "time than ATen's one norm kernel, and this loop's host has no headroom (the profiler's "
    "own host time made the step {overhead:.0%} slower), so they can make the step slower: "
    "time the step with and without them before keeping them"
)


#: said instead where the loop's replay with the measured cost predicted a loss
#: (`analysis.norm_whatif`)
HOST_LIMITED_NORMS_REPLAYED = (
    "membound's fused norm kernels would move fewer bytes here, but each call costs more host "
    "time than ATen's; replayed with their cost measured on this machine, they would change "
    "the step by {saving:+.2f} ms"
)


def _host_limited_text(host_limited) -> str:
    """`host_limited` as a clause: a float is the profiler's overhead (`host_limited`), a
    `Replayed` the what-if's predicted saving."""
    if isinstance(host_limited, Replayed):
        return HOST_LIMITED_NORMS_REPLAYED.format(saving=host_limited.saving_ms)
    return HOST_LIMITED_NORMS.format(overhead=host_limited)


class Replayed:
    """membound's norm kernels predicted to lose `saving_ms` (<= 0) per step by the loop's
    replay (`analysis.norm_whatif`): passed as `host_limited` instead of the overhead."""

    def __init__(self, saving_ms: float):
        self.saving_ms = float(saving_ms)


def memory_bound_fix(name: str, after_residual_add: bool = False, host_limited=None) -> str:
    """What makes this memory-bound op move fewer bytes (or move them faster). `host_limited`:
    the profiler's overhead on the step when the host has no headroom (`host_limited`), or a
    `Replayed` loss, else None: membound's norm kernels are then not offered as the fix."""
    family = op_family(name)
    if family in NORMS and host_limited is not None:
        return f"{COMPILE}; {BF16}; {_host_limited_text(host_limited)}."
    if family == "batch_norm":
        return (
            f"BatchNorm moves its activations twice: {BF16} and use channels_last "
            "(model.to(memory_format=torch.channels_last)) so cuDNN runs it on NHWC 16-bit data; "
            f"{COMPILE} (BatchNorm + ReLU in one kernel)."
        )
    if family in NORMS:
        kind = "LayerNorm" if family == "layer_norm" else "RMSNorm"
        fused = (
            f"this {kind} follows a residual add: membound.nn.FusedAdd{kind} does the add, "
            f"dropout and {kind} in one pass (write it into the block: y, s = "
            f"norm(x, residual) instead of norm(x + residual)); "
            if after_residual_add
            else ""
        )
        return (
            f"{fused}membound.swap_norms(model) replaces the model's {kind} modules with "
            f"membound's fused kernel in place; {COMPILE}; {BF16}."
        )
    if family == "group_norm":
        return f"{COMPILE}; {BF16}."
    if family == "conv":
        return (
            "Use channels_last (model.to(memory_format=torch.channels_last)): cuDNN otherwise "
            f"transposes NCHW to NHWC around each tensor-core convolution; and {BF16}."
        )
    if family == "inductor":
        return (
            "torch.compile already fused this kernel (its name lists the ops); it runs below "
            "the memory roof: try torch.compile(mode='max-autotune') for tuned block sizes, "
            f"and check what it moves: {BF16} where it still reads or writes fp32, "
            "channels_last for convolution-shaped tensors."
        )
    if family == "optimizer":
        return (
            "Use the fused optimizer (torch.optim.AdamW(..., fused=True)), which updates every "
            "parameter in a few kernels; keep master weights fp32 but gradients bf16 where the "
            "framework allows."
        )
    if family == "softmax":
        return f"{COMPILE} (or use F.scaled_dot_product_attention for attention scores); {BF16}."
    if family == "upsample":
        return (
            "Use channels_last (model.to(memory_format=torch.channels_last) and the inputs): "
            "interpolation's backward scatters into its smaller input with atomic adds, and "
            "on NCHW many land on one address (on the H200 the bilinear backward of "
            "8 x 21 x 60 x 60 -> 480 x 480 took 1.72 ms NCHW, 0.78 channels_last); where "
            "the input is 1 x 1 (a pooled branch), x.expand(...) gives the same output with "
            "a backward that is one sum."
        )
    return f"Move fewer bytes: {COMPILE}; {BF16} instead of fp32."


def chain_fix(names: Iterable[str], after_residual_add: bool, host_limited=None) -> str:
    """What removes the HBM round trips of an unfused chain of these ops (`host_limited`: as
    for `memory_bound_fix`)."""
    families = {op_family(n) for n in names}
    parts = []
    norm = next((f for f in ("layer_norm", "rms_norm") if f in families), None)
    if norm and after_residual_add and host_limited is not None:
        parts.append(_host_limited_text(host_limited))
    elif norm and after_residual_add:
        kind = "LayerNorm" if norm == "layer_norm" else "RMSNorm"
        parts.append(
            f"Replace residual add + dropout + {kind} with membound.nn.FusedAdd{kind} (in the "
            "block: y, s = norm(x, residual)); membound.swap_norms(model) alone swaps the norm "
            "modules but leaves the add outside them"
        )
    if "batch_norm" in families:
        parts.append("use channels_last and bf16 autocast for the BatchNorm/activation chains")
    parts.append("let torch.compile fuse the elementwise chains")
    if host_limited is not None and norm and after_residual_add:
        parts.reverse()  # compile first: it cuts host time too
    text = "; ".join(parts)
    return text[0].upper() + text[1:] + "."


#: a profiler overhead above this fraction of the unprofiled step shows a host with no
#: headroom: the host time it adds shows up in the step, as would a fix's. Issue 15's bound on
#: the capture's overhead where the host keeps ahead; on the H200, FusedAddLayerNorm saved
#: 2.4 ms/step on eager GPT-2 where the capture added 2% (2026-12-01) and cost 19.9 where it
#: added 18.5% on a slower host (2026-12-02, benchmarks/results/truth_2026-12-02c.log)
HOST_LIMITED_OVERHEAD = 0.10


def host_limited(timing) -> float | None:
    """None when the host has headroom (or the capture's step timer says nothing), else the
    profiler's overhead on the step (`StepTiming.overhead_fraction`) that shows it has none."""
    overhead = getattr(timing, "overhead_fraction", None) if timing is not None else None
    if overhead is None or not overhead >= HOST_LIMITED_OVERHEAD:
        return None
    return float(overhead)


def pageable_fix(frameworks: Iterable[str], dataloader: bool) -> str:
    """The pinning switch of what feeds this script, where it can be recognised."""
    fw = set(frameworks)
    switches = []
    if "transformers" in fw:
        switches.append("TrainingArguments(dataloader_pin_memory=True)")
    if fw & {"lightning", "pytorch_lightning"}:
        switches.append("pin_memory=True on the DataLoader your LightningModule/DataModule returns")
    if dataloader and not switches:
        switches.append("DataLoader(pin_memory=True)")
    if "timm" in fw:
        switches.append("timm's loader: create_loader(..., pin_memory=True)")
    head = (
        f"Copy from pinned memory: {'; or '.join(switches)}; or "
        if switches
        else (
            "Copy from pinned memory (tensor.pin_memory() once, for data that stays on the host), or "
        )
    )
    return (
        head + "wrap the loader in membound.data.prefetch(loader), which has a DataLoader with "
        "workers pin its batches on its own thread (other loaders: a reusable pinned pool) and "
        "copies the next batch on a side stream while the current step computes; send uint8 "
        "instead of float32 where the data allows."
    )


def bf16_fix(frameworks: Iterable[str], ratio: float) -> str:
    """bf16 autocast, by the switch of what runs this script, for `tf32-matmul`: its calls
    ran `1 / ratio` times as fast in bf16 here."""
    fw = set(frameworks)
    if "transformers" in fw:
        how = "TrainingArguments(bf16=True)"
    elif fw & {"lightning", "pytorch_lightning"}:
        how = "Trainer(precision='bf16-mixed')"
    elif "timm" in fw:
        how = "timm's train.py --amp --amp-dtype bfloat16, or torch.autocast as below"
    else:
        how = "torch.autocast('cuda', dtype=torch.bfloat16) around the forward and the loss"
    return (
        f"Run the model in bf16: {how}. Its matmuls and convolutions ran on TF32 tensor cores; "
        f"timed again after the script at their own shapes, they ran {1 / ratio:.2f}x as fast "
        "in bf16 on this GPU."
    )


#: said where the step's syncs include a GradScaler's inf check (`rules.host_sync`)
GRAD_SCALER_SYNC = (
    "A GradScaler steps a non-fused optimizer only after reading its inf check on the host "
    "(found_inf.item() in scaler.step), a sync every step that reading the loss less often "
    "does not remove: a fused optimizer (torch.optim.AdamW(..., fused=True)) takes the check "
    "on the GPU, and bf16 autocast needs no GradScaler at all. "
)


def sync_fix(frameworks: Iterable[str], grad_scaler: bool = False) -> str:
    fw = set(frameworks)
    if "transformers" in fw:
        # the Trainer's per-step sync is its NaN/Inf check of the loss (a bool of a GPU
        # tensor, every step by default); logging_steps only spaces the loss reads
        how = (
            "TrainingArguments(logging_nan_inf_filter=False) drops the Trainer's per-step "
            "NaN/Inf check of the loss (it syncs every step), and a larger logging_steps reads "
            "the loss less often"
        )
    elif fw & {"lightning", "pytorch_lightning"}:
        how = "log with self.log(..., on_step=False, on_epoch=True) or a larger log_every_n_steps"
    else:
        how = "read the loss (loss.item()) every N steps instead of every step"
    return (GRAD_SCALER_SYNC if grad_scaler else "") + (
        f"Sync less often: {how}; accumulate metrics on the GPU; remove explicit "
        "torch.cuda.synchronize() and .cpu() of GPU values from the step."
    )


#: frameworks that own the training loop: the user's code is hooks the framework calls, so
#: a CUDA graph of the whole step is not the user's to capture
LOOP_OWNERS = ("lightning", "pytorch_lightning")


def loop_owner(frameworks: Iterable[str]) -> str | None:
    """The framework that runs this script's training loop (Lightning's `Trainer.fit`), or
    None where the script writes its own loop or the owner cannot be told (HF's `Trainer`
    and a loop of one's own both import transformers and accelerate)."""
    fw = set(frameworks)
    return "Lightning" if fw & set(LOOP_OWNERS) else None
