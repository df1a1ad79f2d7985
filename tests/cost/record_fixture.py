"""Re-record `trace_args.json.gz`: real profiler args (record_shapes=True) of the scenarios.

Run from the repo root: `python tests/cost/record_fixture.py` (CPU is enough).
"""

from __future__ import annotations

import gzip
import json
import sys
import tempfile
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scenarios import SCENARIOS  # noqa: E402

KEYS = ("Input Dims", "Input type", "Concrete Inputs", "Input Strides")


def record(fn) -> list[dict]:
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("name", "").startswith("aten::")]
    ops.sort(key=lambda e: (e["ts"], -e.get("dur", 0)))
    t0 = ops[0]["ts"] if ops else 0
    return [
        {
            "name": e["name"],
            "ts": round(e["ts"] - t0, 3),
            "dur": e.get("dur", 0),
            "args": {k: e["args"][k] for k in KEYS if k in e["args"]},
        }
        for e in ops
    ]


if __name__ == "__main__":
    data = {"torch": torch.__version__, "scenarios": {n: record(f) for n, f in SCENARIOS.items()}}
    out = HERE / "trace_args.json.gz"
    out.write_bytes(gzip.compress(json.dumps(data, separators=(",", ":")).encode(), mtime=0))
    print(f"wrote {out} ({out.stat().st_size} bytes)")
