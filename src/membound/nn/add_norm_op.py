"""`membound::add_norm_fwd` / `membound::add_norm_bwd`: torch.library custom ops around the
add_norm kernels, with fake implementations (torch.compile traces them without graph breaks)
and autograd registered between them.

Each op picks its implementation per call with `use_triton(tensor)`; triton is imported only
when that says yes. The dropout seed is drawn inside the forward op from torch's default CPU
generator (so `torch.manual_seed` makes runs reproducible, also under torch.compile where the
op is opaque) and returned, with the path the forward took, as a 2-element CPU tensor
(seed, 1 if Triton ran) that the backward reads: both directions always take the same path
(the kernels' and the reference's dropout masks come from different random streams).

Size rule: on CUDA, inputs of at most `EAGER_MAX_ELEMS` elements run plain PyTorch (eager ops
in `functional.add_norm`; this composite when the custom op is called directly)
instead of the kernels: there the per-call host cost of a Triton launch (measured 0.2 ms per
call with Triton 3.6 on the H200 host, run 1) exceeds the whole eager chain's GPU time.
"""

# No `from __future__ import annotations` here: torch.library reads the custom ops' annotations
# at runtime to build their schemas, and older torch (2.4) wants real types, `Optional[...]`.
import functools
import importlib.util
from typing import Optional

import torch

from membound import _env, _profiling

# the reference never imports triton: it is what runs where the kernels cannot
from membound.kernels.add_norm.ref import add_norm_bwd_ref, add_norm_ref, dropout_keep_ref

_EMPTY = (0,)

#: on CUDA, when autograd is involved, at most this many elements run plain PyTorch ops
#: instead of the kernels (`membound.nn.functional.eager_add_norm` in eager mode, the
#: composite below for direct custom-op calls): our backward is a Python autograd Function,
#: whose host cost (run 23 on the H200 host: ~0.34 ms per fwd+bwd at 2048 x 4096) exceeds
#: eager's at that size (0.16 ms), although the kernels' GPU time is half.
#: 2**23 (= 2048 x 4096) keeps 32768 x 1024 on the kernels.
EAGER_MAX_ELEMS = 1 << 23
#: the same without grad (inference), where the kernels' path has no autograd: run 26 on the
#: H200 (do_bench, host in the loop): 8 x 1024 and 64 x 1024 0.019-0.021 ms vs eager's
#: 0.012 (host-bound: our Python costs more than eager's 3 ops), 256 x 4096 (2**20) 0.0188 vs
#: 0.0199, 2048 x 4096 0.0257 vs 0.0489 (GPU time 0.020 vs 0.047)
EAGER_MAX_ELEMS_NOGRAD = (1 << 20) - 1

#: above the size rule, without dropout: "adaptive" runs the eager ops when the GPU has
#: already finished everything queued on the stream (`gpu_idle`: the GPU is waiting for this
#: host thread, so host time is what a call costs the step) and the kernels when work is
#: queued (the GPU is behind, so GPU time is what a call costs). "kernels" keeps the size
#: rule alone. Why (H200, torch 2.11, Triton 3.6, benchmarks/probe_norm_host.py, 12288 x 768
#: fp32 LayerNorm fwd+bwd under bf16 autocast): the kernels take 86 us of GPU time against
#: eager's 155, but 340-495 us of host time against eager's <= 163 (Triton's launcher, the
#: autograd Function, 7 allocations), so in examples/real/gpt2.py, whose host only just keeps
#: ahead of its GPU, swapping the 25 LayerNorms made the step 137 -> 155 ms. Both paths give
#: the same result to rounding (dropout would not: its masks come from different generators,
#: so calls with dropout never switch). Set with `membound.nn.set_add_norm_dispatch`.
#: The default is "kernels": measured on GPT-2 in three H200 calls (2026-12-01, plain timer,
#: same call as two or three baselines of 136-138 ms; benchmarks/results/
#: gpt2_norm_dispatch_2026-12-01.txt), adaptive changed the step by -16.8, +2.8, -17.5 ms
#: with swap_norms and -6.8, +2.4, -18.9 with FusedAddLayerNorm: the query cannot see how far
#: ahead the host is, so on a host only just ahead it picks the kernels when their host cost
#: makes the GPU wait. With the kernels always, FusedAddLayerNorm saved +8.5 and +2.5 ms;
#: swap_norms alone (no residual add to fuse) still lost 6-18 ms on GPT-2, whose LayerNorm
#: is one ATen kernel, and saved 7.35 ms/step (17%) on HF's Llama, whose RMSNorm is ~8 ops.
DISPATCH = "kernels"
DISPATCH_MODES = ("adaptive", "kernels")

#: under torch.compile, without dropout: "inductor" traces the plain PyTorch ops, which
#: inductor fuses with the ops around the norm; "kernels" traces the custom op, opaque to it.
#: Why "inductor" (H200, 2026-12-02, benchmarks/gpu/truth.sh gpt2_compiled, plain timer, same
#: call): examples/real/gpt2_compiled.py took 109.6 ms/step, and 156.0 (+42%) with
#: membound.swap_norms before compiling and the custom op traced: inductor could no longer fuse
#: the norms with their neighbours, and each call kept the kernels' host cost. With dropout
#: the custom op stays: its masks come from membound's kernels' stream, the same with and
#: without compile.
COMPILE_DISPATCH = "inductor"


def set_add_norm_dispatch(mode: str) -> str:
    """Choose how add_norm picks its path on CUDA above the size rule (see `DISPATCH`):
    "kernels" (the default) or "adaptive". Returns the previous mode; a bad one is BadInput."""
    global DISPATCH
    if mode not in DISPATCH_MODES:
        from membound.errors import BadInput

        raise BadInput(f"add_norm dispatch {mode!r}: use one of {', '.join(DISPATCH_MODES)}.")
    previous, DISPATCH = DISPATCH, mode
    return previous


def use_triton(t: torch.Tensor) -> bool:
    """The dispatch rule: Triton kernels for CUDA tensors, or for CPU tensors under Triton's
    interpreter (TRITON_INTERPRET=1, tests); never when MEMBOUND_DISABLE_TRITON is set or
    triton is not installed. Everything else runs the pure-PyTorch reference."""
    if _env.triton_disabled() or not _triton_installed():
        return False
    if t.device.type == "cuda":
        return True
    return t.device.type == "cpu" and _env.triton_interpret()


def gpu_idle(t: torch.Tensor) -> bool:
    """True when the adaptive rule should take the eager ops for CUDA tensor `t`: the stream
    has no unfinished work (one cudaStreamQuery). Never while compiling or capturing a CUDA
    graph (nothing runs then: a query would be wrong, or illegal), nor with DISPATCH
    "kernels"."""
    if DISPATCH != "adaptive" or is_compiling() or torch.cuda.is_current_stream_capturing():
        return False
    return torch.cuda.current_stream(t.device).query()


def profiled() -> bool:
    """True while a profiler that records CPU ops is on (not membound's GPU-only timeline
    pass): the eager Function then calls the custom ops, whose recorded arguments (shapes,
    dtypes, flags) cost the kernels exactly (`cost/formulas/add_norm.py`); otherwise the
    kernels would sit under an `AddNormFunction` op with no cost. Costs host time, only then."""
    return torch.autograd.profiler._is_profiler_enabled and not _profiling.timeline_pass


def is_compiling() -> bool:
    """True while torch.compile traces (torch.compiler.is_compiling is torch >= 2.3)."""
    fn = getattr(torch.compiler, "is_compiling", None)
    return bool(fn()) if fn is not None else bool(torch._dynamo.is_compiling())


@functools.lru_cache(maxsize=1)
def _triton_installed() -> bool:
    return importlib.util.find_spec("triton") is not None


def _rows(t: torch.Tensor | None) -> torch.Tensor | None:
    """(rows, hidden) view; no copy when the leading dims collapse (any row stride allowed)."""
    if t is None or (t.dim() == 2 and t.stride(-1) == 1):  # the common case, no view
        return t
    if t.stride(-1) != 1:
        t = t.contiguous()
    return t.reshape(-1, t.shape[-1])


def _fwd_core(x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s, s_dtype,
              out_dtype, size_rule=True):  # fmt: skip
    """The forward both paths share: (y, s or None, mean, rstd, seed, triton_path).

    y and s have x's shape; mean is empty for RMSNorm; `seed` (an int, 0 without dropout) and
    `triton_path` are what the backward needs to regenerate the same mask on the same path."""
    seed = int(torch.randint(2**62, (1,), dtype=torch.int64).item()) if dropout_p > 0.0 else 0
    x2, r2 = _rows(x), _rows(residual)
    triton_path = use_triton(x) and not (size_rule and x.is_cuda and x.numel() <= EAGER_MAX_ELEMS)
    if triton_path:
        from membound.kernels.add_norm.launch import add_norm_fwd

        y, s, mean, rstd = add_norm_fwd(
            x2, weight, bias, r2, pre_bias, eps=eps, is_rms=is_rms, dropout_p=dropout_p,
            seed=seed, store_s=store_s, s_dtype=s_dtype, out_dtype=out_dtype,
        )  # fmt: skip
    else:
        keep = dropout_keep_ref(seed, x2.shape, dropout_p, x.device) if dropout_p > 0 else None
        y, s, mean, rstd = add_norm_ref(
            x2, weight, bias, r2, pre_bias, eps=eps, is_rms=is_rms, dropout_p=dropout_p,
            keep=keep, s_dtype=s_dtype, out_dtype=out_dtype,
        )  # fmt: skip
        if is_rms:
            mean = mean.new_empty(_EMPTY)
    if not store_s:
        s = None
    if x.dim() != 2:
        y = y.view(x.shape)
        s = s.view(x.shape) if s is not None else None
    return y, s, mean, rstd, seed, triton_path


def _fwd_impl(
    x: torch.Tensor,
    residual: Optional[torch.Tensor],  # noqa: UP045
    pre_bias: Optional[torch.Tensor],  # noqa: UP045
    weight: Optional[torch.Tensor],  # noqa: UP045
    bias: Optional[torch.Tensor],  # noqa: UP045
    dropout_p: float,
    is_rms: bool,
    eps: float,
    store_s: bool,
    s_dtype: torch.dtype,
    out_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`membound::add_norm_fwd`: (y, s (empty when not stored), mean, rstd, (seed, used_triton)).
    The custom op wraps this function (its annotations are the op's schema); calling it
    directly skips the dispatcher."""
    y, s, mean, rstd, seed, triton_path = _fwd_core(
        x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s, s_dtype, out_dtype
    )
    if s is None:
        s = x.new_empty(_EMPTY, dtype=s_dtype)
    return y, s, mean, rstd, torch.tensor([seed, int(triton_path)], dtype=torch.int64)


add_norm_fwd_op = torch.library.custom_op("membound::add_norm_fwd", _fwd_impl, mutates_args=())


@add_norm_fwd_op.register_fake
def _(x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s, s_dtype, out_dtype):
    rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
    y = x.new_empty(x.shape, dtype=out_dtype)
    s = x.new_empty(x.shape if store_s else _EMPTY, dtype=s_dtype)
    mean = x.new_empty((0 if is_rms else rows,), dtype=torch.float32)
    rstd = x.new_empty((rows,), dtype=torch.float32)
    return y, s, mean, rstd, torch.empty(2, dtype=torch.int64, device="cpu")


def _bwd_core(dy, ds, src, mean, rstd, weight, seed, triton_path, dropout_p, is_rms, want_dres,
              want_dweight, want_dbias, want_dpre_bias, x_dtype, res_dtype, param_dtypes):  # fmt: skip
    """The backward both paths share: (dx, dres, dweight, dbias, dpre_bias), None where not
    wanted, and dres None too when it equals dx (no dropout, same dtype: one tensor written
    instead of two). Parameter gradients come in `param_dtypes` (weight, bias, pre_bias)."""
    shape = dy.shape
    dy2, ds2, src2 = _rows(dy), _rows(ds), _rows(src)
    sep_dres = want_dres and (dropout_p > 0.0 or res_dtype != x_dtype)
    if triton_path:  # the forward's path (its dropout stream), whatever the env says now
        from membound.kernels.add_norm.launch import add_norm_bwd

        dx, dr, dw, db, dpb = add_norm_bwd(
            dy2, ds2, src2, mean, rstd, weight, is_rms=is_rms, dropout_p=dropout_p, seed=seed,
            want_dweight=want_dweight, want_dbias=want_dbias, want_dpre_bias=want_dpre_bias,
            dx_dtype=x_dtype, dres_dtype=res_dtype if sep_dres else None,
            param_dtypes=param_dtypes,
        )  # fmt: skip
    else:
        keep = dropout_keep_ref(seed, dy2.shape, dropout_p, dy.device) if dropout_p > 0 else None
        dsum, dx, dw, db, dpb = add_norm_bwd_ref(
            dy2, ds2, src2, mean, rstd, weight, keep, is_rms=is_rms, dropout_p=dropout_p
        )
        dr = dsum.to(res_dtype) if sep_dres else None
        dx = dx.to(x_dtype)
        dw, db, dpb = (
            g.to(dt) if g is not None and want else None
            for g, dt, want in zip(
                (dw, db, dpb),
                param_dtypes,
                (want_dweight, want_dbias, want_dpre_bias),
                strict=False,
            )
        )
    if dx.shape != shape:
        dx = dx.view(shape)
        dr = dr.view(shape) if dr is not None else None
    return dx, dr, dw, db, dpb


def _bwd_impl(
    dy: torch.Tensor,
    ds: Optional[torch.Tensor],  # noqa: UP045
    src: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    weight: Optional[torch.Tensor],  # noqa: UP045
    seed: torch.Tensor,
    dropout_p: float,
    is_rms: bool,
    want_dres: bool,
    want_dweight: bool,
    want_dbias: bool,
    want_dpre_bias: bool,
    x_dtype: torch.dtype,
    res_dtype: torch.dtype,
    param_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`membound::add_norm_bwd`: (dx, dres, dweight, dbias, dpre_bias), `_bwd_core` with the
    seed tensor unpacked and empty tensors where it returns None (a custom op returns tensors,
    and fresh ones: outputs may not alias each other). The custom op wraps this function."""
    s_seed, triton_path = (int(v) for v in seed.tolist())
    grads = _bwd_core(
        dy, ds, src, mean, rstd, weight, s_seed, bool(triton_path), dropout_p, is_rms, want_dres,
        want_dweight, want_dbias, want_dpre_bias, x_dtype, res_dtype, (param_dtype,) * 3,
    )  # fmt: skip
    dtypes = (x_dtype, res_dtype, param_dtype, param_dtype, param_dtype)
    return tuple(
        g if g is not None else dy.new_empty(_EMPTY, dtype=dt)
        for g, dt in zip(grads, dtypes, strict=False)
    )


add_norm_bwd_op = torch.library.custom_op("membound::add_norm_bwd", _bwd_impl, mutates_args=())


@add_norm_bwd_op.register_fake
def _(dy, ds, src, mean, rstd, weight, seed, dropout_p, is_rms, want_dres, want_dweight,
      want_dbias, want_dpre_bias, x_dtype, res_dtype, param_dtype):  # fmt: skip
    n = dy.shape[-1]
    sep_dres = want_dres and (dropout_p > 0.0 or res_dtype != x_dtype)

    def param_grad(wanted):
        return dy.new_empty((n,) if wanted else _EMPTY, dtype=param_dtype)

    return (
        dy.new_empty(dy.shape, dtype=x_dtype),
        dy.new_empty(dy.shape if sep_dres else _EMPTY, dtype=res_dtype),
        param_grad(want_dweight),
        param_grad(want_dbias),
        param_grad(want_dpre_bias),
    )


def _param_dtypes(weight, bias, pre_bias) -> tuple:
    """(weight, bias, pre_bias) dtypes, None for an absent one: what both backward paths
    need to know which parameter gradients exist and in which dtype they go back."""
    return tuple(t.dtype if t is not None else None for t in (weight, bias, pre_bias))


def _wanted(need, has_r: bool, dtypes) -> tuple[bool, bool, bool, bool]:
    """(dres, dweight, dbias, dpre_bias) to compute, from autograd's needs_input_grad over
    (x, residual, pre_bias, weight, bias, ...) and the parameters present."""
    w_dt, b_dt, pb_dt = dtypes
    return (
        has_r and need[1],
        w_dt is not None and need[3],
        b_dt is not None and need[4],
        pb_dt is not None and need[2],
    )


def _setup_context(ctx, inputs, output):
    x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s, s_dtype, out_dtype = (
        inputs
    )
    _, s, mean, rstd, seed = output
    # unused outputs (s without prenorm) must not become zero tensors the backward would read
    ctx.set_materialize_grads(False)
    ctx.mark_non_differentiable(mean, rstd, seed)
    ctx.save_for_backward(s if store_s else x, mean, rstd, weight, seed)
    ctx.dropout_p, ctx.is_rms = dropout_p, is_rms
    ctx.x_dtype = x.dtype
    ctx.res_dtype = residual.dtype if residual is not None else x.dtype
    ctx.has_r = residual is not None
    ctx.dtypes = _param_dtypes(weight, bias, pre_bias)


def _backward(ctx, dy, ds, dmean, drstd, dseed):
    src, mean, rstd, weight, seed = ctx.saved_tensors
    need = ctx.needs_input_grad
    want_r, want_w, want_b, want_pb = _wanted(need, ctx.has_r, ctx.dtypes)
    if dy is None:
        dy = torch.zeros_like(src)
    # parameters may differ in dtype (rare): reduce in fp32 and cast each one below
    dx, dr, dw, db, dpb = add_norm_bwd_op(
        dy, ds if (ds is not None and ds.numel() > 0) else None, src, mean, rstd, weight, seed,
        ctx.dropout_p, ctx.is_rms, want_r, want_w, want_b, want_pb, ctx.x_dtype,
        ctx.res_dtype, torch.float32,
    )  # fmt: skip
    dres = None
    if want_r:
        dres = dr if dr.numel() > 0 or dx.numel() == 0 else dx
    w_dt, b_dt, pb_dt = ctx.dtypes
    return (
        dx if need[0] else None,
        dres,
        dpb.to(pb_dt) if want_pb else None,
        dw.to(w_dt) if want_w else None,
        db.to(b_dt) if want_b else None,
        None, None, None, None, None, None,
    )  # fmt: skip


add_norm_fwd_op.register_autograd(_backward, setup_context=_setup_context)


class AddNormFunction(torch.autograd.Function):
    """The eager-mode autograd path, lean on purpose: host time per call decides mid-size
    shapes (run 3 on the H200 host: the custom-op-shaped Function cost ~640 us of host per
    backward). Returns y, or (y, s) when s is stored; mean/rstd/seed stay on ctx (no extra
    outputs, no CPU tensor in the graph); parameter gradients come out of one reduction
    launch already in each parameter's dtype. torch.compile uses the custom ops instead
    (`membound.nn.functional.add_norm` picks)."""

    @staticmethod
    def forward(ctx, x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s,
                s_dtype, out_dtype):  # fmt: skip
        if profiled():  # the custom op: the profiler records its arguments (see profiled())
            y, s, mean, rstd, info = add_norm_fwd_op(
                x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s,
                s_dtype, out_dtype,
            )  # fmt: skip
            seed, triton_path = (int(v) for v in info.tolist())
            triton_path = bool(triton_path)
            s = s if store_s else None
        else:
            y, s, mean, rstd, seed, triton_path = _fwd_core(
                x, residual, pre_bias, weight, bias, dropout_p, is_rms, eps, store_s, s_dtype,
                out_dtype,
            )  # fmt: skip
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(s if store_s else x, weight)
        ctx.stats = (mean, rstd)  # internal, never handed out: no version check needed
        ctx.meta = (
            seed, triton_path, dropout_p, is_rms, x.dtype,
            residual.dtype if residual is not None else x.dtype, residual is not None,
            _param_dtypes(weight, bias, pre_bias),
        )  # fmt: skip
        return (y, s) if store_s else y

    @staticmethod
    def backward(ctx, dy, ds=None):
        src, weight = ctx.saved_tensors
        mean, rstd = ctx.stats
        seed, triton_path, p, is_rms, x_dtype, res_dtype, has_r, dtypes = ctx.meta
        need = ctx.needs_input_grad
        want_r, want_w, want_b, want_pb = _wanted(need, has_r, dtypes)
        if dy is None:
            dy = torch.zeros_like(src)
        if profiled():  # recorded with its arguments; gradients reduced in fp32, then cast
            info = torch.tensor([seed, int(triton_path)], dtype=torch.int64)
            dx, dr, dw, db, dpb = add_norm_bwd_op(
                dy, ds if (ds is not None and ds.numel() > 0) else None, src, mean, rstd,
                weight, info, p, is_rms, want_r, want_w, want_b, want_pb, x_dtype, res_dtype,
                torch.float32,
            )  # fmt: skip
            dr = dr if dr.numel() > 0 or dx.numel() == 0 else None
            dw, db, dpb = (
                g.to(dt) if want else None
                for g, dt, want in zip((dw, db, dpb), dtypes, (want_w, want_b, want_pb), strict=True)
            )  # fmt: skip
        else:
            dx, dr, dw, db, dpb = _bwd_core(
                dy, ds, src, mean, rstd, weight, seed, triton_path, p, is_rms, want_r, want_w,
                want_b, want_pb, x_dtype, res_dtype, tuple(dt or torch.float32 for dt in dtypes),
            )  # fmt: skip
        dres = (dr if dr is not None else dx) if want_r else None
        return (dx if need[0] else None, dres, dpb, dw, db) + (None,) * 6
