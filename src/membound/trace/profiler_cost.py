"""After `membound diagnose`'s script ends: measure what the timeline pass's profiler adds to
the host per CUDA call on this machine, and keep it in the capture meta.

The replays (`analysis.replay`) take the profiler's cost off every recorded call, calibrated
so that the replayed step equals the unprofiled one. Where the GPU sets the pace the step
does not show that cost (it hides behind the GPU), the calibration reads 0, and a replay
with shorter kernels then keeps the profiler's cost in the host's floor. Out of sample on
the H200, BERT-base fp32 (busy 86%): the GPU what-if predicted 9.3 ms/step for bf16 where
it measured 13.5, and 3.5-5 µs per call taken off would have predicted 12.2-13.3. This
measures the cost instead of assuming it (on the H200, 2026-12-04: 0.8-1.1 µs per call, so
that was not the miss's cause): in a process of its own (after the script, so it never
takes time from the steps membound timed), `ROUNDS` rounds of `CALLS` launches of a
one-element in-place add, host-paced, timed with and without a GPU-only profiler (the
timeline pass's activities). The same process then times the host work bf16 autocast adds
(`autocast_cost`, in plain launches per kernel), which the GPU what-if charges a bf16 step
(`analysis.gpu_whatif.autocast_host_ms`). A failure is a note in the meta, never a failed
diagnose.

    python -m membound.trace.profiler_cost [launches]   # prints one JSON line

(`launches`: as a capture with `--api-records launches` records.)
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from membound.trace import capture_meta, meta_probe

#: the meta key the measurement (or why there is none) is kept under
META_KEY = "profiler_host_cost"
#: how a note on a missing measurement begins
LABEL = "profiler cost not measured"
#: seconds the probe may take (CUDA start-up dominates)
TIMEOUT_S = 60.0
#: launches per timed run, and runs of each kind (interleaved)
CALLS, ROUNDS = 2000, 5


def measure(calls: int = CALLS, rounds: int = ROUNDS, api_records: str = "all") -> dict[str, Any]:
    """{"us_per_call", "plain_us", "profiled_us", "calls", "rounds", "api_records"}: the
    median host time per launch without and with a CUDA-only profiler, and their difference
    (>= 0); with `api_records="launches"` the profiler records the API calls the timeline
    pass records in that mode (`trace.cupti_api`), so the cost is the capture's."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device")
    x = torch.zeros(1, device="cuda")

    def run() -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            x.add_(1.0)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / calls * 1e6

    run()  # warm-up: first launches, allocator
    plain, profiled = [], []
    for _ in range(rounds):
        plain.append(run())
        with profile(activities=[ProfilerActivity.CUDA]):
            if api_records == "launches":
                from membound.trace.cupti_api import keep_launches

                keep_launches()
            profiled.append(run())
    p, q = statistics.median(plain), statistics.median(profiled)
    result = {
        "us_per_call": round(max(q - p, 0.0), 3),
        "plain_us": round(p, 3),
        "profiled_us": round(q, 3),
        "calls": calls,
        "rounds": rounds,
        "api_records": api_records,
    }
    try:  # a failure here loses only this part
        result.update(autocast_cost(p))
    except Exception as e:  # noqa: BLE001 - any failure is a note
        result["autocast_error"] = f"{type(e).__name__}: {e}"[:300]
    return result


#: the transformer-like block whose host time the autocast measurement compares: `LAYERS`
#: layers of LayerNorm -> Linear -> GELU -> Linear + residual on a (`BATCH`, `DIM`) input,
#: small enough that the host paces it; `STEPS` forward-backward steps a timed run
LAYERS, DIM, BATCH, STEPS = 6, 128, 32, 40


def autocast_cost(plain_us: float, rounds: int = ROUNDS, steps: int = STEPS) -> dict[str, Any]:
    """{"autocast_plain_ms", "autocast_ms", "autocast_kernels", "autocast_launches_per_kernel"}:
    a small block's forward (and loss) with and without bf16 autocast, backward after it as a
    training loop runs it, host-paced: the median host time of a step each way, the kernels a
    plain step launches (counted by a CUDA-only profiler), and the host time autocast adds
    over that count of plain launches (`plain_us`): what `analysis.gpu_whatif.autocast_host_ms`
    charges a step per kernel, measured on this machine instead of assumed. On H100 hosts the
    paired TF32 and bf16 runs of one T5 (`h100_real_t5_seq2seq_truth3`, `_truth4`) read about 0.9
    and at least 0.4 launches a kernel, where the plain launch's cost differed 1.7x: autocast's
    host work is not a fixed multiple of a launch."""
    import torch
    import torch.nn.functional as F
    from torch.profiler import ProfilerActivity, profile

    from membound._profiling import no_cycle_warning

    g = torch.Generator(device="cpu").manual_seed(0)

    def param(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape, generator=g) * 0.05).cuda().requires_grad_()

    layers = [
        (param(DIM), param(DIM), param(4 * DIM, DIM), param(4 * DIM), param(DIM, 4 * DIM),
         param(DIM))
        for _ in range(LAYERS)
    ]  # fmt: skip
    params = [t for layer in layers for t in layer]
    x = torch.randn(BATCH, DIM, generator=g).cuda()

    def step(autocast: bool) -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            h = x
            for ln_w, ln_b, w1, b1, w2, b2 in layers:
                y = F.linear(F.gelu(F.linear(F.layer_norm(h, (DIM,), ln_w, ln_b), w1, b1)), w2, b2)
                h = h + y
            loss = h.float().square().mean()
        loss.backward()
        for t in params:
            t.grad = None

    def run(autocast: bool) -> float:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps):
            step(autocast)
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / steps * 1e3

    run(False), run(True)  # warm-up: allocator, autocast's first casts
    with no_cycle_warning():  # torch's note that a profiler cycle clears its events
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step(False)
            torch.cuda.synchronize()
        kernels = sum(1 for e in prof.events() if _on_device(e))
    plain, cast = [], []
    for _ in range(rounds):
        plain.append(run(False))
        cast.append(run(True))
    a, b = statistics.median(plain), statistics.median(cast)
    return {
        "autocast_plain_ms": round(a, 4),
        "autocast_ms": round(b, 4),
        "autocast_kernels": kernels,
        "autocast_launches_per_kernel": launches_per_kernel(a, b, kernels, plain_us),
    }


def _on_device(event: Any) -> bool:
    """Whether a profiler event ran on the GPU (a kernel, memset or copy)."""
    kind = getattr(event, "device_type", None)
    return getattr(kind, "name", str(kind)).upper().endswith("CUDA")


def launches_per_kernel(
    plain_ms: float, autocast_ms: float, kernels: int, plain_us: float
) -> float | None:
    """The host time autocast adds a step (`autocast_ms` - `plain_ms`, not below 0) in plain
    launches' time (`plain_us`) per kernel the plain step launches; None where either count
    is not positive."""
    if kernels <= 0 or plain_us <= 0:
        return None
    return round(max(autocast_ms - plain_ms, 0.0) * 1e3 / (kernels * plain_us), 4)


def probe(meta_path: str | Path, timeout: float = TIMEOUT_S, run=subprocess.run) -> str:
    """Measure in a process of its own and keep the result in the capture meta at
    `meta_path` under `META_KEY`; returns one sentence saying what happened."""
    path = Path(meta_path)
    meta, unread = meta_probe.read_meta(path, LABEL)
    if meta is None:
        return unread
    cmd = [sys.executable, "-m", "membound.trace.profiler_cost"]
    if capture_meta.recorded_launches_only(meta):  # measured as the capture recorded
        cmd.append("launches")
    result, why = meta_probe.run_json(cmd, timeout, run)
    if why is not None:
        return meta_probe.keep_failure(path, meta, META_KEY, LABEL, why)
    try:
        cost = float(result["us_per_call"])
    except (KeyError, TypeError, ValueError):
        return meta_probe.keep_failure(path, meta, META_KEY, LABEL, "the probe printed no JSON")
    meta_probe.keep(path, meta, META_KEY, result)
    factor = autocast_factor({META_KEY: result})
    autocast = (
        f"; bf16 autocast added {factor:.2f} launches' host time a kernel"
        if factor is not None
        else ""
    )
    return (
        f"measured the timeline profiler's host cost here: {cost:.1f} us per CUDA call "
        f"({result['plain_us']:.1f} us a launch without it, {result['profiled_us']:.1f} with)"
        f"{autocast}."
    )


def of(meta: Any) -> float | None:
    """The measured µs per call in a capture meta, or None."""
    return _measured(meta, "us_per_call", lambda v: v >= 0)


def launch_us(meta: Any) -> float | None:
    """The host time of one plain launch measured beside the profiler's cost (µs, the meta's
    `plain_us`: a Python-level op, dispatch and launch), or None."""
    return _measured(meta, "plain_us", lambda v: v > 0)


def autocast_factor(meta: Any) -> float | None:
    """The host work bf16 autocast added per kernel, in plain launches, measured on the
    machine (the meta's `autocast_launches_per_kernel`, `autocast_cost`), or None."""
    return _measured(meta, "autocast_launches_per_kernel", lambda v: v >= 0)


def _measured(meta: Any, key: str, valid) -> float | None:
    """The figure `key` of a capture meta's measurement, where it is a number `valid` accepts."""
    got = meta.get(META_KEY) if isinstance(meta, dict) else None
    try:
        value = float(got[key]) if isinstance(got, dict) else None
    except (KeyError, TypeError, ValueError):
        return None
    return value if value is not None and valid(value) else None


if __name__ == "__main__":
    from membound.defaults import API_RECORDS

    mode = (sys.argv[1:] or ["all"])[0]
    if mode not in API_RECORDS:
        sys.exit(f"profiler_cost: give one of {', '.join(API_RECORDS)}, not {mode!r}")
    print(json.dumps(measure(api_records=mode)), flush=True)
