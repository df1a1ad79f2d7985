"""A wav2vec2 fine-tuned with CTC by the `Trainer`, the way run_speech_recognition_ctc.py runs it.

The model is a `Wav2Vec2ForCTC` built from a `Wav2Vec2Config` the size of wav2vec2-base (the
7-layer convolutional feature encoder with group norm, 12 transformer layers, hidden 768, 12
heads, MLP 3072; ~94M parameters, random init) with a character vocabulary of 32, the script's
model defaults (no dropout, no layerdrop, SpecAugment's `mask_time_prob=0.05`, mean CTC loss)
and its feature encoder frozen (`--freeze_feature_encoder`). `TrainingArguments` are those of
the README's single-GPU command, less its gradient accumulation of 2: batch 16, learning rate
3e-4, 500 warm-up steps, fp16 (autocast and a GradScaler), gradient checkpointing, batches
grouped by length (`input_length`); the rest at their defaults, among them the fused AdamW,
pinned batches, no loader workers, logging every 500 steps, gradient clipping at 1.0 and
`logging_nan_inf_filter=True` (a sync every step). The data is synthetic: 2-6 s clips of
16 kHz noise, normalized per clip by the feature extractor, with random transcripts of ~14
characters a second tokenized by the character tokenizer the script builds; items are python
lists, as a `datasets` column gives them, padded batch by batch by the script's
`DataCollatorCTCWithPadding` (zeros and an attention mask; labels -100), so every batch has a
shape of its own. Written out of
sample (2026-12-06, sixteenth session): no membound rule was changed for it before it was
measured.

Fixes, one flag each:
  --bf16                         TrainingArguments(bf16=True) in place of fp16: no GradScaler
  --tf32                         TrainingArguments(tf32=True)
  --no-gradient-checkpointing    TrainingArguments(gradient_checkpointing=False)
  --dataloader-num-workers N     TrainingArguments(dataloader_num_workers=N): padding off the loop
  --torch-compile                TrainingArguments(torch_compile=True) (shapes change every batch)
  --swap-norms                   membound.swap_norms(model) (the 26 LayerNorms; GroupNorm stays)
  --no-logging-nan-inf-filter    TrainingArguments(logging_nan_inf_filter=False)
  --logging-steps N              log (a sync) every N steps (default 500, as TrainingArguments)
  --no-group-by-length           random batches, no LengthGroupedSampler

    python examples/real/wav2vec2_ctc.py --steps 30
    membound diagnose -- python examples/real/wav2vec2_ctc.py
"""

from __future__ import annotations

import dataclasses
import json
import os
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

SAMPLING_RATE = 16_000
CHARS_PER_SECOND = 14  # read speech: ~14 characters (spaces included) a second
LETTERS = "abcdefghijklmnopqrstuvwxyz'"


def create_vocabulary(texts: list[str]) -> dict[str, int]:
    """The script's create_vocabulary_from_data: every character seen, space as "|", then
    [UNK] and [PAD] (the tokenizer adds <s> and </s>)."""
    vocab = {c: k for k, c in enumerate(sorted(set("".join(texts))))}
    vocab["|"] = vocab.pop(" ")
    vocab["[UNK]"] = len(vocab)
    vocab["[PAD]"] = len(vocab)
    return vocab


def synthetic_texts(durations: list[float], g: torch.Generator) -> list[str]:
    """A transcript per clip, ~CHARS_PER_SECOND characters a second of random words."""
    texts = []
    for seconds in durations:
        words, n = [], 0
        target = max(2, int(seconds * CHARS_PER_SECOND))
        while n < target:
            size = int(torch.randint(2, 9, (), generator=g))
            idx = torch.randint(0, len(LETTERS), (size,), generator=g).tolist()
            words.append("".join(LETTERS[i] for i in idx))
            n += size + 1
        texts.append(" ".join(words)[:target].strip() + " ")  # the script appends a space
    return texts


class SyntheticSpeech(torch.utils.data.Dataset):
    """`n` items over a pool of clips, prepared as the script's `prepare_dataset` leaves them:
    `input_values` (the normalized waveform), `input_length` and `labels` (token ids), each a
    python list, as a `datasets` row without a format gives them."""

    def __init__(self, n, durations, texts, feature_extractor, tokenizer, g):
        self.clips, self.labels = [], []
        for seconds, text in zip(durations, texts, strict=True):
            raw = 0.1 * torch.randn(int(seconds * SAMPLING_RATE), generator=g)
            inputs = feature_extractor(raw.numpy(), sampling_rate=SAMPLING_RATE)
            self.clips.append(inputs.input_values[0])  # float32, zero mean, unit variance
            self.labels.append(tokenizer(text).input_ids)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        if not 0 <= i < self.n:  # the sampler's length pass iterates the dataset to the end
            raise IndexError(i)
        k = i % len(self.clips)
        values = self.clips[k].tolist()
        return {"input_values": values, "input_length": len(values), "labels": self.labels[k]}


@dataclasses.dataclass
class DataCollatorCTCWithPadding:
    """The script's collator: pads the inputs to the batch's longest with the processor
    (zeros, an attention mask) and the labels with -100, which the CTC loss ignores."""

    processor: object
    padding: bool | str = "longest"
    pad_to_multiple_of: int | None = None
    pad_to_multiple_of_labels: int | None = None
    feature_extractor_input_name: str = "input_values"

    def __call__(self, features: list[dict]) -> dict[str, torch.Tensor]:
        # split inputs and labels since they have to be of different lengths and need
        # different padding methods
        name = self.feature_extractor_input_name
        input_features = [{name: feature[name]} for feature in features]
        label_features = [{"input_ids": feature["labels"]} for feature in features]

        batch = self.processor.pad(
            input_features,
            padding=self.padding,
            pad_to_multiple_of=self.pad_to_multiple_of,
            return_tensors="pt",
        )
        labels_batch = self.processor.pad(
            labels=label_features,
            padding=self.padding,
            pad_to_multiple_of=self.pad_to_multiple_of_labels,
            return_tensors="pt",
        )
        # replace padding with -100 to ignore loss correctly
        labels = labels_batch["input_ids"].masked_fill(labels_batch.attention_mask.ne(1), -100)
        batch["labels"] = labels
        if "attention_mask" in batch:
            batch["attention_mask"] = batch["attention_mask"].to(torch.long)
        return batch


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=30, warmup=5)
    p.add_argument("--batch-size", type=int, default=None, help="per-device batch (default 16)")
    p.add_argument("--bf16", action="store_true", help="TrainingArguments(bf16=True), no fp16")
    p.add_argument("--tf32", action="store_true", help="TrainingArguments(tf32=True)")
    p.add_argument(
        "--no-gradient-checkpointing",
        dest="gradient_checkpointing",
        action="store_false",
        help="TrainingArguments(gradient_checkpointing=False): no recomputed forward",
    )
    p.add_argument(
        "--dataloader-num-workers",
        type=int,
        default=0,
        metavar="N",
        help="TrainingArguments(dataloader_num_workers=N) (default 0: collated on the loop)",
    )
    p.add_argument(
        "--torch-compile", action="store_true", help="TrainingArguments(torch_compile=True)"
    )
    p.add_argument("--swap-norms", action="store_true", help="membound.swap_norms(model)")
    p.add_argument(
        "--no-logging-nan-inf-filter",
        dest="logging_nan_inf_filter",
        action="store_false",
        help="TrainingArguments(logging_nan_inf_filter=False): no per-step NaN check",
    )
    p.add_argument("--logging-steps", type=int, default=500, metavar="N", help="(default 500)")
    p.add_argument(
        "--no-group-by-length",
        dest="group_by_length",
        action="store_false",
        help="random batches: no LengthGroupedSampler",
    )
    args = parse(p, argv)
    transformers = require("transformers", "wav2vec2_ctc.py")
    require("accelerate", "wav2vec2_ctc.py")  # the Trainer needs it; say so up front
    if args.dataloader_num_workers < 0 or args.logging_steps < 1:
        p.error("--dataloader-num-workers must be >= 0 and --logging-steps >= 1")

    batch = args.batch_size or pick(args, 16, 2)
    g = torch.Generator().manual_seed(args.seed)
    with tempfile.TemporaryDirectory(prefix="wav2vec2_ctc-") as out:
        # the raw corpus: clip durations and transcripts; the script's vocabulary and
        # tokenizer built from the transcripts, in output_dir
        lo, hi = pick(args, (2.0, 6.0), (0.5, 1.5))
        durations = (lo + (hi - lo) * torch.rand(pick(args, 256, 32), generator=g)).tolist()
        texts = synthetic_texts(durations, g)
        vocab_file = os.path.join(out, "vocab.json")
        with open(vocab_file, "w") as f:
            json.dump(create_vocabulary(texts), f)
        tokenizer = transformers.Wav2Vec2CTCTokenizer(
            vocab_file, unk_token="[UNK]", pad_token="[PAD]", word_delimiter_token="|"
        )
        feature_extractor = transformers.Wav2Vec2FeatureExtractor(
            feature_size=1,
            sampling_rate=SAMPLING_RATE,
            padding_value=0.0,
            do_normalize=True,
            return_attention_mask=True,
        )
        processor = transformers.Wav2Vec2Processor(
            feature_extractor=feature_extractor, tokenizer=tokenizer
        )
        items = batch * (args.warmup_steps + args.steps + 2)
        dataset = SyntheticSpeech(items, durations, texts, feature_extractor, tokenizer, g)
        config = transformers.Wav2Vec2Config(
            hidden_size=pick(args, 768, 32),
            num_hidden_layers=pick(args, 12, 2),
            num_attention_heads=pick(args, 12, 2),
            intermediate_size=pick(args, 3072, 64),
            conv_dim=pick(args, (512,) * 7, (32,) * 7),
            num_conv_pos_embeddings=pick(args, 128, 16),
            num_conv_pos_embedding_groups=pick(args, 16, 4),
            feat_extract_norm="group",
            do_stable_layer_norm=False,
            # the script's ModelArguments defaults
            feat_proj_dropout=0.0,
            attention_dropout=0.0,
            hidden_dropout=0.0,
            final_dropout=0.0,
            activation_dropout=0.0,
            mask_time_prob=0.05,
            mask_time_length=10,
            mask_feature_prob=0.0,
            layerdrop=0.0,
            ctc_loss_reduction="mean",
            ctc_zero_infinity=False,
            pad_token_id=tokenizer.pad_token_id,
            vocab_size=len(tokenizer),
        )
        model = transformers.Wav2Vec2ForCTC(config)
        model.freeze_feature_encoder()
        timer = StepTimer("wav2vec2_ctc", args)
        norms = count_norms(model)
        timer.extra = {
            "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
            "transformers": transformers.__version__,
            "norms": norms,
            "vocab": len(tokenizer),
            "batch": batch,
            "workers": args.dataloader_num_workers,
        }
        if args.swap_norms:
            import membound

            membound.swap_norms(model)
            note_swapped(model, timer, norms)

        # the README's --group_by_length and --gradient_checkpointing by the names of the
        # installed transformers (5.14 made the one a train_sampling_strategy, a later 5.x
        # renamed the other activation_checkpointing)
        fields = {f.name for f in dataclasses.fields(transformers.TrainingArguments)}
        if "train_sampling_strategy" in fields:
            grouped = "group_by_length" if args.group_by_length else "random"
            versioned = {"train_sampling_strategy": grouped}
        else:
            versioned = {"group_by_length": args.group_by_length}
        ckpt = "activation_checkpointing" if "activation_checkpointing" in fields else None
        versioned[ckpt or "gradient_checkpointing"] = args.gradient_checkpointing
        training_args = transformers.TrainingArguments(
            output_dir=out,
            max_steps=timer.total_steps,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=1,
            learning_rate=3e-4,
            warmup_steps=500,
            fp16=args.cuda and not args.bf16,
            bf16=args.bf16,
            tf32=args.tf32 if args.cuda else None,
            use_cpu=not args.cuda,
            length_column_name="input_length",
            logging_steps=args.logging_steps,
            logging_nan_inf_filter=args.logging_nan_inf_filter,
            save_strategy="no",
            eval_strategy="no",
            report_to=[],
            torch_compile=args.torch_compile,
            dataloader_num_workers=args.dataloader_num_workers,
            seed=args.seed,
            **versioned,
        )
        timer.extra["optim"] = str(getattr(training_args.optim, "value", training_args.optim))
        trainer = transformers.Trainer(
            model=model,
            args=training_args,
            data_collator=DataCollatorCTCWithPadding(processor=processor),
            train_dataset=dataset,
            processing_class=feature_extractor,
            callbacks=[hf_step_timer(transformers, timer)],
        )
        trainer.train()
    on = getattr(model, "is_activation_checkpointing", None)
    on = on if on is not None else getattr(model, "is_gradient_checkpointing", False)
    timer.extra["checkpointing"] = bool(on)
    return timer.report()


if __name__ == "__main__":
    main()
