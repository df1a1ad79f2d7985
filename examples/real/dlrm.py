"""A DLRM trained the way facebookresearch/dlrm's dlrm_s_pytorch.py trains it on Criteo Kaggle.

The model of the repository's Kaggle script (bench/dlrm_s_criteo_kaggle.sh): 26
`nn.EmbeddingBag(mode="sum")` tables of dimension 16 with the Kaggle data set's row counts
capped at 1,000,000 (the repository's `--max-ind-range`; five tables are capped: 89.6M
parameters, 340 MiB of tables), a bottom MLP 13-512-256-64-16, the "dot" interaction
(`interact_features`: the 27 features stacked, one `bmm`, the strictly lower triangle picked
by index tensors built from Python lists in every forward, concatenated with the dense
output) and a top MLP 367-512-256-1 with a sigmoid; BCELoss (mean), SGD at lr 0.1 (its
`--optimizer sgd`), `optimizer.zero_grad()`, fp32. The tables' gradients are dense
(`sparse=False`; the repository asks for sparse ones, which a fused SGD refuses). Batch 2048,
the `--mini-batch-size` of the repository's MLPerf run (its Kaggle script's is 128:
`--batch-size 128`). The loader is the repository's: a map-style dataset of per-sample numpy
rows (13 integer counts, 26 categorical indices, one per table as Kaggle's are, a label), a
DataLoader with `--num-workers 0` (its default), no pin_memory, no shuffle, and the collate
of `collate_wrapper_criteo_offset` (the batch made with `torch.tensor` from the samples'
rows, `torch.log` of the counts, the offsets by `torch.tensor(range(B))`) returning per-table
lists, as the repository's random-data path does, which `dlrm_wrap` moves with its list
branch: a plain `.to(device)` per table. With the dense features, the labels and the
interaction's two index tensors that makes 56 host-to-device copies a step (the repository's
Criteo collate stacks the tables, as `--batch-index` does). Every step, between the loss and
the backward, the repository's bookkeeping reads the loss and the output with
`.detach().cpu().numpy()` (the labels too, which never left the host) and counts the rounded
matches. Data are synthetic (counts Poisson, indices uniform, labels Bernoulli at Kaggle's
click rate); no file is read or written. Written out of
sample (2026-12-06, sixteenth session): no membound rule was changed for it before it was
measured.

Fixes, one flag each (what a user would try):
  --num-workers N       DataLoader(num_workers=N): the samples collated in worker processes
  --pin-memory          DataLoader(pin_memory=True) and `.to(device, non_blocking=True)`
  --batch-index         whole batches indexed at once (a BatchSampler with batch_size=None)
                        and collated on tensors: the indices one [26, B] tensor, the offsets
                        from arange, each moved in one copy
  --membound-prefetch   membound.data.prefetch(loader): batches copied ahead on a side stream
  --log-every N         the loss and accuracy summed on the device, read every N steps
  --amp                 bf16 autocast around the forward (BCELoss on its fp32 output)
  --compile             torch.compile(dlrm) (on the CPU: backend "eager")
  --fused-optimizer     SGD(fused=True): one kernel for the update

    python examples/real/dlrm.py --steps 100
    membound diagnose -- python examples/real/dlrm.py
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np
import torch
import torch.nn as nn
from _common import StepTimer, parse, parser, pick

#: rows of the 26 categorical features in the Criteo Kaggle data (the repository's counts)
KAGGLE_COUNTS = (1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593,
                 3194, 27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105,
                 142572)  # fmt: skip
KAGGLE_CLICK_RATE = 0.256


class CriteoLike(torch.utils.data.Dataset):
    """`n` samples held as the repository's CriteoDataset holds them (numpy arrays indexed by row):
    13 counts, 26 indices below each table's row count, a 0/1 label. `__getitem__` takes
    an index (one sample) or a list of them (a whole batch, for --batch-index)."""

    def __init__(self, n: int, counts: list[int], seed: int):
        rng = np.random.default_rng(seed)
        self.X_int = rng.poisson(rng.uniform(0.5, 20.0, 13), (n, 13)).astype(np.int32)
        self.X_cat = rng.integers(0, np.asarray(counts), (n, len(counts)), dtype=np.int64)
        self.y = (rng.random(n) < KAGGLE_CLICK_RATE).astype(np.float32)

    def __getitem__(self, index):
        return self.X_int[index], self.X_cat[index], self.y[index]

    def __len__(self) -> int:
        return len(self.y)


def collate_wrapper_criteo(list_of_tuples):
    """The repository's collate, per table: each tuple is (X_int, X_cat, y)."""
    transposed_data = list(zip(*list_of_tuples, strict=True))
    X_int = torch.log(torch.tensor(transposed_data[0], dtype=torch.float) + 1)
    X_cat = torch.tensor(transposed_data[1], dtype=torch.long)
    T = torch.tensor(transposed_data[2], dtype=torch.float32).view(-1, 1)
    batchSize = X_cat.shape[0]
    featureCnt = X_cat.shape[1]
    lS_i = [X_cat[:, i] for i in range(featureCnt)]
    lS_o = [torch.tensor(range(batchSize)) for _ in range(featureCnt)]
    return X_int, lS_o, lS_i, T


def collate_batch(batch):
    """--batch-index: one whole batch of arrays made tensors once; tables stacked [26, B]."""
    X_int, X_cat, y = (torch.from_numpy(a) for a in batch)
    lS_i = X_cat.t().contiguous()
    lS_o = torch.arange(X_cat.shape[0]).repeat(lS_i.shape[0], 1)
    return torch.log(X_int.float() + 1), lS_o, lS_i, y.view(-1, 1)


class DLRM_Net(nn.Module):
    """dlrm_s_pytorch.py's DLRM_Net on one device (its sequential_forward)."""

    def create_mlp(self, ln, sigmoid_layer):
        layers = nn.ModuleList()
        for i in range(0, len(ln) - 1):
            n, m = ln[i], ln[i + 1]
            LL = nn.Linear(int(n), int(m), bias=True)
            # the repository's custom Xavier fill (drawn with numpy there)
            nn.init.normal_(LL.weight, 0.0, np.sqrt(2 / (m + n)))
            nn.init.normal_(LL.bias, 0.0, np.sqrt(1 / m))
            layers.append(LL)
            layers.append(nn.Sigmoid() if i == sigmoid_layer else nn.ReLU())
        return torch.nn.Sequential(*layers)

    def create_emb(self, m, ln):
        emb_l = nn.ModuleList()
        for n in ln:
            EE = nn.EmbeddingBag(n, m, mode="sum", sparse=False)
            nn.init.uniform_(EE.weight, a=-np.sqrt(1 / n), b=np.sqrt(1 / n))
            emb_l.append(EE)
        return emb_l

    def __init__(self, m_spa, ln_emb, ln_bot, ln_top, arch_interaction_itself=False):
        super().__init__()
        self.arch_interaction_itself = arch_interaction_itself
        self.emb_l = self.create_emb(m_spa, ln_emb)
        self.bot_l = self.create_mlp(ln_bot, -1)
        self.top_l = self.create_mlp(ln_top, len(ln_top) - 2)

    def apply_mlp(self, x, layers):
        return layers(x)

    def apply_emb(self, lS_o, lS_i, emb_l):
        ly = []
        for k, sparse_index_group_batch in enumerate(lS_i):
            sparse_offset_group_batch = lS_o[k]
            E = emb_l[k]
            V = E(sparse_index_group_batch, sparse_offset_group_batch)
            ly.append(V)
        return ly

    def interact_features(self, x, ly):
        # concatenate dense and sparse features
        (batch_size, d) = x.shape
        T = torch.cat([x] + ly, dim=1).view((batch_size, -1, d))
        # perform a dot product
        Z = torch.bmm(T, torch.transpose(T, 1, 2))
        # approach 2: unique (the repository's custom index lists, built every call)
        _, ni, nj = Z.shape
        offset = 1 if self.arch_interaction_itself else 0
        li = torch.tensor([i for i in range(ni) for j in range(i + offset)])
        lj = torch.tensor([j for i in range(nj) for j in range(i + offset)])
        Zflat = Z[:, li, lj]
        # concatenate dense features and interactions
        R = torch.cat([x] + [Zflat], dim=1)
        return R

    def forward(self, dense_x, lS_o, lS_i):
        x = self.apply_mlp(dense_x, self.bot_l)
        ly = self.apply_emb(lS_o, lS_i, self.emb_l)
        z = self.interact_features(x, ly)
        p = self.apply_mlp(z, self.top_l)
        return p


def dlrm_wrap(dlrm, X, lS_o, lS_i, device, non_blocking=False):
    """The repository's dlrm_wrap: lS_i (lS_o) a list of tensors or one stacked tensor."""
    lS_i = [S_i.to(device, non_blocking=non_blocking) for S_i in lS_i] if isinstance(lS_i, list) \
        else lS_i.to(device, non_blocking=non_blocking)  # fmt: skip
    lS_o = [S_o.to(device, non_blocking=non_blocking) for S_o in lS_o] if isinstance(lS_o, list) \
        else lS_o.to(device, non_blocking=non_blocking)  # fmt: skip
    return dlrm(X.to(device, non_blocking=non_blocking), lS_o, lS_i)


def main(argv: list[str] | None = None) -> dict:
    # a step of tens of ms on a GPU host (estimated, not measured: the collate of 2048 samples
    # on the training thread), a few with the loader fixes: 100 timed steps after 10
    p = parser(__doc__, steps=100, warmup=10)
    p.add_argument("--batch-size", type=int, default=None, help="mini-batch size (default 2048)")
    p.add_argument(
        "--max-ind-range",
        type=int,
        default=None,
        metavar="N",
        help="rows per table at most (default 1000000; 1000 on the CPU)",
    )
    p.add_argument("--num-workers", type=int, default=0, metavar="N", help="(default 0)")
    p.add_argument("--pin-memory", action="store_true", help="DataLoader(pin_memory=True)")
    p.add_argument(
        "--batch-index",
        action="store_true",
        help="index whole batches, collate on tensors, one copy for the 26 tables",
    )
    p.add_argument(
        "--membound-prefetch", action="store_true", help="membound.data.prefetch(loader)"
    )
    p.add_argument(
        "--log-every",
        type=int,
        default=1,
        metavar="N",
        help="loss and accuracy read every N steps, summed on the device between (default 1: "
        "the repository's per-step numpy reads)",
    )
    p.add_argument("--amp", action="store_true", help="bf16 autocast around the forward")
    p.add_argument("--compile", action="store_true", help="torch.compile(dlrm)")
    p.add_argument("--fused-optimizer", action="store_true", help="SGD(fused=True)")
    args = parse(p, argv)
    if args.log_every < 1 or args.num_workers < 0:
        p.error("--log-every must be >= 1 and --num-workers >= 0")
    device = torch.device(args.device)
    batch = args.batch_size or pick(args, 2048, 64)
    max_ind_range = args.max_ind_range or pick(args, 1_000_000, 1_000)
    ln_emb = [min(n, max_ind_range) for n in KAGGLE_COUNTS]
    m_spa, ln_bot, top = 16, [13, 512, 256, 64, 16], [512, 256, 1]
    num_fea = len(ln_emb) + 1
    ln_top = [(num_fea * (num_fea - 1)) // 2 + ln_bot[-1], *top]

    timer = StepTimer("dlrm", args)
    train_data = CriteoLike(batch * (timer.total_steps + 2), ln_emb, args.seed)
    if args.batch_index:  # one fetch and one collate per batch, on whole arrays
        sampler = torch.utils.data.BatchSampler(
            torch.utils.data.SequentialSampler(train_data), batch, drop_last=False
        )
        train_ld = torch.utils.data.DataLoader(
            train_data,
            sampler=sampler,
            batch_size=None,
            num_workers=args.num_workers,
            collate_fn=collate_batch,
            pin_memory=args.pin_memory,
        )
    else:
        train_ld = torch.utils.data.DataLoader(
            train_data,
            batch_size=batch,
            shuffle=False,
            num_workers=args.num_workers,
            collate_fn=collate_wrapper_criteo,
            pin_memory=args.pin_memory,
            drop_last=False,
        )
    if args.membound_prefetch:
        import membound.data

        train_ld = membound.data.prefetch(train_ld, args.device)

    dlrm = DLRM_Net(m_spa, ln_emb, ln_bot, ln_top).to(device)
    parameters = sum(q.numel() for q in dlrm.parameters())
    emb_mb = sum(e.weight.numel() * e.weight.element_size() for e in dlrm.emb_l) / 2**20
    print(f"DLRM: {parameters:,} parameters, tables {emb_mb:.1f} MiB", flush=True)
    model = dlrm
    if args.compile:  # inductor on the GPU; the CPU smoke run only checks the loop
        model = torch.compile(dlrm, backend="inductor" if args.cuda else "eager")
    loss_fn = torch.nn.BCELoss(reduction="mean")
    optimizer = torch.optim.SGD(
        dlrm.parameters(), lr=0.1, fused=True if args.fused_optimizer else None
    )
    autocast = (
        torch.autocast(device_type=device.type, dtype=torch.bfloat16) if args.amp else nullcontext()
    )
    nb = args.pin_memory  # pinned batches: copies that do not block the host
    # the Kaggle script's --print-freq (1024); with --log-every N the reads and prints every N
    print_freq = 1024 if args.log_every == 1 else args.log_every
    timer.extra = {"batch": batch, "workers": args.num_workers, "parameters": parameters,
                   "tables_mib": round(emb_mb, 1), "rows": sum(ln_emb)}  # fmt: skip

    total_loss, total_accu, total_samp, j = 0, 0, 0, 0
    while not timer.done:
        for X, lS_o, lS_i, T in train_ld:
            # forward pass
            with autocast:
                Z = dlrm_wrap(model, X, lS_o, lS_i, device, nb)
            if args.amp:  # BCELoss refuses autocast on CUDA: the loss on the fp32 output
                Z = Z.float()
            # loss
            T_d = T.to(device, non_blocking=nb)
            E = loss_fn(Z, T_d)
            mbs = T.shape[0]
            if args.log_every == 1:  # the repository's loss and accuracy, every step
                L = E.detach().cpu().numpy()  # numpy array
                S = Z.detach().cpu().numpy()  # numpy array
                T = T.detach().cpu().numpy()  # numpy array
                A = np.sum((np.round(S, 0) == T).astype(np.uint8))
            else:  # summed on the device, read at the print
                L = E.detach()
                A = (torch.round(Z.detach()) == T_d).sum()
            # scaled error gradient propagation
            optimizer.zero_grad()
            E.backward()
            optimizer.step()
            total_accu += A
            total_loss += L * mbs
            total_samp += mbs
            j += 1
            if j % print_freq == 0:
                gA, gL = float(total_accu) / total_samp, float(total_loss) / total_samp
                print(f"Finished training it {j}, loss {gL:.6f}, accuracy {gA * 100:3.3f} %")
                total_loss, total_accu, total_samp = 0, 0, 0
            timer.step()
            if timer.done:
                break
    if total_samp:
        gA, gL = float(total_accu) / total_samp, float(total_loss) / total_samp
        print(f"Finished training it {j}, loss {gL:.6f}, accuracy {gA * 100:3.3f} %", flush=True)
    return timer.report()


if __name__ == "__main__":
    main()
