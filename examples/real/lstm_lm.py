"""An LSTM language model trained the way PyTorch's examples/word_language_model trains it.

The example's defaults: a 2-layer LSTM of 200 units over 200-wide embeddings of a
Wikitext-2-sized vocabulary (33,278 tokens), dropout 0.2, a linear decoder and log-softmax
with NLLLoss; batch 20 of 35-token windows (bptt), the hidden state carried from window to
window and detached; gradients clipped to 0.25 and plain SGD at lr 20 written as a loop over
the parameters (`p.data.add_(p.grad, alpha=-lr)`); the running loss read with `loss.item()`
after every batch. The token stream is synthetic and, as in the example's `batchify`, sits on
the device from the start: no loader. Written out of sample (2026-12-05, eighth session): no
membound rule was changed for it before it was measured.

Fixes, one flag each (what a user would try):
  --optimizer sgd       torch.optim.SGD (foreach kernels) instead of the per-parameter loop
  --bf16                bf16 autocast
  --compile             torch.compile(model)
  --log-every N         add the loss up on the GPU and read it every N batches
  --cuda-graphs         the whole step (forward, backward, clipping, the update and the
                        hidden state's carry) captured once in a CUDA graph and replayed
                        (PyTorch's whole-network capture recipe; the launch-bound remedy).
                        cuDNN's LSTM launches a kernel per layer and time step, which
                        torch.compile keeps as it is

    python examples/real/lstm_lm.py --steps 100
    membound diagnose -- python examples/real/lstm_lm.py
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from _common import StepTimer, capture_step, parse, parser, pick


class RNNModel(nn.Module):
    """Embedding -> dropout -> LSTM -> dropout -> linear decoder -> log-softmax."""

    def __init__(self, ntoken: int, ninp: int, nhid: int, nlayers: int, dropout: float = 0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers, self.ntoken = nhid, nlayers, ntoken
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)

    def forward(self, tokens: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(self.drop(output)).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = next(self.parameters())
        return (
            w.new_zeros(self.nlayers, batch, self.nhid),
            w.new_zeros(self.nlayers, batch, self.nhid),
        )


def batchify(stream: torch.Tensor, batch: int) -> torch.Tensor:
    """The token stream as `batch` columns (the example's batchify): rows are time."""
    rows = stream.size(0) // batch
    return stream[: rows * batch].view(batch, -1).t().contiguous()


def main(argv: list[str] | None = None) -> dict:
    p = parser(__doc__, steps=100, warmup=10)
    p.add_argument("--optimizer", choices=("loop", "sgd"), default="loop",
                   help="the example's per-parameter SGD loop (default) or torch.optim.SGD")  # fmt: skip
    p.add_argument("--bf16", action="store_true", help="bf16 autocast")
    p.add_argument("--compile", action="store_true", help="torch.compile(model)")
    p.add_argument("--log-every", type=int, default=1, metavar="N",
                   help="read the running loss every N batches (default 1, as the example)")  # fmt: skip
    p.add_argument("--cuda-graphs", action="store_true",
                   help="capture the whole step in a CUDA graph and replay it (CUDA only)")  # fmt: skip
    args = parse(p, argv)
    if args.log_every < 1:
        p.error("--log-every must be >= 1")
    if args.cuda_graphs and (not args.cuda or args.compile):
        p.error("--cuda-graphs needs --device cuda and no --compile")

    ntokens = pick(args, 33278, 100)
    emsize = nhid = pick(args, 200, 16)
    batch, bptt = pick(args, 20, 4), pick(args, 35, 8)
    lr, clip = 20.0, 0.25
    windows = args.warmup_steps + args.steps + 2
    g = torch.Generator().manual_seed(args.seed)
    stream = torch.randint(0, ntokens, (batch * bptt * windows + batch,), generator=g)
    data = batchify(stream, batch).to(args.device)

    model = RNNModel(ntokens, emsize, nhid, 2).to(args.device)
    params = list(model.parameters())
    optimizer = torch.optim.SGD(params, lr=lr) if args.optimizer == "sgd" else None
    net = torch.compile(model) if args.compile else model
    criterion = nn.NLLLoss()

    graphed = (
        _capture(model, params, criterion, data, bptt, batch, lr, clip, args)
        if (args.cuda_graphs)
        else None
    )

    timer = StepTimer("lstm_lm", args)
    timer.extra = {"batch": batch, "bptt": bptt, "vocab": ntokens, "parameters": len(params)}
    model.train()
    hidden = model.init_hidden(batch)
    total = torch.zeros((), device=args.device)
    logged, seen, pending, step = 0.0, 0, 0, 0  # seen: batches whose loss was read
    while not timer.done:
        for i in range(0, data.size(0) - 1 - bptt, bptt):
            tokens, targets = data[i : i + bptt], data[i + 1 : i + 1 + bptt].reshape(-1)
            if graphed is not None:  # the fix: the batch into the graph's inputs, one replay
                graph, static_tokens, static_targets, loss = graphed
                static_tokens.copy_(tokens)
                static_targets.copy_(targets)
                graph.replay()
            else:
                hidden = tuple(h.detach() for h in hidden)  # the example's repackage_hidden
                model.zero_grad()
                with torch.autocast(
                    "cuda" if args.cuda else "cpu", dtype=torch.bfloat16, enabled=args.bf16
                ):
                    output, hidden = net(tokens, hidden)
                    loss = criterion(output.float(), targets)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, clip)
                if optimizer is not None:  # the fix: one foreach update for every parameter
                    optimizer.step()
                else:
                    for q in params:
                        q.data.add_(q.grad, alpha=-lr)
            if args.log_every == 1:
                logged += loss.item()  # the example's total_loss += loss.item(): a sync
                seen += 1
            else:
                total += loss.detach()
                pending += 1
                if step % args.log_every == 0:
                    logged, seen, pending = logged + total.item(), seen + pending, 0
                    total.zero_()
            step += 1
            timer.step()
            if timer.done:
                break
    print(f"mean logged loss {logged / max(seen, 1):.4f}", flush=True)
    return timer.report()


def _capture(model, params, criterion, data, bptt, batch, lr, clip, args):
    """The whole training step captured in one CUDA graph (PyTorch's whole-network capture):
    static token and target buffers, the hidden state kept in graph-owned tensors and carried
    by a copy at the end of the step, gradients allocated by the captured backward (so no
    zero_grad: each replay writes them afresh; `_common.capture_step`). Returns (graph,
    static tokens, static targets, the loss the replays write)."""
    static_tokens = data[:bptt].clone()
    static_targets = data[1 : 1 + bptt].reshape(-1).clone()
    static_hidden = model.init_hidden(batch)
    bf16 = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.bf16)

    def step():
        with bf16:
            output, hidden = model(static_tokens, static_hidden)
            loss = criterion(output.float(), static_targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, clip)
        for q in params:
            q.data.add_(q.grad, alpha=-lr)
        with torch.no_grad():
            for h, new in zip(static_hidden, hidden, strict=True):
                h.copy_(new)
        return loss

    graph, loss = capture_step(step, before=lambda: model.zero_grad(set_to_none=True))
    return graph, static_tokens, static_targets, loss


if __name__ == "__main__":
    main()
