"""Measuring a device's ceilings: one registered step per number, run under a progress bar.

Each step fills one figure of a `Ceilings` in place. Steps register per device type
(`@step("cuda", ...)`), in the order they run; a step that cannot run on this device (no fp8,
no Triton) raises `Skip` and leaves a note instead of a number. Sizes come from a `Plan` so
`quick=True` (tests, CI) runs the same code on small buffers in a few seconds.

Everything torch/Triton is imported inside the steps: importing this module is free.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from membound._profiling import no_cycle_warning
from membound.device import datasheet
from membound.device.ceilings import Ceilings
from membound.device.timing import (
    BurstClocks,
    Timed,
    cuda_burst_clocks,
    cuda_graph_replays_ms,
    timed,
)


class Skip(Exception):
    """This measurement does not apply to this device/software; the message says why."""


#: operand layouts of the matmul sweep, the three products of an nn.Linear: its input's
#: gradient g @ W (both row-major), its forward x @ W.T (B stored (n, k), used transposed)
#: and its weight's gradient g.T @ x (A stored (k, m), used transposed). cuBLAS picks other
#: kernels for each; on the H200 a weight gradient's (4096 x 16384 x 4096 bf16, A.T@B) ran at
#: 861 TFLOP/s in a step while the sweep's other two layouts of that shape reached 817
LAYOUTS = ("A@B", "A@B.T", "A.T@B")
#: orders the sweep runs its shapes in: as listed, or reversed (which shape is timed first
#: should not decide the ceiling; reversing it shows whether it does)
SWEEP_ORDERS = ("forward", "reverse")


@dataclass(frozen=True)
class Plan:
    """Sizes of one measurement run."""

    mem_bytes: int  # per buffer of the copy / read passes
    matmul_shapes: dict[str, tuple[tuple[int, int, int], ...]]  # compute key -> (m, n, k)s
    transfer_bytes: int
    fma_elements: int
    rep_ms: float
    matmul_warmup_ms: float = 25  # per shape and layout, untimed runs before timing it
    #: untimed runs of each sweep's first shape on top of `matmul_warmup_ms`, so the clocks
    #: have settled before the first timing (issue 16: the first shape timed ran fastest)
    sweep_warmup_ms: float = 0
    sweep_order: str = "forward"  # `SWEEP_ORDERS`: the shapes as listed, or the last first
    matmul_layouts: tuple[str, ...] = LAYOUTS  # timed per shape, in this order
    #: the sweep's fastest shape timed again on ReLU'd operands (`_sweep`): GPU plans only
    matmul_relu: bool = False
    l2_bytes: int = 0  # the L2 cache size; 0: unknown, the L2 step is skipped
    l2_reps: int = 100  # back-to-back copies per CUDA graph of the L2 step
    l2_samples: int = 15  # replays of each graph
    #: each matmul shape is also timed in this many short bursts on an idle GPU (0: not);
    #: a ceiling is the best of the sustained and the burst rates (`device.timing.
    #: cuda_burst_timed`: a step's matmuls run at the clocks of bursts, not of a long run)
    matmul_bursts: int = 0
    #: each HBM kernel is also timed in this many bursts (0: not); its rate is the best of
    #: the two timings, as for the matmuls
    memory_bursts: int = 0
    #: the bursts are also timed by their kernels' own durations, the clock a trace's ops
    #: are timed by (`device.timing.cuda_burst_clocks`); a rate is the best of every clock
    kernel_clock: bool = False
    #: buffer sizes, beside `mem_bytes`, whose HBM kernels are also timed in bursts by the
    #: kernel clock (with `kernel_clock` and `memory_bursts`): a model's memory-bound ops are
    #: a few times L2, and on the H200 they ran up to 2.4% above the 2 GiB passes
    memory_sizes: tuple[int, ...] = ()
    #: the host's sleep before each memory burst (HBM's rate does not wait on the clocks
    #: recovering, as a matmul's does: `cuda_burst_timed`)
    memory_idle_ms: float = 20.0
    #: with memory bursts, every timed call of an HBM kernel runs after a read of a buffer
    #: this large (0: not), so that L2 holds clean lines when it starts (`clean_l2`)
    clean_l2_bytes: int = 0


@dataclass(frozen=True)
class Step:
    device: str
    key: str
    label: str
    fn: Callable[[Ceilings, Plan], None]


STEPS: list[Step] = []


def step(device: str, key: str, label: str):
    """Register a measurement step; refuses duplicates (one source of truth per figure)."""

    def deco(fn):
        if any(s.device == device and s.key == key for s in STEPS):
            raise ValueError(f"measurement step {device}:{key} registered twice")
        STEPS.append(Step(device, key, label, fn))
        return fn

    return deco


#: the matmul sweep on a GPU: a matmul ceiling is the best sustained rate over these shapes
#: (m, n, k): square mid-size and large, a wide one with a short k, a tall-skinny one, and a
#: deep-k one (a weight gradient's: `h200_healthy`'s 4096 x 4096 x 16384 ran at 887 TFLOP/s
#: bf16 in a step, above every other shape's rate)
GPU_MATMUL_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 16384, 4096),
                     (65536, 1024, 4096), (4096, 4096, 16384))  # fmt: skip


def plan_for(device: str, quick: bool, sweep_order: str = "forward") -> Plan:
    """The sizes of a run on `device`; `sweep_order` (`SWEEP_ORDERS`) orders the matmul
    sweep's shapes."""
    if sweep_order not in SWEEP_ORDERS:
        raise ValueError(f"sweep order must be one of {SWEEP_ORDERS}, not {sweep_order!r}")
    return dataclasses.replace(_plan(device, quick), sweep_order=sweep_order)


def _plan(device: str, quick: bool) -> Plan:
    import torch

    if device == "cuda":
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        l2_known = int(getattr(props, "L2_cache_size", 0) or 0)
        l2 = l2_known or 50 << 20
        if quick:
            return Plan(
                max(8 * l2, 64 << 20),
                dict.fromkeys(("fp32", "tf32", "fp16", "bf16", "fp8"), ((2048, 2048, 2048),)),
                32 << 20,
                1 << 20,
                20,
                l2_bytes=l2_known,
                l2_reps=50,
                l2_samples=7,
            )
        # buffers far larger than L2 so the copy streams HBM, capped to fit small cards
        mem = min(max(32 * l2, 256 << 20), 2 << 30, props.total_memory // 8)
        # the largest shapes need 3 x 1 GiB in fp32: keep those that fit a quarter of memory
        fits = tuple(
            shape for shape in GPU_MATMUL_SHAPES
            if 4 * (shape[0] * shape[2] + shape[2] * shape[1] + shape[0] * shape[1])
            <= props.total_memory // 4
        ) or ((4096, 4096, 4096),)  # fmt: skip
        shapes = dict.fromkeys(("fp32", "tf32", "fp16", "bf16", "fp8"), fits)
        # per shape and layout 30 ms untimed (the GPU is busy from the shape before), and
        # 300 ms more before each sweep's first; 6 bursts each (3 layouts x 5 shapes x 4
        # dtypes + fp8's 5: 65 timings, the whole measurement ~50 s on the H200)
        return Plan(
            mem, shapes, 256 << 20, 1 << 24, 200,
            matmul_warmup_ms=30, sweep_warmup_ms=300, l2_bytes=l2_known, matmul_bursts=6,
            memory_bursts=10, kernel_clock=True,
            memory_sizes=tuple(s for s in (4 * l2, 8 * l2) if s < mem), memory_idle_ms=5.0,
            clean_l2_bytes=2 * l2, matmul_relu=True,
        )  # fmt: skip
    if quick:
        return Plan(16 << 20, {"fp32": ((256, 256, 256),), "bf16": ((256, 256, 256),)}, 0, 0, 30)
    mem = min(max(4 * _cpu_llc_bytes(), 256 << 20), 1 << 30)
    shapes = {
        "fp32": ((1024, 1024, 1024), (2048, 2048, 2048)),
        "bf16": ((512, 512, 512), (1024, 1024, 1024)),
    }
    return Plan(mem, shapes, 0, 0, 300)


def _cpu_llc_bytes() -> int:
    """Largest CPU cache in bytes (Linux sysfs), or 32 MiB when unknown."""
    from pathlib import Path

    best = 0
    for f in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = f.read_text().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            best = max(best, int(text.rstrip("KMG")) * mult)
        except (OSError, ValueError):
            continue
    return best or 32 << 20


def _record(c: Ceilings, figure: str, t, work: float) -> float:
    """The rate of `work` per second at `t`'s median; its spread is kept in `c.spread`."""
    rate, slow, fast = t.rates(work)
    c.spread[figure] = [slow, fast]
    return rate


# --------------------------------------------------------------------- memory bandwidth
#: the kernels each HBM pass times, with the bytes each moves per element of its buffers
#: (reads + writes); a pass's figure is the best of its kernels, and every rate is kept in
#: `Ceilings.memory_sweep`. One kernel alone is not the roof: on an H200 ReLU's forward
#: (clamp_min, 1 read : 1 write) ran 2% above `copy_`, GELU's backward (2 : 1) 3% above
#: `add` (issue 16: ops above their roof). Names are "<op> <dtype>". `to_bf16 fp32` is the
#: cast fp32 -> bf16 (4 bytes read, 2 written: the 2 : 1 mix), what inductor's
#: `triton_poi_fused__to_copy_*` kernels do; the recorded compiled GPT-2 traces ran those at
#: up to 100.85% of a day-later `add`-based roof (2026-12-05). It replaced
#: `threshold_backward fp32`, never the best of the four on the H200, so the pass takes as long.
HBM_KERNELS: dict[str, tuple[str, ...]] = {
    "memory_bandwidth": ("copy_ fp32", "copy_ bf16", "clamp_min fp32", "clamp_min bf16"),
    "read_mix_bandwidth": ("add fp32", "add bf16", "to_bf16 fp32", "threshold_backward bf16"),
    "read_bandwidth": ("sum fp32", "sum bf16"),
    "write_bandwidth": ("fill_ fp32", "fill_ bf16"),
}  # fmt: skip


def _hbm_kernel(name: str, n_bytes: int, device: str):
    """(fn, bytes it moves per call) of one `HBM_KERNELS` entry on buffers of `n_bytes`.

    Each call re-reads the same input. Reading what the call before wrote instead (two
    buffers in turn, as a model's chain of ops does: could L2 still hold the tail?) measured
    the same on the H200 on these buffers (clamp_min and threshold_backward within 0.3%,
    2026-12-03, benchmarks/results/h200_ceilings_2026-12-03b.json), and 1.4-2.5% slower on
    buffers of 4 x L2 (benchmarks/results/h200_ceilings_2026-12-03d.json), so only the
    re-read form is timed. Those timings were CUDA events after do_bench's L2 flush, a
    write that leaves L2 dirty; what the ops above their roof had that the passes lacked was
    an L2 of clean lines (`clean_l2`), not their producer's output in it."""
    import torch

    op, dt = name.split()
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dt]
    size = torch.empty((), dtype=dtype).element_size()
    n = n_bytes // size
    x = torch.rand(n, device=device, dtype=dtype)
    if op == "fill_":
        return (lambda: x.fill_(1.0)), n * size
    if op == "sum":
        return (lambda: x.sum()), n * size
    if op == "to_bf16":  # its own bf16 output: no buffer of x's dtype beside it
        cast = torch.empty(n, device=device, dtype=torch.bfloat16)
        return (lambda: cast.copy_(x)), n * size + n * cast.element_size()
    out = torch.empty_like(x)
    if op == "copy_":
        return (lambda: out.copy_(x)), 2 * n * size
    if op == "clamp_min":
        return (lambda: torch.clamp_min(x, 0.5, out=out)), 2 * n * size
    y = torch.rand_like(x)
    if op == "add":
        return (lambda: torch.add(x, y, out=out)), 3 * n * size
    if op == "threshold_backward":
        return (
            lambda: torch.ops.aten.threshold_backward.grad_input(y, x, 0.5, grad_input=out)
        ), 3 * n * size
    raise ValueError(f"unknown HBM kernel {name!r}")


def _hbm_pass(figure: str):
    """The pass of `figure`: every kernel of `HBM_KERNELS[figure]` timed back to back
    (`timed`) and, on a GPU plan with `memory_bursts`, in bursts after an idle GPU
    (`cuda_burst_timed`), its rate the better of the two. On the H200 the recorded models'
    memory-bound kernels ran up to 3% above the sustained passes (ReLU's forward and
    backward, inductor's casts: issue 16), as their matmuls had run above the sustained
    matmul rate; `memory_sweep[figure]` holds the better rate per kernel, and with bursts
    `"<figure> sustained"` and `"<figure> burst"` hold each timing's, `"<figure> kernel
    clock"` the bursts' by their kernels' durations.

    With `p.clean_l2_bytes`, every burst call starts on an L2 of clean lines (`clean_l2`),
    so that no other kernel's write-back shares its traffic. With `p.memory_sizes`, each
    kernel is also timed on buffers of those sizes, in bursts by
    the kernel clock alone (`"<figure> kernel clock <N> MiB"`), and its rate is the best of
    every size. The ops of the H200's traces, 230-400 MB a call, ran up to 2.4% above the
    2 GiB passes by the kernel clock, the clock they are timed by (2026-12-03, call 7:
    `benchmarks/results/over_roof_2026-12-03g.txt`); event pairs cost a short call a few
    µs more, which is why smaller buffers timed by events had seemed slower."""

    def run(c: Ceilings, p: Plan) -> None:
        before = clean_l2(p.clean_l2_bytes, c.device) if p.memory_bursts else None
        rates: dict[str, float] = {}
        sustained: dict[str, float] = {}
        bursts: dict[str, float] = {}
        kernel: dict[str, float] = {}
        by_size: dict[str, dict[str, float]] = {}
        spreads: dict[str, list[float]] = {}
        for name in HBM_KERNELS[figure]:
            fn, work = _hbm_kernel(name, p.mem_bytes, c.device)
            # (rate, slow, fast) of the best timing so far; a later one wins only if faster
            best = timed(fn, c.device, rep_ms=p.rep_ms).rates(work)
            sustained[name] = best[0]
            if p.memory_bursts and c.device == "cuda":
                clocks = _bursts(fn, p.memory_bursts, p, idle_ms=p.memory_idle_ms, before=before)
                seen = clocks.events.rates(work)
                bursts[name], best = seen[0], max(best, seen, key=_rate)
                if clocks.kernels is not None:
                    seen = clocks.kernels.rates(work)
                    kernel[name], best = seen[0], max(best, seen, key=_rate)
            del fn  # its buffers go before the next kernel's
            for n_bytes in p.memory_sizes if p.kernel_clock and p.memory_bursts else ():
                fn, work = _hbm_kernel(name, n_bytes, c.device)
                clocks = _bursts(fn, p.memory_bursts, p, idle_ms=p.memory_idle_ms, before=before)
                del fn
                if clocks.kernels is None:
                    continue
                seen = clocks.kernels.rates(work)
                by_size.setdefault(f"{figure} kernel clock {_size(n_bytes)}", {})[name] = seen[0]
                best = max(best, seen, key=_rate)
            rates[name], spreads[name] = best[0], [best[1], best[2]]
        best = max(rates, key=rates.__getitem__)
        c.memory_sweep[figure] = rates
        if bursts:
            c.memory_sweep[f"{figure} sustained"] = sustained
            c.memory_sweep[f"{figure} burst"] = bursts
        if kernel:
            c.memory_sweep[f"{figure} kernel clock"] = kernel
        c.memory_sweep.update(by_size)
        c.spread[figure] = spreads[best]
        setattr(c, figure, rates[best])

    return run


def _rate(timing: tuple[float, float, float]) -> float:
    """The rate of a (rate, slow, fast) triple (`Timed.rates`): what `max` compares."""
    return timing[0]


def clean_l2(n_bytes: int, device: str):
    """A call that leaves L2 holding clean lines: the sum of a buffer of `n_bytes` (twice
    L2), or None (`n_bytes` 0, or not a GPU).

    What L2 holds when a kernel starts moves its HBM rate. After a kernel that wrote, L2 is
    full of dirty lines, and the next kernel's traffic waits on their write-back: on the
    H200 ReLU's forward on 268 MB reached 4.46 TB/s (best of 40, 4.35 median) after such a
    read, and 4.25 (4.13) after its own previous call, as every pass had timed it; ReLU's
    backward 4.57 (4.48) against 4.40 (4.30) (`benchmarks/probe_chain_roof.py`,
    `benchmarks/results/chain_roof_2026-12-03j.jsonl`). The recorded models' ops ran at up to
    4.44 and 4.54: in a model many ops start after one that only read. The roof is the
    rate of a kernel whose traffic is its own."""
    if not n_bytes or device != "cuda":
        return None
    import torch

    buf = torch.zeros(n_bytes // 4, device=device)
    return lambda: buf.sum()


def _size(n_bytes: int) -> str:
    """'240 MiB', '256 KiB': a buffer size as a key's label."""
    return f"{n_bytes >> 20} MiB" if n_bytes >= 1 << 20 else f"{n_bytes >> 10} KiB"


def _bursts(fn, n: int, p: Plan, **kw) -> BurstClocks:
    """`fn` timed in `n` bursts, by events and, when `p.kernel_clock`, by its kernels."""
    return cuda_burst_clocks(fn, bursts=n, kernel_clock=p.kernel_clock, **kw)


def _l2(c: Ceilings, p: Plan) -> None:
    """The copy rate inside L2: copies of two sizes whose source and destination both fit in
    a quarter (an eighth) of L2, each `p.l2_reps` times back to back in a CUDA graph (no host
    between launches, no flush: the data stays in L2). A copy alone is too short to time (a
    few µs, its launch and ramp-up as long as its transfer); the difference of the two
    sizes' times is the time of the bytes between them, moved at L2's rate, with each
    kernel's fixed cost gone. Read + write counted, as for the HBM copy."""
    import torch

    if not p.l2_bytes:
        raise Skip("this device reports no L2 size (torch L2_cache_size)")
    big = p.l2_bytes // 8 // 4  # fp32 elements of a source: source + destination = L2 / 4
    small = big // 2
    pairs = []
    for n in (big, small):
        src = torch.rand(n, device=c.device)
        pairs.append((src, torch.empty_like(src)))
    (sb, db), (ss, ds) = pairs
    times_big, times_small = cuda_graph_replays_ms(
        [lambda: db.copy_(sb), lambda: ds.copy_(ss)], reps=p.l2_reps, samples=p.l2_samples
    )
    deltas = [b - s for b, s in zip(times_big, times_small, strict=True)]
    positive = [d for d in deltas if d > 0]
    if len(positive) * 2 <= len(deltas):
        raise Skip(
            "the larger L2-resident copy did not take longer than the smaller one "
            f"({len(positive)} of {len(deltas)} replays): no rate to take from them"
        )
    c.l2_bandwidth = _record(c, "l2_bandwidth", Timed.of(positive), 2 * (big - small) * 4)
    c.l2_bytes = int(p.l2_bytes)


for _dev in ("cuda", "cpu"):
    step(_dev, "copy", "memory bandwidth: 1 read : 1 write")(_hbm_pass("memory_bandwidth"))
    step(_dev, "read", "memory bandwidth: read")(_hbm_pass("read_bandwidth"))
    step(_dev, "read_mix", "memory bandwidth: 2 reads : 1 write")(_hbm_pass("read_mix_bandwidth"))
    step(_dev, "write", "memory bandwidth: write")(_hbm_pass("write_bandwidth"))
step("cuda", "l2", "L2 bandwidth: copy inside L2")(_l2)


# --------------------------------------------------------------------------- matmul
def _matmul(key: str):
    def run(c: Ceilings, p: Plan) -> None:
        import torch

        dtype = {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "fp16": torch.float16,
            "bf16": torch.bfloat16,
        }[key]

        def timed_shape(
            m: int, n: int, k: int, layout: str, warmup_ms: float, operands: str = "randn"
        ):
            # random data, not zeros: power-limited GPUs run zeros measurably faster
            if layout == "A.T@B":  # a weight gradient's: A stored (k, m), used transposed
                a = torch.randn(k, m, device=c.device).to(dtype).t()
            else:
                a = torch.randn(m, k, device=c.device).to(dtype)
            if layout in ("A@B", "A.T@B"):
                b = torch.randn(k, n, device=c.device).to(dtype)
            else:  # nn.Linear's: the weight stored (n, k), used transposed
                b = torch.randn(n, k, device=c.device).to(dtype).t()
            if operands == "relu":  # what a ReLU network feeds its matmuls: half zeros
                a, b = a.clamp_min(0), b.clamp_min(0)
            with _tf32(key == "tf32"):
                t = timed(lambda: torch.mm(a, b), c.device, rep_ms=p.rep_ms, warmup_ms=warmup_ms)
                if not (p.matmul_bursts and c.device == "cuda"):
                    return t, None
                return t, _bursts(lambda: torch.mm(a, b), p.matmul_bursts, p)

        _sweep(c, key, p.matmul_shapes[key], timed_shape, p, p.matmul_layouts, relu=True)

    return run


def _sweep(
    c: Ceilings, key: str, shapes, timed_shape, p: Plan, layouts=("A@B",), relu: bool = False
) -> None:
    """Time each (m, n, k) of `shapes` in each of `layouts`, in `p.sweep_order`, with
    `timed_shape(m, n, k, layout, warmup_ms)`; the first timing gets `p.sweep_warmup_ms` of
    untimed runs more than the others. `timed_shape` returns a `Timed` of the sustained runs,
    or (that, the bursts' `BurstClocks` or None). The ceiling of `key`
    is the best rate, sustained or in bursts by either clock, its spread that timing's, and
    every rate is kept in `c.matmul_sweep[key]` with its layout and its place in the order
    (`burst_flops` where bursts were timed, `kernel_flops` where their kernels were). Each
    timing's buffers are freed before the next one.

    With `relu` (and `p.matmul_relu`), the fastest shape and layout is timed once more on
    ReLU'd operands (`timed_shape(..., operands="relu")`: half of each operand zeros) and
    kept as a row with `"operands": "relu"`: a GPU capped by power runs operands that toggle
    fewer bits faster. On the H200 (`benchmarks/probe_matmul_data.py`, 2026-12-04) bf16
    4096 x 4096 x 16384 A.T@B ran at 817-824 TFLOP/s on normal operands and 892-901 on ReLU'd
    ones (933 on zeros); `h200_healthy`'s weight gradient, whose operands are a ReLU'd
    activation and a gradient ReLU's backward masked, ran at 861 against the random-data
    sweep's 818: above a roof that was not one."""
    if p.sweep_order not in SWEEP_ORDERS:
        raise ValueError(f"sweep order must be one of {SWEEP_ORDERS}, not {p.sweep_order!r}")
    ordered = list(shapes) if p.sweep_order == "forward" else list(shapes)[::-1]
    best: list = [None]  # (rate, the timing that gave it, FLOPs of one call)
    rows: list[dict] = []

    def add(m: int, n: int, k: int, layout: str, timing, **extra) -> None:
        """One timing's row (sustained, burst and kernel-clock rates), the best kept."""
        t, burst = timing if isinstance(timing, tuple) else (timing, None)
        flop = 2 * m * n * k
        row = {"m": m, "n": n, "k": k, "flops": flop / (t.median_ms / 1e3), "layout": layout,
               "order": len(rows), **extra}  # fmt: skip
        found = [(row["flops"], t)]
        if burst is not None:
            row["burst_flops"] = flop / (burst.events.median_ms / 1e3)
            found.append((row["burst_flops"], burst.events))
            if burst.kernels is not None:
                row["kernel_flops"] = flop / (burst.kernels.median_ms / 1e3)
                found.append((row["kernel_flops"], burst.kernels))
        for rate, timed_by in found:  # ties keep the earlier timing
            if best[0] is None or rate > best[0][0]:
                best[0] = (rate, timed_by, flop)
        rows.append(row)
        if c.device == "cuda":
            import torch

            torch.cuda.empty_cache()

    for i, ((m, n, k), layout) in enumerate((s, lay) for s in ordered for lay in layouts):
        warmup = p.matmul_warmup_ms + (p.sweep_warmup_ms if i == 0 else 0.0)
        add(m, n, k, layout, timed_shape(m, n, k, layout, warmup))
    if relu and p.matmul_relu and rows:

        def fastest(r: dict) -> float:
            return max(r["flops"], r.get("burst_flops", 0.0), r.get("kernel_flops", 0.0))

        top = max(rows, key=fastest)
        m, n, k, layout = top["m"], top["n"], top["k"], top["layout"]
        timing = timed_shape(m, n, k, layout, p.matmul_warmup_ms, operands="relu")
        add(m, n, k, layout, timing, operands="relu")
    c.matmul_sweep[key] = rows
    c.flops[key] = _record(c, f"flops.{key}", best[0][1], best[0][2])


@contextlib.contextmanager
def _tf32(on: bool):
    """TF32 for fp32 matmuls on/off, restored after: the new `fp32_precision` switch where
    torch has it (mixing it with the legacy flag is an error there), else `allow_tf32`."""
    import torch

    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        attr, value = "fp32_precision", "tf32" if on else "ieee"
    else:
        attr, value = "allow_tf32", on
    saved = getattr(matmul, attr)
    setattr(matmul, attr, value)
    try:
        yield
    finally:
        setattr(matmul, attr, saved)


def _fp8(c: Ceilings, p: Plan) -> None:
    import torch

    cap = torch.cuda.get_device_capability()
    if cap < (8, 9) or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        raise Skip(
            f"fp8 matmul needs compute capability >= 8.9 and torch._scaled_mm (have {cap[0]}.{cap[1]})"
        )
    one = torch.ones((), device="cuda")

    def timed_shape(m: int, n: int, k: int, layout: str, warmup_ms: float):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn).t()  # column-major (cuBLASLt)

        def mm():
            return torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)

        try:
            mm()
        except Exception as exc:  # kernels missing from this build
            raise Skip(f"torch._scaled_mm failed here: {exc}".splitlines()[0]) from None
        t = timed(mm, "cuda", rep_ms=p.rep_ms, warmup_ms=warmup_ms)
        return t, _bursts(mm, p.matmul_bursts, p) if p.matmul_bursts else None

    # cuBLASLt's fp8 matmul takes B column-major only: nn.Linear's layout, A @ W.T
    _sweep(c, "fp8", p.matmul_shapes["fp8"], timed_shape, p, ("A@B.T",))


def _fp32_vector(c: Ceilings, p: Plan) -> None:
    import torch

    try:
        from membound.device.fma import fma_chains
    except Exception as exc:
        raise Skip(f"the fp32 vector rate needs Triton ({exc.__class__.__name__})") from None
    x = torch.rand(p.fma_elements, device="cuda")
    _, flops = fma_chains(x)  # compile outside the timed region
    t = timed(lambda: fma_chains(x), "cuda", rep_ms=p.rep_ms)
    c.flops["fp32_vector"] = _record(c, "flops.fp32_vector", t, flops)


for _key in ("fp32", "tf32", "fp16", "bf16"):
    step("cuda", _key, f"matmul {_key}" + (" (TF32 off)" if _key == "fp32" else ""))(_matmul(_key))
step("cuda", "fp8", "matmul fp8 (torch._scaled_mm)")(_fp8)
step("cuda", "fp32_vector", "fp32 vector FMA (Triton)")(_fp32_vector)
step("cpu", "fp32", "matmul fp32")(_matmul("fp32"))
step("cpu", "bf16", "matmul bf16")(_matmul("bf16"))


# ------------------------------------------------------------------------ host<->device
_BUFFERS: dict[int, object] = {}  # one set of host buffers shared by the eight copy steps


def _transfer(direction: str, memory: str, non_blocking: bool):
    def run(c: Ceilings, p: Plan) -> None:
        from membound.device.transfer import HostBuffers, measure_transfer

        if p.transfer_bytes not in _BUFFERS:
            _BUFFERS.clear()
            _BUFFERS[p.transfer_bytes] = HostBuffers(p.transfer_bytes)
        c.transfers.append(
            measure_transfer(_BUFFERS[p.transfer_bytes], direction, memory, non_blocking)
        )

    return run


def _register_transfers() -> None:
    from membound.device.transfer import CONFIGS

    for direction, memory, nb in CONFIGS:
        label = f"{direction.upper()} {memory}, non_blocking={nb}"
        step("cuda", f"{direction}-{memory}-{'nb' if nb else 'sync'}", label)(
            _transfer(direction, memory, nb)
        )


_register_transfers()


# ----------------------------------------------------------- GPU<->GPU (interconnect)
def _register_interconnect() -> None:
    from membound.device import interconnect

    interconnect.register(step, Skip)  # both steps Skip on machines with fewer than 2 GPUs


_register_interconnect()


# ---------------------------------------------------------------------------- driver
def measure(
    device: str,
    name: str,
    key: dict,
    *,
    quick: bool = False,
    progress: bool = True,
    sweep_order: str = "forward",
) -> Ceilings:
    """Run every step registered for `device` ("cuda" | "cpu"); returns measured Ceilings.
    `sweep_order` ("forward" | "reverse") orders the matmul sweep's shapes."""
    t0 = time.perf_counter()
    plan = plan_for(device, quick, sweep_order)
    c = Ceilings(device=device, name=name, memory_bandwidth=float("nan"), key=dict(key))
    c.datasheet = datasheet.figures(name) if device == "cuda" else None
    steps = [s for s in STEPS if s.device == device]
    # every step: a profiler torch warns about once must not print into the table's output
    with _progress(progress) as bar, no_cycle_warning():
        tasks = [bar.add_task(s.label, total=1) if bar else None for s in steps]
        for s, task in zip(steps, tasks, strict=True):
            t1 = time.perf_counter()
            try:
                s.fn(c, plan)
            except Skip as exc:
                c.notes.append(f"{s.key}: {exc}")
            c.step_seconds[s.key] = round(time.perf_counter() - t1, 3)
            if bar:
                bar.update(task, completed=1)
    _BUFFERS.clear()  # give the pinned buffer back
    c.seconds = time.perf_counter() - t0
    c.measured_at = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    return c


class _NoBar:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def _progress(enabled: bool):
    if not enabled:
        return _NoBar()
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
