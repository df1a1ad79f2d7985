"""examples/real: every script's --help, tiny CPU runs that print a parseable MEMBOUND_TRUTH line.

The torch-only scripts (gpt2, gpt2_compiled) always run; the framework ones run when their
framework is importable and otherwise must exit 2 with one line naming it. Runs are separate
processes (the scripts set global torch flags and seeds), with the tiny CPU sizes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "examples" / "real"
SCRIPTS = sorted(p.stem for p in REAL.glob("[!_]*.py"))
PREFIX = "MEMBOUND_TRUTH "
#: script -> the package it needs beyond torch (None: torch only)
FRAMEWORK = {
    "gpt2": None,
    "gpt2_compiled": None,
    "resnet50_fp32": "torchvision",
    "resnet50_prefetch": "timm",  # or torchvision
    "lightning_fit": "lightning",
    "hf_trainer_llama": "transformers",
    # out of sample, 2026-12-04
    "tabular_mlp": None,
    "vit_timm": "timm",
    "bert_finetune": "transformers",
    # out of sample, 2026-12-04 (evening)
    "segmentation_tv": "torchvision",
    # out of sample, 2026-12-04 (late)
    "dcgan": None,
    "t5_seq2seq": "transformers",
    # out of sample, 2026-12-05 (eighth session)
    "ddpm_unet": None,
    "lstm_lm": None,
    # out of sample, 2026-12-06
    "convnext_amp": None,
    "mnist_cnn": None,  # torchvision's transforms where installed, else written out
    "gcn_cora": None,
}
#: modules the scripts import by bare name from examples/real
_LOCAL = ("_common", "gpt2")


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def run(script: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, str(REAL / f"{script}.py"), "--device", "cpu", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


def truth(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(PREFIX)]
    assert len(lines) == 1, proc.stdout[-2000:]
    return json.loads(lines[0][len(PREFIX) :])


@pytest.fixture
def in_process(monkeypatch):
    """Run a script in this interpreter (for --help and the missing-framework exit) without
    leaking its bare-name modules: examples/planted has a `_common` of its own."""
    saved = {name: sys.modules.pop(name) for name in _LOCAL if name in sys.modules}
    monkeypatch.syspath_prepend(str(REAL))
    yield
    for name in _LOCAL:
        sys.modules.pop(name, None)
    sys.modules.update(saved)


def test_every_script_and_its_framework_is_listed():
    assert set(SCRIPTS) == set(FRAMEWORK)


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_works_without_the_framework(script, in_process, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--help"])
    with pytest.raises(SystemExit) as exc:
        runpy.run_path(str(REAL / f"{script}.py"), run_name="__main__")
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "--steps" in out and "--device" in out
    assert "MEMBOUND_TRUTH" in out  # the epilog says what the script prints


@pytest.mark.parametrize(
    "script,blocked",
    [
        ("resnet50_fp32", ("torchvision",)),
        ("resnet50_prefetch", ("timm", "torchvision")),
        ("lightning_fit", ("lightning",)),
        ("hf_trainer_llama", ("transformers",)),
        ("vit_timm", ("timm",)),
        ("bert_finetune", ("transformers",)),
        ("segmentation_tv", ("torchvision",)),
        ("t5_seq2seq", ("transformers",)),
    ],
)
def test_missing_framework_exits_2_with_one_line(script, blocked, in_process, monkeypatch, capsys):
    """Whether or not the framework is installed here: imports of it are made to fail."""
    for name in blocked:
        monkeypatch.setitem(sys.modules, name, None)  # `import name` raises ImportError
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n in blocked else real_find_spec(n, *a)
    )
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--device", "cpu", "--steps", "1"])
    state = __import__("torch").random.get_rng_state()
    try:
        with pytest.raises(SystemExit) as exc:
            runpy.run_path(str(REAL / f"{script}.py"), run_name="__main__")
    finally:
        __import__("torch").random.set_rng_state(state)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and blocked[-1] in err[0] and "pip install" in err[0]


#: the gpt2 runs, in one process (one torch import): each main() call seeds itself anew
GPT2_RUNS = [
    ("baseline", ["--steps", "2", "--warmup-steps", "1", "--grad-accum", "2"], False),
    ("fused", ["--steps", "2", "--warmup-steps", "1", "--grad-accum", "2", "--fused-add-norm",
               "--log-every", "2"], False),
    ("swapped", ["--steps", "2", "--warmup-steps", "1", "--grad-accum", "2", "--swap-norms"], False),
    # the eager backend: dynamo traces the model (graph capture, guards) without codegen
    ("compiled", ["--steps", "1", "--warmup-steps", "1", "--grad-accum", "1", "--backend", "eager"],
     True),
]  # fmt: skip


@pytest.fixture(scope="module")
def gpt2_runs() -> dict[str, tuple[dict, list[str]]]:
    """name -> (the MEMBOUND_TRUTH dict, the losses printed before it)."""
    calls = "; ".join(
        f"gpt2.main({[*args, '--device', 'cpu']!r}, compiled={compiled})"
        for _, args, compiled in GPT2_RUNS
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REAL), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", f"import gpt2; {calls}"],
        capture_output=True, text=True, timeout=240, env=env, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out, seen = {}, []
    names = iter(name for name, _, _ in GPT2_RUNS)
    for line in proc.stdout.splitlines():
        if line.startswith("iter "):
            seen.append(line.split("loss ")[1].split(",")[0])
        elif line.startswith(PREFIX):
            out[next(names)] = (json.loads(line[len(PREFIX) :]), seen)
            seen = []
    assert list(out) == [name for name, _, _ in GPT2_RUNS], proc.stdout[-3000:]
    return out


def test_gpt2_prints_its_step_time(gpt2_runs):
    t, losses = gpt2_runs["baseline"]
    assert t["script"] == "gpt2" and t["device"] == "cpu"
    assert t["steps"] == 2 and t["warmup_steps"] == 1
    assert 0 < t["step_ms_min"] <= t["step_ms_median"] <= t["step_ms_max"]
    # the window mean is the window's wall time over its steps
    assert t["step_ms"] == pytest.approx(t["window_ms"] / 2, rel=1e-3)
    assert t["flags"]["grad_accum"] == 2 and t["flags"]["compile"] is False
    assert len(losses) == 3  # loss.item() every step (warm-up included)
    # what the process did per timed step: it ran (CPU time), and counted the rest
    proc = t["process"]
    assert set(proc) == {"cpu_ms", "minor_faults", "major_faults", "voluntary_switches",
                         "involuntary_switches"}  # fmt: skip
    assert proc["cpu_ms"] > 0 and all(v >= 0 for v in proc.values())
    if sys.platform.startswith("linux"):  # the training thread's share of it
        assert 0 < t["thread"]["cpu_ms"] <= proc["cpu_ms"] + 1e-3


def test_gpt2_fused_add_norm_keeps_the_math(gpt2_runs):
    """FusedAddBlock moves each residual add into the next norm: same initial weights, same
    data, so the same losses (to the printed 4 decimals)."""
    t, losses = gpt2_runs["fused"]
    assert t["flags"]["fused_add_norm"] and t["flags"]["log_every"] == 2
    base = gpt2_runs["baseline"][1]
    assert losses == [base[0], base[2]]  # --log-every 2: iterations 0 and 2


def test_gpt2_swap_norms_swaps_every_layernorm_and_keeps_the_math(gpt2_runs):
    t, losses = gpt2_runs["swapped"]
    # 2 layers x 2 norms + the final one, all nn.LayerNorm
    assert t["extra"]["norms"] == 5 and t["extra"]["norms_swapped"] == 5
    assert losses == gpt2_runs["baseline"][1]


@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--batch-index", "--log-every", "3"), 0), (("--num-workers", "1"), 1)],
)
def test_tabular_mlp_runs_with_its_loaders(args, workers):
    """The default DataLoader, whole-batch indexing and a worker: each a plain timer line."""
    t = truth(run("tabular_mlp", "--steps", "3", "--warmup-steps", "1", *args))
    assert t["script"] == "tabular_mlp" and t["steps"] == 3 and t["step_ms"] > 0
    assert t["extra"]["workers"] == workers and t["extra"]["batch"] == 64


@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--log-every", "3", "--channels-last"), 0), (("--workers", "1", "--pin-memory"), 1),
     (("--membound-prefetch",), 0), (("--compile", "--compile-mode", "reduce-overhead"), 0)],
)  # fmt: skip
def test_dcgan_runs_with_its_fixes(args, workers):
    """The example's loop (two optimizers a step, five numbers read a step) with each fix."""
    t = truth(run("dcgan", "--steps", "3", "--warmup-steps", "1", *args))
    assert t["script"] == "dcgan" and t["steps"] == 3 and t["step_ms"] > 0
    assert t["extra"]["workers"] == workers and t["extra"]["batch"] == 4


@pytest.mark.parametrize(
    "args,workers",
    [((), 2), (("--sdpa", "--foreach-ema", "--log-every", "2"), 2),
     (("--bf16", "--channels-last", "--num-workers", "0"), 0), (("--membound-prefetch",), 2)],
)  # fmt: skip
def test_ddpm_unet_runs_with_its_fixes(args, workers):
    """The DDPM loop (clip, AdamW, the per-parameter EMA loop, loss.item()) with its fixes."""
    t = truth(run("ddpm_unet", "--steps", "2", "--warmup-steps", "1", *args))
    assert t["script"] == "ddpm_unet" and t["steps"] == 2 and t["step_ms"] > 0
    assert t["extra"]["workers"] == workers and t["extra"]["batch"] == 4
    assert t["extra"]["parameters"] == 184  # the tiny CPU U-Net's parameter tensors


def test_ddpm_unet_is_the_papers_model_and_its_fixes_keep_the_math(in_process):
    """The CIFAR-10 U-Net of the DDPM paper (35.7M parameters); attention by SDPA equals the
    einsum + softmax it replaces; the foreach EMA equals the per-parameter loop."""
    import torch

    ddpm = runpy.run_path(str(REAL / "ddpm_unet.py"))
    model = ddpm["UNet"]()
    params = list(model.parameters())
    assert len(params) == 304 and round(sum(q.numel() for q in params) / 1e6, 1) == 35.7
    g = torch.Generator().manual_seed(0)
    einsum, sdpa = ddpm["Attention"](64, False), ddpm["Attention"](64, True)
    sdpa.load_state_dict(einsum.state_dict())
    x = torch.randn(2, 64, 8, 8, generator=g)
    torch.testing.assert_close(sdpa(x), einsum(x), rtol=1e-5, atol=1e-5)
    # sources that require grad, as the model's parameters do: the EMA weights must stay out
    # of autograd (no history kept from step to step) on both paths
    src = [torch.randn(3, 5, generator=g).requires_grad_(), torch.randn(7, generator=g)]
    looped = [torch.randn(3, 5, generator=g), torch.randn(7, generator=g)]
    fused = [t.clone() for t in looped]
    ddpm["update_ema"](looped, src, rate=0.9)
    ddpm["foreach_ema"](fused, src, rate=0.9)
    for a, b in zip(looped, fused, strict=True):
        torch.testing.assert_close(a, b)
        assert not a.requires_grad and not b.requires_grad


@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--bf16", "--channels-last", "--log-every", "2"), 0),
     (("--ema-foreach", "--fused-adamw", "--workers", "1"), 1), (("--compile",), 0)],
)  # fmt: skip
def test_convnext_amp_runs_with_its_fixes(args, workers):
    """timm's --amp loop (scaler sequence, clip, AdamW, the state_dict EMA, loss.item()) with
    its fixes; on the CPU the autocast is bf16 and the GradScaler disabled."""
    t = truth(run("convnext_amp", "--steps", "2", "--warmup-steps", "1", *args))
    assert t["script"] == "convnext_amp" and t["steps"] == 2 and t["step_ms"] > 0
    assert t["extra"]["workers"] == workers and t["extra"]["batch"] == 2
    # the tiny CPU ConvNeXt: 56 parameter tensors, all of them in the EMA (no buffers)
    assert t["extra"]["parameters"] == t["extra"]["ema_tensors"] == 56
    assert t["extra"]["amp_dtype"] == "bfloat16" and t["extra"]["grad_scaler"] is False
    for flag in ("bf16", "channels_last", "ema_foreach", "fused_adamw", "compile"):
        assert t["flags"][flag] is (flag.replace("_", "-") in " ".join(args))


def test_convnext_amp_is_convnext_t_and_its_fixes_keep_the_math(in_process):
    """ConvNeXt-T's size (timm's convnext_tiny: 28,589,128 parameters); ModelEmaV3's foreach
    lerp equals ModelEmaV2's state_dict loop and both move the EMA toward the model; the
    label-smoothing loss is cross-entropy with label_smoothing."""
    import copy

    import torch

    cnx = runpy.run_path(str(REAL / "convnext_amp.py"))
    with torch.device("meta"):
        full = cnx["ConvNeXt"]()
    count = sum(q.numel() for q in full.parameters())
    assert abs(count - 28_589_128) <= 0.03 * 28_589_128, count
    assert sum(len(stage) for stage in full.stages) == 18

    torch.manual_seed(0)
    model = cnx["ConvNeXt"](depths=(1, 1, 1, 1), dims=(8, 16, 32, 64), num_classes=10)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():  # the model moves away from its EMA (fresh random weights)
        for q in model.parameters():
            q.copy_(torch.randn_like(q))
    before = [t.clone() for t in cnx["ema_tensors"](ema)]
    looped, fused = ema, copy.deepcopy(ema)
    cnx["ema_update_v2"](looped, model, 0.9)
    cnx["ema_update_foreach"](cnx["ema_tensors"](fused), cnx["ema_tensors"](model), 0.9)
    target = cnx["ema_tensors"](model)
    after_v2, after_v3 = cnx["ema_tensors"](looped), cnx["ema_tensors"](fused)
    assert len(before) == len(target) == len(after_v2) == 56
    for old, new_v2, new_v3, m in zip(before, after_v2, after_v3, target, strict=True):
        torch.testing.assert_close(new_v3, new_v2)
        torch.testing.assert_close(new_v2, 0.9 * old + 0.1 * m)
        assert (new_v2 - m).norm() < (old - m).norm()  # moved toward the model
        assert not new_v2.requires_grad and not new_v3.requires_grad
    assert not any(torch.equal(o, n) for o, n in zip(before, after_v2, strict=True))

    logits, target = torch.randn(6, 10), torch.randint(0, 10, (6,))
    torch.testing.assert_close(
        cnx["LabelSmoothingCrossEntropy"](0.1)(logits, target),
        torch.nn.functional.cross_entropy(logits, target, label_smoothing=0.1),
    )


def _mean_loss(proc) -> str:
    return next(ln for ln in proc.stdout.splitlines() if ln.startswith("mean logged loss"))


def test_lstm_lm_runs_with_its_fixes_and_torch_sgd_is_the_examples_loop():
    """The word_language_model loop, and its fixes: torch.optim.SGD (no momentum) makes the
    same update as the example's loop over the parameters (same seed, same dropout draws:
    the same losses); reading the loss every 3 batches still means it over every batch."""
    loop = run("lstm_lm", "--steps", "4", "--warmup-steps", "1")
    t = truth(loop)
    assert t["script"] == "lstm_lm" and t["steps"] == 4 and t["step_ms"] > 0
    assert t["extra"] == {"batch": 4, "bptt": 8, "vocab": 100, "parameters": 11}
    sgd = run("lstm_lm", "--steps", "4", "--warmup-steps", "1", "--optimizer", "sgd")
    assert truth(sgd)["flags"]["optimizer"] == "sgd"
    assert _mean_loss(sgd) == _mean_loss(loop)
    every3 = run("lstm_lm", "--steps", "5", "--warmup-steps", "1", "--log-every", "3", "--bf16")
    assert truth(every3)["flags"]["log_every"] == 3
    assert 3.0 < float(_mean_loss(every3).split()[-1]) < 6.0  # a per-batch NLL near ln(100)


def test_mnist_cnn_runs_with_its_loader_fixes_and_learns():
    """PyTorch's examples/mnist loop, tiny: the loss falls from ln(10) over a few steps, with
    worker processes and with membound's prefetcher as with the example's loader."""
    plain = run("mnist_cnn", "--steps", "12", "--warmup-steps", "1")
    t = truth(plain)
    assert t["script"] == "mnist_cnn" and t["steps"] == 12
    assert t["extra"] == {"batch": 16, "workers": 0, "images": 512}
    losses = [float(ln.split()[-1]) for ln in plain.stdout.splitlines() if "Loss:" in ln]
    assert len(losses) == 2 and losses[0] > 2.0 > losses[-1]
    workers = run("mnist_cnn", "--steps", "3", "--warmup-steps", "1", "--num-workers", "2")
    assert truth(workers)["extra"]["workers"] == 2
    prefetched = run("mnist_cnn", "--steps", "3", "--warmup-steps", "1", "--membound-prefetch")
    assert truth(prefetched)["flags"]["membound_prefetch"] is True
    refused = run("mnist_cnn", "--cuda-graphs")
    assert refused.returncode == 2 and "--cuda-graphs needs --device cuda" in refused.stderr


def test_gcn_cora_runs_with_its_fixes():
    """pygcn's full-batch loop, tiny: the epoch line each epoch (four reads), the training
    loss falling; --fastmode reports the training figures for the validation ones."""
    plain = run("gcn_cora", "--steps", "6", "--warmup-steps", "1")
    t = truth(plain)
    assert t["script"] == "gcn_cora" and t["extra"]["nodes"] == 200
    lines = [ln for ln in plain.stdout.splitlines() if ln.startswith("Epoch:")]
    assert len(lines) == 7
    first, last = (float(ln.split()[3]) for ln in (lines[0], lines[-1]))
    assert last < first
    fast = run("gcn_cora", "--steps", "3", "--warmup-steps", "0", "--fastmode", "--log-every", "2")
    fast_lines = [ln.split() for ln in fast.stdout.splitlines() if ln.startswith("Epoch:")]
    assert len(fast_lines) == 2 and all(ln[3] == ln[7] for ln in fast_lines)
    refused = run("gcn_cora", "--cuda-graphs")
    assert refused.returncode == 2 and "--cuda-graphs needs --device cuda" in refused.stderr


def test_lstm_lm_cuda_graphs_needs_cuda():
    """--cuda-graphs (the whole step captured in a CUDA graph) says in one line that it
    needs a GPU, and exits 2, rather than failing inside the capture."""
    proc = subprocess.run(
        [sys.executable, str(REAL / "lstm_lm.py"), "--device", "cpu", "--cuda-graphs"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert last.endswith("--cuda-graphs needs --device cuda and no --compile")


@pytest.mark.gpu
def test_lstm_lm_cuda_graphs_trains_on_a_gpu():
    """On a GPU the graphed step trains: the mean logged loss falls from ln(vocab)."""
    graphed = run("lstm_lm", "--steps", "30", "--warmup-steps", "1", "--cuda-graphs")
    assert truth(graphed)["flags"]["cuda_graphs"] is True
    assert float(_mean_loss(graphed).split()[-1]) < 10.5  # ln(33278) = 10.41 at the start


def test_gpt2_compiled_runs_through_torch_compile(gpt2_runs):
    t, losses = gpt2_runs["compiled"]
    assert t["script"] == "gpt2_compiled" and t["steps"] == 1 and len(losses) == 2
    assert t["flags"]["backend"] == "eager" and t["flags"]["mode"] == "default"


@pytest.mark.slow
@pytest.mark.parametrize(
    "script,args,extra",
    [
        ("resnet50_fp32", ("--amp", "--channels-last", "--tf32"), {"matmul_allow_tf32": True}),
        ("resnet50_prefetch", ("--membound-prefetch", "--channels-last"), {"workers": 0}),
        ("lightning_fit", ("--membound-prefetch",), {"workers": 0}),
        ("hf_trainer_llama", ("--no-logging-nan-inf-filter",), {"norms": 5}),
        ("vit_timm", ("--swap-norms", "--log-every", "2"), {"norms": 5, "norms_swapped": 5}),
        ("bert_finetune", ("--swap-norms",), {"norms": 5, "norms_swapped": 5}),
        ("segmentation_tv", ("--channels-last", "--bf16", "--log-every", "2"), {"workers": 0}),
        (
            "t5_seq2seq",
            ("--swap-norms", "--no-logging-nan-inf-filter"),
            {"norms": 12, "norms_swapped": 12},
        ),
    ],
)
def test_framework_script_runs_tiny(script, args, extra):
    pytest.importorskip(FRAMEWORK[script])
    if script == "resnet50_prefetch":
        pytest.importorskip("torchvision")
    t = truth(run(script, "--steps", "1", "--warmup-steps", "1", *args, timeout=300))
    assert t["script"] == script and t["steps"] == 1 and t["step_ms"] > 0
    assert extra.items() <= t["extra"].items()
