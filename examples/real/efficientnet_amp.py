"""An EfficientNet-B0 trained the way timm's train.py runs its EfficientNet-B0 recipe with --amp.

The model is EfficientNet-B0 written out in plain torch (5.29M parameters, timm's
efficientnet_b0, BatchNorm at PyTorch's eps and momentum as there): a 3 x 3 stride-2 stem conv
to 32 channels, BatchNorm and SiLU; seven stages of (1, 2, 2, 3, 3, 4, 1) blocks at widths (16,
24, 40, 80, 112, 192, 320), kernels (3, 3, 5, 3, 5, 5, 3) and strides (1, 2, 2, 2, 1, 2, 1),
the first depthwise-separable, the rest MBConv (1 x 1 expansion x6, depthwise conv,
squeeze-excitation down to a quarter of the block's input channels with SiLU and a sigmoid
gate, 1 x 1 projection and BatchNorm, stochastic depth up to 0.2 and the residual add where
the shape allows); the head a 1 x 1 conv to 1280, BatchNorm, SiLU, a global average pool,
dropout 0.2 and a Linear to 1000 classes. Training is the recipe's (`--opt rmsproptf
--opt-eps .001 --weight-decay 1e-5 --drop 0.2 --drop-path 0.2 --model-ema --model-ema-decay
0.9999 --amp --lr .048 --sched step --reprob 0.2 --remode pixel`) in timm 0.9's loop: fp16
autocast and a GradScaler in the NativeScaler order (scale, backward, step, update: no clip,
so no unscale_), timm's RMSpropTF (alpha 0.9, eps 1e-3 inside the sqrt, momentum 0.9 with the
LR in the buffer, square averages from one) whose step is a Python loop over the 213
parameters, no weight decay on norms and biases, a warm-up and step LR set on the param
groups in Python every step, label-smoothing cross-entropy (0.1), and an EMA (decay 0.9999)
updated every step as ModelEmaV2 does it: a Python loop over both state_dicts (360 tensors),
one `copy_(decay * e + (1 - decay) * m)` each. The loader is a DataLoader with 8 workers and
`pin_memory` off (timm's default) over uint8 3 x 224 x 224 images (a fixed pool of random
pictures, flipped at random), batch 256, fast_collate, behind timm's PrefetchLoader: on a
side stream the next batch is moved with `.cuda(non_blocking=True)` from pageable memory,
converted, normalized and randomly erased (a Python loop over the samples, each erased with
probability 0.2 by a rectangle of normal noise) while the current one trains; the loss is
read with `loss.item()` every step for the running meter. Written out of
sample (2026-12-06, sixteenth session): no membound rule was changed for it before it was
measured.

Fixes, one flag each (what a user would try):
  --channels-last       the model and the batches in channels_last (timm's --channels-last)
  --pin-mem             DataLoader(pin_memory=True) (timm's --pin-mem)
  --bf16                bf16 autocast and no GradScaler (no scale or inf check)
  --compile             torch.compile(model) (timm's --torchcompile)
  --ema-foreach         the EMA as today's ModelEmaV3 does it: one torch._foreach_lerp_ over
                        the floating-point tensors (the integer counters still copied one by one)
  --torch-rmsprop       torch.optim.RMSprop(foreach=True) in place of RMSpropTF's loop: what a
                        user chasing speed tries, not the same numerics (eps outside the sqrt,
                        square averages from zero, the LR applied after the momentum)
  --membound-prefetch   membound.data.prefetch(loader) in place of the PrefetchLoader, its
                        transform membound.data.Normalize then the same random erasing
  --log-every N         read the loss every N steps (timm's log interval), not every step

    python examples/real/efficientnet_amp.py --steps 20
    membound diagnose -- python examples/real/efficientnet_amp.py
"""

from __future__ import annotations

import copy
import math
import random
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, SyntheticUint8Images, parse, parser, pick

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
#: (blocks, kernel, stride, expansion, out channels) of B0's stages (timm's arch_def)
B0_STAGES = ((1, 3, 1, 1, 16), (2, 3, 2, 6, 24), (2, 5, 2, 6, 40), (3, 3, 2, 6, 80),
             (3, 5, 1, 6, 112), (4, 5, 2, 6, 192), (1, 3, 1, 6, 320))  # fmt: skip


def fast_collate(batch):
    """timm's fast_collate for tensors: one uint8 batch tensor, int64 targets."""
    targets = torch.tensor([b[1] for b in batch], dtype=torch.int64)
    tensor = torch.zeros((len(batch), *batch[0][0].shape), dtype=torch.uint8)
    for i in range(len(batch)):
        tensor[i].copy_(batch[i][0])
    return tensor, targets


class RandomErasing:
    """timm's RandomErasing (mode 'pixel') on a normalized batch on its device: a Python loop
    over the samples, each with probability `probability` given one rectangle (2% to 1/3 of
    the area, aspect 0.3 to 3.3, ten tries to fit) of normal noise drawn there."""

    def __init__(self, probability: float = 0.2, min_area=0.02, max_area=1 / 3, min_aspect=0.3):
        self.probability, self.min_area, self.max_area = probability, min_area, max_area
        self.log_aspect_ratio = (math.log(min_aspect), math.log(1 / min_aspect))

    def _erase(self, img: torch.Tensor, chan: int, img_h: int, img_w: int) -> None:
        if random.random() > self.probability:
            return
        for _ in range(10):
            target_area = random.uniform(self.min_area, self.max_area) * img_h * img_w
            aspect_ratio = math.exp(random.uniform(*self.log_aspect_ratio))
            h = int(round(math.sqrt(target_area * aspect_ratio)))
            w = int(round(math.sqrt(target_area / aspect_ratio)))
            if w < img_w and h < img_h:
                top, left = random.randint(0, img_h - h), random.randint(0, img_w - w)
                img[:, top : top + h, left : left + w] = torch.empty(
                    (chan, h, w), dtype=img.dtype, device=img.device
                ).normal_()
                break

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        _, chan, img_h, img_w = x.shape
        for i in range(x.shape[0]):
            self._erase(x[i], chan, img_h, img_w)
        return x


class PrefetchLoader:
    """timm's PrefetchLoader: the next batch is copied to the device, converted to float,
    normalized and randomly erased on a side stream while the current one trains."""

    def __init__(self, loader, device, mean, std, re_prob: float = 0.2):
        self.loader = loader
        self.device = torch.device(device)
        self.mean = torch.tensor([x * 255 for x in mean], device=device).view(1, 3, 1, 1)
        self.std = torch.tensor([x * 255 for x in std], device=device).view(1, 3, 1, 1)
        self.random_erasing = RandomErasing(re_prob) if re_prob > 0 else None
        self.is_cuda = self.device.type == "cuda"

    def __iter__(self):
        first, batch_input, batch_target = True, None, None
        stream = torch.cuda.Stream() if self.is_cuda else None
        for next_input, next_target in self.loader:
            with torch.cuda.stream(stream) if self.is_cuda else nullcontext():
                next_input = next_input.to(device=self.device, non_blocking=True)
                next_target = next_target.to(device=self.device, non_blocking=True)
                next_input = next_input.float().sub_(self.mean).div_(self.std)
                if self.random_erasing is not None:
                    next_input = self.random_erasing(next_input)
            if not first:
                yield batch_input, batch_target
            first = False
            if stream is not None:  # (timm records no stream use on the main stream)
                torch.cuda.current_stream().wait_stream(stream)
            batch_input, batch_target = next_input, next_target
        yield batch_input, batch_target

    def __len__(self) -> int:  # (timm's also passes .sampler and .dataset through)
        return len(self.loader)


class DropPath(nn.Module):
    """Stochastic depth: a sample's branch dropped with probability `p`, the rest scaled up."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.p == 0.0 or not self.training:
            return x
        keep = 1.0 - self.p
        mask = x.new_empty((x.shape[0], 1, 1, 1)).bernoulli_(keep)
        return x.div(keep) * mask


class SqueezeExcite(nn.Module):
    """Pool -> 1x1 conv down to `rd` channels -> SiLU -> 1x1 conv back -> a sigmoid gate."""

    def __init__(self, chs: int, rd: int):
        super().__init__()
        self.conv_reduce, self.act1 = nn.Conv2d(chs, rd, 1), nn.SiLU(inplace=True)
        self.conv_expand = nn.Conv2d(rd, chs, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.conv_expand(self.act1(self.conv_reduce(x.mean((2, 3), keepdim=True))))
        return x * s.sigmoid()


def conv_bn(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1, act: bool = True):
    """conv (no bias, 'same'-sized symmetric padding) -> BatchNorm -> SiLU (if `act`)."""
    layers = [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]  # fmt: skip
    return nn.Sequential(*layers, *([nn.SiLU(inplace=True)] if act else []))


class MBConv(nn.Module):
    """[1x1 expand, BN, SiLU] -> depthwise kxk, BN, SiLU -> SE -> 1x1 project, BN -> drop path
    and residual add if stride 1 keeps the channels (no expand: timm's DepthwiseSeparableConv)."""

    def __init__(self, cin: int, cout: int, k: int, stride: int, exp: int, drop_path: float):
        super().__init__()
        mid = cin * exp
        self.conv_pw = conv_bn(cin, mid) if exp != 1 else nn.Identity()
        self.conv_dw = conv_bn(mid, mid, k, stride, groups=mid)
        self.se = SqueezeExcite(mid, cin // 4)  # a quarter of the block's input channels
        self.conv_pwl = conv_bn(mid, cout, act=False)
        self.has_skip = stride == 1 and cin == cout
        self.drop_path = DropPath(drop_path) if self.has_skip else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv_pwl(self.se(self.conv_dw(self.conv_pw(x))))
        return x + self.drop_path(h) if self.has_skip else h


class EfficientNet(nn.Module):
    """EfficientNet at the given stages (the defaults: B0), timm's Google-style init."""

    def __init__(self, stages=B0_STAGES, num_classes=1000, drop_rate=0.2, drop_path_rate=0.2):
        super().__init__()
        self.conv_stem = conv_bn(3, 32, 3, 2)
        n, idx, cin, blocks = sum(s[0] for s in stages), 0, 32, []
        for repeats, k, stride, exp, cout in stages:
            for j in range(repeats):  # drop path rising linearly with the block index
                rate = drop_path_rate * idx / n
                blocks.append(MBConv(cin, cout, k, stride if j == 0 else 1, exp, rate))
                cin, idx = cout, idx + 1
        self.blocks = nn.Sequential(*blocks)
        self.conv_head = conv_bn(cin, 1280)
        self.drop_rate = drop_rate
        self.classifier = nn.Linear(1280, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):  # normal(0, sqrt(2 / fan_out)), fan_out per group
                fan_out = m.kernel_size[0] * m.kernel_size[1] * m.out_channels // m.groups
                nn.init.normal_(m.weight, 0, math.sqrt(2.0 / fan_out))
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                r = 1.0 / math.sqrt(m.weight.size(0))
                nn.init.uniform_(m.weight, -r, r)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv_head(self.blocks(self.conv_stem(x))).mean((2, 3))
        return self.classifier(F.dropout(x, self.drop_rate, self.training))


class LabelSmoothingCrossEntropy(nn.Module):
    """timm's training loss without mixup: (1 - s) * NLL + s * the mean of -log p."""

    def __init__(self, smoothing: float = 0.1):
        super().__init__()
        self.smoothing = smoothing

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logprobs = F.log_softmax(x, dim=-1)
        nll = -logprobs.gather(dim=-1, index=target.unsqueeze(1)).squeeze(1)
        smooth = -logprobs.mean(dim=-1)
        return ((1.0 - self.smoothing) * nll + self.smoothing * smooth).mean()


class RMSpropTF(torch.optim.Optimizer):
    """timm's RMSpropTF: square averages from one, eps inside the sqrt, the LR in the momentum
    buffer, weight decay added to the gradient; a Python loop of small kernels a parameter."""

    def __init__(self, params, lr=1e-2, alpha=0.9, eps=1e-10, weight_decay=0.0, momentum=0.0):
        defaults = dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad, state = p.grad, self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["square_avg"] = torch.ones_like(p)  # PyTorch's starts at zero
                    if group["momentum"] > 0:
                        state["momentum_buffer"] = torch.zeros_like(p)
                square_avg = state["square_avg"]
                state["step"] += 1
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                # TensorFlow's order of ops for the squared average; eps inside the sqrt
                square_avg.add_(grad.pow(2) - square_avg, alpha=1.0 - group["alpha"])
                avg = square_avg.add(group["eps"]).sqrt_()
                if group["momentum"] > 0:
                    buf = state["momentum_buffer"]
                    buf.mul_(group["momentum"]).addcdiv_(grad, avg, value=group["lr"])
                    p.add_(-buf)
                else:
                    p.addcdiv_(grad, avg, value=-group["lr"])


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """timm's param_groups_weight_decay: no weight decay on 1-D tensors (norms, biases)."""
    decay, no_decay = [], []
    for q in model.parameters():
        if q.requires_grad:
            (no_decay if q.ndim <= 1 else decay).append(q)
    return [dict(params=no_decay, weight_decay=0.0), dict(params=decay, weight_decay=weight_decay)]


def ema_update_v2(ema_model: nn.Module, model: nn.Module, decay: float) -> None:
    """ModelEmaV2's update: walk both state_dicts, one blend and one copy_ a tensor (the
    BatchNorm counters included, as ModelEmaV2 does)."""
    with torch.no_grad():
        pairs = zip(ema_model.state_dict().values(), model.state_dict().values(), strict=True)
        for ema_v, model_v in pairs:
            ema_v.copy_(decay * ema_v + (1.0 - decay) * model_v)


def ema_update_v3(ema_model: nn.Module, model: nn.Module, decay: float) -> None:
    """ModelEmaV3's foreach update: the integer buffers copied one by one, then one
    multi-tensor lerp over every floating-point tensor."""
    with torch.no_grad():
        ema_lerp, model_lerp = [], []
        pairs = zip(ema_model.state_dict().values(), model.state_dict().values(), strict=True)
        for ema_v, model_v in pairs:
            if ema_v.is_floating_point():
                ema_lerp.append(ema_v)
                model_lerp.append(model_v)
            else:
                ema_v.copy_(model_v)
        torch._foreach_lerp_(ema_lerp, model_lerp, 1.0 - decay)


def step_lr(update: int, lr: float, per_epoch: int, warmup_lr=1e-6, warmup_epochs=3,
            decay_epochs=2.4, decay_rate=0.97) -> float:  # fmt: skip
    """timm's StepLRScheduler (the recipe's --warmup-epochs 3 --decay-epochs 2.4 --decay-rate
    .97), its step_update per update: a linear warm-up, then x0.97 every 2.4 epochs."""
    warmup_t, decay_t = warmup_epochs * per_epoch, decay_epochs * per_epoch
    if update < warmup_t:
        return warmup_lr + update * (lr - warmup_lr) / warmup_t
    return lr * decay_rate ** (update // decay_t)


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 256)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 8)")
    p.add_argument("--channels-last", action="store_true", help="channels_last model and images")
    p.add_argument("--pin-mem", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast instead of fp16 + scaler")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--ema-foreach", action="store_true", help="the EMA by one torch._foreach_lerp_")
    p.add_argument("--torch-rmsprop", action="store_true", help="torch.optim.RMSprop, foreach")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    p.add_argument(
        "--log-every", type=int, default=1, metavar="N", help="loss.item() every N steps"
    )
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    random.seed(args.seed)  # the random erasing's host-side draws

    batch = args.batch_size or pick(args, 256, 4)
    size = pick(args, 224, 32)
    workers = args.workers if args.workers is not None else pick(args, 8, 0)
    lr, weight_decay, ema_decay, smoothing, re_prob = 0.048, 1e-5, 0.9999, 0.1, 0.2
    per_epoch = 1281167 // batch  # ImageNet's updates an epoch, for the schedule
    # B0: 5,288,548 parameters at 1000 classes (timm's efficientnet_b0), 213 tensors and 360
    # state_dict entries; the CPU smoke run keeps one block a stage (96 tensors, 162 entries)
    model = EfficientNet(stages=pick(args, B0_STAGES, tuple((1, *s[1:]) for s in B0_STAGES)))
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(args.device, memory_format=fmt)
    groups = param_groups(model, weight_decay)
    for group in groups:  # the scheduler starts the groups at the warm-up LR
        group["lr"] = step_lr(0, lr, per_epoch)
    rmsprop = dict(lr=lr, alpha=0.9, eps=1e-3, momentum=0.9)  # --opt rmsproptf --opt-eps .001
    if args.torch_rmsprop:
        optimizer = torch.optim.RMSprop(groups, **rmsprop, foreach=True)
    else:
        optimizer = RMSpropTF(groups, **rmsprop)
    # fp16 + GradScaler on the GPU (timm's --amp); the CPU smoke run autocasts to bf16 with the
    # scaler disabled, which runs the same calls (scale, step and update pass through)
    amp_dtype = torch.bfloat16 if args.bf16 or not args.cuda else torch.float16
    amp = torch.autocast(device_type="cuda" if args.cuda else "cpu", dtype=amp_dtype)
    scaler = torch.amp.GradScaler("cuda", enabled=args.cuda and amp_dtype == torch.float16)
    ema = copy.deepcopy(model).eval().requires_grad_(False)  # ModelEmaV2(model)
    criterion = LabelSmoothingCrossEntropy(smoothing)
    timer = StepTimer("efficientnet_amp", args)
    params = list(model.parameters())
    timer.extra = {"batch": batch, "workers": workers, "size": size,
                   "params_m": round(sum(q.numel() for q in params) / 1e6, 2),
                   "parameters": len(params), "ema_tensors": len(ema.state_dict()),
                   "amp_dtype": str(amp_dtype).removeprefix("torch."),
                   "grad_scaler": scaler.is_enabled()}  # fmt: skip
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
        collate_fn=fast_collate,
        pin_memory=args.pin_mem and args.cuda,  # timm's --pin-mem, off by default
        drop_last=True,
        persistent_workers=workers > 0,
    )
    if args.membound_prefetch:
        import membound.data

        normalize = membound.data.Normalize(
            IMAGENET_MEAN, IMAGENET_STD, dtype=torch.float32, channels_last=args.channels_last
        )
        erase = RandomErasing(re_prob)
        loader = membound.data.prefetch(
            loader, args.device, transform=lambda b: (erase(normalize(b[0])), b[1])
        )
    else:
        loader = PrefetchLoader(loader, args.device, IMAGENET_MEAN, IMAGENET_STD, re_prob)

    model.train()
    num_updates, logged, seen = 0, 0.0, 0
    while not timer.done:
        for inputs, target in loader:
            if args.channels_last:
                inputs = inputs.contiguous(memory_format=torch.channels_last)
            with amp:
                output = net(inputs)
                loss = criterion(output, target)
            scaler.scale(loss).backward()  # NativeScaler: no clip_grad, so no unscale_
            scaler.step(optimizer)
            scaler.update()
            if num_updates % args.log_every == 0:
                loss_value = loss.item()  # the running loss meter (losses_m.update)
                logged, seen = logged + loss_value, seen + 1
                if num_updates % 10 == 0:
                    print(f"step {num_updates}: loss {loss_value:.4f}", flush=True)
            num_updates += 1
            optimizer.zero_grad()
            if args.ema_foreach:  # the fix: ModelEmaV3's multi-tensor lerp
                ema_update_v3(ema, model, ema_decay)
            else:
                ema_update_v2(ema, model, ema_decay)
            for group in optimizer.param_groups:  # lr_scheduler.step_update, on the host
                group["lr"] = step_lr(num_updates, lr, per_epoch)
            timer.step()
            if timer.done:
                break
    print(f"mean logged loss {logged / max(seen, 1):.4f}", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
