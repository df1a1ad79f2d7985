"""A DDPM denoiser trained the way the public diffusion code bases train it.

The model is the DDPM paper's CIFAR-10 U-Net as improved-diffusion and its descendants write
it (about 36M parameters): base width 128, widths x(1, 2, 2, 2), two residual blocks a level
(GroupNorm(32) -> SiLU -> 3x3 conv, the timestep embedding added in between, dropout 0.1),
self-attention at 16 x 16 written out as two einsums and a softmax, nearest-neighbour
upsampling. Training is the paper's: linear betas over 1000 steps, a uniform random timestep a
sample, the noise predicted with an MSE loss, fp32, AdamW (lr 2e-4), gradients clipped to norm
1, and an EMA of the weights (decay 0.9999) updated after every optimizer step by a Python loop
over the parameters (improved-diffusion's `update_ema`: `targ.mul_(rate).add_(src, alpha=1 -
rate)`). The loader is a DataLoader with 2 workers and no pinned memory over 32 x 32 RGB
images flipped at random and scaled to [-1, 1] on the CPU (here a fixed pool of random uint8
pictures), batch 128, moved with `.to(device)`; the loss is read with `loss.item()` every step
for the log. Written out of sample (2026-12-05, eighth session): no membound rule was changed
for it before it was measured.

Fixes, one flag each (what a user would try):
  --tf32                TF32 convolutions and matmuls
  --bf16                bf16 autocast (torch.autocast("cuda", dtype=torch.bfloat16))
  --channels-last       the model and the batches in channels_last
  --sdpa                attention by F.scaled_dot_product_attention, not einsum + softmax
  --foreach-ema         the EMA update as one torch._foreach_lerp_ over the parameter lists
  --compile             torch.compile(model)
  --fused-optimizer     AdamW(fused=True): one kernel for the update
  --log-every N         read the loss every N steps, not every step
  --pin-memory          DataLoader(pin_memory=True)
  --num-workers N       DataLoader workers (default 2)
  --membound-prefetch   membound.data.prefetch(loader): pinned batches on a side stream

    python examples/real/ddpm_unet.py --steps 20
    membound diagnose -- python examples/real/ddpm_unet.py
"""

from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, SyntheticUint8Images, parse, parser, pick

#: diffusion steps and the linear beta schedule's ends (the DDPM paper's)
T, BETA_1, BETA_T = 1000, 1e-4, 0.02


class SyntheticImages(SyntheticUint8Images):
    """`n` items from a pool of random uint8 RGB pictures, flipped at random and scaled to
    [-1, 1] on access (torchvision's RandomHorizontalFlip, ToTensor, Normalize(0.5, 0.5));
    unlabelled (0)."""

    def __init__(self, n: int, size: int, pool: int = 256):
        super().__init__(n, size, num_classes=1, pool=pool)

    def __getitem__(self, i: int):
        img, _ = super().__getitem__(i)
        return img.float() / 127.5 - 1.0, 0


def timestep_embedding(t: torch.Tensor, dim: int, max_period: float = 10000.0) -> torch.Tensor:
    """Sinusoidal embeddings of the timesteps `t` (one per sample), `dim` wide."""
    half = dim // 2
    freqs = torch.exp(
        -math.log(max_period) * torch.arange(half, device=t.device, dtype=torch.float32) / half
    )
    args = t[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, temb: int, dropout: float):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(temb, cout)
        self.norm2 = nn.GroupNorm(32, cout)
        self.dropout = nn.Dropout(dropout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(emb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        return self.skip(x) + h


class Attention(nn.Module):
    """Single-head self-attention over the pixels, as the DDPM code writes it."""

    def __init__(self, ch: int, sdpa: bool):
        super().__init__()
        self.norm = nn.GroupNorm(32, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)
        self.sdpa = sdpa

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, hh, ww = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, c, hh * ww).unbind(1)
        if self.sdpa:  # the fix: one fused kernel, pixels as the sequence
            h = F.scaled_dot_product_attention(
                q.transpose(1, 2)[:, None], k.transpose(1, 2)[:, None], v.transpose(1, 2)[:, None]
            )[:, 0].transpose(1, 2)
        else:
            w = torch.einsum("bci,bcj->bij", q, k) * (c**-0.5)
            w = torch.softmax(w, dim=-1)
            h = torch.einsum("bij,bcj->bci", w, v)
        return x + self.proj(h.reshape(b, c, hh, ww))


class Downsample(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, stride=2, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Upsample(nn.Module):
    def __init__(self, ch: int):
        super().__init__()
        self.conv = nn.Conv2d(ch, ch, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class UNet(nn.Module):
    def __init__(
        self,
        ch: int = 128,
        mult: tuple[int, ...] = (1, 2, 2, 2),
        blocks: int = 2,
        attn_res: tuple[int, ...] = (16,),
        dropout: float = 0.1,
        size: int = 32,
        sdpa: bool = False,
    ):
        super().__init__()
        self.ch = ch
        temb = 4 * ch
        self.temb = nn.Sequential(nn.Linear(ch, temb), nn.SiLU(), nn.Linear(temb, temb))
        self.inc = nn.Conv2d(3, ch, 3, padding=1)
        self.down = nn.ModuleList()
        skips, cur, res = [ch], ch, size
        for i, m in enumerate(mult):
            for _ in range(blocks):
                layer = [ResBlock(cur, ch * m, temb, dropout)]
                cur = ch * m
                if res in attn_res:
                    layer.append(Attention(cur, sdpa))
                self.down.append(nn.ModuleList(layer))
                skips.append(cur)
            if i != len(mult) - 1:
                self.down.append(Downsample(cur))
                skips.append(cur)
                res //= 2
        self.mid = nn.ModuleList(
            [
                ResBlock(cur, cur, temb, dropout),
                Attention(cur, sdpa),
                ResBlock(cur, cur, temb, dropout),
            ]
        )
        self.up = nn.ModuleList()
        for i, m in reversed(list(enumerate(mult))):
            for _ in range(blocks + 1):
                layer = [ResBlock(cur + skips.pop(), ch * m, temb, dropout)]
                cur = ch * m
                if res in attn_res:
                    layer.append(Attention(cur, sdpa))
                self.up.append(nn.ModuleList(layer))
            if i != 0:
                self.up.append(Upsample(cur))
                res *= 2
        self.out = nn.Sequential(nn.GroupNorm(32, cur), nn.SiLU(), nn.Conv2d(cur, 3, 3, padding=1))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        emb = self.temb(timestep_embedding(t, self.ch))
        hs = [self.inc(x)]
        for layer in self.down:
            if isinstance(layer, Downsample):
                hs.append(layer(hs[-1]))
                continue
            h = layer[0](hs[-1], emb)
            for extra in layer[1:]:
                h = extra(h)
            hs.append(h)
        h = self.mid[0](hs[-1], emb)
        h = self.mid[2](self.mid[1](h), emb)
        for layer in self.up:
            if isinstance(layer, Upsample):
                h = layer(h)
                continue
            h = layer[0](torch.cat([h, hs.pop()], dim=1), emb)
            for extra in layer[1:]:
                h = extra(h)
        return self.out(h)


def update_ema(target_params, source_params, rate: float = 0.9999) -> None:
    """improved-diffusion's EMA update: one multiply and one add per parameter."""
    for targ, src in zip(target_params, source_params, strict=True):
        targ.detach().mul_(rate).add_(src, alpha=1 - rate)


def foreach_ema(target_params, source_params, rate: float = 0.9999) -> None:
    """The same update as one foreach op over the lists (timm's ModelEmaV3 does this), under
    no_grad: the in-place lerp would otherwise record autograd history on the EMA weights."""
    with torch.no_grad():
        torch._foreach_lerp_(target_params, source_params, 1 - rate)


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="images per batch (default 128)")
    p.add_argument("--tf32", action="store_true", help="TF32 convolutions and matmuls")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast")
    p.add_argument("--channels-last", action="store_true", help="model and batches NHWC")
    p.add_argument("--sdpa", action="store_true", help="F.scaled_dot_product_attention")
    p.add_argument("--foreach-ema", action="store_true", help="EMA by torch._foreach_lerp_")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--fused-optimizer", action="store_true", help="AdamW(fused=True)")
    p.add_argument("--log-every", type=int, default=1, metavar="N", help="loss.item() every N")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument("--num-workers", type=int, default=2, metavar="N", help="(default 2)")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    args = parse(p, argv)
    if args.log_every < 1 or args.num_workers < 0:
        p.error("--log-every must be >= 1 and --num-workers >= 0")
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    batch = args.batch_size or pick(args, 128, 4)
    size = pick(args, 32, 8)
    total = batch * (args.warmup_steps + args.steps + 2)
    loader = torch.utils.data.DataLoader(
        SyntheticImages(total, size),
        batch_size=batch,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory,
        drop_last=True,
        persistent_workers=args.num_workers > 0,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device)

    model = UNet(
        ch=pick(args, 128, 32),
        mult=pick(args, (1, 2, 2, 2), (1, 2)),
        attn_res=pick(args, (16,), (4,)),
        size=size,
        sdpa=args.sdpa,
    ).to(args.device)
    layout = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=layout)
    ema = copy.deepcopy(model).requires_grad_(False)
    params, ema_params = list(model.parameters()), list(ema.parameters())
    optimizer = torch.optim.AdamW(params, lr=2e-4, fused=True if args.fused_optimizer else None)
    net = torch.compile(model) if args.compile else model

    betas = torch.linspace(BETA_1, BETA_T, T, dtype=torch.float64)
    alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
    sqrt_ac = alphas_cumprod.sqrt().float().to(args.device)
    sqrt_1m_ac = (1.0 - alphas_cumprod).sqrt().float().to(args.device)

    timer = StepTimer("ddpm_unet", args)
    timer.extra = {
        "batch": batch,
        "params_m": round(sum(q.numel() for q in params) / 1e6, 2),
        "parameters": len(params),
        "workers": args.num_workers,
    }
    model.train()
    logged, seen, step = 0.0, 0, 0
    while not timer.done:
        for x0, _ in loader:
            x0 = x0.to(args.device).contiguous(memory_format=layout)
            t = torch.randint(0, T, (x0.shape[0],), device=args.device)
            noise = torch.randn_like(x0)
            xt = sqrt_ac[t].view(-1, 1, 1, 1) * x0 + sqrt_1m_ac[t].view(-1, 1, 1, 1) * noise
            with torch.autocast(
                "cuda" if args.cuda else "cpu", dtype=torch.bfloat16, enabled=args.bf16
            ):
                loss = F.mse_loss(net(xt, t).float(), noise)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            if args.foreach_ema:  # the fix: a few multi-tensor kernels for every parameter
                foreach_ema(ema_params, params)
            else:
                update_ema(ema_params, params)
            if step % args.log_every == 0:
                logged += loss.item()  # the log line's loss: a sync
                seen += 1
            step += 1
            timer.step()
            if timer.done:
                break
    print(f"mean logged loss {logged / max(seen, 1):.4f}", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
