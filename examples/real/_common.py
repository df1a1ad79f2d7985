"""Shared plumbing for the truth-by-intervention scripts: arguments, device, the plain step timer.

Each script in this folder is a training loop written the way public training code is
written, with flags that apply one fix each. `StepTimer` times the steps the way the user
runs them: `time.perf_counter()` at every step boundary and `torch.cuda.synchronize()` only
when the timed window opens and when it closes (never inside it), warm-up steps (compilation,
autotuning, allocator growth, DataLoader start-up) skipped. At the end it prints one line,

    MEMBOUND_TRUTH {"script": "gpt2", "steps": 20, "step_ms": 131.9, ...}

which `benchmarks/bench_truth.py` reads. `step_ms` is the headline figure: the wall time of
the timed window divided by its steps, synchronized at both ends. `step_ms_median` is the
median of the per-step intervals between boundaries (host clock, unsynchronized: in a loop
that runs ahead of the GPU each interval is host time, throttled by the GPU's pace).

Nothing here imports membound: a script imports it only when a flag asks for a membound fix.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
from typing import Any

import torch

#: the fixed prefix of the result line; the JSON object follows on the same line
TRUTH_PREFIX = "MEMBOUND_TRUTH "

#: exit code of a script whose framework is not installed (one line on stderr says which)
EXIT_MISSING = 2


def parser(doc: str, *, steps: int, warmup: int) -> argparse.ArgumentParser:
    """An argument parser with the options every script shares."""
    p = argparse.ArgumentParser(
        description=doc.strip().splitlines()[0],
        epilog="Prints one `MEMBOUND_TRUTH {json}` line at the end (examples/real/_common.py).",
    )
    p.add_argument(
        "--steps", type=int, default=steps, help=f"timed training steps (default {steps})"
    )
    p.add_argument(
        "--warmup-steps",
        type=int,
        default=warmup,
        metavar="N",
        help=f"steps run before the timed window opens, not timed (default {warmup})",
    )
    p.add_argument(
        "--device",
        default=None,
        help="cuda (default when available: the real sizes) or cpu (tiny sizes, smoke tests)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    return p


def parse(p: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """Parse, check the step counts, resolve the device (`args.device`, `args.cuda`), seed."""
    args = p.parse_args(argv)
    if args.steps < 1 or args.warmup_steps < 0:
        p.error(
            f"--steps must be >= 1 and --warmup-steps >= 0 (got {args.steps}, {args.warmup_steps})"
        )
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    args.cuda = str(args.device).startswith("cuda")
    if args.cuda and not torch.cuda.is_available():
        p.error("--device cuda: no CUDA device is available here; use --device cpu")
    if args.cuda and os.environ.get("MEMBOUND_BLOCKING_SYNC"):
        args.blocking_sync = blocking_sync()
    torch.manual_seed(args.seed)
    return args


def blocking_sync() -> str:
    """Make this process's CUDA syncs sleep instead of spin (`cudaSetDeviceFlags(
    cudaDeviceScheduleBlockingSync)`, before the context exists), so that a thread's CPU time
    is its host work alone: a measuring aid (env MEMBOUND_BLOCKING_SYNC=1), never a fix. The
    runtime's answer ("ok", or why not)."""
    import ctypes

    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "libcudart.so" in ln}
        if not paths:
            return "no libcudart mapped"
        rc = ctypes.CDLL(sorted(paths)[0]).cudaSetDeviceFlags(ctypes.c_uint(4))
        return "ok" if rc == 0 else f"cudaSetDeviceFlags returned {rc}"
    except OSError as exc:
        return f"not set: {exc}"


def autograd_cpu_ms() -> float | None:
    """CPU ms so far of this process's autograd device threads (`pt_autograd_*`; Linux
    `/proc/self/task/*/schedstat`), None where there are none or it cannot be read."""
    total, found = 0, False
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open(f"/proc/self/task/{tid}/comm") as f:
                    if not f.read().startswith("pt_autograd"):
                        continue
                with open(f"/proc/self/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
                found = True
            except (OSError, ValueError, IndexError):
                continue
    except OSError:
        return None
    return total / 1e6 if found else None


def pick(args: argparse.Namespace, gpu_value: Any, cpu_value: Any) -> Any:
    """The real size on CUDA, a tiny one on the CPU."""
    return gpu_value if args.cuda else cpu_value


def require(module: str, script: str, package: str | None = None) -> Any:
    """Import `module`, or exit with EXIT_MISSING and one line saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pkg = package or module
        print(
            f"{script}: needs {pkg}, which is not importable here ({exc}); "
            f"install it (pip install {pkg}) to run this script.",
            file=sys.stderr,
        )
        raise SystemExit(EXIT_MISSING) from None


def _sync(device: str) -> None:
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def _usage() -> tuple:
    """(this process's figures, all its threads; the calling thread's): each (CPU seconds,
    minor and major page faults, voluntary and involuntary context switches), () where
    getrusage (or, off Linux, the per-thread kind) is missing. The figures membound's
    capture keeps per phase (`membound.trace.step_clock`), taken here without importing
    membound (a baseline run must not)."""
    try:
        import resource
    except ImportError:  # Windows
        return ((), ())
    out = []
    for who in (resource.RUSAGE_SELF, getattr(resource, "RUSAGE_THREAD", None)):
        if who is None:
            out.append(())
            continue
        r = resource.getrusage(who)
        out.append((r.ru_utime + r.ru_stime, r.ru_minflt, r.ru_majflt, r.ru_nvcsw, r.ru_nivcsw))
    return tuple(out)


USAGE_FIELDS = ("cpu_ms", "minor_faults", "major_faults", "voluntary_switches",
                "involuntary_switches")  # fmt: skip


def tf32_flag(legacy, backend) -> bool | None:
    """A TF32 flag read through torch's legacy API (`legacy()`), or where that raises
    (torch 2.9 on, once a framework set it through the newer per-backend API: "a mix of the
    legacy and new APIs") from `backend.fp32_precision`; None where neither gives it."""
    try:
        return bool(legacy())
    except RuntimeError:
        got = getattr(backend, "fp32_precision", None)
        return None if got is None else got == "tf32"


def matmul_precision() -> dict[str, Any]:
    """The fp32 matmul precision in effect: TF32 for cuBLAS and cuDNN (`tf32_flag`: HF's
    tf32=True sets it through the newer API on transformers 5, and the legacy read then
    raised on an H100, 2026-12-07), and `torch.get_float32_matmul_precision()`."""
    try:
        precision = torch.get_float32_matmul_precision()
    except RuntimeError:
        precision = None
    return {
        "allow_tf32": tf32_flag(
            lambda: torch.backends.cuda.matmul.allow_tf32, torch.backends.cuda.matmul
        ),
        "cudnn_allow_tf32": tf32_flag(
            lambda: torch.backends.cudnn.allow_tf32, torch.backends.cudnn
        ),
        "float32_precision": precision,
    }


def usage_delta(a: tuple, b: tuple, steps: int) -> dict:
    """`USAGE_FIELDS` per step between two snapshots of one kind ({} where one is empty)."""
    if not a or not b or steps <= 0:
        return {}
    d = [y - x for x, y in zip(a, b, strict=True)]
    d[0] *= 1e3  # seconds -> ms
    return {k: round(v / steps, 4) for k, v in zip(USAGE_FIELDS, d, strict=True)}


class StepTimer:
    """The plain step timer: call `step()` once at the end of every training step.

    The window opens at the end of warm-up step `warmup` (synchronize, then read the clock)
    and closes at the end of step `warmup + steps` (synchronize, read the clock); steps in
    between only read the clock. Steps after the window are ignored. `done` says whether
    the window has closed; `report()` prints the MEMBOUND_TRUTH line and returns its dict.
    """

    def __init__(self, script: str, args: argparse.Namespace, *, flags: dict | None = None):
        self.script = script
        self.device = args.device
        self.warmup = int(args.warmup_steps)
        self.steps = int(args.steps)
        self.flags = flags if flags is not None else flags_of(args)
        self.extra: dict[str, Any] = {}
        self.seen = 0
        self.t_open: float | None = None
        self.t_close: float | None = None
        self.marks: list[float] = []  # clock at the end of each timed step (the last: synced)
        self.usage_open: tuple = ()
        self.usage_close: tuple = ()
        self.autograd_open: float | None = None
        self.autograd_close: float | None = None
        self.blocking_sync = getattr(args, "blocking_sync", None)
        if self.warmup == 0:
            self._open()

    def _open(self) -> None:
        _sync(self.device)
        self.t_open = time.perf_counter()
        self.usage_open = _usage()
        self.autograd_open = autograd_cpu_ms()

    def step(self) -> None:
        self.seen += 1
        if self.seen < self.warmup or self.t_close is not None:
            return
        if self.seen == self.warmup:
            self._open()
            return
        if self.seen == self.warmup + self.steps:
            _sync(self.device)
            self.t_close = time.perf_counter()
            self.usage_close = _usage()
            self.autograd_close = autograd_cpu_ms()
            self.marks.append(self.t_close)
            return
        self.marks.append(time.perf_counter())

    @property
    def done(self) -> bool:
        return self.t_close is not None

    @property
    def total_steps(self) -> int:
        """Steps the loop must run for the window to close."""
        return self.warmup + self.steps

    def result(self) -> dict[str, Any]:
        """The figures of the window (raises if it has not closed)."""
        if self.t_open is None or self.t_close is None:
            raise RuntimeError(
                f"{self.script}: the timed window did not close: {self.seen} step(s) seen, "
                f"{self.total_steps} needed (warm-up {self.warmup} + timed {self.steps})"
            )
        edges = [self.t_open, *self.marks]
        per_step = [(edges[i + 1] - edges[i]) * 1e3 for i in range(len(edges) - 1)]
        window_ms = (self.t_close - self.t_open) * 1e3
        out = {
            "script": self.script,
            "device": str(self.device),
            "gpu": torch.cuda.get_device_name() if str(self.device).startswith("cuda") else "",
            "torch": torch.__version__,
            "steps": len(per_step),
            "warmup_steps": self.warmup,
            "step_ms": round(window_ms / len(per_step), 4),
            "step_ms_median": round(statistics.median(per_step), 4),
            "step_ms_min": round(min(per_step), 4),
            "step_ms_max": round(max(per_step), 4),
            "window_ms": round(window_ms, 3),
            "flags": self.flags,
        }
        if self.extra:
            out["extra"] = self.extra
        # the fp32 matmul precision in effect when the window closed: a framework may change
        # it on its own (HF's torch_compile=True turns TF32 on where tf32 is unset), and a
        # fix's saving means something else when it did
        out["matmul"] = matmul_precision()
        # what the process (all threads) and the training thread did per timed step (CPU
        # time, page faults, context switches): runs of one call whose step times differ
        # say here whether one was more contended
        if self.usage_open and self.usage_close:
            for k, who in enumerate(("process", "thread")):
                got = usage_delta(self.usage_open[k], self.usage_close[k], len(per_step))
                if got:
                    out[who] = got
        if self.autograd_open is not None and self.autograd_close is not None:
            # backward's host work on CUDA (the autograd device threads), per timed step
            out["autograd_cpu_ms"] = round(
                (self.autograd_close - self.autograd_open) / len(per_step), 4
            )
        if self.blocking_sync is not None:
            out["blocking_sync"] = self.blocking_sync  # syncs slept: thread CPU is host work
        return out

    def report(self) -> dict[str, Any]:
        """Print the MEMBOUND_TRUTH line (stdout, flushed) and return its dict."""
        out = self.result()
        print(TRUTH_PREFIX + json.dumps(out, sort_keys=True), flush=True)
        return out


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    """The parsed options as JSON-able values (what the result line records as `flags`)."""
    out = {}
    for key, value in sorted(vars(args).items()):
        if key in ("cuda",):
            continue
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value
        else:
            out[key] = str(value)
    return out


class SyntheticUint8Images(torch.utils.data.Dataset):
    """`n` items from a pool of random uint8 CHW images, flipped at random on access and
    returned as uint8 with an int label: what timm's loader hands its prefetcher, which
    converts and normalizes on the GPU (the ConvNeXt and EfficientNet recipes); the ViT and
    DDPM scripts scale and normalize its items on the host, as their recipes' transforms do."""

    def __init__(self, n: int, size: int, num_classes: int, pool: int = 64):
        g = torch.Generator().manual_seed(0)
        self.images = torch.randint(0, 256, (pool, 3, size, size), dtype=torch.uint8, generator=g)
        self.labels = torch.randint(0, num_classes, (n,), generator=g)
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int):
        img = self.images[i % len(self.images)]
        if torch.rand(()) < 0.5:
            img = img.flip(-1)
        return img, int(self.labels[i])


def add_prefetch_options(p: argparse.ArgumentParser) -> None:
    """`--prefetch-threads` and `--prefetch-producer`, the knobs of `--membound-prefetch` that
    the truth runs time against each other (`prefetch_kwargs` passes them on)."""
    p.add_argument(
        "--prefetch-threads",
        type=int,
        default=None,
        help="with --membound-prefetch: its copy threads (default: the prefetcher's own)",
    )
    p.add_argument(
        "--prefetch-producer",
        choices=("thread", "inline", "auto"),
        default=None,
        help="with --membound-prefetch: who pulls batches and issues their copies "
        "(default: the prefetcher's own)",
    )


def prefetch_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """`add_prefetch_options`' values as `membound.data.prefetch` keywords (those not given
    are left to the prefetcher's defaults)."""
    kw = {"num_threads": args.prefetch_threads, "producer": args.prefetch_producer}
    return {k: v for k, v in kw.items() if v is not None}


def count_norms(model) -> int:
    """Modules that normalize with a learned gain, by class name, not import: HF's own
    RMSNorm classes (LlamaRMSNorm, T5LayerNorm), nn.LayerNorm, nn.RMSNorm, and membound's."""
    return sum(type(m).__name__.endswith(("RMSNorm", "LayerNorm")) for m in model.modules())


def note_swapped(model, timer: StepTimer, norms: int, what: str = "norm modules") -> None:
    """After `membound.swap_norms(model)`: how many of the `norms` it swapped, in the result
    line (`norms_swapped`) and one printed line (a swap that swapped nothing saves nothing)."""
    swapped = sum(type(m).__module__.startswith("membound") for m in model.modules())
    timer.extra["norms_swapped"] = swapped
    print(f"swap_norms: {swapped} of {norms} {what} swapped", flush=True)


def hf_step_timer(transformers, timer: StepTimer):
    """A Hugging Face `TrainerCallback` that calls the plain step timer at every optimizer
    step's end (`transformers` is the imported module: this file never imports it)."""

    class StepTimerCallback(transformers.TrainerCallback):
        def on_step_end(self, args_, state, control, **kwargs):
            timer.step()

    return StepTimerCallback()


def capture_step(step, before=None, warmup: int = 3):
    """PyTorch's whole-network capture of a training step: `warmup` eager calls of `step()`
    on a side stream first (cuDNN, cuBLAS and the allocator settle; they train too), then
    one call captured in a CUDA graph. `before()` runs ahead of each of them (a
    `zero_grad(set_to_none=True)`, so that the captured backward allocates the gradients in
    the graph's own memory and each replay writes them afresh). Returns (the graph, what the
    captured call returned: the tensors each `graph.replay()` rewrites)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            if before is not None:
                before()
            step()
    torch.cuda.current_stream().wait_stream(side)
    if before is not None:
        before()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    return graph, out
