"""Shared plumbing for the planted-bottleneck scripts: arguments, sizes, a per-step log line.

Each script in this folder is a small training loop with ONE bottleneck planted so that it
dominates the step on an H200; `membound diagnose -- examples/planted/<code>.py` should name
it as the top finding. On a machine without CUDA the same loop runs tiny, for smoke tests.
"""

from __future__ import annotations

import argparse
import time

import torch


def setup(doc: str, default_steps: int = 20) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--steps", type=int, default=default_steps, help="training steps to run")
    parser.add_argument(
        "--device",
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="cuda (the planted sizes) or cpu (tiny sizes, for smoke tests)",
    )
    args = parser.parse_args()
    args.cuda = args.device.startswith("cuda")
    torch.manual_seed(0)
    return args


def pick(args: argparse.Namespace, gpu_value, cpu_value):
    """The planted size on CUDA, a tiny one on CPU."""
    return gpu_value if args.cuda else cpu_value


class StepTimer:
    """Prints ms/step at the end; the `.item()` it takes per step is the loop's one sync,
    the way a real loop logs its loss, so the host never runs more than a step ahead."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.t0 = time.perf_counter()
        self.steps = 0
        self.last = float("nan")

    def step(self, loss: torch.Tensor | None) -> None:
        if loss is not None:
            self.last = float(loss.detach().float().sum().item())
        self.steps += 1

    def done(self) -> None:
        ms = (time.perf_counter() - self.t0) * 1e3 / max(self.steps, 1)
        print(f"{self.name}: {self.steps} steps, {ms:.2f} ms/step, last loss {self.last:.4g}")
