"""A T5 fine-tuned with the Hugging Face `Seq2SeqTrainer`, the way run_summarization.py runs it.

The model is built from a `T5Config` the size of t5-small (6 + 6 layers, d_model 512, d_ff
2048, 8 heads, vocabulary 32128; ~60M parameters, random init), trained on source sequences
of 512 tokens and targets of 128, batch 16, in fp32: the script's default (it offers --fp16
and --bf16; T5 is known to overflow in fp16). `Seq2SeqTrainingArguments` are left at their
defaults except what the script sets: learning rate, no checkpoints, no reporting, logging
every 10 steps. Left at the default are, among others, the fused AdamW, pinned batches, no
loader workers, gradient clipping at 1.0 and `logging_nan_inf_filter=True` (the loss is
checked for NaN/inf on the host: a sync every step). The dataset is synthetic: random token
ids, already tokenized and padded to the fixed lengths, as the script's preprocessing leaves
them.

Fixes, one flag each:
  --bf16                         Seq2SeqTrainingArguments(bf16=True)
  --tf32                         Seq2SeqTrainingArguments(tf32=True)
  --swap-norms                   membound.swap_norms(model) (T5's own T5LayerNorm, an RMS norm)
  --torch-compile                Seq2SeqTrainingArguments(torch_compile=True)
  --no-logging-nan-inf-filter    Seq2SeqTrainingArguments(logging_nan_inf_filter=False)

    python examples/real/t5_seq2seq.py --steps 30
    membound diagnose -- python examples/real/t5_seq2seq.py
"""

from __future__ import annotations

import tempfile

import torch
from _common import (
    StepTimer,
    count_norms,
    hf_step_timer,
    note_swapped,
    parse,
    parser,
    pick,
    require,
)


class SyntheticPairs(torch.utils.data.Dataset):
    """`n` (source, target) pairs of random token ids from a fixed pool, padded to their
    lengths as the script's tokenization leaves them (targets: -100 past their end, which
    the loss ignores)."""

    def __init__(self, n: int, source: int, target: int, vocab: int, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.inputs = torch.randint(2, vocab, (pool, source), generator=g)
        self.labels = torch.randint(2, vocab, (pool, target), generator=g)
        ends = torch.randint(target // 2, target + 1, (pool,), generator=g)
        for k, end in enumerate(ends.tolist()):
            self.labels[k, end:] = -100
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        k = i % len(self.inputs)
        ids = self.inputs[k]
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": self.labels[k]}


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=30, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="per-device batch (default 16)")
    p.add_argument("--bf16", action="store_true", help="Seq2SeqTrainingArguments(bf16=True)")
    p.add_argument("--tf32", action="store_true", help="Seq2SeqTrainingArguments(tf32=True)")
    p.add_argument("--swap-norms", action="store_true", help="membound.swap_norms(model)")
    p.add_argument(
        "--torch-compile", action="store_true", help="Seq2SeqTrainingArguments(torch_compile=True)"
    )
    p.add_argument(
        "--no-logging-nan-inf-filter",
        dest="logging_nan_inf_filter",
        action="store_false",
        help="logging_nan_inf_filter=False: no per-step NaN check on the host",
    )
    p.add_argument("--logging-steps", type=int, default=10, metavar="N", help="(default 10)")
    args = parse(p, argv)
    transformers = require("transformers", "t5_seq2seq.py")
    require("accelerate", "t5_seq2seq.py")  # the Trainer needs it; say so up front
    if args.bf16 and not args.cuda:
        p.error("--bf16 is for the GPU run")

    batch = args.batch_size or pick(args, 16, 2)
    source, target = pick(args, (512, 128), (32, 8))
    config = transformers.T5Config(
        vocab_size=pick(args, 32128, 256),
        d_model=pick(args, 512, 32),
        d_kv=pick(args, 64, 8),
        d_ff=pick(args, 2048, 64),
        num_layers=pick(args, 6, 2),
        num_decoder_layers=pick(args, 6, 2),
        num_heads=pick(args, 8, 4),
        decoder_start_token_id=0,
        pad_token_id=0,
    )
    model = transformers.T5ForConditionalGeneration(config)
    timer = StepTimer("t5_seq2seq", args)
    norms = count_norms(model)
    timer.extra = {
        "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
        "transformers": transformers.__version__,
        "norms": norms,
    }
    if args.swap_norms:
        import membound

        membound.swap_norms(model)
        note_swapped(model, timer, norms)

    with tempfile.TemporaryDirectory(prefix="t5_seq2seq-") as out:
        training_args = transformers.Seq2SeqTrainingArguments(
            output_dir=out,
            max_steps=timer.total_steps,
            per_device_train_batch_size=batch,
            learning_rate=5e-4,
            bf16=args.bf16,
            tf32=args.tf32 if args.cuda else None,
            use_cpu=not args.cuda,
            logging_steps=args.logging_steps,
            logging_nan_inf_filter=args.logging_nan_inf_filter,
            save_strategy="no",
            report_to="none",
            torch_compile=args.torch_compile,
            seed=args.seed,
        )
        timer.extra["optim"] = str(getattr(training_args.optim, "value", training_args.optim))
        dataset = SyntheticPairs(batch * (timer.total_steps + 2), source, target, config.vocab_size)
        trainer = transformers.Seq2SeqTrainer(
            model=model,
            args=training_args,
            train_dataset=dataset,
            callbacks=[hf_step_timer(transformers, timer)],
        )
        trainer.train()
    return timer.report()


if __name__ == "__main__":
    main()
