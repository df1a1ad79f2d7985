"""Fixes ranked by what they save: the findings grouped by the one change a user makes.

A finding says where time goes; a user applies a fix, and one fix often removes several
findings at once (channels_last speeds up every BatchNorm, forward and backward; torch.compile
fuses the unfused chains and removes launch overhead). The truth runs on the H200
(benchmarks/bench_truth.py, examples/real) measure fixes, not findings, and there the largest
single finding under-predicted the fix 2-3x: ResNet-50 fp32's top finding, BatchNorm backward
at 10.7 ms/step, stood for channels_last, which saved 17.4 ms, while the two BatchNorm
findings together predict 15.1.

Each finding names the remedies that recover its saving (`remedies_of`), chosen by what the
saving *is*, not by what the fix text mentions:
- `memory-bound-op` is an efficiency gap (time beyond the op's time at the memory roof):
  a better kernel or layout recovers it: channels_last for BatchNorm and convolutions,
  membound.swap_norms for LayerNorm/RMSNorm, the fused optimizer for optimizer ops, torch.compile
  for elementwise ops, softmax and norms; bf16 does not (it halves bytes, not the gap);
- `fp32-storage` is bytes: bf16 (autocast), or bf16 storage where autocast is already on;
- `unfused-chain` is intermediate round trips: torch.compile, or membound's FusedAdd* in the
  block when the chain is a residual add into a norm; a norm written out as separate ops
  (HF's RMSNorm) is recovered by membound.swap_norms, which swaps the module (not the add:
  on a norm that is already one ATen kernel, swap_norms alone fuses nothing); where the
  host has no headroom (the capture's overhead on the step >= 10%, `fixes.host_limited`),
  membound's norm kernels are no remedy of one ATen norm: they cost more host time per call;
- `fp32-matmul`: bf16 or TF32; `tf32-matmul` (TF32 tensor-core time, priced by the bf16
  speed-up measured after the script): bf16; `launch-bound`: torch.compile or CUDA graphs
  (CUDA graphs alone where the step is compiled code already:
  `rules.launch_bound.COMPILED_SHARE`);
- `host-sync`: syncing less; `pageable-copy`, `blocking-copy`: pinned memory or
  membound.data.prefetch; `input-starved`: membound.data.prefetch (or more workers).

Where the loop's timeline replays (`gpu_whatif.calibrated_replay`), torch.compile is read
from a replay of its own (`analysis.compile_whatif`: the launches fusion removes lose their
host work, its findings' kernel time goes, the compiled runtime's cost is paid), signed, in
place of its findings' sum (`_compiled`); docs/remedies.md has the tallies. What follows is
the sum, which stays where no replay is trusted.

`launch-bound` goes whole to torch.compile. Tried on the recorded H200 truth fixtures
(2026-12-05) and dropped: giving compile only the launch gaps in front of kernels it fuses
away (not those before cuBLAS/cuDNN/attention/optimizer kernels, which it keeps) cut the
DCGAN's compile to 2.59 ms/step (measured -1.77) but the T5's to 13.88 (measured 32.06,
where it lost its place on top) and the Llama's first run out of tolerance: compile also
removes the Python and dispatch in front of the library kernels it keeps. Where compile
measured a loss (DCGAN, tabular MLP: steps of 10-14 ms, a few hundred kernels) its own
per-call cost is what no finding holds. On an H100 (2026-12-05, one device call:
`tests/fixtures/h100_samecall_dcgan*`) the compiled DCGAN launched 334 kernels a step, the
eager one 325 (cuDNN's convolutions and layout transforms stay; BatchNorm + LeakyReLU become a
reduction and a pointwise kernel), and the unprofiled steps were the same (15.16, 15.23 ms).
Tried on the recorded H200 truth fixtures the same day and not kept either:
- compile given only the launch-bound idle between launch calls (not inside them): DCGAN's
  compile 2.90, T5's 12.38 (below its bf16's 15.96: the T5 lost its place on top), HF
  Llama's first and third runs out of tolerance; 85 of 130 within, 10 of 12 scripts;
- compile given launch-bound scaled by the launches a fusion estimate removes (each run of
  ATen elementwise/reduction/norm kernels between two library kernels as one kernel plus one
  per reduction: DCGAN 325 -> 280 estimated, 334 measured; Llama 1241 -> 447; T5 1832 ->
  958): DCGAN's compile 1.12 (measured -1.77), tabular 0.55 (-2.11), ViT 8.77 (3.05), but
  T5's 13.16 again below its bf16: 86 of 130 within, 10 of 12 scripts.
Both move the compile predictions toward the truth on the loops where compile lost, and both
cost the T5, whose bf16/TF32 prediction (15.96; measured 2.65 and 4.55) is the GPU what-if's
host floor (`analysis.gpu_whatif`): that floor is what to mend first. Since (seventh
session) bf16 pays autocast's host work (`gpu_whatif.autocast_cap`: the T5's bf16 8.52),
but TF32's 15.95 stays above both compile estimates, and on that H200 run the replay's
floor (53 ms) sat below the step TF32 measured (62.6). On later T5 runs the replay's floor
held: TF32 within tolerance on an H200 and an H100, and the CPU floor (the training and
autograd threads' CPU less the sync waits) 2.1 ms from the replay's.

A remedy's predicted saving is the sum of its findings' savings: the GPU-work findings
share no kernel time (see `rules.memory`), so the sum does not count a byte twice. It is
capped at the step itself. The GPU-work findings' part is kernel time; with the analysis's
GPU what-if (`analysis.gpu_whatif`: the loop's timeline replayed with shorter kernels) it is
read through that curve, so a loop whose host cannot launch faster saves only down to the
host's own time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from membound.analysis import compile_whatif, gpu_whatif
from membound.analysis.findings import ranked
from membound.analysis.fixes import NORMS, op_family
from membound.analysis.gpu_whatif import GPU_WORK

#: remedies that change how fast kernels run, not what the host launches: their GPU-work
#: saving is read through the GPU what-if curve (`analysis.gpu_whatif`). Out of sample on the
#: H200 (BERT-base fp32, examples/real/bert_finetune.py): fp32-matmul's 45.7 ms/step of
#: matmul time became 29.6 through the curve; TF32 measured 29.4, bf16 autocast 27.8.
CURVE_REMEDIES = frozenset({"tf32", "bf16"})

#: what `cuda_graphs` pays each step (ms): its text's first way, torch.compile's
#: mode='reduce-overhead', runs the compiled runtime (guards, the CUDA-graph trees' checks)
#: every step. Not measured for that mode: taken as the default mode's
#: (`compile_whatif.FIXED_MS`, the compile probe's low end). Without it the launch-bound idle
#: alone over-predicted all three reduce-overhead runs timed (2026-12-07: the DCGAN on two
#: H100 hosts, 3.12 and 3.03 predicted, 1.70 and 0.47 saved; the compiled GPT-2 on the H200,
#: 1.36 predicted, -0.70 saved); graphs captured by hand pay none of it
GRAPH_RUNTIME_MS = compile_whatif.FIXED_MS

#: remedy key -> what the user does (one line; the findings carry the details)
REMEDIES: dict[str, str] = {
    "channels_last": "model.to(memory_format=torch.channels_last) (and the inputs)",
    "bf16": "bf16 autocast: torch.autocast('cuda', dtype=torch.bfloat16)",
    "bf16_storage": "bf16 storage: model.to(torch.bfloat16), fp32 master weights (autocast is on)",
    "tf32": "TF32 matmuls: torch.backends.cuda.matmul.allow_tf32 = True",
    "compile": "torch.compile(model)",
    "cuda_graphs": "CUDA graphs of the model's work: torch.compile(mode='reduce-overhead') "
    "(its compiled runtime paid in the figure), or torch.cuda.graphs around the forward and "
    "backward (graph_step: the whole step)",
    "graph_step": "the whole step captured once in a CUDA graph and replayed (torch.cuda.graph, "
    "the batch copied into static inputs): no host work per step",
    "swap_norms": "membound.swap_norms(model): each norm module one fused kernel each way",
    "fused_add_norm": "membound.nn.FusedAdd* in the blocks: the residual add fused into the norm",
    "fused_optimizer": "a fused optimizer: torch.optim.AdamW(..., fused=True)",
    "foreach": "the loop's per-tensor updates as one torch._foreach_* op over the lists "
    "(torch._foreach_lerp_ for an EMA)",
    "foreach_optimizer": "the optimizer's update over its parameter lists (torch.optim's "
    "foreach or fused implementation), not a loop over the parameters",
    "compile_loop": "torch.compile the loop's own code outside the model (the batch's "
    "preparation, a metric), or move it into the forward",
    "max_autotune": "torch.compile(mode='max-autotune'): inductor's kernels autotuned",
    "sync_less": "sync less often: read the loss every N steps",
    "pin_memory": "copy from pinned memory (the loader's pin_memory switch)",
    "prefetch": "membound.data.prefetch(loader): pinned batches copied on a side stream",
    "workers": "DataLoader(num_workers=N, persistent_workers=True): batches built off the "
    "training thread",
    "drop_data_parallel": "call the model directly: no nn.DataParallel around a model on one GPU",
    "batch_index": "index whole batches: a BatchSampler with batch_size=None (a TensorDataset "
    "takes a list of indices), not rows stacked one by one",
}


def remedies_of(code: str, evidence: dict[str, Any] | None) -> tuple[str, ...]:
    """The remedies that recover this finding's saving, most specific first."""
    ev = evidence or {}
    if code == "memory-bound-op":
        if "ops_below_roof" in ev:  # the summed finding (rules/memory_gap.py)
            return ("compile",)
        family = op_family(str(ev.get("op", "")))
        if family == "upsample":  # atomics on NCHW (analysis.fixes): layout, not fusion
            return ("channels_last",)
        if family in ("batch_norm", "conv"):
            return ("channels_last", "compile") if family == "batch_norm" else ("channels_last",)
        if family in NORMS:  # no headroom on the host: our kernels' host cost may lose
            return ("compile",) if ev.get("host_limited") else ("swap_norms", "compile")
        if family == "optimizer":
            return ("fused_optimizer",)
        if family == "inductor":  # already compiled: fusing again is no remedy
            return ("max_autotune",)
        if family in ("matmul", "attention", "rnn"):
            return ()  # a library kernel: no fix of ours moves its bytes faster
        return ("compile",)
    if code == "unfused-chain":
        if ev.get("outside_model"):  # the loop's own chains (rules.memory._loop_chains)
            if ev.get("optimizer_loop"):  # a hand-written update's loop over the parameters
                return ("foreach_optimizer",)
            return ("foreach",) if ev.get("per_tensor", True) else ("compile_loop",)
        if ev.get("norm_written_out"):  # a norm spelled in elementwise ops (rules.norm_written)
            return ("swap_norms", "fused_add_norm", "compile")
        chain = str(ev.get("top_chain", "")).lower()
        norm_chain = any(n in chain for n in NORMS) and "add" in chain
        if norm_chain and not ev.get("host_limited"):
            return ("compile", "fused_add_norm")
        return ("compile",)
    # the whole step in one CUDA graph: not while the host reads from the GPU mid-step; no
    # graph at all where an op of the backward syncs (`rules.host_bound.backward_syncs`) or the
    # shapes change from step to step (`rules.host_bound.shapes_vary`)
    graphs = () if ev.get("backward_syncs_per_step") or ev.get("shapes_vary") else ("cuda_graphs",)
    whole = (
        ()
        if ev.get("mid_step_syncs_per_step") or ev.get("loop_owner") or not graphs
        else ("graph_step",)
    )
    if code == "launch-bound" and ev.get("compiled"):
        return (*graphs, *whole)  # compiled already: what is left is the launches
    if code == "launch-bound":
        return ("compile", *graphs, *whole)
    if code == "host-bound":
        return whole
    if code == "host-sync" and ev.get("grad_scaler_sync"):
        # the scaler's inf check: a fused step takes it on the GPU, bf16 needs no scaler
        return ("sync_less", "fused_optimizer", "bf16")
    if code == "fp32-storage" and ev.get("autocast_on"):
        return ("bf16_storage",)  # autocast is on already: what is left is 16-bit storage
    return {
        "fp32-storage": ("bf16",),
        "fp32-matmul": ("bf16", "tf32"),
        "tf32-matmul": ("bf16",),
        "host-sync": ("sync_less",),
        "data-parallel-one-gpu": ("drop_data_parallel",),
        "pageable-copy": ("pin_memory", "prefetch"),
        "blocking-copy": ("prefetch", "pin_memory"),
        "input-starved": ("workers", "prefetch")
        if ev.get("worker_bound")
        else ("prefetch",)
        if ev.get("multiprocess_workers", True)
        else ("batch_index", "workers")
        if ev.get("per_row_collate")
        else ("workers", "batch_index")
        if ev.get("item_bound")
        else ("workers",),
    }.get(code, ())


@dataclass
class Remedy:
    """One fix and what it is predicted to save: the sum of the findings it recovers."""

    key: str
    what: str
    saving_ms_per_step: float
    share_of_step: float
    findings: list[int] = field(default_factory=list)  # indexes into Analysis.findings
    codes: list[str] = field(default_factory=list)
    expected_step_ms_after_fix: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "remedy": self.key,
            "what": self.what,
            "saving_ms_per_step": round(self.saving_ms_per_step, 4),
            "share_of_step": round(self.share_of_step, 4),
            "expected_step_ms_after_fix": None
            if self.expected_step_ms_after_fix is None
            else round(self.expected_step_ms_after_fix, 4),
            "findings": list(self.findings),
            "codes": list(self.codes),
        }


def remedies(
    findings: Iterable[Any], step_ms: float | None, gpu_curve: dict | None = None
) -> list[Remedy]:
    """Every remedy some finding names, ranked by predicted saving (ties: fewer findings
    first, then the one a finding names first, then the key). `findings` are `Finding`s (code, evidence,
    time_lost_ms_per_step); `step_ms` the step the savings refer to (None: no cap, no share);
    `gpu_curve` the GPU what-if (`analysis.gpu_whatif.curve`) the GPU-work part is read through."""
    findings = list(findings)
    by_key: dict[str, Remedy] = {}
    place: dict[str, int] = {}  # best place a remedy holds in a finding's list (ties)
    for i, f in enumerate(findings):
        saving = float(f.time_lost_ms_per_step or 0.0)
        if not saving > 0.0:  # also drops NaN
            continue
        for k, key in enumerate(remedies_of(f.code, f.evidence)):
            place[key] = min(place.get(key, k), k)
            r = by_key.setdefault(key, Remedy(key, REMEDIES[key], 0.0, 0.0))
            r.findings.append(i)
            if f.code not in r.codes:
                r.codes.append(f.code)
    fused = fused_of(gpu_curve)
    if fused is not None:
        if "fused_optimizer" not in by_key and fused["saving_ms"] > 0:
            # no finding names it (its parts were each too small, or fell to other remedies):
            # the optimizer's own what-if still predicts it
            by_key["fused_optimizer"] = Remedy("fused_optimizer", "", 0.0, 0.0)
            place["fused_optimizer"] = 0
        if "fused_optimizer" in by_key:  # the loop's own class
            cls = fused.get("optimizer", "AdamW")
            by_key[
                "fused_optimizer"
            ].what = f"a fused optimizer: torch.optim.{cls}(..., fused=True)"
    measured = {key: kernels_of(gpu_curve, key) for key in MEASURED_KERNELS}
    for key, saving in measured.items():
        if saving is not None and key not in by_key and abs(saving) >= _notable(step_ms):
            # no finding names it: the kernels timed after the script still predict it, a
            # loss too (said as one: the BatchNorm fix text names channels_last, and a
            # U-Net's convolutions ran 12.9 ms/step slower in it on an H100)
            by_key[key] = Remedy(key, REMEDIES[key], 0.0, 0.0)
            place[key] = len(REMEDIES)
    out = []
    for r in by_key.values():
        kept = timed_away(findings, r.findings, {r.key}, gpu_curve)
        if kept != r.findings:
            r.findings = kept
            r.codes = list(dict.fromkeys(findings[i].code for i in kept))
        curve = gpu_curve if r.key in CURVE_REMEDIES else None
        r.saving_ms_per_step = _saving(
            findings, r.findings, r.key == "bf16_storage", curve, autocast=r.key == "bf16",
            keys={r.key}, compile_curve=compile_curve_of(gpu_curve), fused=fused,
        )  # fmt: skip
        replayed = norm_whatif_ms(findings, r.key, r.findings)
        if replayed is not None:  # the step replayed with the norm kernels' measured cost
            r.saving_ms_per_step = replayed
        if measured.get(r.key) is not None:  # its kernels timed after the script, signed
            r.saving_ms_per_step += measured[r.key]
        if r.key == "compile":  # inductor's channels_last convolutions, where it picks them
            r.saving_ms_per_step += compiled_layout_ms(gpu_curve) or 0.0
        r.saving_ms_per_step -= runtime_ms({r.key})
        if step_ms and step_ms > 0:
            r.saving_ms_per_step = min(r.saving_ms_per_step, step_ms)
            r.share_of_step = r.saving_ms_per_step / step_ms
            r.expected_step_ms_after_fix = step_ms - r.saving_ms_per_step
        out.append(r)
    return sorted(out, key=lambda r: (-r.saving_ms_per_step, len(r.findings), place[r.key], r.key))


def _notable(step_ms: float | None) -> float:
    """The least change (ms/step) a measured what-if makes a remedy of its own: 1% of the
    step, or 0.1 ms where the step is not known."""
    return 0.01 * step_ms if step_ms and step_ms > 0 else 0.1


#: remedies whose saving the norm what-if predicts (`analysis.norm_whatif`)
NORM_REMEDIES = ("swap_norms", "fused_add_norm")


def _alone(findings: list, indexes) -> float:
    """The largest saving one of `findings[indexes]` states for its fix applied alone
    (`saving_alone_ms_per_step`; 0 where none does): bf16 storage also shrinks time other
    findings own (`rules.memory._bf16_storage_alone_ms`)."""
    stated = ((findings[i].evidence or {}).get("saving_alone_ms_per_step") for i in indexes)
    return max((float(v) for v in stated if v is not None), default=0.0)


def norm_whatif_ms(findings: list, key: str, indexes=None) -> float | None:
    """The norm what-if's predicted saving of `key` (`<key>_ms_per_step`) from the first of
    `findings[indexes]` (default: all) that carries one, or None: it is the whole step's
    change with membound's kernels, so it replaces the findings' sum, which counts only GPU
    time. Signed: a fix that slows the step has a negative saving."""
    if key not in NORM_REMEDIES:
        return None
    for i in range(len(findings)) if indexes is None else indexes:
        w = (findings[i].evidence or {}).get("norm_whatif")
        if isinstance(w, dict) and w.get(f"{key}_ms_per_step") is not None:
            return float(w[f"{key}_ms_per_step"])
    return None


def combined(
    findings: Iterable[Any],
    keys: Iterable[str],
    step_ms: float | None = None,
    gpu_curve: dict | None = None,
) -> float:
    """Predicted saving of applying the remedies `keys` together: every finding one of them
    recovers, each counted once (capped at the step); with `bf16_storage`, at least what its
    finding says it saves applied alone (`saving_alone_ms_per_step`); the GPU-work part read
    through `gpu_curve` (`analysis.gpu_whatif`)."""
    wanted = set(keys)
    findings = list(findings)
    if len(wanted) == 1 and wanted <= set(NORM_REMEDIES):
        # membound's norm kernels, replayed with their host cost measured here: the whole
        # step's change, a loss included (the report then does not offer them)
        replayed = norm_whatif_ms(findings, next(iter(wanted)))
        if replayed is not None:
            return replayed
    mine = [
        i
        for i, f in enumerate(findings)
        if float(f.time_lost_ms_per_step or 0.0) > 0.0
        and wanted.intersection(remedies_of(f.code, f.evidence))
    ]
    mine = timed_away(findings, mine, wanted, gpu_curve)
    both = what_if_ms(gpu_curve, "bf16_channels_last_kernels") if BOTH <= wanted else None
    if both is not None:
        # the convolutions timed in bf16 and channels_last together replace what each part
        # predicts of them alone (`tf32-matmul`, and the two what-ifs below)
        mine = [i for i in mine if findings[i].code != "tf32-matmul"]
    # the fused optimizer's replay takes its findings (or bf16 the scaler's sync) once
    refit, mine = _fused(findings, mine, wanted, fused_of(gpu_curve))
    refit = refit or 0.0
    # (finding indexes, the curve they are read through): curve remedies alone read all of
    # theirs through it; a mix (HF's torch_compile=True, which turns TF32 on too; AMP with
    # channels_last) takes each part as it would be applied alone, each finding counted once:
    # those only its curve remedies recover through the curve, the rest (what compile or
    # channels_last recover) as they are
    if wanted and wanted <= CURVE_REMEDIES:
        parts = [(mine, gpu_curve)]
    elif "compile" in wanted and compile_curve_of(gpu_curve):
        # compile's replay takes every GPU-work finding of the set (`_compiled`): kernel time
        # TF32 or bf16 removes shortens the same replayed step, not a second one
        parts = [(mine, None)]
    elif wanted & CURVE_REMEDIES and gpu_curve:
        by_curve = [
            i for i in mine
            if wanted.intersection(remedies_of(findings[i].code, findings[i].evidence))
            <= CURVE_REMEDIES
        ]  # fmt: skip
        parts = [(by_curve, gpu_curve), ([i for i in mine if i not in by_curve], None)]
    else:
        parts = [(mine, None)]
    total = refit + sum(
        _saving(
            findings, idx, "bf16_storage" in wanted, curve, autocast="bf16" in wanted,
            keys=wanted, compile_curve=compile_curve_of(gpu_curve),
        )
        for idx, curve in parts
    )  # fmt: skip
    if both is not None:
        total += both
    else:
        total += sum(kernels_of(gpu_curve, k) or 0.0 for k in wanted & set(MEASURED_KERNELS))
    if "compile" in wanted and "channels_last" not in wanted:
        total += compiled_layout_ms(gpu_curve) or 0.0
    if mine:  # a set no finding names predicts nothing, its runtime included
        total -= runtime_ms(wanted)
    return min(total, step_ms) if step_ms and step_ms > 0 else total


def runtime_ms(keys: set[str]) -> float:
    """What the remedies `keys` pay each step that no finding holds (ms): the compiled
    runtime of torch.compile's mode='reduce-overhead' where `cuda_graphs` is among them
    (`GRAPH_RUNTIME_MS`), unless `compile` is too, whose replay already pays it."""
    return GRAPH_RUNTIME_MS if "cuda_graphs" in keys and "compile" not in keys else 0.0


def timed_away(findings: list, indexes, wanted: set[str], gpu_curve: dict | None) -> list[int]:
    """`indexes` less the `memory-bound-op` findings on an op whose calls the channels_last
    what-if timed in channels_last (`dtype_whatif`: its measured figure holds them), where
    channels_last is the one of `wanted` that recovers them. On an H100 (2026-12-07) the
    findings on classification_tv's convolutions said 15.23 ms/step, the same convolutions
    timed in channels_last 6.83, and channels_last saved 13.92 in all: adding both counted
    the convolutions twice (33.25 predicted)."""
    w = gpu_curve.get("channels_last_kernels") if isinstance(gpu_curve, dict) else None
    ops = set(w.get("ops") or ()) if isinstance(w, dict) and "channels_last" in wanted else ()
    if not ops:
        return list(indexes)
    return [
        i for i in indexes
        if not (
            findings[i].code == "memory-bound-op"
            and (findings[i].evidence or {}).get("op") in ops
            and set(remedies_of(findings[i].code, findings[i].evidence)) & wanted
            == {"channels_last"}
        )
    ]  # fmt: skip


#: remedies whose convolutions and matmuls were timed after the script in the form the fix
#: gives them (`analysis.dtype_whatif`): remedy -> the what-if's name in the GPU what-if
MEASURED_KERNELS = {"bf16": "bf16_kernels", "channels_last": "channels_last_kernels"}


def compiled_layout_ms(gpu_curve: dict | None) -> float | None:
    """What torch.compile's channels_last convolutions save (signed), where inductor would pick
    that layout for them (`dtype_whatif.inductor_picks_channels_last`) and they were timed
    so after the script; None otherwise."""
    w = gpu_curve.get("channels_last_kernels") if isinstance(gpu_curve, dict) else None
    if not isinstance(w, dict) or not w.get("inductor_picks_it"):
        return None
    if w.get("convolutions_saving_ms") is not None:  # inductor writes the norms itself
        return float(w["convolutions_saving_ms"])
    return what_if_ms(gpu_curve, "channels_last_kernels")


#: bf16 autocast and channels_last applied together
BOTH = frozenset({"bf16", "channels_last"})


def kernels_of(gpu_curve: dict | None, remedy: str) -> float | None:
    """What `remedy` saves of the convolutions and matmuls timed after the script in the form
    it gives them (`MEASURED_KERNELS`; signed: a loss is negative), or None where they were
    not measured."""
    return what_if_ms(gpu_curve, MEASURED_KERNELS.get(remedy))


def what_if_ms(gpu_curve: dict | None, name: str | None) -> float | None:
    """The saving (ms/step, signed) of the measured what-if `name` the GPU what-if keeps
    (`analysis.dtype_whatif.WHAT_IFS`), or None where there is none."""
    w = gpu_curve.get(name) if name and isinstance(gpu_curve, dict) else None
    return float(w["saving_ms"]) if isinstance(w, dict) and w.get("saving_ms") is not None else None


def through_curve(findings: list, gpu_curve: dict, step_ms: float | None) -> list:
    """The GPU-work findings whose every remedy is a `CURVE_REMEDIES` one, their saving read
    through `gpu_curve` (`gpu_whatif.saving`): each keeps the kernel time it removes as
    `evidence["kernel_ms_per_step"]`, predicts the step's saving from it (share and step
    after the fix follow), at most what bf16 autocast can save where that is its one fix
    (`gpu_whatif.autocast_cap`); ranked again."""
    for f in findings:
        ev = f.evidence or {}
        keys = remedies_of(f.code, ev)
        if f.code not in GPU_WORK or not keys or not set(keys) <= CURVE_REMEDIES:
            continue
        if "kernel_ms_per_step" in ev:
            continue
        kernel = float(f.time_lost_ms_per_step)
        new = gpu_whatif.saving(gpu_curve, kernel)
        if tuple(keys) == ("bf16",):
            # its one fix is bf16 autocast, whose host work is paid too (`_saving`): on an
            # H100 (2026-12-07) the DDPM U-Net's `tf32-matmul` said 10.97 ms/step, its bf16
            # remedy 5.37, and bf16 saved 2.23 on a host that paced the step
            cap = gpu_whatif.autocast_cap(gpu_curve)
            new = new if cap is None else min(new, cap)
        f.evidence = {**ev, "kernel_ms_per_step": round(kernel, 4)}
        if kernel > 0:
            f.share_of_step *= new / kernel
        f.time_lost_ms_per_step = new
        if step_ms:
            f.expected_step_ms_after_fix = step_ms - new
    return ranked(findings)


def finding_saving(f, keys: set[str] | None) -> float:
    """What finding `f` saves once the remedies `keys` are applied (None: any of its own):
    its whole `time_lost_ms_per_step`, unless every one of `keys` among its remedies recovers
    only the part its evidence states (`saving_by_remedy`: launch-bound's gaps inside a
    library call's own launches, which torch.compile leaves, `rules.launch_bound`)."""
    saving = float(f.time_lost_ms_per_step or 0.0)
    part = (f.evidence or {}).get("saving_by_remedy")
    if not keys or not isinstance(part, dict) or not saving > 0.0:
        return saving
    mine = [k for k in keys if k in remedies_of(f.code, f.evidence)]
    if not mine or any(k not in part for k in mine):
        return saving
    return min(saving, max(float(part[k]) for k in mine))


def compile_curve_of(gpu_curve: dict | None) -> dict | None:
    """The compile what-if (`analysis.compile_whatif.curve`) the analysis keeps in its GPU
    what-if under "compile", or None."""
    c = gpu_curve.get("compile") if isinstance(gpu_curve, dict) else None
    return c if isinstance(c, dict) else None


def fused_of(gpu_curve: dict | None) -> dict | None:
    """The fused optimizer's what-if (`analysis.optimizer_whatif.of`) the analysis keeps in
    its GPU what-if under "fused_optimizer", or None."""
    w = gpu_curve.get("fused_optimizer") if isinstance(gpu_curve, dict) else None
    return w if isinstance(w, dict) and w.get("saving_ms") is not None else None


def _fused(findings: list, indexes, keys: set[str] | None, what_if: dict | None):
    """(the fused optimizer's replayed saving, the indexes left for the sum) where
    `fused_optimizer` is among `keys` and its what-if reads: the findings it recovers (the
    optimizer ops' memory-bound time, the GradScaler's sync) are in the replay, not added
    again. Where bf16 autocast is among `keys` without it, and a GradScaler's sync precedes
    the update, bf16 (no scaler at all) takes the replay's figure for that sync alone in
    place of the `host-sync` finding that names the scaler. Else (None, indexes)."""
    indexes = list(indexes)
    if what_if is None or not keys:
        return None, indexes
    if "fused_optimizer" in keys:
        mine = [
            i for i in indexes
            if "fused_optimizer" in remedies_of(findings[i].code, findings[i].evidence)
        ]  # fmt: skip
        return float(what_if["saving_ms"]), [i for i in indexes if i not in mine]
    if "bf16" in keys and what_if.get("grad_scaler_sync") and what_if.get("sync_ms"):
        mine = [
            i for i in indexes
            if findings[i].code == "host-sync"
            and (findings[i].evidence or {}).get("grad_scaler_sync")
        ]  # fmt: skip
        if mine:
            return float(what_if["sync_ms"]), [i for i in indexes if i not in mine]
    return None, indexes


def _compiled(findings: list, indexes, keys: set[str] | None, curve: dict | None):
    """(compile's saving read from its what-if `curve`, the indexes left for the sum) where
    compile is among `keys` and the curve reads: the findings compile recovers go through the
    replay (their GPU-work kernel time as the time removed; the `launch-bound` idle is the
    replay's host part, not added again), and so do the GPU-work findings of the other `keys`
    applied with it (TF32 with compile: HF's torch_compile); else (None, indexes)."""
    indexes = list(indexes)
    if not curve or not keys or "compile" not in keys:
        return None, indexes
    mine = []
    for i in indexes:
        own = remedies_of(findings[i].code, findings[i].evidence)
        if "compile" in own or (findings[i].code in GPU_WORK and keys.intersection(own)):
            mine.append(i)
    kernel = 0.0
    for i in mine:
        f = findings[i]
        if f.code in GPU_WORK and float(f.time_lost_ms_per_step or 0.0) > 0.0:
            kernel += float((f.evidence or {}).get("kernel_ms_per_step", f.time_lost_ms_per_step))
    saved = compile_whatif.saving(curve, kernel)
    if saved is None:
        return None, indexes
    return saved, [i for i in indexes if i not in mine]


def _saving(
    findings: list,
    indexes,
    bf16_storage: bool,
    gpu_curve: dict | None,
    autocast: bool = False,
    keys: set[str] | None = None,
    compile_curve: dict | None = None,
    fused: dict | None = None,
) -> float:
    """What the findings `indexes` save together: their idle findings' sum plus their
    GPU-work findings' kernel time read through `gpu_curve` (`gpu_whatif.saving`); with
    `bf16_storage`, the GPU part at least what its finding says it saves alone; with
    `autocast` (bf16 autocast among the fixes), the GPU part at most what is left once the
    host work autocast adds is paid (`gpu_whatif.autocast_cap`); `keys`, the remedies
    applied, for the findings that state a part of their saving per remedy
    (`finding_saving`); `compile_curve`, compile's what-if, which predicts the findings
    compile recovers where compile is among `keys` (`_compiled`), signed; `fused`, the fused
    optimizer's what-if, likewise for `fused_optimizer` (`_fused`)."""
    compiled, indexes = _compiled(findings, indexes, keys, compile_curve)
    refit, indexes = _fused(findings, indexes, keys, fused)
    kernel = other = 0.0
    for i in indexes:
        saving = finding_saving(findings[i], keys)
        if not saving > 0.0:
            continue
        if findings[i].code in GPU_WORK:
            # the kernel time it removes (`through_curve` kept it), read through the curve
            # once for all of the remedy's findings
            ev = findings[i].evidence or {}
            kernel += float(ev.get("kernel_ms_per_step", saving))
        else:
            other += saving
    if bf16_storage:  # what it saves alone: a floor of any set holding it
        kernel = max(kernel, _alone(findings, indexes))
    gpu = gpu_whatif.saving(gpu_curve, kernel)
    cap = gpu_whatif.autocast_cap(gpu_curve) if autocast else None
    return (gpu if cap is None else min(gpu, cap)) + other + (compiled or 0.0) + (refit or 0.0)
