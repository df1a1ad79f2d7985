"""GPT-2 124M trained the way nanoGPT's train.py trains it: eager, bf16 autocast, fused AdamW.

The model is GPT-2 small (12 layers, 12 heads, 768 wide, block 1024, vocabulary 50304 =
50257 rounded up to a multiple of 64), pre-norm blocks with nn.LayerNorm, flash attention
through scaled_dot_product_attention, tied embeddings. The loop: a random window of a token
array per micro-batch (pinned, copied with non_blocking=True, the next one fetched while
the GPU runs the current one), 4 micro-batches of 12 x 1024 tokens per step (gradient
accumulation), bf16 autocast, gradient clipping, cosine learning rate with warm-up, fused
AdamW, and `loss.item()` every step (nanoGPT's log_interval = 1). Tokens are synthetic.

Fixes, one flag each:
  --compile          torch.compile the model (fuses the elementwise and norm chains)
  --log-every N      read the loss (.item(), a host<->GPU sync) every N steps, not every step
  --swap-norms       membound.swap_norms(model): LayerNorms become membound's fused kernels
  --fused-add-norm   blocks add the residual inside the next norm (membound FusedAddLayerNorm)
  --bf16-weights     bf16 storage: the model in bf16 (no autocast), fp32 master weights and
                     AdamW state, the updated weights copied back to bf16 after each step

    python examples/real/gpt2.py --steps 20
    membound diagnose -- python examples/real/gpt2.py
"""

from __future__ import annotations

import argparse
import math
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, parse, parser, pick


@dataclass
class GPTConfig:
    block_size: int = 1024
    vocab_size: int = 50304
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    dropout: float = 0.0
    bias: bool = True


#: the CPU smoke-test size
TINY = GPTConfig(block_size=64, vocab_size=256, n_layer=2, n_head=2, n_embd=32)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=cfg.bias)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.resid_dropout = nn.Dropout(cfg.dropout)
        self.n_head = cfg.n_head
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, head size)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=cfg.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=cfg.bias)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class FusedAddBlock(nn.Module):
    """The same block, written the way fused-norm codebases write it: the residual add moves
    into the norm after it. `forward(h, residual)` returns `(h, residual)`: each norm adds the
    previous branch's output `h` to the residual stream (kept in fp32) and normalizes the sum
    in one kernel. Same math as `Block`; parameter names are the same too."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        from membound.nn import FusedAddLayerNorm

        def norm():
            return FusedAddLayerNorm(
                cfg.n_embd, bias=cfg.bias, prenorm=True, residual_dtype=torch.float32
            )

        self.ln_1 = norm()
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = norm()
        self.mlp = MLP(cfg)

    def forward(self, h: torch.Tensor, residual: torch.Tensor | None):
        a, residual = self.ln_1(h, residual)
        h = self.attn(a)
        a, residual = self.ln_2(h, residual)
        return self.mlp(a), residual


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig, fused_add_norm: bool = False):
        super().__init__()
        self.cfg = cfg
        self.fused_add_norm = fused_add_norm
        block = FusedAddBlock if fused_add_norm else Block
        if fused_add_norm:
            from membound.nn import FusedAddLayerNorm

            ln_f = FusedAddLayerNorm(cfg.n_embd, bias=cfg.bias)
        else:
            ln_f = nn.LayerNorm(cfg.n_embd, bias=cfg.bias)
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
                wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
                drop=nn.Dropout(cfg.dropout),
                h=nn.ModuleList([block(cfg) for _ in range(cfg.n_layer)]),
                ln_f=ln_f,
            )
        )
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        # GPT-2's scaled init of the projections into the residual stream
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        _, t = idx.shape
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        if self.fused_add_norm:
            h, residual = x, None
            for block in self.transformer.h:
                h, residual = block(h, residual)
            x = self.transformer.ln_f(h, residual)
        else:
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        # every 2-D weight (matmuls, embeddings) decays; biases and norm gains do not
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        no_decay = [p for p in params if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        extra = {"fused": True} if device_type == "cuda" else {}
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, **extra)


class MasterWeights:
    """fp32 master copies of a bf16 model's parameters (mixed-precision training's classic
    layout): AdamW steps the fp32 copies; the model keeps bf16 weights and gradients."""

    def __init__(self, model: nn.Module):
        self.model_params = [p for p in model.parameters() if p.requires_grad]
        for p in self.model_params:
            p.data = p.data.to(torch.bfloat16)
        for b in model.buffers():
            if b.is_floating_point():
                b.data = b.data.to(torch.bfloat16)
        self.master = [p.detach().float().requires_grad_(True) for p in self.model_params]

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type):
        decay = [m for p, m in zip(self.model_params, self.master, strict=True) if p.dim() >= 2]
        no_decay = [m for p, m in zip(self.model_params, self.master, strict=True) if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ]
        extra = {"fused": True} if device_type == "cuda" else {}
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas, **extra)

    def take_grads(self) -> None:
        for p, m in zip(self.model_params, self.master, strict=True):
            m.grad = None if p.grad is None else p.grad.float()

    @torch.no_grad()
    def write_back(self) -> None:
        torch._foreach_copy_(self.model_params, self.master)
        for p in self.model_params:
            p.grad = None


class TokenBatches:
    """Random windows of one long token array, as nanoGPT's get_batch reads its memmap."""

    def __init__(self, n_tokens, vocab, batch_size, block_size, device, seed=0):
        rng = np.random.default_rng(seed)
        self.data = rng.integers(0, min(vocab, 50257), size=n_tokens, dtype=np.uint16)
        self.batch_size, self.block_size, self.device = batch_size, block_size, device
        self.cuda = str(device).startswith("cuda")

    def get(self):
        ix = torch.randint(len(self.data) - self.block_size - 1, (self.batch_size,))
        x = torch.stack(
            [torch.from_numpy(self.data[i : i + self.block_size].astype(np.int64)) for i in ix]
        )
        y = torch.stack(
            [
                torch.from_numpy(self.data[i + 1 : i + 1 + self.block_size].astype(np.int64))
                for i in ix
            ]
        )
        if self.cuda:  # pinned, so the copies are truly asynchronous
            return (
                x.pin_memory().to(self.device, non_blocking=True),
                y.pin_memory().to(self.device, non_blocking=True),
            )
        return x.to(self.device), y.to(self.device)


def build_parser(compiled: bool) -> argparse.ArgumentParser:
    doc = COMPILED_DOC if compiled else __doc__
    p = parser(doc, steps=20, warmup=5 if compiled else 3)
    p.add_argument("--batch-size", type=int, default=None, help="micro-batch size (default 12)")
    p.add_argument("--grad-accum", type=int, default=4, help="micro-batches per step (default 4)")
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="read the loss with .item() every N steps (default 1, as nanoGPT's log_interval)",
    )
    p.add_argument(
        "--swap-norms", action="store_true", help="membound.swap_norms(model) before training"
    )
    p.add_argument(
        "--fused-add-norm",
        action="store_true",
        help="blocks fuse each residual add into the next norm (membound.nn.FusedAddLayerNorm)",
    )
    p.add_argument(
        "--bf16-weights",
        action="store_true",
        help="bf16 storage: model.to(bfloat16) without autocast, fp32 master weights in AdamW",
    )
    p.add_argument(
        "--norm-dispatch",
        choices=["adaptive", "kernels"],
        default=None,
        help="with membound's norms: membound.nn.set_add_norm_dispatch(MODE) (default: its own)",
    )
    if compiled:
        p.add_argument(
            "--mode",
            default="default",
            choices=["default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune"],
            help="torch.compile mode; reduce-overhead replays CUDA graphs (default: default)",
        )
        p.add_argument(
            "--backend",
            default="inductor",
            help="torch.compile backend (default inductor; eager/aot_eager for quick CPU checks)",
        )
    else:
        p.add_argument("--compile", action="store_true", help="torch.compile the model")
    return p


COMPILED_DOC = "GPT-2 124M, the gpt2.py loop under torch.compile (see gpt2_compiled.py)."


def main(argv: list[str] | None = None, *, compiled: bool = False) -> dict:
    args = parse(build_parser(compiled), argv)
    name = "gpt2_compiled" if compiled else "gpt2"
    if not compiled:
        args.mode, args.backend = "default", "inductor"
    use_compile = compiled or args.compile
    if args.log_every < 1:
        raise SystemExit(f"{name}: --log-every must be >= 1 (got {args.log_every})")
    device_type = "cuda" if args.cuda else "cpu"
    cfg = pick(args, GPTConfig(), TINY)
    batch_size = args.batch_size or pick(args, 12, 2)
    accum = args.grad_accum
    torch.backends.cuda.matmul.allow_tf32 = True  # as nanoGPT: TF32 for any fp32 matmul left
    torch.backends.cudnn.allow_tf32 = True
    # bf16 autocast on the GPU; the CPU smoke test runs in fp32
    ctx = torch.autocast("cuda", dtype=torch.bfloat16) if args.cuda else nullcontext()
    if args.bf16_weights:  # everything is bf16 already: autocast would only add casts
        ctx = nullcontext()

    if args.norm_dispatch is not None:
        import membound.nn

        membound.nn.set_add_norm_dispatch(args.norm_dispatch)
    model = GPT(cfg, fused_add_norm=args.fused_add_norm).to(args.device)
    extra = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2)}
    if args.swap_norms:
        import membound

        before = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
        membound.swap_norms(model)
        left = sum(isinstance(m, nn.LayerNorm) for m in model.modules())
        extra.update(norms=before, norms_swapped=before - left)
        print(f"swap_norms: {before - left} of {before} LayerNorms swapped")
    masters = None
    if args.bf16_weights:
        # bf16 storage with fp32 master weights: the optimizer updates fp32 copies; each step
        # takes the bf16 gradients into them and writes the new weights back to the model
        masters = MasterWeights(model)
        optimizer = masters.configure_optimizers(0.1, 6e-4, (0.9, 0.95), device_type)
        extra.update(bf16_weights=True)
    else:
        optimizer = model.configure_optimizers(0.1, 6e-4, (0.9, 0.95), device_type)
    if use_compile:
        model = torch.compile(model, mode=args.mode, backend=args.backend)
    cudagraphs = use_compile and args.mode == "reduce-overhead"

    timer = StepTimer(name, args)
    timer.extra = extra
    total = timer.total_steps
    warmup_iters, max_lr, min_lr = max(1, total // 10), 6e-4, 6e-5

    def get_lr(it: int) -> float:  # linear warm-up, then cosine decay to min_lr
        if it < warmup_iters:
            return max_lr * (it + 1) / warmup_iters
        ratio = (it - warmup_iters) / max(1, total - warmup_iters)
        return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)

    batches = TokenBatches(
        pick(args, 8 << 20, 1 << 14), cfg.vocab_size, batch_size, cfg.block_size, args.device
    )
    X, Y = batches.get()
    model.train()
    for it in range(total):
        lr = get_lr(it)
        for group in optimizer.param_groups:
            group["lr"] = lr
        if cudagraphs:
            # one new CUDA-graph generation per optimizer step, not per micro-step: the
            # gradients of micro-step 1 (graph outputs held by .grad) must stay alive, so
            # the next micro-steps' replays may not reuse their memory
            torch.compiler.cudagraph_mark_step_begin()
        for _ in range(accum):
            with ctx:
                _, loss = model(X, Y)
                loss = loss / accum  # the gradients of a mean over the whole step
            X, Y = batches.get()  # the next micro-batch, while the GPU runs this one
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if masters is not None:
            masters.take_grads()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if masters is not None:
            masters.write_back()
        if it % args.log_every == 0:
            lossf = loss.item() * accum  # the loop's sync: waits for the GPU to finish
            print(f"iter {it}: loss {lossf:.4f}, lr {lr:.2e}", flush=True)
        timer.step()
    return timer.report()


if __name__ == "__main__":
    main()
