"""A small Llama trained with the Hugging Face `Trainer`, the way its causal-LM scripts run it.

The model is built from a `LlamaConfig` (8 layers, hidden 1024, 16 heads, MLP 2816,
vocabulary 32000, sequence 1024; ~170M parameters, random init), trained in bf16 mixed
precision with `TrainingArguments` left at their defaults except what a pre-training or
fine-tuning script sets: batch 8, learning rate and schedule, logging every 10 steps, no
checkpoints, no reporting. Left at the default are, among others, the fused AdamW
(`optim=adamw_torch_fused`), `dataloader_pin_memory=True`, gradient clipping at 1.0 and
`logging_nan_inf_filter=True` (which checks the loss for NaN/inf on the host: a sync
every step). The dataset is synthetic: random token ids, labels = input ids.

Fixes, one flag each:
  --swap-norms                   membound.swap_norms(model) before the Trainer is built
  --torch-compile                TrainingArguments(torch_compile=True)
  --no-logging-nan-inf-filter    TrainingArguments(logging_nan_inf_filter=False)
  --logging-steps N              log (a sync) every N steps
  --dataloader-pin-memory B      TrainingArguments(dataloader_pin_memory=B) (default true)

    python examples/real/hf_trainer_llama.py --steps 30
    membound diagnose -- python examples/real/hf_trainer_llama.py
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


class SyntheticTokens(torch.utils.data.Dataset):
    """`n` sequences of random token ids from a fixed pool; labels are the inputs (the
    model shifts them), as a tokenized and grouped text dataset gives them."""

    def __init__(self, n: int, seq_len: int, vocab: int, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (pool, seq_len), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        ids = self.ids[i % len(self.ids)]
        return {"input_ids": ids, "labels": ids.clone()}


def _bool(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=30, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="per-device batch (default 8)")
    p.add_argument("--seq-len", type=int, default=None, help="sequence length (default 1024)")
    p.add_argument("--layers", type=int, default=None, help="decoder layers (default 8)")
    p.add_argument("--swap-norms", action="store_true", help="membound.swap_norms(model)")
    p.add_argument(
        "--torch-compile", action="store_true", help="TrainingArguments(torch_compile=True)"
    )
    p.add_argument(
        "--no-logging-nan-inf-filter",
        dest="logging_nan_inf_filter",
        action="store_false",
        help="TrainingArguments(logging_nan_inf_filter=False): no per-step NaN check",
    )
    p.add_argument("--logging-steps", type=int, default=10, metavar="N", help="(default 10)")
    p.add_argument(
        "--dataloader-pin-memory",
        type=_bool,
        default=True,
        metavar="B",
        help="true or false (default true, as TrainingArguments)",
    )
    p.add_argument("--dataloader-num-workers", type=int, default=0, metavar="N", help="(default 0)")
    p.add_argument("--optim", default=None, help="TrainingArguments optim (default: its default)")
    p.add_argument(
        "--attn-implementation",
        default="sdpa",
        choices=["sdpa", "eager", "flash_attention_2"],
        help="attention kernel (default sdpa)",
    )
    args = parse(p, argv)
    transformers = require("transformers", "hf_trainer_llama.py")
    require("accelerate", "hf_trainer_llama.py")  # the Trainer needs it; say so up front

    seq = args.seq_len or pick(args, 1024, 32)
    batch = args.batch_size or pick(args, 8, 2)
    config = transformers.LlamaConfig(
        vocab_size=pick(args, 32000, 256),
        hidden_size=pick(args, 1024, 32),
        intermediate_size=pick(args, 2816, 64),
        num_hidden_layers=args.layers or pick(args, 8, 2),
        num_attention_heads=pick(args, 16, 2),
        num_key_value_heads=pick(args, 16, 2),
        max_position_embeddings=seq,
        rms_norm_eps=1e-5,
        attn_implementation=args.attn_implementation,
    )
    model = transformers.LlamaForCausalLM(config)
    timer = StepTimer("hf_trainer_llama", args)
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

    extra_args = {"optim": args.optim} if args.optim else {}
    with tempfile.TemporaryDirectory(prefix="hf_trainer_llama-") as out:
        training_args = transformers.TrainingArguments(
            output_dir=out,
            max_steps=timer.total_steps,
            per_device_train_batch_size=batch,
            learning_rate=3e-4,
            weight_decay=0.1,
            adam_beta2=0.95,
            lr_scheduler_type="cosine",
            warmup_steps=max(1, timer.total_steps // 10),
            bf16=args.cuda,
            use_cpu=not args.cuda,
            logging_steps=args.logging_steps,
            logging_nan_inf_filter=args.logging_nan_inf_filter,
            save_strategy="no",
            report_to="none",
            torch_compile=args.torch_compile,
            dataloader_pin_memory=args.dataloader_pin_memory,
            dataloader_num_workers=args.dataloader_num_workers,
            seed=args.seed,
            **extra_args,
        )
        timer.extra["optim"] = str(getattr(training_args.optim, "value", training_args.optim))
        dataset = SyntheticTokens(batch * (timer.total_steps + 2), seq, config.vocab_size)
        trainer = transformers.Trainer(
            model=model,
            args=training_args,
            train_dataset=dataset,
            callbacks=[hf_step_timer(transformers, timer)],
        )
        trainer.train()
    return timer.report()


if __name__ == "__main__":
    main()
