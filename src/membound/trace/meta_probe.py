"""The plumbing of a measurement `membound diagnose` takes after the script ends: a command
run in a process of its own, with a timeout, whose last line of output is one JSON object,
kept in the capture meta under the measurement's key. A failure never fails diagnose: it is
kept in the meta as `{"error": why, ...}` and as a note. `trace.norm_probe`,
`trace.profiler_cost`, `trace.loader_probe` and `trace.layout_probe` are its users."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def read_meta(path: Path, label: str) -> tuple[dict | None, str | None]:
    """(the capture meta at `path`, None), or (None, "<label>: the capture meta cannot be
    read (why).")."""
    try:
        return json.loads(path.read_text()), None
    except (OSError, ValueError) as exc:
        return None, f"{label}: the capture meta cannot be read ({exc})."


def trace_beside(path: Path, meta: dict, *keys: str) -> Path | None:
    """The trace file the meta names under the first of `keys` it holds, beside the meta;
    None when none is named or the file is missing."""
    name = next((meta.get(k) for k in keys if meta.get(k)), None)
    if not isinstance(name, str) or not (path.parent / name).is_file():
        return None
    return path.parent / name


def read_beside(
    path: Path, label: str, key: str, names: tuple[str, ...], what: str, read, **extra: Any
) -> tuple[dict | None, Any, str | None]:
    """(meta, `read(trace)`, None) for the capture meta at `path` and the first trace it
    names under `names` (`read` takes what the probe needs from it), or (meta or None, None,
    the sentence to say): the meta cannot be read, no such trace was written (`what` names
    it: "no trace with op shapes"), or the trace cannot be read (kept in the meta under `key`
    as a failure, with `extra`)."""
    from membound.trace.load import load_trace

    meta, unread = read_meta(path, label)
    if meta is None:
        return None, None, unread
    found = trace_beside(path, meta, *names)
    if found is None:
        return meta, None, f"{label}: {what} was written."
    try:
        return meta, read(load_trace(found)), None
    except Exception as exc:  # a trace that cannot be read costs the probe, not diagnose
        why = f"the trace cannot be read ({type(exc).__name__}: {exc})"
        return meta, None, keep_failure(path, meta, key, label, why, **extra)


def run_json(cmd: list[str], timeout: float, run=subprocess.run) -> tuple[Any, str | None]:
    """(the JSON of `cmd`'s last line of output, None), or (None, why there is none)."""
    try:
        done = run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"the probe took longer than {timeout:.0f} s"
    except OSError as exc:
        return None, f"the probe could not start ({exc})"
    if done.returncode != 0:
        last = (done.stderr or "").strip().splitlines()[-1:] or [f"exit code {done.returncode}"]
        return None, f"the probe failed: {last[0]}"
    try:
        return json.loads((done.stdout or "").strip().splitlines()[-1]), None
    except (ValueError, IndexError):
        return None, "the probe printed no JSON"


def int_list(text: Any, positive: bool = False) -> list[int] | None:
    """A recorded concrete input such as '[1, 1]' -> [1, 1] (`positive`: only a non-empty
    list of positive ints); None for anything else."""
    try:
        value = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        return None
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        return None
    if positive and not (value and all(v > 0 for v in value)):
        return None
    return value


def keep(path: Path, meta: dict, key: str, value: Any) -> None:
    """`meta[key] = value`, written back to the meta file at `path`."""
    meta[key] = value
    path.write_text(json.dumps(meta, indent=1) + "\n")


def keep_failure(path: Path, meta: dict, key: str, label: str, why: str, **extra: Any) -> str:
    """Keep why there is no measurement in the meta (`meta[key]` and the note
    "<label>: <why>." in its notes, as best it can: an unwritable meta costs the note, not
    diagnose); returns the note."""
    note = f"{label}: {why}."
    meta[key] = {"error": why, **extra}
    notes = meta.get("notes") if isinstance(meta.get("notes"), list) else []
    meta["notes"] = [*notes, note]
    try:
        path.write_text(json.dumps(meta, indent=1) + "\n")
    except OSError:
        pass
    return note


def median_ms(fn, device: str, warmup: int, reps: int) -> float:
    """The median time (ms) of `fn()` over `reps` calls after `warmup` more: CUDA events
    around each call on a GPU, the wall clock on the CPU. What a probe times its ops with."""
    import statistics
    import time

    import torch

    times = []
    for i in range(warmup + reps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            ms = start.elapsed_time(end)
        else:
            t0 = time.perf_counter()
            fn()
            ms = (time.perf_counter() - t0) * 1e3
        if i >= warmup:
            times.append(ms)
    return statistics.median(times)


def keys_main(argv, description: str, valid, measure, what: str) -> int:
    """A probe's command line: `--keys` (a JSON list, each `valid`), `--device`; prints
    `measure(keys, device)` as one line of JSON (what `run_json` reads). `what` names the
    keys in the error a bad list gets (exit code 2)."""
    import argparse

    p = argparse.ArgumentParser(description=description)
    p.add_argument("--keys", required=True, help="JSON list of keys (`keys_of`)")
    p.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    a = p.parse_args(argv)
    try:
        keys = json.loads(a.keys)
    except ValueError:
        p.error("--keys is not JSON")
    if not isinstance(keys, list) or not all(valid(k) for k in keys):
        p.error(f"--keys must be a JSON list of {what}")
    print(json.dumps(measure(keys, a.device)), flush=True)
    return 0


def measure_keys(
    meta_path, label: str, key: str, keys_of, module: str, nothing: str, timeout: float, run
) -> tuple[dict | None, list | None, Any, str | None]:
    """The shared half of a probe after the script: read the capture meta at `meta_path` and
    the trace beside it (the ops pass, else the timeline), find its `keys_of`, and run
    `python -m <module> --keys ...` on them. Returns (meta, keys, the JSON result, None), or
    (meta or None, keys or None, None, the sentence to say): `nothing` where there are no
    keys, the failure (kept in the meta under `key`, as a note) where the run failed or
    printed no list of ops."""
    path = Path(meta_path)
    where, what = ("ops_trace", "trace"), "no trace with op shapes"
    meta, keys, said = read_beside(path, label, key, where, what, keys_of)
    if said is not None:
        return meta, None, None, said
    if not keys:
        return meta, keys, None, nothing
    wanted = [{k: v for k, v in found.items() if k not in ("device_ms", "calls")} for found in keys]
    cmd = [sys.executable, "-m", module, "--keys", json.dumps(wanted)]
    result, why = run_json(cmd, timeout, run)
    if why is None and not (isinstance(result, dict) and isinstance(result.get("ops"), list)):
        why = "the probe printed no list of ops"
    if why is not None:
        return meta, keys, None, keep_failure(path, meta, key, label, why, keys=wanted)
    return meta, keys, result, None


def innermost_calls(trace, names):
    """(op name, recorded dims, types, concrete inputs, strides, kernel ms) of each CPU op of
    `trace` named in `names` that recorded its shapes and launched kernels itself: of nested
    calls of those names (autocast's outer call, `aten::convolution` around
    `cudnn_convolution`), the innermost. What a probe's `keys_of` reads."""
    import numpy as np

    from membound.trace.model import KERNEL, LAUNCH_CALLS

    cpu, rt, gpu = trace.cpu, trace.runtime, trace.gpu
    ids = [i for i, n in enumerate(trace.names) if n in names]
    if not len(cpu) or not len(rt) or not len(gpu) or not ids:
        return
    ops = np.flatnonzero(np.isin(cpu.name, ids) & (cpu.shape >= 0))
    launch = np.isin(rt.call, LAUNCH_CALLS)
    kernels = gpu.kind == KERNEL
    ts, ends, tids = cpu.ts[ops], cpu.ts[ops] + cpu.dur[ops], cpu.tid[ops]
    for j, i in enumerate(ops.tolist()):
        t0, t1, tid = float(ts[j]), float(ends[j]), tids[j]
        nested = (tids == tid) & (ts >= t0) & (ts <= t1)
        nested[j] = False
        if nested.any():
            continue  # an outer call: the inner one launches
        inside = launch & (rt.tid == tid) & (rt.ts >= t0) & (rt.ts <= t1)
        if not inside.any():
            continue
        mine = kernels & np.isin(gpu.correlation, rt.correlation[inside])
        if not mine.any():
            continue
        dims, types, concrete = trace.shapes[int(cpu.shape[i])]
        stid = int(cpu.strides[i])
        strides = trace.strides[stid] if stid >= 0 else None
        kernel_ms = float(gpu.dur[mine].sum()) / 1e3
        yield trace.names[int(cpu.name[i])], dims, types, concrete, strides, kernel_ms
