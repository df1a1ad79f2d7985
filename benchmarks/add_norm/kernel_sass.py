"""Registers, spills and hot-loop size of the add_norm kernels, compiled for a GPU on a machine
without one.

Each problem goes through the real launchers (`add_norm_fwd` / `add_norm_bwd`) on meta tensors
with the launch replaced by a capture, so the kernel, its constexprs, warps and the argument
specialization (dtypes, 16-byte divisibility) are exactly what a CUDA launch of that shape
would compile. Triton then compiles for `--arch` (default sm_90, the H200), and the bundled
`cuobjdump` reports registers and stack (spills) and gives the SASS, whose largest loop is
the row loop of a persistent kernel. A kernel that spills, or whose loop grows, is worth a
device run; one whose SASS did not change (`--save DIR` then `diff`) is not.

    python benchmarks/add_norm/kernel_sass.py         # the benchmark shapes, bf16
    python benchmarks/add_norm/kernel_sass.py --hidden 16384 --no-dropout --save /tmp/sass

Runs without TRITON_INTERPRET (the interpreter has no compiler); needs Triton's NVIDIA
backend with its bundled binaries (any CUDA wheel of Triton has them).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

_TYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
          torch.int64: "i64", torch.int32: "i32", torch.int8: "i8"}  # fmt: skip


#: shared memory a block may opt into on the H100/H200 (sm_90): decides, as on the device,
#: whether the Gluon backward runs
SM90_SMEM_OPTIN = 227 * 1024


def capture_launches(fn) -> list:
    """[(plan, args)] of the launches `fn()` makes through `launch_planned` (not run). Meta
    tensors stand for CUDA ones: planned with the GPU's pair-kernel fallback, and the Gluon
    backward where an sm_90 GPU would run it (16-bit rows its cp.async can copy, enough shared
    memory)."""
    from membound.kernels.add_norm import gluon, launch
    from membound.kernels.add_norm.plan import PLANNER, configured

    seen = []
    real = launch.launch_planned
    launch.launch_planned = lambda plan, args: seen.append((plan, args))
    # the planner's device check, for this one planner: meta tensors are no CUDA device
    PLANNER.gluon_runs = lambda device, block_n: (
        gluon.AVAILABLE and gluon.smem_bytes(block_n) <= SM90_SMEM_OPTIN
    )
    try:
        with configured(pair_fallback=2):  # what a CUDA launch compiles
            fn()
    finally:
        launch.launch_planned = real
        del PLANNER.gluon_runs
        PLANNER.plans.clear()
    return seen


def signature(kernel, args) -> tuple[dict, dict]:
    """(signature, attrs) for `triton.compile` as a launch with `args` would specialize them:
    pointers by dtype, ints by width, 16-byte divisibility where the launch would find it
    (meta tensors count as aligned; ints divisible by 16)."""
    names = kernel.arg_names
    sig, attrs = {}, {}
    for i, (name, v) in enumerate(zip(names, args, strict=False)):
        if isinstance(v, torch.Tensor):
            sig[name] = "*" + _TYPES[v.dtype]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(v, bool):
            sig[name] = "i1"
        elif isinstance(v, int):
            sig[name] = "i32" if -(2**31) <= v < 2**31 else "i64"
            if v % 16 == 0 and v != 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            sig[name] = "fp32"
    for name in names[len(args) :]:
        sig[name] = "constexpr"
    return sig, attrs


def _bin(name: str) -> str:
    import triton

    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def hot_loop(sass: str) -> int:
    """Instructions in the largest backward-branch range of the SASS (the row loop)."""
    ins = []
    for line in sass.splitlines():
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    index = {a: i for i, (a, _) in enumerate(ins)}
    best = 0
    for i, (a, text) in enumerate(ins):
        m = re.search(r"BRA\b.*?0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < a and int(m.group(1), 16) in index:
            best = max(best, i - index[int(m.group(1), 16)] + 1)
    return best


def compile_stats(plan, args, arch: int = 90, save: Path | None = None, label: str = "") -> dict:
    """Compile one captured launch for sm_`arch`: registers, stack bytes, spill instructions,
    SASS instructions in all and in the hot loop."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel = plan.kernel
    sig, attrs = signature(kernel, args)
    names = kernel.arg_names
    source = ASTSource
    if getattr(kernel, "is_gluon", lambda: False)():
        from triton.experimental.gluon._runtime import GluonASTSource as source
    src = source(kernel, sig, constexprs={(names.index(k),): v for k, v in
                                          plan.constexprs.items()}, attrs=attrs)  # fmt: skip
    compiled = triton.compile(
        src, target=GPUTarget("cuda", arch, 32),
        options=dict(num_warps=plan.num_warps, num_stages=plan.num_stages),
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        res = subprocess.run([_bin("cuobjdump"), "-res-usage", str(cubin)], capture_output=True,
                             text=True, check=True).stdout  # fmt: skip
        sass = subprocess.run([_bin("cuobjdump"), "-sass", str(cubin)], capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        # addresses and encodings stripped: two builds diff by instruction only
        (save / f"{label}.sass").write_text(re.sub(r"/\*[0-9a-f]*\*/", "", sass))
    reg = re.search(r"REG:(\d+)", res)
    stack = re.search(r"STACK:(\d+)", res)
    return {
        "regs": int(reg.group(1)) if reg else -1,
        "stack": int(stack.group(1)) if stack else -1,
        "spills": len(re.findall(r"\b(?:STL|LDL)\b", sass)),
        "sass": len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", sass, re.M)),
        "loop": hot_loop(sass),
    }


def problems(rows: int, widths, dtype, dropout: bool):
    """(label, captured launches) of the fused forward and backward per width, bf16-style
    benchmark case: residual, weight, bias, dropout 0.1 (or none)."""
    from membound.kernels.add_norm import add_norm_bwd, add_norm_fwd

    p = 0.1 if dropout else 0.0
    meta = torch.device("meta")
    for n in widths:
        x, r, dy = (torch.empty(rows, n, dtype=dtype, device=meta) for _ in range(3))
        w, b = (torch.empty(n, dtype=dtype, device=meta) for _ in range(2))
        mean, rstd = (torch.empty(rows, device=meta) for _ in range(2))
        yield (
            f"fwd_{n}",
            capture_launches(
                lambda x=x, r=r, w=w, b=b: add_norm_fwd(
                    x, w, b, r, None, eps=1e-5, is_rms=False, dropout_p=p, seed=1
                )  # fmt: skip
            ),
        )
        yield (
            f"bwd_{n}",
            capture_launches(
                lambda dy=dy, x=x, w=w, mean=mean, rstd=rstd: add_norm_bwd(
                    dy,
                    None,
                    x,
                    mean,
                    rstd,
                    w,
                    is_rms=False,
                    dropout_p=p,
                    seed=1,
                    want_dweight=True,
                    want_dbias=True,
                    dres_dtype=dtype,
                )  # fmt: skip
            ),
        )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=32768)
    ap.add_argument("--hidden", default="1024,2048,4096,8192,16384")
    ap.add_argument("--dtype", choices=["bf16", "fp16", "fp32"], default="bf16")
    ap.add_argument("--no-dropout", action="store_true")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--save", type=Path, help="write each kernel's SASS (addresses stripped)")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("kernel_sass: unset TRITON_INTERPRET (the interpreter compiles nothing)")
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    widths = [int(v) for v in args.hidden.split(",")]
    print(f"{'problem':<12}{'kernel':<34}{'warps':>6}{'regs':>6}{'stack':>7}{'spills':>7}"
          f"{'sass':>7}{'loop':>6}")  # fmt: skip
    for label, launches in problems(args.rows, widths, dtype, not args.no_dropout):
        for plan, call_args in launches:
            name = plan.kernel.fn.__name__ if hasattr(plan.kernel, "fn") else str(plan.kernel)
            st = compile_stats(plan, call_args, args.arch, args.save, f"{label}_{name}")
            print(f"{label:<12}{name:<34}{plan.num_warps:>6}{st['regs']:>6}{st['stack']:>7}"
                  f"{st['spills']:>7}{st['sass']:>7}{st['loop']:>6}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    raise SystemExit(main())
