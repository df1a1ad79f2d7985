"""What the add_norm benchmarks share: the problem (32768 rows, bf16, residual + dropout 0.1), the
bytes and FLOPs of its directions, GPU time (CUDA-graph replay), output checks, the functions
compared (eager, membound), and the command line every script takes (`--csv`, `--run`).

Each script in this folder is one experiment and appends to its own CSV,
`benchmarks/results/add_norm/<script>.csv`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

# the shared harness one folder up (a path from this file, not from the working directory)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness import (  # noqa: E402
    RESULTS_DIR,
    CsvRows,
    add_output_args,
    bench_ms,  # noqa: F401 - the scripts import it from here
    copy_bandwidth,
)

#: rows of every problem (bf16, the benchmark's hidden widths)
M = 32768
#: dropout probability of the fused problem
P = 0.1
#: FLOPs per element of the fused op, by direction (the benchmark's estimate: the norm's
#: statistics and affine, the add and dropout scale; a plain norm counts the same)
FLOPS_PER_ELEM = {"fwd": 8, "bwd": 12, "fwd+bwd": 20}


def work(rows: int, hidden: int, elem_bytes: int, tensors: int, direction: str) -> dict:
    """`bytes` and `flops` columns of a row: `tensors` row-sized tensors moved once (the fused
    forward reads x and residual and writes y and s: 4; the backward reads dy and s and
    writes dx and dresidual: 4; a plain norm forward 2), FLOPS_PER_ELEM per element."""
    return {
        "bytes": tensors * rows * hidden * elem_bytes,
        "flops": FLOPS_PER_ELEM[direction] * rows * hidden,
    }


def parser(doc: str, name: str) -> argparse.ArgumentParser:
    """The script's parser (`doc`: its module docstring) with `--csv` defaulting to
    `results/add_norm/<name>.csv` and `--run`."""
    ap = argparse.ArgumentParser(
        description=doc.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_output_args(ap, RESULTS_DIR / "add_norm" / f"{name}.csv")
    return ap


def open_csv(args) -> CsvRows:
    return CsvRows(args.csv, args.run)


def start(args, needs_cuda: bool = True) -> tuple[CsvRows, float] | None:
    """(the CSV, copy bandwidth measured now), or None (printed why) without a CUDA device."""
    if needs_cuda and not torch.cuda.is_available():
        print(f"{Path(sys.argv[0]).name} needs a CUDA device.")
        return None
    copy_bw = copy_bandwidth()
    print(f"copy bandwidth {copy_bw / 1e12:.2f} TB/s", flush=True)
    return open_csv(args), copy_bw


def gpu_ms(fn) -> float:
    """GPU time alone: CUDA-graph replay, L2 flushed before each call, flush time subtracted."""
    from membound.device.timing import cuda_graph_median_ms

    return cuda_graph_median_ms(fn, reps=10, samples=5)


def same(out, ref) -> bool:
    """Outputs of a variant match the default's (16-bit rounding and reduction order aside)."""
    for a, b in zip(out, ref, strict=True):
        if a is None or b is None:
            if (a is None) != (b is None):
                return False
            continue
        a, b = a.float(), b.float()
        if a.shape != b.shape:
            return False
        if a.numel() == 0:  # RMSNorm's mean
            continue
        if not torch.isfinite(a).all() or (a - b).abs().max() > 2e-2 * (b.abs().max() + 1):
            return False
    return True


def time_checked(csv: CsvRows, copy_bw, call, ref, label, *, bytes, flops, **row) -> None:
    """GPU time of `call()` after checking its outputs against `ref`: printed after `label`
    and added to `csv` (with `row`; "WRONG" appended to the variant when they differ). A
    variant that fails is reported and skipped: one must not stop the others."""
    try:
        ok = same(call(), ref)
        ms = gpu_ms(call)
    except Exception as e:  # noqa: BLE001
        print(f"{label}{type(e).__name__}: {str(e)[:150]}")
        return
    frac = bytes / ms / 1e-3 / copy_bw
    tag = "" if ok else "  WRONG"
    print(f"{label}{ms:8.4f} ms {frac:6.3f}{tag}")
    row["variant"] += tag.strip()
    csv.add(**row, ms=round(ms, 4), fraction_of_copy=round(frac, 3), bytes=bytes, flops=flops)


def eager_fused(x, r, w, b, p):
    """The baseline with membound's semantics: s = dropout(x) + r; y = layer_norm(s)."""
    s = F.dropout(x, p) + r
    return F.layer_norm(s, (s.shape[-1],), w, b, 1e-5), s


def membound_fused(x, r, w, b, p):
    from membound.nn.functional import add_norm

    return add_norm(x, w, b, residual=r, dropout_p=p, prenorm=True)


def kernels_always(fn):
    """fn with the size rule off: the kernels run even for small inputs (shows their host
    cost next to the size rule's choice)."""
    from membound.nn import add_norm_op

    def run(*a):
        old, add_norm_op.EAGER_MAX_ELEMS = add_norm_op.EAGER_MAX_ELEMS, -1
        try:
            return fn(*a)
        finally:
            add_norm_op.EAGER_MAX_ELEMS = old

    return run


def fused_problem(n: int, dtype=torch.bfloat16, rows: int = M, grad: bool = False):
    """(x, r, dy, w, b) of the fused problem on the GPU."""
    x, r, dy = (torch.randn(rows, n, device="cuda", dtype=dtype) for _ in range(3))
    w, b = (torch.randn(n, device="cuda", dtype=dtype) for _ in range(2))
    if grad:
        for t in (x, r, w, b):
            t.requires_grad_()
    return x, r, dy, w, b


def saved_forward(x, r, w, b, p=P, bias=True):
    """(s, mean, rstd) the backward reads: the fused forward's, through the launcher."""
    from membound.kernels.add_norm import add_norm_fwd

    _, s, mean, rstd = add_norm_fwd(
        x, w, b if bias else None, r, None, eps=1e-5, is_rms=False, dropout_p=p, seed=1
    )
    return s, mean, rstd


def backward(dy, s, mean, rstd, w, p=P, config=None, param_dtypes=None, want=True):
    """A zero-argument call of the launcher's backward (residual, weight and bias gradients)."""
    from membound.kernels.add_norm import add_norm_bwd

    dtypes = param_dtypes or (w.dtype, w.dtype, torch.float32)
    return lambda: add_norm_bwd(
        dy, None, s, mean, rstd, w, is_rms=False, dropout_p=p, seed=1, want_dweight=want,
        want_dbias=want, dres_dtype=dy.dtype, param_dtypes=dtypes, config=config,
    )  # fmt: skip
