"""A ConvNeXt-Tiny trained the way timm's train.py runs a ConvNeXt recipe with --amp.

The model is ConvNeXt-T written out in plain torch (28.6M parameters): a 4 x 4 stride-4 stem
conv and a LayerNorm2d, four stages of (3, 3, 9, 3) blocks at widths (96, 192, 384, 768), a
LayerNorm2d and a 2 x 2 stride-2 conv between stages; each block a depthwise 7 x 7 conv, a
permute to NHWC, nn.LayerNorm, Linear 4x, GELU, Linear, a layer scale (init 1e-6), a permute
back, stochastic depth (up to 0.1) and the residual add; the head a global average pool, a
LayerNorm and a Linear to 1000 classes. Training is timm's `--amp` loop: fp16 autocast and a
GradScaler in the NativeScaler order (scale, backward, unscale_, clip_grad_norm_ to 5.0, step,
update), AdamW (lr 4e-3, weight decay 0.05 off the norms, biases and layer scales, torch's
default implementation), a cosine LR set on the param groups in Python every step,
label-smoothing cross-entropy (0.1), and an EMA of the weights (decay 0.9998) updated after
every step the way ModelEmaV2 does it: a Python loop over both state_dicts, one
`copy_(decay * e + (1 - decay) * m)` a tensor. The loader is a DataLoader with 8 workers and
`pin_memory=True` (the recipe's --pin-mem) over uint8 3 x 224 x 224 images (a fixed pool of
random pictures, flipped at random), batch 128, moved with `.cuda(non_blocking=True)` and
converted and normalized on the GPU (what timm's prefetcher does, here without its side
stream); the loss is read with `loss.item()` every step for the running meter. Written out of
sample (2026-12-06): no membound rule was changed for it before it was measured.

Fixes, one flag each (what a user would try):
  --bf16                bf16 autocast and no GradScaler (no scale, unscale or inf check)
  --channels-last       the model and the batches in channels_last (timm's --channels-last)
  --compile             torch.compile(model) (timm's --torchcompile)
  --ema-foreach         the EMA as ModelEmaV3 does it: one torch._foreach_lerp_ over the
                        lists of EMA and model tensors, not a loop of small kernels
  --fused-adamw         AdamW(fused=True): one kernel for the optimizer step, which also
                        takes the GradScaler's inf check on the GPU (no .item() in step)
  --log-every N         read the loss every N steps (timm's log interval), not every step

    python examples/real/convnext_amp.py --steps 20
    membound diagnose -- python examples/real/convnext_amp.py
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, SyntheticUint8Images, parse, parser, pick

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


class LayerNorm2d(nn.LayerNorm):
    """LayerNorm over the channels of an NCHW tensor: permute to NHWC, normalize, permute back."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.permute(0, 2, 3, 1)
        x = F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        return x.permute(0, 3, 1, 2)


class DropPath(nn.Module):
    """Stochastic depth: drop the whole residual branch of a sample with probability `p`,
    scaling the kept ones by 1 / (1 - p)."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0],) + (1,) * (x.ndim - 1)).bernoulli_(keep)
        return x * mask.div_(keep)


class Block(nn.Module):
    """dwconv 7x7 -> NHWC -> LayerNorm -> Linear 4x -> GELU -> Linear -> gamma -> NCHW,
    dropped by stochastic depth and added to the input."""

    def __init__(self, dim: int, drop_path: float, ls_init: float = 1e-6):
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(ls_init * torch.ones(dim))
        self.drop_path = DropPath(drop_path)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.dwconv(x).permute(0, 2, 3, 1)
        h = self.pwconv2(self.act(self.pwconv1(self.norm(h))))
        h = (self.gamma * h).permute(0, 3, 1, 2)
        return x + self.drop_path(h)


class ConvNeXt(nn.Module):
    """ConvNeXt at the given depths and widths (the defaults: ConvNeXt-T)."""

    def __init__(
        self,
        depths: tuple[int, ...] = (3, 3, 9, 3),
        dims: tuple[int, ...] = (96, 192, 384, 768),
        num_classes: int = 1000,
        drop_path_rate: float = 0.1,
    ):
        super().__init__()
        self.downsample = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(3, dims[0], 4, stride=4), LayerNorm2d(dims[0], eps=1e-6))]
        )
        for i in range(len(dims) - 1):
            self.downsample.append(
                nn.Sequential(
                    LayerNorm2d(dims[i], eps=1e-6), nn.Conv2d(dims[i], dims[i + 1], 2, stride=2)
                )
            )
        n = sum(depths)  # stochastic depth rising linearly from 0 to drop_path_rate
        rates = [drop_path_rate * k / max(n - 1, 1) for k in range(n)]
        self.stages = nn.ModuleList()
        first = 0
        for depth, dim in zip(depths, dims, strict=True):
            self.stages.append(nn.Sequential(*(Block(dim, rates[first + j]) for j in range(depth))))
            first += depth
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.trunc_normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for down, stage in zip(self.downsample, self.stages, strict=True):
            x = stage(down(x))
        return self.head(self.norm(x.mean((-2, -1))))


class LabelSmoothingCrossEntropy(nn.Module):
    """timm's default training loss without mixup: (1 - s) * NLL + s * the mean of -log p."""

    def __init__(self, smoothing: float = 0.1):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logprobs = F.log_softmax(x, dim=-1)
        nll = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth = -logprobs.mean(dim=-1)
        return ((1.0 - self.smoothing) * nll + self.smoothing * smooth).mean()


def ema_update_v2(ema_model: nn.Module, model: nn.Module, decay: float) -> None:
    """ModelEmaV2's update: walk both state_dicts, one blend and one copy_ a floating-point
    tensor (integer buffers, if any, are left alone; ConvNeXt has none)."""
    with torch.no_grad():
        for ema_v, model_v in zip(
            ema_model.state_dict().values(), model.state_dict().values(), strict=True
        ):
            if ema_v.is_floating_point():
                ema_v.copy_(decay * ema_v + (1.0 - decay) * model_v)


def ema_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The floating-point state_dict entries of `module` (its parameters and float buffers,
    detached views of their storage): the lists ModelEmaV3's foreach update lerps."""
    return [v for v in module.state_dict().values() if v.is_floating_point()]


def ema_update_foreach(
    ema_tensors: list[torch.Tensor], model_tensors: list[torch.Tensor], decay: float
) -> None:
    """ModelEmaV3's foreach update: e += (1 - decay) * (m - e) for every tensor, one
    multi-tensor lerp over the lists (under no_grad: no autograd history on the EMA)."""
    with torch.no_grad():
        torch._foreach_lerp_(ema_tensors, model_tensors, 1.0 - decay)


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """timm's optimizer groups: no weight decay on 1-D tensors (norms, biases, layer scales)."""
    decay, no_decay = [], []
    for q in model.parameters():
        if q.requires_grad:
            (no_decay if q.ndim <= 1 else decay).append(q)
    return [
        {"params": no_decay, "weight_decay": 0.0},
        {"params": decay, "weight_decay": weight_decay},
    ]


def cosine_lr(step: int, total: int, lr: float, warmup: int, lr_min: float = 1e-6) -> float:
    """A cosine schedule with a linear warm-up from `lr_min`, per update (timm's
    CosineLRScheduler with --sched-on-updates), computed on the host."""
    if step < warmup:
        return lr_min + (lr - lr_min) * step / warmup
    t = (step - warmup) / max(total - warmup, 1)
    return lr_min + 0.5 * (lr - lr_min) * (1.0 + math.cos(math.pi * t))


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 128)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast instead of fp16 + scaler")
    p.add_argument("--channels-last", action="store_true", help="channels_last model and images")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--ema-foreach", action="store_true", help="the EMA by one torch._foreach_lerp_")
    p.add_argument("--fused-adamw", action="store_true", help="AdamW(fused=True)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="loss.item() every N steps (default 1)",
    )
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")

    batch = args.batch_size or pick(args, 128, 2)
    size = pick(args, 224, 32)
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    lr, weight_decay, clip_grad, ema_decay, smoothing = 4e-3, 0.05, 5.0, 0.9998, 0.1
    model = ConvNeXt(
        depths=pick(args, (3, 3, 9, 3), (1, 1, 1, 1)),
        dims=pick(args, (96, 192, 384, 768), (8, 16, 32, 64)),
    )
    model = model.to(args.device)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    optimizer = torch.optim.AdamW(
        param_groups(model, weight_decay), lr=lr, fused=True if args.fused_adamw else None
    )
    # fp16 + GradScaler on the GPU (timm's --amp); the CPU smoke run autocasts to bf16 with the
    # scaler disabled, which runs the same calls (scale, unscale_ and update do nothing)
    amp_dtype = torch.bfloat16 if args.bf16 or not args.cuda else torch.float16
    amp = torch.autocast(device_type="cuda" if args.cuda else "cpu", dtype=amp_dtype)
    scaler = torch.amp.GradScaler("cuda", enabled=args.cuda and amp_dtype == torch.float16)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    ema_list, model_list = ema_tensors(ema), ema_tensors(model)
    criterion = LabelSmoothingCrossEntropy(smoothing)
    timer = StepTimer("convnext_amp", args)
    params = list(model.parameters())
    timer.extra = {
        "batch": batch,
        "workers": workers,
        "size": size,
        "params_m": round(sum(q.numel() for q in params) / 1e6, 2),
        "parameters": len(params),
        "ema_tensors": len(ema_list),
        "amp_dtype": str(amp_dtype).removeprefix("torch."),
        "grad_scaler": scaler.is_enabled(),
    }
    if args.compile:  # inductor on the GPU; the CPU smoke run only checks the loop
        net = torch.compile(model, backend="inductor" if args.cuda else "eager")
    else:
        net = model

    dataset = SyntheticUint8Images(batch * (timer.total_steps + 2), size, 1000)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        pin_memory=args.cuda,  # the recipe's --pin-mem (nothing to pin for on the CPU)
        drop_last=True,
        persistent_workers=workers > 0,
    )
    mean = torch.tensor([255 * m for m in IMAGENET_MEAN], device=args.device).view(1, 3, 1, 1)
    std = torch.tensor([255 * s for s in IMAGENET_STD], device=args.device).view(1, 3, 1, 1)
    total = timer.total_steps

    model.train()
    i, logged, seen = 0, 0.0, 0
    while not timer.done:
        for inputs, target in loader:
            optimizer.zero_grad(set_to_none=True)
            inputs = inputs.to(args.device, non_blocking=True)  # .cuda(non_blocking=True)
            target = target.to(args.device, non_blocking=True)
            inputs = inputs.float().sub_(mean).div_(std).contiguous(memory_format=fmt)
            with amp:
                output = net(inputs)
                loss = criterion(output, target)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, clip_grad)
            scaler.step(optimizer)
            scaler.update()
            if args.ema_foreach:  # the fix: a few multi-tensor kernels for every tensor
                ema_update_foreach(ema_list, model_list, ema_decay)
            else:
                ema_update_v2(ema, model, ema_decay)
            for group in optimizer.param_groups:  # the scheduler's step_update, on the host
                group["lr"] = cosine_lr(i + 1, total, lr, warmup=min(5, total))
            if i % args.log_every == 0:
                loss_value = loss.item()  # the running loss meter (losses_m.update)
                logged += loss_value
                seen += 1
                if i % 10 == 0:
                    print(f"step {i}: loss {loss_value:.4f}", flush=True)
            i += 1
            timer.step()
            if timer.done:
                break
    print(f"mean logged loss {logged / max(seen, 1):.4f}", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
