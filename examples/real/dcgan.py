"""A DCGAN trained the way PyTorch's examples (dcgan/main.py) train it.

The generator and discriminator of the example (64 x 64 RGB, nz 100, ngf = ndf = 64: transposed
convolutions / convolutions, BatchNorm, ReLU / LeakyReLU, Tanh / Sigmoid), their weights
drawn from N(0, 0.02), BCELoss, two Adam optimizers (lr 2e-4, betas (0.5, 0.999)), batch 128,
fp32, `cudnn.benchmark = True` (the example sets it). The loader is the example's: a DataLoader with 2 workers and no pin_memory over an image
folder resized, center-cropped and normalized to [-1, 1] on the CPU (here a fixed pool of
random uint8 pictures), batches moved with `.to(device)`. Each iteration updates D on a real
and a fake batch, then G, and reads five numbers from the GPU as the example's progress line
does: D(x), D(G(z)) before and after D's step (`output.mean().item()`), and both losses.
Images are synthetic; no file is read or written.

Fixes, one flag each:
  --pin-memory          DataLoader(pin_memory=True)
  --membound-prefetch   membound.data.prefetch(loader): pinned batches on a side stream
  --channels-last       both networks and the real batch in channels_last
  --compile             torch.compile(netG) and torch.compile(netD) (on the CPU: backend "eager")
  --compile-mode reduce-overhead   with --compile: CUDA graphs (the launch-bound remedy)
  --log-every N         read the five numbers every N iterations, not every iteration

    python examples/real/dcgan.py --steps 30
    membound diagnose -- python examples/real/dcgan.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick


class SyntheticImages(torch.utils.data.Dataset):
    """`n` items from a pool of random uint8 RGB pictures of `size` pixels, made fp32 and
    normalized to [-1, 1] on access (the example's ToTensor and Normalize((0.5,)*3,
    (0.5,)*3)); the label is 0, as an image folder with one class gives."""

    def __init__(self, n: int, size: int, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        x = self.images[i % len(self.images)].float().div(255.0)
        return (x - 0.5) / 0.5, 0


def weights_init(m: nn.Module) -> None:
    """The example's custom init: N(0, 0.02) convolutions, N(1, 0.02) BatchNorm scales."""
    name = type(m).__name__
    if "Conv" in name:
        nn.init.normal_(m.weight, 0.0, 0.02)
    elif "BatchNorm" in name:
        nn.init.normal_(m.weight, 1.0, 0.02)
        nn.init.zeros_(m.bias)


def generator(nz: int, ngf: int, nc: int = 3) -> nn.Sequential:
    """z (nz x 1 x 1) -> a 64 x 64 image, four times up by two after a 4 x 4 start."""
    layers: list[nn.Module] = [
        nn.ConvTranspose2d(nz, ngf * 8, 4, 1, 0, bias=False),
        nn.BatchNorm2d(ngf * 8),
        nn.ReLU(True),
    ]
    for k in (8, 4, 2):
        layers += [
            nn.ConvTranspose2d(ngf * k, ngf * k // 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ngf * k // 2),
            nn.ReLU(True),
        ]
    layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def discriminator(ndf: int, nc: int = 3) -> nn.Sequential:
    """A 64 x 64 image -> the probability it is real."""
    layers: list[nn.Module] = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True)]
    for k in (1, 2, 4):
        layers += [
            nn.Conv2d(ndf * k, ndf * k * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(ndf * k * 2),
            nn.LeakyReLU(0.2, True),
        ]
    layers += [nn.Conv2d(ndf * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid()]
    return nn.Sequential(*layers)


def main(argv: list[str] | None = None) -> dict:
    # a step of a few ms on a GPU (estimated, not measured): 100 make a window the host's
    # jitter does not swing; cuDNN's benchmark mode tries its algorithms in the first steps
    p = parser(__doc__, steps=100, warmup=10)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 128)")
    p.add_argument("--workers", type=int, default=None, help="DataLoader workers (default 2)")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    p.add_argument("--channels-last", action="store_true", help="channels_last networks and images")
    p.add_argument("--compile", action="store_true", help="torch.compile both networks")
    p.add_argument(
        "--compile-mode",
        default="default",
        choices=["default", "reduce-overhead"],
        help="with --compile: torch.compile's mode; reduce-overhead replays CUDA graphs",
    )
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="read D(x), D(G(z)) and the losses every N iterations (default 1)",
    )
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    batch = args.batch_size or pick(args, 128, 4)
    size, nz, width = 64, 100, pick(args, 64, 8)
    workers = args.workers if args.workers is not None else pick(args, 2, 0)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    torch.backends.cudnn.benchmark = True

    netG = generator(nz, width).to(args.device)
    netD = discriminator(width).to(args.device)
    netG.apply(weights_init)
    netD.apply(weights_init)
    netG = netG.to(memory_format=fmt)
    netD = netD.to(memory_format=fmt)
    timer = StepTimer("dcgan", args)
    timer.extra = {"batch": batch, "workers": workers, "width": width}
    if args.compile:  # inductor on the GPU; the CPU smoke run only checks the loop
        backend = "inductor" if args.cuda else "eager"
        mode = args.compile_mode if args.cuda else None  # the eager backend takes no mode
        netG = torch.compile(netG, backend=backend, mode=mode)
        netD = torch.compile(netD, backend=backend, mode=mode)
    cudagraphs = args.compile and args.cuda and args.compile_mode == "reduce-overhead"

    dataset = SyntheticImages(batch * (timer.total_steps + 2), size)
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=batch,
        shuffle=True,
        num_workers=workers,
        drop_last=True,
        pin_memory=args.pin_memory,
    )
    if args.membound_prefetch:
        import membound.data

        loader = membound.data.prefetch(loader, args.device)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(batch, nz, 1, 1, device=args.device)
    real_label, fake_label = 1.0, 0.0
    optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))

    i = 0
    while not timer.done:
        for data in loader:
            read = i % args.log_every == 0
            if cudagraphs:  # one CUDA-graph generation per iteration (three D calls in it)
                torch.compiler.cudagraph_mark_step_begin()
            # (1) D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real = data[0].to(args.device, memory_format=fmt)
            b = real.size(0)
            label = torch.full((b,), real_label, dtype=real.dtype, device=args.device)
            output = netD(real).view(-1)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item() if read else None
            noise = torch.randn(b, nz, 1, 1, device=args.device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach()).view(-1)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item() if read else None
            errD = errD_real + errD_fake
            optimizerD.step()
            # (2) G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake).view(-1)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item() if read else None
            optimizerG.step()
            if read:
                line = (
                    f"[{i}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                    f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
                )
                if i % 10 == 0:
                    print(line, flush=True)
            i += 1
            timer.step()
            if timer.done:
                break
    with torch.no_grad():
        netG(fixed_noise)  # the example's sample of the fixed noise (not saved here)
    return timer.report()


if __name__ == "__main__":
    main()
