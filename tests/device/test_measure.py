"""Measuring ceilings for real: CPU quick run here; the full CUDA run on a GPU."""

from __future__ import annotations

import pytest
import torch

from membound.device import get_ceilings
from membound.device.ceilings import Ceilings
from membound.device.measure import STEPS, step
from membound.errors import BadInput, NeedsGPU


def test_cpu_quick_measurement_is_plausible():
    c = get_ceilings("cpu", quick=True, progress=False)
    assert c.source == "measured" and c.device == "cpu"
    assert 1e8 < c.memory_bandwidth < 1e13
    assert 1e8 < c.read_bandwidth < 1e13
    assert set(c.flops) == {"fp32", "bf16"}
    assert all(1e8 < v < 1e15 for v in c.flops.values())
    assert c.seconds is not None and c.seconds < 30
    assert c.transfers == []
    assert 1e8 < c.write_bandwidth < 1e13
    assert 1e8 < c.read_mix_bandwidth < 1e13
    assert c.l2_bandwidth is None and c.l2_bytes is None  # the L2 step is the GPU's only
    # each step's seconds, in the order the steps ran; together no more than the whole
    assert list(c.step_seconds) == [s.key for s in STEPS if s.device == "cpu"]
    assert all(v >= 0 for v in c.step_seconds.values())
    assert sum(c.step_seconds.values()) <= c.seconds + 5e-4 * len(c.step_seconds)  # rounded
    assert Ceilings.from_dict(c.to_dict()).step_seconds == c.step_seconds
    # every figure keeps the spread of its repeated runs around the median it reports
    assert set(c.spread) == {"memory_bandwidth", "read_bandwidth", "write_bandwidth",
                             "read_mix_bandwidth", "flops.fp32", "flops.bf16"}  # fmt: skip
    for figure, value in [("memory_bandwidth", c.memory_bandwidth),
                          ("read_bandwidth", c.read_bandwidth),
                          ("read_mix_bandwidth", c.read_mix_bandwidth),
                          ("write_bandwidth", c.write_bandwidth),
                          ("flops.fp32", c.flops["fp32"]), ("flops.bf16", c.flops["bf16"])]:  # fmt: skip
        slow, fast = c.spread_of(figure)
        assert slow <= value * (1 + 1e-9) and fast >= value * (1 - 1e-9), figure
    # each matmul ceiling is the best rate of its sweep (one shape, every layout, when quick)
    for key in ("fp32", "bf16"):
        assert c.flops[key] == max(r["flops"] for r in c.matmul_sweep[key])
        assert [(r["layout"], r["order"]) for r in c.matmul_sweep[key]] == [
            ("A@B", 0),
            ("A@B.T", 1),
            ("A.T@B", 2),
        ]


def _plan(**kw):
    from membound.device.measure import Plan

    return Plan(1 << 20, {}, 0, 0, 10, **kw)


def test_sweep_takes_the_best_shape_and_keeps_every_rate():
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _sweep
    from membound.device.timing import Timed

    ms = {(64, 64, 64): 1.0, (128, 128, 128): 2.0, (256, 32, 64): 0.8}  # 128³: 8x the work
    seen = []

    def fake(m, n, k, layout, warmup_ms):
        seen.append(((m, n, k), layout, warmup_ms))
        t = ms[(m, n, k)] * (1.0 if layout == "A@B" else 0.5)  # A@B.T twice as fast
        return Timed(t, t * 0.9, t * 1.2, 5)

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    plan = _plan(matmul_warmup_ms=7, sweep_warmup_ms=300)
    _sweep(c, "fp32", tuple(ms), fake, plan, ("A@B", "A@B.T"))
    rows = c.matmul_sweep["fp32"]
    rates = {((r["m"], r["n"], r["k"]), r["layout"]): r["flops"] for r in rows}
    assert rates[((128, 128, 128), "A@B")] == pytest.approx(2 * 128**3 / 2e-3)
    assert rates[((128, 128, 128), "A@B.T")] == pytest.approx(2 * 128**3 / 1e-3)
    assert c.flops["fp32"] == max(rates.values()) == rates[((128, 128, 128), "A@B.T")]
    slow, fast = c.spread_of("flops.fp32")
    assert slow == pytest.approx(c.flops["fp32"] / 1.2) and fast == pytest.approx(
        c.flops["fp32"] / 0.9
    )
    # both layouts of each shape in the listed order; only the first timing warms up longer
    assert [r["order"] for r in rows] == list(range(6))
    assert [s for s, _, _ in seen] == [s for s in ms for _ in range(2)]
    assert [lay for _, lay, _ in seen] == ["A@B", "A@B.T"] * 3
    assert [w for _, _, w in seen] == [307] + [7] * 5


def test_a_burst_rate_above_the_sustained_one_is_the_ceiling():
    """A shape timed in bursts on an idle GPU (clocks not yet power-capped) that runs faster
    than any sustained timing sets the ceiling; both rates stay in the sweep's rows."""
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _sweep
    from membound.device.timing import BurstClocks, Timed
    from membound.report.ceilings import sweep_table

    sustained = {(64, 64, 64): 1.0, (128, 128, 128): 8.0}  # the same rate
    burst = {(64, 64, 64): 0.9, (128, 128, 128): 6.4}  # 128³ 25% faster in bursts

    def fake(m, n, k, layout, warmup_ms):
        t, b = sustained[(m, n, k)], burst[(m, n, k)]
        return Timed(t, t, t, 5), BurstClocks(Timed(b, b * 0.95, b * 1.1, 10), None)

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c, "bf16", tuple(sustained), fake, _plan())
    rows = c.matmul_sweep["bf16"]
    assert [r["flops"] for r in rows] == pytest.approx([2 * 64**3 / 1e-3, 2 * 128**3 / 8e-3])
    assert [r["burst_flops"] for r in rows] == pytest.approx(
        [2 * 64**3 / 0.9e-3, 2 * 128**3 / 6.4e-3]
    )
    assert c.flops["bf16"] == pytest.approx(2 * 128**3 / 6.4e-3)
    slow, fast = c.spread_of("flops.bf16")  # the burst timing's spread
    assert slow == pytest.approx(c.flops["bf16"] / 1.1)
    # the table shows the burst rates as a row of their own
    table = {(key, layout): rates for key, layout, rates in sweep_table(c)}
    assert set(table) == {("bf16", "A@B"), ("bf16", "A@B burst")}
    assert table[("bf16", "A@B burst")][(128, 128, 128)] == pytest.approx(c.flops["bf16"])
    # a timing without bursts (CPU, or bursts off) is the sustained one alone
    c2 = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(
        c2,
        "bf16",
        tuple(sustained),
        lambda m, n, k, lay, w: (fake(m, n, k, lay, w)[0], None),
        _plan(),
    )
    assert "burst_flops" not in c2.matmul_sweep["bf16"][0]
    assert c2.flops["bf16"] == pytest.approx(2 * 64**3 / 1e-3)


def test_the_fastest_shape_is_timed_again_on_relud_operands():
    """With `Plan.matmul_relu` the sweep times its fastest shape and layout once more on
    ReLU'd operands (half zeros: on the H200 bf16 ran 9% faster on them, and a ReLU MLP's
    weight gradient sat above the random-data roof); that row is kept with its operands,
    sets the ceiling when faster, and shows as a row of its own in the sweep table."""
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _plan as plan_of
    from membound.device.measure import _sweep
    from membound.device.timing import Timed
    from membound.report.ceilings import sweep_table

    ms = {(64, 64, 64): 1.0, (128, 128, 128): 8.0}  # the same rate; 128^3 first in a tie
    seen = []

    def fake(m, n, k, layout, warmup_ms, operands="randn"):
        seen.append(((m, n, k), layout, operands))
        t = (
            ms[(m, n, k)]
            * (0.5 if layout == "A@B.T" else 1.0)
            * (0.9 if operands == "relu" else 1.0)
        )
        return Timed(t, t, t, 5)

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c, "bf16", tuple(ms), fake, _plan(matmul_relu=True), ("A@B", "A@B.T"), relu=True)
    rows = c.matmul_sweep["bf16"]
    assert len(rows) == 5 and rows[-1]["operands"] == "relu" and rows[-1]["order"] == 4
    assert seen[-1] == ((64, 64, 64), "A@B.T", "relu")  # the fastest (first of the tie)
    assert c.flops["bf16"] == pytest.approx(2 * 64**3 / 0.45e-3) == rows[-1]["flops"]
    table = {(key, layout): rates for key, layout, rates in sweep_table(c)}
    assert table[("bf16", "A@B.T relu")] == {(64, 64, 64): pytest.approx(c.flops["bf16"])}
    assert table[("bf16", "A@B.T")][(64, 64, 64)] == pytest.approx(2 * 64**3 / 0.5e-3)
    # off unless asked: the plain sweep and the CPU plans time random operands only
    c2 = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c2, "bf16", tuple(ms), fake, _plan(), ("A@B",), relu=True)
    assert not any("operands" in r for r in c2.matmul_sweep["bf16"])
    assert plan_of("cpu", False).matmul_relu is False


def test_gpu_plans_time_bursts_and_the_deep_k_shape():
    from membound.device.measure import GPU_MATMUL_SHAPES, _plan

    assert (4096, 4096, 16384) in GPU_MATMUL_SHAPES
    assert _plan("cpu", False).matmul_bursts == 0  # bursts are a GPU timing


def test_sweep_in_reverse_order_times_the_last_shape_first():
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _sweep
    from membound.device.timing import Timed

    shapes = ((64, 64, 64), (128, 128, 128), (256, 32, 64))
    seen = []

    def fake(m, n, k, layout, warmup_ms):
        seen.append((m, n, k))
        return Timed(1.0, 0.9, 1.1, 5)

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c, "bf16", shapes, fake, _plan(sweep_order="reverse"))
    assert seen == list(shapes[::-1])
    assert [((r["m"], r["n"], r["k"]), r["order"]) for r in c.matmul_sweep["bf16"]] == [
        (s, i) for i, s in enumerate(shapes[::-1])
    ]
    with pytest.raises(ValueError, match="sweep order"):
        _sweep(c, "bf16", shapes, fake, _plan(sweep_order="sideways"))


def test_plan_takes_the_sweep_order():
    from membound.device.measure import plan_for

    assert plan_for("cpu", True).sweep_order == "forward"
    assert plan_for("cpu", True, "reverse").sweep_order == "reverse"
    with pytest.raises(ValueError, match="sweep order"):
        plan_for("cpu", True, "backwards")


def test_an_hbm_kernel_faster_in_bursts_sets_the_pass(monkeypatch):
    """On a GPU plan with `memory_bursts`, each HBM kernel is also timed in bursts, by events
    and (with `kernel_clock`) by its kernels' durations; the fastest of the three is the
    kernel's rate (and so the pass's, with its spread), a slower one is not; every clock's
    rates are kept beside the pass's."""
    from membound.device import measure
    from membound.device.ceilings import Ceilings
    from membound.device.timing import BurstClocks, Timed

    sustained = {"fill_ fp32": 2.0, "fill_ bf16": 2.0}
    burst = {"fill_ fp32": 1.6, "fill_ bf16": 2.5}  # fp32 25% faster in bursts, bf16 slower
    kernels = {"fill_ fp32": 1.7, "fill_ bf16": 1.8}  # bf16 fastest by its kernel's clock
    current = []
    asked = []

    def fake_kernel(name, n_bytes, device):
        current.append(name)
        return (lambda: None), n_bytes

    def fake_timed(fn, device, **kw):
        t = sustained[current[-1]]
        return Timed(t, t, t, 9)

    def fake_clocks(fn, *, bursts, kernel_clock, idle_ms, before):
        assert bursts == 10 and idle_ms == 20.0 and before is None
        asked.append(kernel_clock)
        b, k = burst[current[-1]], kernels[current[-1]]
        return BurstClocks(
            Timed(b, b * 0.9, b * 1.2, bursts),
            Timed(k, k * 0.95, k * 1.1, bursts) if kernel_clock else None,
        )

    monkeypatch.setattr(measure, "_hbm_kernel", fake_kernel)
    monkeypatch.setattr(measure, "timed", fake_timed)
    monkeypatch.setattr(measure, "cuda_burst_clocks", fake_clocks)
    c = Ceilings(device="cuda", name="x", memory_bandwidth=1.0)
    measure._hbm_pass("write_bandwidth")(c, _plan(memory_bursts=10, kernel_clock=True))
    buf = 1 << 20
    assert asked == [True, True]
    assert c.memory_sweep["write_bandwidth"] == pytest.approx(
        {"fill_ fp32": buf / 1.6e-3, "fill_ bf16": buf / 1.8e-3}
    )
    assert c.memory_sweep["write_bandwidth burst"] == pytest.approx(
        {"fill_ fp32": buf / 1.6e-3, "fill_ bf16": buf / 2.5e-3}
    )
    assert c.memory_sweep["write_bandwidth kernel clock"] == pytest.approx(
        {"fill_ fp32": buf / 1.7e-3, "fill_ bf16": buf / 1.8e-3}
    )
    assert c.memory_sweep["write_bandwidth sustained"] == pytest.approx(
        {"fill_ fp32": buf / 2.0e-3, "fill_ bf16": buf / 2.0e-3}
    )
    assert c.write_bandwidth == pytest.approx(buf / 1.6e-3)
    assert c.spread["write_bandwidth"] == pytest.approx([buf / 1.92e-3, buf / 1.44e-3])
    # bursts without the kernel clock: events only, no kernel-clock rates kept
    asked.clear()
    c1 = Ceilings(device="cuda", name="x", memory_bandwidth=1.0)
    measure._hbm_pass("write_bandwidth")(c1, _plan(memory_bursts=10))
    assert asked == [False, False] and "write_bandwidth kernel clock" not in c1.memory_sweep
    assert c1.memory_sweep["write_bandwidth"]["fill_ bf16"] == pytest.approx(buf / 2.0e-3)
    # without bursts in the plan (or off a GPU) only the sustained timing is made
    c2 = Ceilings(device="cuda", name="x", memory_bandwidth=1.0)
    measure._hbm_pass("write_bandwidth")(c2, _plan())
    assert c2.write_bandwidth == pytest.approx(buf / 2.0e-3)
    assert set(c2.memory_sweep) == {"write_bandwidth"}


def test_an_hbm_kernel_faster_on_a_smaller_buffer_sets_the_pass(monkeypatch):
    """With `memory_sizes`, each kernel is also timed on those buffers, in bursts by the
    kernel clock; a faster rate there is the kernel's (and the pass's), each size's rates
    are kept under their own key, and the buffers of the plan's size come first."""
    from membound.device import measure
    from membound.device.ceilings import Ceilings
    from membound.device.timing import BurstClocks, Timed

    sizes = []

    def fake_kernel(name, n_bytes, device):
        sizes.append(n_bytes)
        return (lambda: None), n_bytes

    def fake_timed(fn, device, **kw):
        return Timed(2.0, 2.0, 2.0, 9)

    def fake_clocks(fn, *, bursts, kernel_clock, idle_ms, before):
        assert idle_ms == 5.0 and before == "clean"  # every burst of every size
        n = sizes[-1]
        # by the kernel clock: 2 ms on the plan's 1 MiB; 0.45 ms on 256 KiB (4.4% faster)
        k = 2.0 if n == 1 << 20 else 0.45 if n == 1 << 18 else 1.0
        return BurstClocks(Timed(2.1, 2.1, 2.1, 5), Timed(k, k, k, 5))

    monkeypatch.setattr(measure, "_hbm_kernel", fake_kernel)
    monkeypatch.setattr(measure, "timed", fake_timed)
    monkeypatch.setattr(measure, "cuda_burst_clocks", fake_clocks)
    c = Ceilings(device="cuda", name="x", memory_bandwidth=1.0)
    asked = []
    monkeypatch.setattr(measure, "clean_l2", lambda n, device: asked.append(n) or "clean")
    plan = _plan(memory_bursts=10, kernel_clock=True, memory_sizes=(1 << 18, 1 << 19),
                 memory_idle_ms=5.0, clean_l2_bytes=3 << 20)  # fmt: skip
    measure._hbm_pass("write_bandwidth")(c, plan)
    assert sizes == [1 << 20, 1 << 18, 1 << 19] * 2
    assert asked == [3 << 20]  # one clean-L2 buffer for the pass
    assert c.write_bandwidth == pytest.approx((1 << 18) / 0.45e-3)
    assert c.memory_sweep["write_bandwidth kernel clock 256 KiB"] == pytest.approx(
        {"fill_ fp32": (1 << 18) / 0.45e-3, "fill_ bf16": (1 << 18) / 0.45e-3}
    )
    assert c.memory_sweep["write_bandwidth kernel clock 512 KiB"] == pytest.approx(
        {"fill_ fp32": (1 << 19) / 1e-3, "fill_ bf16": (1 << 19) / 1e-3}
    )
    assert c.memory_sweep["write_bandwidth"]["fill_ fp32"] == pytest.approx((1 << 18) / 0.45e-3)
    assert c.memory_sweep["write_bandwidth kernel clock"] == pytest.approx(
        {"fill_ fp32": (1 << 20) / 2e-3, "fill_ bf16": (1 << 20) / 2e-3}
    )


def test_the_full_gpu_plan_reads_the_kernel_clock():
    """The plan a `membound roofline` on a GPU runs times its bursts by the kernels' clock
    too; the quick one (tests, CI) does not."""
    import types

    import torch

    from membound.device import measure

    props = types.SimpleNamespace(L2_cache_size=50 << 20, total_memory=140 << 30)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.cuda, "current_device", lambda: 0)
        mp.setattr(torch.cuda, "get_device_properties", lambda i: props)
        full, quick = measure._plan("cuda", False), measure._plan("cuda", True)
    assert full.kernel_clock and full.memory_bursts and full.matmul_bursts
    assert full.clean_l2_bytes == 2 * props.L2_cache_size and not quick.clean_l2_bytes
    assert not quick.kernel_clock
    assert not measure._plan("cpu", False).kernel_clock


def test_a_matmul_faster_by_its_kernel_clock_sets_the_ceiling():
    """A sweep shape's bursts timed by their kernels (`kernel_flops`) faster than by events
    (`burst_flops`) and sustained (`flops`) set the dtype's ceiling, with that timing's
    spread; the rows keep all three."""
    from membound.device.ceilings import Ceilings
    from membound.device.measure import _sweep
    from membound.device.timing import BurstClocks, Timed

    times = {(64, 64, 64): (2.0, 1.8, 1.5), (128, 64, 64): (4.0, 3.9, 3.95)}

    def fake(m, n, k, layout, warmup_ms):
        s, b, kc = times[(m, n, k)]
        return Timed(s, s, s, 5), BurstClocks(Timed(b, b, b, 5), Timed(kc, kc * 0.9, kc, 5))

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    _sweep(c, "bf16", list(times), fake, _plan())
    rows = {(r["m"], r["n"], r["k"]): r for r in c.matmul_sweep["bf16"]}
    work = 2 * 64**3
    assert rows[(64, 64, 64)]["flops"] == pytest.approx(work / 2.0e-3)
    assert rows[(64, 64, 64)]["burst_flops"] == pytest.approx(work / 1.8e-3)
    assert rows[(64, 64, 64)]["kernel_flops"] == pytest.approx(work / 1.5e-3)
    assert c.flops["bf16"] == pytest.approx(work / 1.5e-3)
    assert c.spread["flops.bf16"] == pytest.approx([work / 1.5e-3, work / 1.35e-3])


@pytest.mark.parametrize(
    ("figure", "moves"),
    [
        # bytes each kernel moves per byte of one buffer (reads + writes)
        ("write_bandwidth", {"fill_ fp32": 1, "fill_ bf16": 1}),
        ("memory_bandwidth", {"copy_ fp32": 2, "copy_ bf16": 2, "clamp_min fp32": 2,
                              "clamp_min bf16": 2}),
        ("read_mix_bandwidth", {"add fp32": 3, "add bf16": 3, "to_bf16 fp32": 1.5,
                                "threshold_backward bf16": 3}),
        ("read_bandwidth", {"sum fp32": 1, "sum bf16": 1}),
    ],
)  # fmt: skip
def test_each_hbm_pass_is_the_best_of_its_kernels(monkeypatch, figure, moves):
    """Every kernel of a pass runs on buffers of the plan's size and is timed; its rate is
    the bytes it reads and writes ÷ the median time. The figure is the fastest kernel's
    (here the third timed: 1 ms against 2), with that kernel's spread; every rate is kept."""
    from membound.device import measure
    from membound.device.ceilings import Ceilings
    from membound.device.timing import Timed

    ran = []

    def fake_timed(fn, device, **kw):
        fn()
        ms = 1.0 if len(ran) == 2 else 2.0
        ran.append(ms)
        return Timed(ms, ms * 0.75, ms * 2, 9)

    monkeypatch.setattr(measure, "timed", fake_timed)
    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    measure._hbm_pass(figure)(c, _plan())
    buf = 1 << 20
    names = list(measure.HBM_KERNELS[figure])
    assert list(c.memory_sweep[figure]) == names == list(moves)
    for i, name in enumerate(names):
        assert c.memory_sweep[figure][name] == pytest.approx(moves[name] * buf / (ran[i] * 1e-3))
    best = names[2] if len(names) > 2 else names[0]
    assert getattr(c, figure) == pytest.approx(c.memory_sweep[figure][best])
    assert getattr(c, figure) == max(c.memory_sweep[figure].values())
    t = ran[names.index(best)]
    assert c.spread[figure] == pytest.approx([moves[best] * buf / (2 * t * 1e-3),
                                              moves[best] * buf / (0.75 * t * 1e-3)])  # fmt: skip


def test_the_hbm_kernels_compute_what_they_say():
    from membound.device import measure

    for name in [k for ks in measure.HBM_KERNELS.values() for k in ks]:
        fn, moved = measure._hbm_kernel(name, 4096, "cpu")
        out = fn()
        assert moved in (4096, 2 * 4096, 3 * 4096, 4096 + 4096 // 2), name
        if name.startswith("to_bf16"):
            assert out.dtype == torch.bfloat16 and moved == 4096 + 2 * out.numel()
        if name.startswith("fill_"):
            assert bool((out == 1).all())
        if name.startswith("clamp_min"):
            assert float(out.min()) >= 0.5


def test_l2_bandwidth_is_the_rate_between_two_sizes_inside_l2(monkeypatch):
    """`_l2` copies L2/8 and L2/16 sources (each with its destination: a quarter and an eighth
    of L2) in graphs of back-to-back copies; the rate is the bytes between the two sizes over
    the time between them, so each copy's fixed cost (here 3 µs) drops out."""
    from membound.device import measure
    from membound.device.ceilings import Ceilings

    l2 = 8 << 20
    fixed_ms, rate = 3e-3, 5e12  # per copy: 3 µs fixed, then bytes at 5 TB/s
    got = {}

    def fake_replays(fns, *, reps, samples):
        got["reps"], got["samples"] = reps, samples
        out = []
        for fn in fns:
            dst = fn()
            got.setdefault("elements", []).append(dst.numel())
            ms = fixed_ms + 2 * dst.numel() * 4 / rate * 1e3
            out.append([ms * (1 + 0.01 * (i % 3)) for i in range(samples)])
        return out

    monkeypatch.setattr(measure, "cuda_graph_replays_ms", fake_replays)
    c = Ceilings(device="cpu", name="x", memory_bandwidth=1e12)
    measure._l2(c, _plan(l2_bytes=l2, l2_reps=40, l2_samples=9))
    assert got["elements"] == [l2 // 32, l2 // 64]  # fp32 sources of L2/8 and L2/16 bytes
    assert (got["reps"], got["samples"]) == (40, 9)
    assert c.l2_bytes == l2
    # the fixed cost would have pulled a one-size rate down to ~2.9e12
    assert c.l2_bandwidth == pytest.approx(rate, rel=0.03)
    slow, fast = c.spread_of("l2_bandwidth")
    assert slow <= c.l2_bandwidth <= fast


def test_l2_step_skips_without_a_size_or_a_difference(monkeypatch):
    from membound.device import measure
    from membound.device.ceilings import Ceilings

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1e12)
    with pytest.raises(measure.Skip, match="L2 size"):
        measure._l2(c, _plan(l2_bytes=0))
    monkeypatch.setattr(
        measure, "cuda_graph_replays_ms", lambda fns, **kw: [[1.0, 1.0, 0.9], [1.0, 1.0, 1.0]]
    )
    with pytest.raises(measure.Skip, match="did not take longer"):
        measure._l2(c, _plan(l2_bytes=1 << 20))
    assert c.l2_bandwidth is None and c.l2_bytes is None


def test_matmul_step_times_every_layout_on_cpu():
    """The real matmul step on small CPU shapes, each in the three layouts of nn.Linear's
    products: A@B (input gradient), A@B.T (forward), A.T@B (weight gradient)."""
    from membound.device.ceilings import Ceilings
    from membound.device.measure import Plan, _matmul

    c = Ceilings(device="cpu", name="x", memory_bandwidth=1.0)
    plan = Plan(1 << 20, {"fp32": ((64, 48, 32), (96, 64, 32))}, 0, 0, 5)
    _matmul("fp32")(c, plan)
    rows = c.matmul_sweep["fp32"]
    assert [(r["m"], r["n"], r["k"], r["layout"], r["order"]) for r in rows] == [
        (64, 48, 32, "A@B", 0), (64, 48, 32, "A@B.T", 1), (64, 48, 32, "A.T@B", 2),
        (96, 64, 32, "A@B", 3), (96, 64, 32, "A@B.T", 4), (96, 64, 32, "A.T@B", 5),
    ]  # fmt: skip
    assert c.flops["fp32"] == max(r["flops"] for r in rows) > 0


def test_steps_refuse_duplicates():
    with pytest.raises(ValueError, match="twice"):
        step("cpu", "copy", "again")(lambda c, p: None)
    keys = [(s.device, s.key) for s in STEPS]
    assert len(keys) == len(set(keys))
    assert sum(s.device == "cuda" and s.key.startswith(("h2d", "d2h")) for s in STEPS) == 8


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU error")
def test_cuda_without_gpu_says_so():
    with pytest.raises(NeedsGPU, match="--device cpu"):
        get_ceilings("cuda")


@pytest.mark.parametrize("device", ["tpu", "mps", "nonsense:3"])
def test_unsupported_device_is_bad_input(device):
    with pytest.raises((BadInput, NeedsGPU)):
        get_ceilings(device)


@pytest.mark.gpu
def test_cuda_quick_measurement_shows_the_pageable_trap():
    c = get_ceilings("cuda", quick=True, progress=False)
    assert c.memory_bandwidth > 1e11 and c.read_bandwidth > 1e11
    for key in ("fp32", "tf32", "fp16", "bf16"):
        assert c.flops[key] > 1e12, key
    if torch.cuda.get_device_capability() >= (8, 0):
        assert c.flops["bf16"] > c.flops["fp32"]
    assert len(c.transfers) == 8
    pinned_nb = c.transfer("h2d", "pinned", True)
    pageable_nb = c.transfer("h2d", "pageable", True)
    # the key fact: non_blocking from pageable memory still blocks the host; from pinned it does not
    assert pageable_nb.host_blocked_fraction > 0.5
    assert pinned_nb.host_blocked_fraction < 0.3
    assert pinned_nb.bandwidth > pageable_nb.bandwidth
    slow, fast = pinned_nb.bandwidth_spread
    assert slow <= pinned_nb.bandwidth <= fast
    slow, fast = c.spread_of("flops.bf16")
    assert slow <= c.flops["bf16"] <= fast
    assert c.datasheet is None or c.datasheet["memory_bandwidth"] > 0
    # the write-only pass and the copy inside L2 (when torch reports an L2 size)
    assert c.write_bandwidth > 1e11
    # two reads to one write: within the spread of HBM's rates (not L2's: buffers > L2)
    assert 0.7 * c.memory_bandwidth < c.read_mix_bandwidth < 1.3 * c.memory_bandwidth
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    if getattr(props, "L2_cache_size", 0):
        assert c.l2_bytes == props.L2_cache_size
        assert c.l2_bandwidth > c.memory_bandwidth  # L2 outruns HBM
    rows = c.matmul_sweep["bf16"]
    assert {r["layout"] for r in rows} == {"A@B", "A@B.T", "A.T@B"}
    if "fp8" in c.matmul_sweep:  # cuBLASLt's fp8 takes B column-major only
        assert {r["layout"] for r in c.matmul_sweep["fp8"]} == {"A@B.T"}


@pytest.mark.gpu
def test_graph_replays_keep_l2_resident_copies_fast():
    """`cuda_graph_replays_ms`: per fn, `samples` times per call; a copy twice as large
    (both inside an H100/H200's L2) takes longer."""
    from membound.device.timing import cuda_graph_replays_ms

    a = torch.rand(1 << 20, device="cuda")
    b = torch.rand(1 << 21, device="cuda")
    da, db = torch.empty_like(a), torch.empty_like(b)
    small, large = cuda_graph_replays_ms(
        [lambda: da.copy_(a), lambda: db.copy_(b)], reps=20, samples=5
    )
    assert len(small) == len(large) == 5
    assert sorted(large)[2] > sorted(small)[2] > 0


def test_a_profilers_cycle_warning_stays_out_of_the_measurement(monkeypatch, recwarn):
    """torch warns once, at some profiler's start, that it clears its events each cycle; on
    the H100 (torch 2.11, 2026-12-07) it landed in `membound roofline`'s output from the
    kernel clock's first profiler. Any step's such warning is kept out; others are not."""
    import warnings

    from membound.device import measure as m

    def noisy(c, plan):
        warnings.warn(
            "Warning: Profiler clears events at the end of each cycle. Only events from the "
            "current cycle will be reported. To keep events across cycles, set acc_events=True.",
            UserWarning,
            stacklevel=1,
        )
        warnings.warn("something else", UserWarning, stacklevel=1)
        c.memory_bandwidth = 1.0

    monkeypatch.setattr(m, "STEPS", [m.Step("cpu", "noisy", "a noisy step", noisy)])
    c = m.measure("cpu", "cpu", {}, quick=True, progress=False)
    assert c.memory_bandwidth == 1.0
    assert [str(w.message) for w in recwarn] == ["something else"]
