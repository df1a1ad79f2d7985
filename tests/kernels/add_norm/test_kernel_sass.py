"""benchmarks/add_norm/kernel_sass.py: compiling the add_norm kernels for sm_90 without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[3]
TOOL = ROOT / "benchmarks" / "add_norm" / "kernel_sass.py"
sys.path.append(str(TOOL.parent))  # after the installed packages: its folder holds gluon.py, ...
import kernel_sass  # noqa: E402

SASS = """
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   S2R R0, SR_TID.X ;
        /*0020*/                   FADD R2, R0, R0 ;
        /*0030*/                   FMUL R3, R2, R2 ;
        /*0040*/              @P0 BRA 0x20 ;
        /*0050*/                   ISETP.NE.AND P1, PT, R3, RZ, PT ;
        /*0060*/              @P1 BRA 0x50 ;
        /*0070*/                   EXIT ;
"""


def test_hot_loop_is_the_widest_backward_branch():
    # 0x20..0x40 spans 3 instructions, 0x50..0x60 two; forward branches do not count
    assert kernel_sass.hot_loop(SASS) == 3
    assert kernel_sass.hot_loop(SASS.replace("0x20 ;", "0x70 ;")) == 2


def test_signature_specializes_like_a_launch():
    from membound.kernels import add_norm as K

    meta = torch.device("meta")
    x, r = (torch.empty(64, 1024, dtype=torch.bfloat16, device=meta) for _ in range(2))
    w = torch.empty(1024, dtype=torch.bfloat16, device=meta)
    ((plan, args),) = kernel_sass.capture_launches(
        lambda: K.add_norm_fwd(
            x, w, None, r, None, eps=1e-5, is_rms=False, dropout_p=0.1, seed=3
        )  # fmt: skip
    )
    sig, attrs = kernel_sass.signature(plan.kernel, args)
    names = plan.kernel.arg_names
    assert sig["X"] == "*bf16" and sig["RSTD"] == "*fp32" and sig["eps"] == "fp32"
    assert sig["M"] == "i32" and (names.index("N"),) in attrs  # 1024: divisible by 16
    assert (names.index("SEED"),) not in attrs  # 3
    assert all(sig[n] == "constexpr" for n in plan.constexprs)


def _run_tool(*args) -> list[list[str]]:
    """kernel_sass.py's table rows for `args`, run as a subprocess without TRITON_INTERPRET
    (the interpreter compiles nothing)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    out = subprocess.run(
        [sys.executable, str(TOOL), *args],
        capture_output=True, text=True, env=env, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return [line.split() for line in out.stdout.splitlines()[1:] if line.strip()]


@pytest.mark.skipif(
    not (Path(kernel_sass._bin("cuobjdump")).exists()), reason="no bundled cuobjdump"
)
def test_compiles_the_forward_and_backward_for_sm90():
    """A real compile (no interpreter: a subprocess without TRITON_INTERPRET): every kernel of
    a small problem reports registers and a row loop, and none of these spills."""
    rows = _run_tool("--rows", "64", "--hidden", "1024")
    kernels = {r[1] for r in rows}
    assert {"_add_norm_fwd_kernel", "_add_norm_bwd_kernel", "_sum_partials_kernel"} <= kernels
    for _problem, _kernel, _warps, regs, stack, spills, sass, _loop in rows:
        assert 0 < int(regs) <= 255 and int(sass) > 0
        assert int(stack) == 0 and int(spills) == 0
    assert all(int(r[7]) > 0 for r in rows if r[1] != "_sum_partials_kernel")


@pytest.mark.skipif(
    not (Path(kernel_sass._bin("cuobjdump")).exists()), reason="no bundled cuobjdump"
)
def test_compiles_the_gluon_backward_for_sm90():
    """The Gluon backward, where an H200 runs it (16384 columns, bf16, dropout), compiles
    with this Triton (its API moves between releases) into at most 128 registers: with
    more, a 16-warp block could not launch. Spills stay few (earlier drafts had 60-300)."""
    from membound.kernels.add_norm import gluon

    if not gluon.AVAILABLE:
        pytest.skip("this Triton has no Gluon")
    rows = {r[1]: r for r in _run_tool("--rows", "64", "--hidden", "16384")}
    _problem, _kernel, warps, regs, _stack, spills, sass, loop = rows["_add_norm_bwd_smem_kernel"]
    assert int(warps) == 16 and 0 < int(regs) <= 128
    assert int(spills) <= 40 and int(loop) > 500
