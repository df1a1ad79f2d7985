"""BERT-base fine-tuned for sequence classification, the way `run_glue_no_trainer.py` does it.

The model is `BertForSequenceClassification` built from a `BertConfig` (12 layers, hidden
768, ~110M parameters, random init: nothing can be downloaded), trained with 🤗 Accelerate
left at its defaults (`Accelerator()`: fp32, no mixed precision), `torch.optim.AdamW` with
weight decay off for biases and LayerNorm weights, a linear schedule with warm-up, batch 32
of 128 tokens padded by a collate function, and the loss accumulated on the device every
step (`total_loss += loss.detach().float()`, no host read until the end). The data are
synthetic token ids of random lengths with random labels.

Fixes, one flag each:
  --mixed-precision bf16   Accelerator(mixed_precision="bf16")
  --tf32                   torch.backends.cuda.matmul.allow_tf32 = True
  --swap-norms             membound.swap_norms(model) (BERT's 25 LayerNorms)
  --compile                torch.compile(model) before accelerator.prepare
  --fused-optimizer        AdamW(fused=True): one kernel for the update

    python examples/real/bert_finetune.py --steps 20
    membound diagnose -- python examples/real/bert_finetune.py
"""

from __future__ import annotations

import torch
from _common import StepTimer, note_swapped, parse, parser, pick, require


class SyntheticSentences(torch.utils.data.Dataset):
    """`n` token-id sequences of random length (at least half of `max_len`), random labels:
    what a tokenized GLUE split gives a collate function."""

    def __init__(self, n: int, max_len: int, vocab: int, labels: int, pool: int = 256):
        g = torch.Generator().manual_seed(0)
        lengths = torch.randint(max_len // 2, max_len + 1, (pool,), generator=g)
        self.ids = [torch.randint(1000, vocab, (int(k),), generator=g) for k in lengths]
        self.labels = torch.randint(0, labels, (n,), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        return {"input_ids": self.ids[i % len(self.ids)], "labels": int(self.labels[i])}


def pad_collate(max_len: int):
    """Pad to `max_len` (the script's `--pad_to_max_length`) with an attention mask."""

    def collate(items):
        ids = torch.zeros(len(items), max_len, dtype=torch.long)
        mask = torch.zeros(len(items), max_len, dtype=torch.long)
        for row, item in enumerate(items):
            k = len(item["input_ids"])
            ids[row, :k] = item["input_ids"]
            mask[row, :k] = 1
        labels = torch.tensor([item["labels"] for item in items])
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}

    return collate


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=20, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="batch size (default 32)")
    p.add_argument("--max-length", type=int, default=None, help="tokens per row (default 128)")
    p.add_argument(
        "--mixed-precision",
        default="no",
        choices=["no", "bf16", "fp16"],
        help="Accelerator(mixed_precision=...) (default no, Accelerate's default)",
    )
    p.add_argument("--tf32", action="store_true", help="allow TF32 matmuls")
    p.add_argument("--swap-norms", action="store_true", help="membound.swap_norms(model)")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--fused-optimizer", action="store_true", help="AdamW(fused=True)")
    args = parse(p, argv)
    transformers = require("transformers", "bert_finetune.py")
    accelerate = require("accelerate", "bert_finetune.py")

    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    batch = args.batch_size or pick(args, 32, 4)
    max_len = args.max_length or pick(args, 128, 16)
    config = transformers.BertConfig(
        vocab_size=pick(args, 30522, 2000),
        hidden_size=pick(args, 768, 32),
        num_hidden_layers=pick(args, 12, 2),
        num_attention_heads=pick(args, 12, 2),
        intermediate_size=pick(args, 3072, 64),
        num_labels=2,
    )
    accelerator = accelerate.Accelerator(mixed_precision=args.mixed_precision, cpu=not args.cuda)
    model = transformers.BertForSequenceClassification(config)
    timer = StepTimer("bert_finetune", args)
    norms = sum(isinstance(m, torch.nn.LayerNorm) for m in model.modules())
    timer.extra = {
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "transformers": transformers.__version__,
        "accelerate": accelerate.__version__,
        "norms": norms,
    }
    if args.swap_norms:
        import membound

        membound.swap_norms(model)
        note_swapped(model, timer, norms, "LayerNorms")

    no_decay = ["bias", "LayerNorm.weight"]
    grouped = [
        {
            "params": [
                p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)
            ],
            "weight_decay": 0.01,
        },
        {
            "params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)],
            "weight_decay": 0.0,
        },
    ]
    optimizer = torch.optim.AdamW(grouped, lr=2e-5, fused=True if args.fused_optimizer else None)
    dataset = SyntheticSentences(batch * (timer.total_steps + 2), max_len, config.vocab_size, 2)
    loader = torch.utils.data.DataLoader(
        dataset, shuffle=True, collate_fn=pad_collate(max_len), batch_size=batch
    )
    scheduler = transformers.get_scheduler(
        "linear",
        optimizer=optimizer,
        num_warmup_steps=max(1, timer.total_steps // 10),
        num_training_steps=timer.total_steps,
    )
    if args.compile:
        model = torch.compile(model)
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)

    model.train()
    total_loss = torch.zeros((), device=accelerator.device)
    for batch_ in loader:
        outputs = model(**batch_)
        loss = outputs.loss
        total_loss += loss.detach().float()
        accelerator.backward(loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        timer.step()
        if timer.done:
            break
    print(f"mean loss {total_loss.item() / max(timer.seen, 1):.4f}", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
