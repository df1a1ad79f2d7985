"""Build kineto-shaped traces with events at chosen times, for tests with hand-computed
numbers. Writes the layout torch's exporter uses (one top-level event after another, each
starting on a line `  {`) or a compact single-line document."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

MAIN_TID = 100
PID = 1


class TraceBuilder:
    def __init__(self, device: str | None = "NVIDIA H200"):
        self.events: list[dict] = []
        self.device = device
        self._corr = 1000
        self._ext = 1

    # host side -----------------------------------------------------------------------
    def step(self, n: int, ts: float, dur: float, cat: str = "user_annotation") -> None:
        self._x(cat, f"ProfilerStep#{n}", ts, dur, tid=MAIN_TID)

    def annotation(self, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> None:
        self._x("user_annotation", name, ts, dur, tid=tid)

    def dataloader(self, ts: float, dur: float) -> None:
        self.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", ts, dur)

    def op(self, name, ts, dur, dims=None, types=None, concrete=None, tid=MAIN_TID, seq=None):
        """A CPU op; `seq`: its autograd "Sequence number" (none recorded when None)."""
        args = {} if seq is None else {"Sequence number": seq}
        if dims is not None:
            args = {
                **args,
                "Input Dims": dims,
                "Input type": types or ["float"] * len(dims),
                "Concrete Inputs": concrete or [""] * len(dims),
            }
        self._x("cpu_op", name, ts, dur, tid=tid, **args)

    def runtime(self, name: str, ts: float, dur: float, tid: int = MAIN_TID) -> int:
        self._corr += 1
        self._x("cuda_runtime", name, ts, dur, tid=tid, correlation=self._corr)
        return self._corr

    # device side ---------------------------------------------------------------------
    def kernel(self, name, ts, dur, corr=-1, stream=7) -> None:
        self._x(
            "kernel", name, ts, dur, pid=0, tid=stream, correlation=corr, stream=stream, device=0
        )

    def launch(
        self, name: str, host_ts: float, gpu_ts: float, dur: float, stream=7, host_dur=5.0
    ) -> int:
        corr = self.runtime("cudaLaunchKernel", host_ts, host_dur)
        self.kernel(name, gpu_ts, dur, corr, stream)
        return corr

    def memcpy(
        self, ts, dur, nbytes, memory="Pageable", corr=-1, stream=7, direction="HtoD"
    ) -> None:
        src, dst = (memory, "Device") if direction == "HtoD" else ("Device", memory)
        self._x(
            "gpu_memcpy",
            f"Memcpy {direction} ({src} -> {dst})",
            ts,
            dur,
            pid=0,
            tid=stream,
            correlation=corr,
            stream=stream,
            device=0,
            bytes=nbytes,
            **{"memory bandwidth (GB/s)": nbytes / (dur * 1e3) if dur else 0},
        )

    def copy(self, host_ts, host_dur, gpu_ts, gpu_dur, nbytes, memory="Pageable", stream=7) -> None:
        corr = self.runtime("cudaMemcpyAsync", host_ts, host_dur)
        self.memcpy(gpu_ts, gpu_dur, nbytes, memory, corr, stream)

    def _x(self, cat, name, ts, dur, pid=PID, tid=MAIN_TID, **args) -> None:
        if cat == "cpu_op" or cat == "user_annotation":
            args = {"External id": self._ext, **args}
            self._ext += 1
        self.events.append(
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": pid,
                "tid": tid,
                "ts": ts,
                "dur": dur,
                "args": args,
            }
        )

    # output --------------------------------------------------------------------------
    def document(self) -> dict:
        props = [{"id": 0, "name": self.device, "totalGlobalMem": 150 << 30}] if self.device else []
        meta = [
            {
                "ph": "M",
                "name": "process_name",
                "pid": PID,
                "tid": 0,
                "ts": 0,
                "args": {"name": "python"},
            }
        ]
        return {"schemaVersion": 1, "deviceProperties": props, "traceEvents": meta + self.events}

    def text(self, layout: str = "kineto") -> str:
        doc = self.document()
        if layout == "compact":
            return json.dumps(doc)
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        lines = ["{"]
        for k, v in head.items():
            lines.append(f'  "{k}": {json.dumps(v)},')
        lines.append('  "traceEvents": [')
        body = []
        for ev in doc["traceEvents"]:
            inner = ",\n".join(f'    "{k}": {json.dumps(v)}' for k, v in ev.items())
            body.append("  {\n" + inner + "\n  }")
        lines.append(",\n".join(body))
        lines.append('  ],\n  "traceName": "test"\n}')
        return "\n".join(lines)

    def write(self, path, layout: str = "kineto") -> Path:
        path = Path(path)
        data = self.text(layout).encode()
        if path.suffix == ".gz":
            path.write_bytes(gzip.compress(data))
        else:
            path.write_bytes(data)
        return path


def planted_input_pipeline(steps: int = 2) -> TraceBuilder:
    """Per 5 ms step: DataLoader 1 ms, a pageable 1 MB copy (host call 1 ms, on the GPU the
    last 100 µs), a 1 ms kernel, aten::item + sync, a 1 ms kernel, idle to the step end.
    Expected per step (ms): busy 2.1; idle dataloader 1.0, pageable_copy 0.91 (the copy op,
    then until the next kernel starts: the blocked host had nothing queued), sync 0.48,
    other 0.51."""
    b = TraceBuilder()
    for s in range(steps):
        o = s * 5000.0
        b.step(s, o, 5000.0)
        b.dataloader(o, 1000.0)
        b.op("aten::copy_", o + 1000, 1000.0)
        b.copy(o + 1000, 1000.0, o + 1900, 100.0, 1_000_000, "Pageable")
        b.launch("kernel_a", o + 2000, o + 2010, 1000.0)
        b.op("aten::item", o + 3020, 10.0)
        b.runtime("cudaStreamSynchronize", o + 3021, 5.0)
        b.launch("kernel_b", o + 3490, o + 3500, 1000.0)
    return b


#: ceilings the synthetic scenarios are computed against (round numbers on purpose)
def test_ceilings():
    from membound.device.ceilings import Ceilings, Transfer

    return Ceilings(
        device="cuda",
        name="NVIDIA H200",
        memory_bandwidth=1e12,
        flops={"fp32": 50e12, "tf32": 400e12, "bf16": 800e12, "fp16": 800e12, "fp32_vector": 60e12},
        transfers=[Transfer("h2d", "pinned", True, 1 << 26, 50e9, 0.005)],
        source="measured",
    )


LN_DIMS = [[8192, 1024], [1024], [1024], [1024]]


def planted_memory_block(steps: int = 2) -> TraceBuilder:
    """Per 5 ms step: an fp32 4096³ matmul at CUDA-core speed (3 ms), then residual add
    (0.6 ms) and LayerNorm (0.15 ms) on fp32 8192×1024, launched early (GPU-bound)."""
    b = TraceBuilder()
    for s in range(steps):
        o = s * 5000.0
        b.step(s, o, 5000.0)
        b.op("aten::mm", o + 10, 20, [[4096, 4096], [4096, 4096]], ["float", "float"])
        b.launch("volta_sgemm_128x64_nn", o + 20, o + 100, 3000.0)
        b.op(
            "aten::add",
            o + 40,
            20,
            [[8192, 1024], [8192, 1024], []],
            ["float", "float", "Scalar"],
            ["", "", "1"],
        )
        b.launch("vectorized_elementwise_kernel", o + 50, o + 3100, 600.0)
        b.op(
            "aten::layer_norm",
            o + 70,
            30,
            [[8192, 1024], [], [1024], [1024], [], []],
            ["float", "", "float", "float", "Scalar", "Scalar"],
            ["", "[1024]", "", "", "1e-05", "True"],
        )
        b.op(
            "aten::native_layer_norm",
            o + 75,
            20,
            LN_DIMS,
            ["float", "float", "float", "Scalar"],
            ["", "[1024]", "", "", "1e-05"],
        )
        b.launch("vectorized_layer_norm_kernel", o + 85, o + 3700, 150.0)
    return b


def planted_launch_bound(steps: int = 2, kernels: int = 200) -> TraceBuilder:
    """Per step: `kernels` kernels of 5 µs, each launched 15 µs after the previous, so the
    GPU idles 10 µs between consecutive kernels (see tests/analysis/test_rules.py for the
    expected launch idle)."""
    b = TraceBuilder()
    period = 15.0
    wall = kernels * period
    for s in range(steps):
        o = s * wall
        b.step(s, o, wall)
        for k in range(kernels):
            t = o + k * period
            b.op("aten::relu", t, 4.0)
            b.launch("elementwise_kernel", t + 1, t + 2 + 8, 5.0, host_dur=3.0)
    return b


def healthy(steps: int = 2) -> TraceBuilder:
    """GPU-bound bf16 matmuls back to back at ~90% of the bf16 ceiling, launched ahead."""
    b = TraceBuilder()
    flops = 2 * 8192**3
    dur = flops / 800e12 / 0.9 * 1e6  # µs
    n = 6
    wall = n * dur + 20
    for s in range(steps):
        o = s * wall
        b.step(s, o, wall)
        for k in range(n):
            b.op(
                "aten::mm", o + 1 + k * 2, 1.5, [[8192, 8192], [8192, 8192]], ["c10::BFloat16"] * 2
            )
            b.launch(
                "sm90_xmma_gemm_bf16bf16", o + 1.5 + k * 2, o + 10 + k * dur, dur, host_dur=0.4
            )
    return b


def no_steps() -> TraceBuilder:
    """The input-pipeline scenario without ProfilerStep marks (one window)."""
    b = planted_input_pipeline(steps=2)
    b.events = [e for e in b.events if not e["name"].startswith("ProfilerStep#")]
    return b


SCENARIOS = {
    "synthetic_input_pipeline": planted_input_pipeline,
    "synthetic_memory_block": planted_memory_block,
    "synthetic_launch_bound": planted_launch_bound,
    "synthetic_healthy": healthy,
    "synthetic_no_steps": no_steps,
}


if __name__ == "__main__":  # regenerate tests/fixtures/synthetic_*/trace.json.gz
    data = Path(__file__).resolve().parents[1] / "fixtures"
    for name, make in SCENARIOS.items():
        (data / name).mkdir(parents=True, exist_ok=True)
        make().write(data / name / "trace.json.gz")
        print("wrote", data / name / "trace.json.gz")
