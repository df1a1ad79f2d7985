"""Which part of the GPU-only timeline pass costs the step time (issue 15's ≤ 10% target)?

The timeline pass (`torch.profiler` with `ProfilerActivity.CUDA` only) records kernels,
memcpys and memsets, and also every CUDA runtime and driver API call (`cudaLaunchKernel`,
`cuLaunchKernel`, ...). On 2026-12-02's hosts it added 17-25% to the step of launch-dense
loops (eager and compiled GPT-2, the HF Llama), and no `torch.profiler` option leaves the
API records out. This probe measures, by intervention, what each record kind costs: after
the profiler started, it turns CUPTI activity kinds off again through libcupti's own
`cuptiActivityDisable` (the library kineto already loaded), then times the same steps.

Variants (`--variants`, comma-separated, each a set of kinds turned off):

- `plain`: no profiler;
- `cuda`: the timeline pass as membound runs it (a bare CUDA-only `torch.profiler`);
- `nodriver`: `cuda` without driver API records (`CUPTI_ACTIVITY_KIND_DRIVER`);
- `noapi`: without driver and runtime API records (kernels, memcpys, memsets only);
- `nokernel`: `noapi` without kernel records too (memcpys and memsets: the floor);
- `launches`: `cuda` with only the API functions the timeline reads recorded (membound's
  `trace.cupti_api.keep_launches`: per-function switches, launches/memcpys/memsets/syncs kept);
- `launches_nodriver`: `launches` with the driver kind off as well (2026-12-08: on the HF
  Llama the timeline pass cost the launching threads 11.6 ms a step, about 9 µs a kernel,
  where the profiler-cost probe's one-kernel loop reads 1.6 µs a launch: the functions the
  filter drops may still be intercepted while their kind is on). It measures where the cost
  lands, not a capture to ship: every kernel launched through the driver alone then has no
  launch record, and eager loops have many (cuBLASLt's `cuLaunchKernelEx`, cuDNN's RNN and
  runtime-compiled kernels: 1,015 of the Llama's 6,210, 880 of the LSTM LM's 1,870);
- `membound`: membound's own capture (`trace.capture.Capture`, its hooks and marks);
- `membound_launches`: the same with `api_records="launches"` (`diagnose --api-records`);
- `queued`: `cuda` with CUPTI's latency timestamps on (`cuptiActivityEnableLatencyTimestamps`):
  each kernel record then carries when the host queued it (kineto exports it as the kernel's
  `queued`), the launch time the runtime records give the timeline today;
- `noapi_queued`: `noapi` with the latency timestamps: the candidate timeline pass that
  records no API call and takes each kernel's launch time from its `queued` instead;
- `syncs_queued`: `launches` without the launch calls (syncs, memcpys, memsets kept, which
  the idle causes need) and with the latency timestamps: the candidate that keeps what a
  kernel record cannot say.

The first window of each variant with latency timestamps says how many kernels carried a
queued time, how far it lies from their start and (`queued`, which keeps the launch calls)
from the end of the call that launched them: whether the two clocks agree.

It runs one of `examples/real/`'s scripts as the user runs it, replacing the scripts' plain
step timer (`_common.StepTimer`) by one that times `rounds x variants` windows of `--window`
steps back to back in the same process, variants interleaved (`plain` first in each round),
each window synchronized at its two ends only. The profiler starts two steps before its
window and stops after it (neither timed). The first window of each profiled variant also
counts what its trace holds (kernels, runtime and driver calls), to show the kinds really
went off. Each window also reads the CPU time the training thread and PyTorch's autograd
threads (`pt_autograd_<n>`, where backward's host work runs on CUDA: `trace.step_clock`) spent
in it, per step, so that a variant's cost is placed on the thread that paid it (on an H100
HF T5, 2026-12-05, most of the timeline pass's cost was on the autograd thread: about 20 µs
per backward launch, against 3 µs per launch on a single-threaded loop). One JSON line per
window, then one summary line per variant:

    PYTHONPATH=src python benchmarks/probe_cupti_kinds.py --script gpt2 [--window 8]
        [--rounds 3] [--variants plain,cuda,noapi] [--kineto-config TEXT] [-- script arguments]

`--kineto-config` gives every profiled variant of the run kineto options (lines of
`KEY=VALUE`, `;` between them), through the file `KINETO_CONFIG` names, which kineto reads at
each trace's start (`ActivityProfilerProxy::prepareTrace`). The option that matters here:
`CUPTI_PER_THREAD_BUFFER_ENABLED=true`, CUPTI's per-thread activity buffers (CUDA 12.3 on),
which kineto leaves off by default: where the training thread and the autograd thread both
launch, they otherwise fill one shared buffer. Once set, CUPTI keeps the attribute for the
process, so a run with it and a run without are two processes, each against its own plain
windows. The summary says whether this torch's kineto knows each key (a key it does not know
is ignored).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
KINDS = {"driver": 4, "runtime": 5, "concurrent_kernel": 10}  # CUpti_ActivityKind
VARIANTS = {
    "plain": None,
    "cuda": (),
    "nodriver": ("driver",),
    "noapi": ("driver", "runtime"),
    "nokernel": ("driver", "runtime", "concurrent_kernel"),
    "launches": "launches",
    "launches_nodriver": ("+launches", "driver"),
    "membound": "membound",
    "membound_launches": "membound",
    "queued": ("+latency",),
    "noapi_queued": ("driver", "runtime", "+latency"),
    "syncs_queued": ("+syncs", "+latency"),
}


def libcupti() -> ctypes.CDLL | None:
    """The libcupti this process already loaded (kineto's), or None."""
    from membound.trace.cupti_api import find_libcupti

    path = find_libcupti()
    return ctypes.CDLL(path) if path is not None else None


def launch_call(name: str) -> bool:
    """A kernel launch call, by its CUPTI or kineto name (not a graph launch: a replay's
    kernels have no launch call of their own)."""
    return "Launch" in name and "GraphLaunch" not in name


def keep_trace(path: str, script: str, variant: str) -> str | None:
    """With `--keep-traces DIR`, a gzip copy of the window's exported trace as
    DIR/<script>_<variant>.json.gz (traces with queued times: the material to build a
    timeline without API records on); the copy's path, or None."""
    folder = PLAN.get("keep_traces")
    if not folder:
        return None
    import gzip
    import shutil

    os.makedirs(folder, exist_ok=True)
    out = os.path.join(folder, f"{script}_{variant}.json.gz")
    with open(path, "rb") as src, gzip.open(out, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def latency_timestamps(lib, on: bool) -> None:
    """CUPTI's kernel latency timestamps (queued, submitted) on or off; a CUPTI without the
    function, or one that refuses, ends the probe with the reason."""
    if lib is None:
        raise SystemExit("probe_cupti_kinds: libcupti is not loaded in this process")
    fn = getattr(lib, "cuptiActivityEnableLatencyTimestamps", None)
    if fn is None:
        raise SystemExit(
            "probe_cupti_kinds: this CUPTI has no cuptiActivityEnableLatencyTimestamps"
        )
    rc = fn(ctypes.c_uint8(1 if on else 0))
    if rc != 0:
        raise SystemExit(f"probe_cupti_kinds: cuptiActivityEnableLatencyTimestamps({on}) -> {rc}")


def queued_stats(events: list[dict]) -> dict:
    """Of an exported trace's kernels: how many carry a queued time (kineto's `queued`
    argument, in the trace's µs; 0 where CUPTI had none), and where a launch call with the
    kernel's correlation id was recorded, the median of (call end - queued) and of
    (kernel start - queued), in µs."""
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    ends = {
        (e.get("args") or {}).get("correlation"): e["ts"] + e.get("dur", 0)
        for e in events
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and launch_call(e.get("name", ""))
    }
    queued = [(k, (k.get("args") or {}).get("queued") or 0) for k in kernels]
    known = [(k, q) for k, q in queued if q > 0]
    to_call = [
        ends[c] - q for k, q in known if (c := (k.get("args") or {}).get("correlation")) in ends
    ]
    return {
        "kernels": len(kernels),
        "with_queued": len(known),
        "call_end_minus_queued_us": round(statistics.median(to_call), 3) if to_call else None,
        "start_minus_queued_us": round(statistics.median(k["ts"] - q for k, q in known), 3)
        if known
        else None,
    }


class ProbeTimer:
    """Drop-in for `_common.StepTimer`: `rounds x variants` timed windows in one run."""

    GAP = 2  # steps between windows: the profiler starts here, untimed

    def __init__(self, script, args, *, flags=None):
        import torch

        self.torch = torch
        self.script = script
        self.device = args.device
        self.extra: dict = {}
        self.warmup = int(args.warmup_steps)
        self.plan = [v for _ in range(PLAN["rounds"]) for v in PLAN["variants"]]
        self.window = PLAN["window"]
        self.seen = 0
        self.rows: list[dict] = []
        self.counted: set[str] = set()
        self._i = -1  # the window in progress (-1: warm-up)
        self._phase, self._left, self._t0 = "warmup", 0, 0.0
        self._cpu0 = (0.0, 0.0)  # the threads' CPU seconds when the window began
        self._prof = None
        self._cap = None
        if self.warmup == 0:
            self._i = 0
            self._enter_gap()

    @property
    def total_steps(self) -> int:
        return self.warmup + len(self.plan) * (self.GAP + self.window)

    @property
    def done(self) -> bool:
        return 0 <= len(self.plan) <= self._i

    def _begin_profiler(self, variant: str) -> None:
        from torch.profiler import ProfilerActivity, profile

        kinds = VARIANTS[variant]
        if kinds is None:
            return
        if kinds == "membound":
            from membound.trace.capture import Capture

            steps = self.GAP + self.window + 4  # more than run: written on leaving
            out = tempfile.mkdtemp(prefix="probe-")
            api = "launches" if variant == "membound_launches" else "all"
            self._cap = Capture(
                steps=steps, wait=0, warmup=0, ops_steps=1, out=out, api_records=api
            )
            self._cap.__enter__()
            if api != "all" and not (self._cap.api_filter or {}).get("applied"):
                print(f"probe_cupti_kinds: not applied: {self._cap.api_filter}", flush=True)
            return
        self._prof = profile(activities=[ProfilerActivity.CUDA])
        self._prof.start()
        if kinds == "launches":
            from membound.trace.cupti_api import keep_launches

            got = keep_launches()
            if not got.get("applied"):  # the variant then times the plain timeline pass
                print(f"probe_cupti_kinds: keep_launches did nothing: {got}", flush=True)
            elif variant not in self.counted:
                print("probe_cupti_kinds: " + json.dumps(
                    {k: v for k, v in got.items() if not k.endswith("_kept")}), flush=True)  # fmt: skip
            return
        if kinds:
            lib = libcupti()
            if lib is None:
                raise SystemExit("probe_cupti_kinds: libcupti is not loaded in this process")
            for k in kinds:
                if k == "+latency":
                    latency_timestamps(lib, True)
                    continue
                if k in ("+launches", "+syncs"):
                    # membound's per-function switches; "+syncs": the launch calls off too
                    from membound.trace.cupti_api import keep_launches
                    from membound.trace.kineto_names import api_kept

                    got = (
                        keep_launches()
                        if k == "+launches"
                        else keep_launches(keep=lambda n: api_kept(n) and not launch_call(n))
                    )
                    if not got.get("applied"):
                        raise SystemExit(f"probe_cupti_kinds: {k[1:]} filter failed: {got}")
                    continue
                rc = lib.cuptiActivityDisable(ctypes.c_int(KINDS[k]))
                if rc != 0:
                    raise SystemExit(f"probe_cupti_kinds: cuptiActivityDisable({k}) -> {rc}")

    def _end_profiler(self, variant: str, row: dict) -> None:
        if self._cap is not None:
            self._cap.__exit__(None, None, None)
            self._cap = None
            return
        if self._prof is None:
            return
        count = variant not in self.counted
        if count:
            self.counted.add(variant)
            path = os.path.join(tempfile.mkdtemp(prefix="probe-"), "t.json")
            self._prof.stop()
            self._prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
            cats = Counter(e.get("cat") for e in events)
            row["trace"] = {
                c: cats.get(c, 0)
                for c in ("kernel", "cuda_runtime", "cuda_driver", "gpu_memcpy", "gpu_memset")
            }
            if "+latency" in (VARIANTS[variant] or ()):
                row["queued"] = queued_stats(events)
                keep_trace(path, self.script, variant)
        else:
            self._prof.stop()
        if "+latency" in (VARIANTS[variant] or ()):  # off again: the next variant is as named
            latency_timestamps(libcupti(), False)
        self._prof = None

    def _cpu(self) -> tuple[float, float]:
        """CPU seconds so far of the training thread and of the autograd threads (found
        again at each call: they start at the first backward)."""
        from membound.trace.step_clock import autograd_threads

        helpers = 0.0
        for clock in autograd_threads().values():
            try:
                helpers += time.clock_gettime(clock)
            except OSError:  # the thread ended
                continue
        return time.thread_time(), helpers

    def _sync(self) -> None:
        if str(self.device).startswith("cuda"):
            self.torch.cuda.synchronize()

    def _enter_gap(self) -> None:
        self._phase, self._left = "gap", self.GAP
        self._begin_profiler(self.plan[self._i])

    def step(self) -> None:
        self.seen += 1
        if self.done or self._phase == "warmup" and self.seen < self.warmup:
            return
        if self._phase == "warmup":
            self._i = 0
            self._enter_gap()
            return
        self._left -= 1
        if self._left:
            return
        self._sync()
        if self._phase == "gap":
            self._phase, self._left, self._t0 = "timed", self.window, time.perf_counter()
            self._cpu0 = self._cpu()
            return
        ms = (time.perf_counter() - self._t0) / self.window * 1e3
        thread, helpers = (
            (b - a) / self.window * 1e3 for a, b in zip(self._cpu0, self._cpu(), strict=True)
        )
        variant = self.plan[self._i]
        row = {
            "script": self.script,
            "window": self._i,
            "variant": variant,
            "step_ms": round(ms, 3),
            "thread_cpu_ms": round(thread, 3),
            "autograd_cpu_ms": round(helpers, 3),
        }
        self._end_profiler(variant, row)
        self.rows.append(row)
        print(json.dumps(row), flush=True)
        self._i += 1
        if not self.done:
            self._enter_gap()

    def report(self) -> dict:
        by: dict[str, list[dict]] = {}
        for r in self.rows:
            by.setdefault(r["variant"], []).append(r)

        def median(variant: str, key: str) -> float:
            return statistics.median(r[key] for r in by.get(variant) or [{key: float("nan")}])

        base = median("plain", "step_ms")
        out = {}
        for v, rows in by.items():
            med = median(v, "step_ms")
            out[v] = {
                "median_ms": round(med, 3),
                "windows": [r["step_ms"] for r in rows],
                "overhead": round(med / base - 1, 4),
                # where the cost landed: each thread's CPU a step, and its growth over plain
                **{
                    f"{key}_median": round(median(v, key), 3)
                    for key in ("thread_cpu_ms", "autograd_cpu_ms")
                },
                **{
                    f"{key}_growth": round(median(v, key) - median("plain", key), 3)
                    for key in ("thread_cpu_ms", "autograd_cpu_ms")
                },
            }
        line = {
            "script": self.script,
            "summary": out,
            "torch": self.torch.__version__,
            "gpu": self.torch.cuda.get_device_name() if self.torch.cuda.is_available() else "",
            "kineto_config": PLAN.get("kineto_config", {}),
            "kineto_knows": PLAN.get("kineto_knows", {}),
        }
        print("PROBE_SUMMARY " + json.dumps(line), flush=True)
        for v, x in out.items():  # the same, a line per variant: where the cost landed
            print(
                f"  {v:18s} {x['median_ms']:8.2f} ms {x['overhead']:+7.1%}  thread CPU "
                f"{x['thread_cpu_ms_growth']:+6.2f}  autograd threads' CPU "
                f"{x['autograd_cpu_ms_growth']:+6.2f} ms/step",
                flush=True,
            )
        if PLAN.get("out"):
            with open(PLAN["out"], "a") as f:
                f.write(json.dumps(line) + "\n")
        return line

    def result(self) -> dict:
        return {}


PLAN: dict = {}


def kineto_config(text: str) -> dict[str, str]:
    """Give kineto the options in `text` (`KEY=VALUE`, `;` or newlines between them) through
    the file `KINETO_CONFIG` names, before any trace starts, as the capture does
    (`trace.kineto_config.request`); {key: value} of the options."""
    from membound.trace.kineto_config import request

    options = {
        k.strip(): v.strip()
        for k, v in (
            part.split("=", 1) for part in text.replace(";", "\n").splitlines() if "=" in part
        )
    }
    got = request(options, tempfile.mkdtemp(prefix="probe-kineto-"))
    if got["file"] is None:
        raise SystemExit(f"probe_cupti_kinds: kineto's config not written: {got.get('why')}")
    return options


def kineto_knows(keys) -> dict[str, bool]:
    """Whether this torch's kineto (linked into libtorch_cpu) holds each option name: an
    option it does not know, it ignores."""
    import mmap

    import torch

    lib = Path(torch.__file__).parent / "lib"
    found = dict.fromkeys(keys, False)
    for so in sorted(lib.glob("libtorch_cpu*.so*")):
        with open(so, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            for k in keys:
                found[k] = found[k] or m.find(k.encode()) >= 0
    return found


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--script", required=True, help="examples/real/ script name (gpt2, ...)")
    p.add_argument("--window", type=int, default=8, help="steps per timed window (default 8)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of all variants (default 3)")
    p.add_argument(
        "--variants",
        default="plain,cuda,launches,noapi,membound,membound_launches",
        help=f"comma-separated, of {', '.join(VARIANTS)}",
    )
    p.add_argument("--out", default=None, help="append the summary line to this JSONL file")
    p.add_argument(
        "--keep-traces",
        default=None,
        metavar="DIR",
        help="keep the first window's trace of each variant with latency timestamps (gzip) here",
    )
    p.add_argument(
        "--kineto-config",
        default="",
        metavar="TEXT",
        help="kineto options for every profiled variant, KEY=VALUE;... (e.g. "
        "CUPTI_PER_THREAD_BUFFER_ENABLED=true)",
    )
    args = p.parse_args(argv)
    variants = args.variants.split(",")
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        p.error(f"unknown variant(s) {bad}; known: {', '.join(VARIANTS)}")
    if "plain" in variants:
        variants.remove("plain")
    PLAN.update(window=args.window, rounds=args.rounds, variants=["plain", *variants], out=args.out)
    PLAN.update(keep_traces=args.keep_traces)
    if args.kineto_config:
        options = kineto_config(args.kineto_config)
        PLAN.update(kineto_config=options, kineto_knows=kineto_knows(options))
    sys.path.insert(0, str(ROOT / "examples" / "real"))
    import _common

    _common.StepTimer = ProbeTimer
    mod = __import__(
        args.script.removesuffix("_compiled") if args.script == "gpt2_compiled" else args.script
    )
    sys.argv = [args.script, *rest]
    if args.script == "gpt2_compiled":
        mod.main(rest, compiled=True)
    else:
        mod.main(rest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
