"""`launch_bound.py` with its whole step captured in one CUDA graph (the fix for launch-bound).

The same 24-layer model of tiny elementwise kernels; forward, backward and the SGD update are
captured once into a `torch.cuda.CUDAGraph` (PyTorch's whole-network capture recipe: warm-up
iterations on a side stream, static input and loss tensors) and each step replays it: one
launch per step instead of ~220. `membound diagnose` must not report launch gaps inside a
replay. Steps are marked with `membound.step()` when membound is importable (the optimizer's
`step` runs inside the graph, not from Python). On the CPU it runs the eager loop.
"""

import torch
from _common import StepTimer, setup
from launch_bound import build

try:
    import membound

    mark_step = membound.step
except ImportError:  # run without membound: no step marks needed

    def mark_step():
        return None


args = setup(__doc__, default_steps=24)
model, opt, x = build(args.device)


def train_step():
    opt.zero_grad(set_to_none=False)  # graph replays need the same .grad tensors
    loss = model(x).mean()
    loss.backward()
    opt.step()
    return loss


timer = StepTimer("launch-bound-graphed")
if args.cuda:
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            train_step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_loss = train_step()
    for _ in range(args.steps):
        graph.replay()
        mark_step()
        timer.step(static_loss)
else:
    for _ in range(args.steps):
        timer.step(train_step())
        mark_step()
timer.done()
