"""examples/real: every script's --help, tiny CPU runs that print a parseable MEMBOUND_TRUTH line.

The torch-only scripts (gpt2, gpt2_compiled) always run; the framework ones run when their
framework is importable and otherwise must exit 2 with one line naming it. Runs are separate
processes (the scripts set global torch flags and seeds), with the tiny CPU sizes.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
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
    # 2026-12-06
    "cifar_resnet18": None,  # torchvision's transforms where installed, else written out
    "detection_tv": "torchvision",  # its data, transforms and sampler import without it
    # out of sample, 2026-12-06 (sixteenth session)
    "efficientnet_amp": None,
    "dlrm": None,
    "wav2vec2_ctc": "transformers",
    # out of sample, 2026-12-07 (twentieth session)
    "classification_tv": "torchvision",
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
        ("detection_tv", ("torchvision",)),
        ("wav2vec2_ctc", ("transformers",)),
        ("classification_tv", ("torchvision",)),
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
    # the fp32 matmul precision the window ran with: TF32, as nanoGPT sets it
    assert t["matmul"] == {
        "allow_tf32": True,
        "cudnn_allow_tf32": True,
        "float32_precision": "high",
    }
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


@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--bf16", "--channels-last", "--log-every", "2", "--torch-rmsprop"), 0),
     (("--ema-foreach", "--pin-mem", "--workers", "1"), 1)],
)  # fmt: skip
def test_efficientnet_amp_runs_with_its_fixes(args, workers):
    """timm's EfficientNet-B0 recipe loop (PrefetchLoader with random erasing, RMSpropTF's
    loop, the state_dict EMA, loss.item()) with its fixes; on the CPU the autocast is bf16, the
    GradScaler off, and the model B0's widths with one block a stage."""
    t = truth(run("efficientnet_amp", "--steps", "2", "--warmup-steps", "1", *args))
    assert t["script"] == "efficientnet_amp" and t["steps"] == 2 and t["step_ms"] > 0
    assert t["extra"]["workers"] == workers and t["extra"]["batch"] == 4
    # 96 parameter tensors; the EMA walks the whole state_dict (BatchNorm's buffers too)
    assert t["extra"]["parameters"] == 96 and t["extra"]["ema_tensors"] == 162
    assert t["extra"]["amp_dtype"] == "bfloat16" and t["extra"]["grad_scaler"] is False
    for flag in ("bf16", "channels_last", "ema_foreach", "torch_rmsprop", "pin_mem"):
        assert t["flags"][flag] is (flag.replace("_", "-") in " ".join(args))


def test_efficientnet_amp_is_b0_and_its_fixes_keep_the_math(in_process):
    """timm's efficientnet_b0 size (5,288,548 parameters, 16 blocks); ModelEmaV3's foreach
    lerp equals ModelEmaV2's loop; RMSpropTF's first step is timm's."""
    import copy

    import torch

    eff = runpy.run_path(str(REAL / "efficientnet_amp.py"))
    with torch.device("meta"):
        full = eff["EfficientNet"]()
    assert sum(q.numel() for q in full.parameters()) == 5_288_548
    torch.manual_seed(0)
    small = ((1, 3, 1, 1, 8), (1, 3, 2, 6, 16))
    model = eff["EfficientNet"](stages=small, num_classes=10)
    ema = copy.deepcopy(model).eval().requires_grad_(False)
    with torch.no_grad():
        for q in model.parameters():
            q.copy_(torch.randn_like(q))
    looped, fused = ema, copy.deepcopy(ema)
    eff["ema_update_v2"](looped, model, 0.9)
    eff["ema_update_v3"](fused, model, 0.9)
    for a, b in zip(looped.state_dict().values(), fused.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    x = torch.randn(2, 3, 32, 32)
    model.train()
    opt = eff["RMSpropTF"](model.parameters(), lr=0.01, alpha=0.9, eps=1e-3, momentum=0.9)
    before = [q.detach().clone() for q in model.parameters()]
    model(x).square().mean().backward()
    grads = [q.grad.clone() for q in model.parameters()]
    opt.step()
    # timm's first step by hand, in float64: square averages from one, eps inside the sqrt,
    # the LR in the momentum buffer (zero before)
    for q, b, g in zip(model.parameters(), before, grads, strict=True):
        g64 = g.double()
        step = 0.01 * g64 / (0.9 + 0.1 * g64.square() + 1e-3).sqrt()
        torch.testing.assert_close(q.detach().double(), b.double() - step, rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--batch-index", "--log-every", "2", "--amp"), 0),
     (("--num-workers", "1", "--fused-optimizer"), 1)],
)  # fmt: skip
def test_dlrm_runs_with_its_fixes(args, workers):
    """dlrm_s_pytorch.py's loop, tiny: per-table lists (or --batch-index's stacked batch),
    the per-step .cpu() bookkeeping (or --log-every's sums on the device)."""
    t = truth(run("dlrm", "--steps", "2", "--warmup-steps", "1", *args))
    assert t["script"] == "dlrm" and t["steps"] == 2 and t["step_ms"] > 0
    assert t["extra"]["batch"] == 64 and t["extra"]["parameters"] == 743_617
    assert t["extra"]["workers"] == workers
    for flag in ("batch_index", "amp", "fused_optimizer"):
        assert t["flags"][flag] is (flag.replace("_", "-") in " ".join(args))


def test_dlrm_collates_agree(in_process):
    """--batch-index's collate gives the repository's collate's batch, tables stacked."""
    import numpy as np
    import torch

    dl = runpy.run_path(str(REAL / "dlrm.py"))
    rng = np.random.default_rng(0)
    rows = [(rng.integers(0, 50, 13), rng.integers(0, 9, 26), np.float32(rng.random() < 0.3))
            for _ in range(5)]  # fmt: skip
    x, offsets, indices, y = dl["collate_wrapper_criteo"](rows)
    batch = tuple(np.stack([r[k] for r in rows]) for k in range(3))
    x2, offsets2, indices2, y2 = dl["collate_batch"](batch)
    torch.testing.assert_close(x, x2)
    torch.testing.assert_close(torch.stack(indices), indices2)
    torch.testing.assert_close(torch.stack(offsets), offsets2)
    torch.testing.assert_close(y, y2.float())


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


def _bars(proc) -> list[tuple[int, float, int, int]]:
    """(batch, running mean loss, correct, total) of each progress-bar draw (`\\r`-ended)."""
    bar = re.compile(r"Loss: (\S+) \| Acc: \S+% \((\d+)/(\d+)\) (\d+)/\d+$")
    out = []
    for line in proc.stdout.splitlines():  # splitlines splits at the bar's carriage returns
        if m := bar.search(line):
            out.append((int(m[4]), float(m[1]), int(m[2]), int(m[3])))
    return out


def test_cifar_resnet18_runs_with_its_fixes_and_log_every_keeps_the_totals():
    """kuangliu/pytorch-cifar's loop, tiny: a bar drawn every step from two reads; the first
    loss near ln(10); --log-every 4 sums on the device and draws the same running totals at
    steps 4 and 8; the loader, layout and wrapper fixes run."""
    plain = run("cifar_resnet18", "--steps", "8", "--warmup-steps", "0")
    t = truth(plain)
    assert t["script"] == "cifar_resnet18" and t["steps"] == 8 and t["step_ms"] > 0
    assert t["extra"] == {"batch": 8, "workers": 0, "images": 512, "pin_memory": False,
                          "data_parallel": False}  # fmt: skip
    bars = _bars(plain)
    assert [b[0] for b in bars] == list(range(1, 9))
    assert 1.8 < bars[0][1] < 3.2  # ln(10) = 2.30 before the first update
    assert all(math.isfinite(b[1]) for b in bars) and bars[-1][3] == 64
    every4 = run("cifar_resnet18", "--steps", "8", "--warmup-steps", "0", "--log-every", "4")
    assert truth(every4)["flags"]["log_every"] == 4
    drawn = _bars(every4)
    assert [b[0] for b in drawn] == [4, 8]
    for got, want in zip(drawn, (bars[3], bars[7]), strict=True):
        assert got[0] == want[0] and got[2:] == want[2:]
        assert got[1] == pytest.approx(want[1], abs=2e-3)  # fp32 sums on the device
    loaders = run("cifar_resnet18", "--steps", "2", "--warmup-steps", "1", "--num-workers", "2",
                  "--pin-memory", "--channels-last", "--no-data-parallel")  # fmt: skip
    t = truth(loaders)
    assert t["extra"]["workers"] == 2 and t["extra"]["pin_memory"] is True
    assert t["flags"]["channels_last"] is True and t["flags"]["no_data_parallel"] is True
    prefetched = run("cifar_resnet18", "--steps", "2", "--warmup-steps", "1",
                     "--membound-prefetch", "--amp")  # fmt: skip
    t = truth(prefetched)
    assert t["flags"]["membound_prefetch"] is True and t["flags"]["amp"] is True


def test_cifar_resnet18_is_kuangliu_resnet18_and_refuses_log_every_0(in_process, capsys):
    """The repository's ResNet18(): 11,173,962 parameters in 62 tensors, a 3 x 3 stride-1
    stem without max-pool (32 x 32 in, 4 x 4 before the pool); --log-every 0 is an argparse
    error (exit 2)."""
    import torch

    cifar = runpy.run_path(str(REAL / "cifar_resnet18.py"))
    with torch.device("meta"):
        net = cifar["ResNet18"]()
    params = list(net.parameters())
    assert len(params) == 62 and sum(q.numel() for q in params) == 11_173_962
    assert net.conv1.kernel_size == (3, 3) and net.conv1.stride == (1, 1)
    assert not any(isinstance(m, torch.nn.MaxPool2d) for m in net.modules())
    shortcuts = [b.shortcut for layer in (net.layer1, net.layer2, net.layer3, net.layer4)
                 for b in layer]  # fmt: skip
    assert [len(s) for s in shortcuts] == [0, 0, 2, 0, 2, 0, 2, 0]  # 1 x 1 conv + BN
    x = torch.randn(2, 3, 32, 32)
    small = cifar["ResNet"](cifar["BasicBlock"], [1, 1, 1, 1])
    assert small(x).shape == (2, 10)
    state = torch.random.get_rng_state()
    try:
        with pytest.raises(SystemExit) as exc:
            cifar["main"](["--device", "cpu", "--log-every", "0"])
    finally:
        torch.random.set_rng_state(state)
    assert exc.value.code == 2
    assert "--log-every must be >= 1" in capsys.readouterr().err


def test_detection_tv_data_transforms_and_sampler_are_the_references(in_process, capsys):
    """Without torchvision: the synthetic COCO items (1-8 boxes inside the image, 8 px a side
    at least, labels 1-90, a bool mask per box, the same item for the same index); the
    reference's flip (x -> width - x of the other corner, masks and pixels mirrored), its
    PILToTensor + ConvertImageDtype (the permuted HWC pixels / 255), tuple(zip(*batch)),
    batches of one aspect-ratio group each, MetricLogger's reads, reduce_dict on one process;
    --amp without CUDA and too few images are argparse errors (exit 2)."""
    import numpy as np
    import torch
    from PIL import Image

    det = runpy.run_path(str(REAL / "detection_tv.py"))
    ds = det["SyntheticCoco"](32, (96, 160), (120, 160), seed=0)
    for i in range(len(ds)):
        image, target = ds[i]
        h, w = ds.get_height_and_width(i)
        assert image.size == (w, h) and image.mode == "RGB"
        boxes, labels, masks = target["boxes"], target["labels"], target["masks"]
        k = len(boxes)
        assert 1 <= k <= 8 and boxes.dtype == torch.float32 and labels.dtype == torch.int64
        assert (boxes[:, 2:] - boxes[:, :2] >= 8).all() and (boxes[:, :2] >= 0).all()
        assert (boxes[:, 2] <= w).all() and (boxes[:, 3] <= h).all()
        assert ((labels >= 1) & (labels <= 90)).all()
        assert masks.shape == (k, h, w) and masks.dtype == torch.bool
        torch.testing.assert_close(masks.sum((1, 2)).float(), target["area"])
        assert target["image_id"] == i and target["iscrowd"].tolist() == [0] * k
    again = ds[3]
    assert np.array_equal(np.array(again[0]), np.array(ds[3][0]))
    assert torch.equal(again[1]["boxes"], ds[3][1]["boxes"])

    with torch.random.fork_rng():
        # one box in a 100 x 50 image: x0, x1 = 10, 30 become 100 - 30, 100 - 10
        pixels = np.arange(50 * 100 * 3, dtype=np.uint8).reshape(50, 100, 3)
        mask = torch.zeros((1, 50, 100), dtype=torch.bool)
        mask[0, 20:40, 10:30] = True
        target = {"boxes": torch.tensor([[10.0, 20.0, 30.0, 40.0]]), "masks": mask.clone()}
        flipped, target = det["RandomHorizontalFlip"](1.0)(Image.fromarray(pixels), target)
        assert target["boxes"].tolist() == [[70.0, 20.0, 90.0, 40.0]]
        assert torch.equal(target["masks"], mask.flip(-1))
        assert target["masks"][0, 20:40, 70:90].all() and target["masks"].sum() == 400
        assert np.array_equal(np.array(flipped), pixels[:, ::-1])
        kept, _ = det["RandomHorizontalFlip"](0.0)(flipped, target)
        assert kept is flipped
        x, _ = det["detection_preset_train"](0.0)(Image.fromarray(pixels), None)
    want = torch.from_numpy(pixels).permute(2, 0, 1).float() / 255
    assert x.dtype == torch.float32 and torch.equal(x, want)
    assert x.stride() == (1, 300, 3)  # F.pil_to_tensor's permuted view, kept by the cast

    assert det["collate_fn"]([(1, "a"), (2, "b"), (3, "c")]) == ((1, 2, 3), ("a", "b", "c"))
    groups = det["aspect_ratio_groups"](ds.sizes, 3)
    assert det["aspect_ratio_groups"]([(100, 50), (100, 100), (50, 100)], 3) == [1, 4, 7]
    sampler = det["GroupedBatchSampler"](torch.utils.data.SequentialSampler(ds), groups, 2)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 16
    assert all(len(b) == 2 and len({groups[i] for i in b}) == 1 for b in batches)

    logger = det["MetricLogger"](delimiter="  ")
    logger.update(loss=torch.tensor(2.0), lr=0.02)
    logger.update(loss=torch.tensor(4.0), lr=0.02)
    assert str(logger) == "loss: 2.0000 (3.0000)  lr: 0.0200 (0.0200)"
    losses = {"loss_classifier": torch.tensor(1.0)}
    assert det["reduce_dict"](losses) is losses

    for argv, message in (
        (["--amp"], "--amp (fp16 autocast with a GradScaler) needs --device cuda"),
        (["--images", "3"], "--images must give at least two batches of 2 (got 3)"),
        (["--log-every", "0"], "--log-every must be >= 1"),
    ):
        state = torch.random.get_rng_state()
        try:
            with pytest.raises(SystemExit) as exc:
                det["main"](["--device", "cpu", *argv])
        finally:
            torch.random.set_rng_state(state)
        assert exc.value.code == 2
        assert message in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(
    "args,workers",
    [((), 0), (("--log-every", "2", "--tf32"), 0),
     (("--membound-prefetch", "--num-workers", "1", "--channels-last"), 1)],
)  # fmt: skip
def test_detection_tv_runs_tiny(args, workers):
    """The reference's loop on the CPU (torchvision's Faster R-CNN on 128 x 160 images): the
    four losses logged at the first step, a timer line, and the loader and layout fixes."""
    pytest.importorskip("torchvision")
    proc = run("detection_tv", "--steps", "2", "--warmup-steps", "1", *args, timeout=300)
    t = truth(proc)
    assert t["script"] == "detection_tv" and t["steps"] == 2 and t["step_ms"] > 0
    assert {"batch": 2, "workers": workers, "images": 16, "amp": False, "min_size": 128,
            "max_size": 160}.items() <= t["extra"].items()  # fmt: skip
    first = next(ln for ln in proc.stdout.splitlines() if ln.startswith("Epoch: [0]  [0/8]"))
    for name in ("loss", "loss_classifier", "loss_box_reg", "loss_objectness", "loss_rpn_box_reg"):
        assert f"  {name}: " in first
    assert t["flags"]["log_every"] == (2 if "--log-every" in args else 1)
    assert t["flags"]["tf32"] is ("--tf32" in args)
    assert t["flags"]["membound_prefetch"] is ("--membound-prefetch" in args)


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
        (
            "wav2vec2_ctc",
            ("--swap-norms", "--no-logging-nan-inf-filter"),
            {"norms": 6, "norms_swapped": 6},
        ),
        ("classification_tv", ("--channels-last", "--log-every", "2"), {"workers": 0}),
        ("classification_tv", ("--gpu-decode",), {"workers": 0}),
    ],
)
def test_framework_script_runs_tiny(script, args, extra):
    pytest.importorskip(FRAMEWORK[script])
    if script == "resnet50_prefetch":
        pytest.importorskip("torchvision")
    t = truth(run(script, "--steps", "1", "--warmup-steps", "1", *args, timeout=300))
    assert t["script"] == script and t["steps"] == 1 and t["step_ms"] > 0
    assert extra.items() <= t["extra"].items()


@pytest.mark.parametrize("script", ["lightning_fit", "segmentation_tv", "vit_timm"])
def test_prefetch_knobs_reach_the_prefetcher(script, in_process, monkeypatch, capsys):
    # the truth runs time membound.data.prefetch's producers against each other
    # (bench_truth's membound-prefetch-thread): each script offers both knobs, and
    # prefetch_kwargs hands them to membound.data.prefetch by its own keyword names
    monkeypatch.setattr(sys, "argv", [f"{script}.py", "--help"])
    with pytest.raises(SystemExit):
        runpy.run_path(str(REAL / f"{script}.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "--prefetch-producer {thread,inline,auto}" in out and "--prefetch-threads" in out
    import inspect

    import _common

    import membound.data

    p = _common.parser("doc", steps=1, warmup=0)
    _common.add_prefetch_options(p)
    assert _common.prefetch_kwargs(p.parse_args([])) == {}  # the prefetcher's own defaults
    kw = _common.prefetch_kwargs(p.parse_args(["--prefetch-producer", "inline"]))
    assert kw == {"producer": "inline"}
    assert set(kw) <= set(inspect.signature(membound.data.prefetch).parameters)
    # the scripts import membound only with --membound-prefetch, so they keep their own copy
    # of the producers' names: the prefetcher's own
    from membound.data.prefetch import PRODUCERS

    (choices,) = [a.choices for a in p._actions if a.dest == "prefetch_producer"]
    assert tuple(choices) == PRODUCERS


def test_tf32_flags_read_where_the_legacy_api_refuses(in_process):
    """The truth line's TF32 flags: the legacy read where it answers; where torch refuses it
    (a framework set TF32 through the per-backend API: the T5's --tf32 run failed so on an
    H100, 2026-12-07), the backend's `fp32_precision`; None where neither says."""
    from types import SimpleNamespace

    import _common

    def refuses():
        raise RuntimeError("you have used mix of the legacy and new APIs")

    assert _common.tf32_flag(lambda: 1, SimpleNamespace()) is True
    assert _common.tf32_flag(refuses, SimpleNamespace(fp32_precision="tf32")) is True
    assert _common.tf32_flag(refuses, SimpleNamespace(fp32_precision="ieee")) is False
    assert _common.tf32_flag(refuses, SimpleNamespace()) is None
    got = _common.matmul_precision()
    assert set(got) == {"allow_tf32", "cudnn_allow_tf32", "float32_precision"}
    assert got["float32_precision"] in ("highest", "high", "medium")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/task")
def test_autograd_cpu_reads_only_the_autograd_threads(in_process):
    """The plain runs' `autograd_cpu_ms` is the CPU of the threads named `pt_autograd_*`
    (backward's host work on CUDA): a thread of that name that burns ~60 ms counts, one of
    another name that burns as much does not."""
    import ctypes
    import threading
    import time

    import _common

    libc = ctypes.CDLL(None)

    def burn(name: bytes, started: threading.Event, stop: threading.Event) -> None:
        libc.prctl(15, ctypes.c_char_p(name), 0, 0, 0)  # PR_SET_NAME: the thread's comm
        t = time.thread_time()
        while time.thread_time() - t < 0.06:
            pass
        started.set()
        stop.wait(10)

    assert _common.autograd_cpu_ms() is None  # none such in this process yet
    stop = threading.Event()
    threads = []
    for name in (b"pt_autograd_7", b"not_autograd"):
        started = threading.Event()
        th = threading.Thread(target=burn, args=(name, started, stop), daemon=True)
        th.start()
        assert started.wait(10)
        threads.append(th)
    try:
        got = _common.autograd_cpu_ms()
        assert got is not None and 55 <= got < 110, got
    finally:
        stop.set()
        for th in threads:
            th.join(10)


def test_blocking_sync_is_a_cuda_only_aid(monkeypatch):
    """MEMBOUND_BLOCKING_SYNC=1 changes nothing on the CPU: the run's line has no
    `blocking_sync` (and, with no autograd device threads, no `autograd_cpu_ms`)."""
    monkeypatch.setenv("MEMBOUND_BLOCKING_SYNC", "1")
    out = truth(run("mnist_cnn", "--steps", "2", "--warmup-steps", "1"))
    assert "blocking_sync" not in out and "autograd_cpu_ms" not in out
    assert out["steps"] == 2
