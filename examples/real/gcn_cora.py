"""A two-layer graph convolutional network trained the way Kipf's pygcn trains it on Cora.

pygcn's train.py: the whole graph in one batch (full-batch training), a sparse, symmetric,
row-normalized adjacency with self-loops multiplied by `torch.spmm`, dense row-normalized
bag-of-words features, GraphConvolution(in, 16) -> ReLU -> dropout 0.5 ->
GraphConvolution(16, classes) -> log-softmax, NLL loss on the 140 training nodes, Adam at
lr 0.01 with weight decay 5e-4. Every epoch (a step here) also evaluates: the model in eval
mode runs the forward again for the validation loss and accuracy, and the epoch's line prints
four numbers read from the GPU with `.item()`. The graph is synthetic and Cora-sized (2,708
nodes, 1,433 features, 7 classes, about 5,300 edges), labels tied to the features so the loss
falls. Written out of sample (2026-12-06, twelfth session): no membound rule was changed for
it before it was measured.

Fixes, one flag each (what a user would try):
  --fastmode            pygcn's own flag: no evaluation forward each epoch
  --compile             torch.compile(model)
  --cuda-graphs         the whole epoch (training step and evaluation forward) captured once
                        in a CUDA graph and replayed; the four numbers read after the replay
  --log-every N         print the epoch's line (four .item()) every N epochs, not every one

    python examples/real/gcn_cora.py --steps 200
    membound diagnose -- python examples/real/gcn_cora.py
"""

from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, capture_step, parse, parser, pick


class GraphConvolution(nn.Module):
    """pygcn's layer: support = input @ W, output = adj @ support + b (adj sparse)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.empty(out_features))
        stdv = 1.0 / math.sqrt(out_features)
        self.weight.data.uniform_(-stdv, stdv)
        self.bias.data.uniform_(-stdv, stdv)

    def forward(self, x, adj):
        return torch.spmm(adj, torch.mm(x, self.weight)) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat: int, nhid: int, nclass: int, dropout: float):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def accuracy(output, labels):
    """pygcn's accuracy: the share of argmax hits, a tensor on the device."""
    preds = output.max(1)[1].type_as(labels)
    return preds.eq(labels).double().sum() / len(labels)


def synthetic_cora(n: int, nfeat: int, nclass: int, edges: int, seed: int):
    """A Cora-sized graph: sparse binary features row-normalized (dense, as pygcn keeps
    them), labels from a fixed random rule on the features, random edges made symmetric
    with self-loops and row-normalized (pygcn's `normalize(adj + I)`), coalesced COO."""
    g = torch.Generator().manual_seed(seed)
    feats = (torch.rand(n, nfeat, generator=g) < 0.0127).float()
    feats[:, 0] = 1.0  # no empty row
    feats = feats / feats.sum(1, keepdim=True)
    labels = (feats @ torch.randn(nfeat, nclass, generator=g)).argmax(1)
    src = torch.randint(0, n, (edges,), generator=g)
    dst = torch.randint(0, n, (edges,), generator=g)
    loops = torch.arange(n)
    rows = torch.cat([src, dst, loops])
    cols = torch.cat([dst, src, loops])
    idx = (
        torch.sparse_coo_tensor(
            torch.stack([rows, cols]), torch.ones(len(rows)), (n, n), check_invariants=False
        )
        .coalesce()
        .indices()
    )  # each edge once
    degree = torch.bincount(idx[0], minlength=n).float()
    adj = torch.sparse_coo_tensor(
        idx, 1.0 / degree[idx[0]], (n, n), is_coalesced=True, check_invariants=False
    )
    return feats, adj, labels


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=200, warmup=20)
    p.add_argument("--fastmode", action="store_true", help="no evaluation forward each epoch")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--cuda-graphs", action="store_true",
                   help="capture the whole epoch in a CUDA graph and replay it (CUDA only)")  # fmt: skip
    p.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="print the epoch's line every N epochs (default 1, as pygcn)")  # fmt: skip
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.cuda_graphs and (not args.cuda or args.compile):
        p.error("--cuda-graphs needs --device cuda and no --compile")

    n, nfeat = pick(args, 2708, 200), pick(args, 1433, 64)
    feats, adj, labels = synthetic_cora(n, nfeat, 7, pick(args, 5278, 400), args.seed)
    idx_train = torch.arange(pick(args, 140, 40))  # pygcn: 140 training, 300 validation nodes
    idx_val = torch.arange(pick(args, 200, 100), pick(args, 500, 200))
    feats, adj, labels = feats.to(args.device), adj.to(args.device), labels.to(args.device)
    idx_train, idx_val = idx_train.to(args.device), idx_val.to(args.device)

    model = GCN(nfeat, 16, 7, 0.5).to(args.device)
    optimizer = torch.optim.Adam(
        model.parameters(), lr=0.01, weight_decay=5e-4, capturable=args.cuda_graphs
    )
    net = torch.compile(model) if args.compile else model

    def epoch():
        model.train()
        optimizer.zero_grad(set_to_none=not args.cuda_graphs)
        output = net(feats, adj)
        loss_train = F.nll_loss(output[idx_train], labels[idx_train])
        acc_train = accuracy(output[idx_train], labels[idx_train])
        loss_train.backward()
        optimizer.step()
        if args.fastmode:
            return loss_train, acc_train, loss_train, acc_train
        model.eval()
        output = net(feats, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
        return loss_train, acc_train, loss_val, accuracy(output[idx_val], labels[idx_val])

    graph = None
    if args.cuda_graphs:  # the epoch zeroes its gradients in place: the graph keeps them
        graph, numbers = capture_step(epoch)

    timer = StepTimer("gcn_cora", args)
    timer.extra = {"nodes": n, "features": nfeat, "edges": int(adj._nnz())}
    step = 0
    while not timer.done:
        if graph is not None:
            graph.replay()
        else:
            numbers = epoch()
        if step % args.log_every == 0:  # pygcn's epoch line: four reads from the GPU
            loss_train, acc_train, loss_val, acc_val = numbers
            print(
                f"Epoch: {step + 1:04d} loss_train: {loss_train.item():.4f} "
                f"acc_train: {acc_train.item():.4f} loss_val: {loss_val.item():.4f} "
                f"acc_val: {acc_val.item():.4f}"
            )
        step += 1
        timer.step()
    return timer.report()


if __name__ == "__main__":
    main()
