"""Terminal tables of a device's ceilings: measured vs datasheet, and host<->device copies;
and the marks the op tables put on a bandwidth fraction of a roof other than HBM's."""

from __future__ import annotations

from membound.device.ceilings import COMPUTE_KEYS, Ceilings

_FLOP_LABELS = {
    "fp64": "fp64",
    "fp32": "matmul fp32 (TF32 off)",
    "tf32": "matmul tf32",
    "fp16": "matmul fp16",
    "bf16": "matmul bf16",
    "fp8": "matmul fp8",
    "int8": "matmul int8",
    "fp32_vector": "fp32 vector FMA",
}


#: the mark an op table's bandwidth fraction carries when it is of a roof other than the HBM
#: copy's (`OpRow.memory_roof`), and the line that says what the marks mean
ROOF_MARKS = {"l2": " L2", "l2-reads": " L2r", "write": " W", "mixed": " mix"}
ROOF_LEGEND = (
    "of BW: of the HBM copy rate; marked L2: of the L2 copy rate (calls whose bytes fit in L2), "
    "L2r: reads that fit in L2 at its rate, the rest at HBM's, W: of the write rate (fills), "
    "mix: of each call's own (some calls fit in L2)"
)


def roof_mark(memory_roof: str | None) -> str:
    """ " L2" / " L2r" / " W" / " mix" after a bandwidth fraction held to the L2 / L2-reads /
    write / several roofs (`analysis.roofline.MEMORY_ROOFS`); "" for HBM's."""
    return ROOF_MARKS.get(memory_roof or "", "")


def roof_legend(rows) -> str | None:
    """`ROOF_LEGEND` when some op row is held to a roof other than HBM's, else None."""
    return ROOF_LEGEND if any(roof_mark(getattr(r, "memory_roof", None)) for r in rows) else None


def _tera(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if x >= 1e12:
        return f"{x / 1e12:.3g} T{unit}"
    return f"{x / 1e9:.3g} G{unit}"


def ceiling_rows(c: Ceilings) -> list[tuple[str, float | None, float | None]]:
    """(label, measured, datasheet) for every ceiling, in display order."""
    return [(label, measured, sheet) for label, _, measured, sheet in _rows(c)]


def _rows(c: Ceilings) -> list[tuple[str, str, float | None, float | None]]:
    sheet = c.datasheet or {}
    rows: list[tuple[str, str, float | None, float | None]] = [
        (_hbm_label(c, "memory_bandwidth", "copy (read+write)", "1 read : 1 write"),
         "memory_bandwidth", c.memory_bandwidth, sheet.get("memory_bandwidth")),
        (_hbm_label(c, "read_bandwidth", "read (sum)", "read"), "read_bandwidth",
         c.read_bandwidth, sheet.get("memory_bandwidth")),
    ]  # fmt: skip
    # measured since issue 16: rows only where the ceilings have them (older files do not)
    mix = getattr(c, "read_mix_bandwidth", None)
    if mix is not None:
        rows.append((_hbm_label(c, "read_mix_bandwidth", "2 reads : 1 write (add)",
                                "2 reads : 1 write"), "read_mix_bandwidth", mix,
                     sheet.get("memory_bandwidth")))  # fmt: skip
    write = getattr(c, "write_bandwidth", None)
    if write is not None:
        rows.append((_hbm_label(c, "write_bandwidth", "write (fill_)", "write"),
                     "write_bandwidth", write, sheet.get("memory_bandwidth")))  # fmt: skip
    l2 = getattr(c, "l2_bandwidth", None)
    if l2 is not None:
        size = getattr(c, "l2_bytes", None)
        where = f" of {size / (1 << 20):.0f} MiB" if size else ""
        rows.append((f"L2 bandwidth: copy inside L2{where} (read+write)", "l2_bandwidth", l2, None))
    for key in COMPUTE_KEYS:
        if key in c.flops:
            rows.append((_FLOP_LABELS.get(key, key), f"flops.{key}", c.flops[key], sheet.get(key)))
    return rows


def _hbm_label(c: Ceilings, figure: str, single: str, mix: str) -> str:
    """An HBM pass's row label: the kernel that set it where several were timed
    (`Ceilings.memory_sweep`, "1 read : 1 write (best: clamp_min bf16)"), else the one kernel
    files written before timed."""
    rates = (getattr(c, "memory_sweep", None) or {}).get(figure)
    if not rates:
        return f"memory bandwidth: {single}"
    return f"memory bandwidth: {mix} (best: {max(rates, key=rates.__getitem__)})"


def spread_text(measured: float | None, spread: tuple[float, float] | None) -> str:
    """How far the slow and fast runs (10th/90th percentile) lie from the median figure,
    e.g. "-3% +1%"; "-" when the figure was not measured over repeated runs."""
    if not measured or spread is None:
        return "-"
    slow, fast = (round(100 * (x / measured - 1)) for x in spread)
    return f"{slow:+d}% {fast:+d}%"


def ridge_key(c: Ceilings) -> str | None:
    """The compute roof a headline ridge point is quoted for: bf16 tensor cores on a GPU;
    on a CPU its best measured rate (its bf16 matmul can be 100x below its fp32 one)."""
    if not c.flops:
        return None
    if c.device == "cuda" and "bf16" in c.flops:
        return "bf16"
    return max(c.flops, key=c.flops.get)


def render(
    ceilings: Ceilings, console=None, cached: bool = False, previous: Ceilings | None = None
) -> None:
    """Print the ceilings table (and the transfer table when there are transfers); `cached`:
    the figures were loaded, not measured now (the title says so); `previous`: the
    measurement this one replaced (a column shows how far each figure moved since)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    c = ceilings
    where = f"{c.name} ({c.device}, {c.source}"
    if c.measured_at:
        where += f" {c.measured_at}"
    if c.seconds is not None:
        where += f", took {c.seconds:.1f} s"
        slow = sorted(c.step_seconds.items(), key=lambda kv: -kv[1])[:3]
        if slow and c.seconds > 0:
            where += " (" + ", ".join(f"{k} {v:.1f}" for k, v in slow) + " the longest)"
    if cached:
        where += "; cached: --refresh measures again"
    t = Table(title=f"ceilings of {where})", title_justify="left")
    spreads = bool(c.spread)
    before = {figure: value for _, figure, value, _ in _rows(previous)} if previous else {}
    sheets = bool(c.datasheet)  # no columns of dashes where no vendor figures are known
    cols = ["ceiling", "measured"] + ["spread"] * spreads + ["datasheet", "fraction"] * sheets
    cols += ["vs previous"] * bool(before)
    for col in cols:
        t.add_column(col, justify="left" if col == "ceiling" else "right")
    for label, figure, measured, sheet in _rows(c):
        unit = "FLOP/s" if figure.startswith("flops.") else "B/s"
        frac = f"{measured / sheet:.0%}" if measured and sheet else "-"
        cells = [label, _tera(measured, unit)]
        if spreads:
            cells.append(spread_text(measured, c.spread_of(figure)))
        if sheets:
            cells += [_tera(sheet, unit), frac]
        if before:
            old = before.get(figure)
            cells.append(f"{round(100 * (measured / old - 1)):+d}%" if measured and old else "-")
        t.add_row(*cells)
    caption = []
    key = ridge_key(c)
    if key and c.memory_bandwidth:
        caption.append(f"ridge point ({_FLOP_LABELS.get(key, key)}): {c.ridge(key):.3g} FLOP/byte")
    if spreads:
        caption.append(
            "spread: the slow and fast runs (10th/90th percentile) against the median; "
            "a wide one means the device was busy or changing clocks while measured"
        )
    if before:
        caption.append(
            f"vs previous: against the measurement of {previous.measured_at or 'unknown date'}"
            " that this one replaces"
        )
    t.caption = "\n".join(caption) or None
    console.print(t)

    sweep = sweep_table(c)
    if sweep:
        shapes = list(dict.fromkeys(shape for *_, rates in sweep for shape in rates))
        st = Table(title="matmul sweep: sustained rate per shape (m x n x k)", title_justify="left")
        st.add_column("matmul")
        layouts = len({layout for _, layout, _ in sweep}) > 1
        if layouts:
            st.add_column("layout")
        for m, n, k in shapes:
            st.add_column(f"{m}x{n}x{k}", justify="right")
        best = {}
        for key, _, rates in sweep:
            best[key] = max(best.get(key, 0.0), *rates.values())
        for key, layout, rates in sweep:
            st.add_row(
                _FLOP_LABELS.get(key, key),
                *([layout] if layouts else []),
                *(
                    "-" if shape not in rates
                    else ("[bold]" if rates[shape] == best[key] else "")
                    + _tera(rates[shape], "FLOP/s")
                    for shape in shapes
                ),
            )  # fmt: skip
        st.caption = "the ceiling is each matmul's best (bold); shapes in the order timed"
        st.caption += (
            "; A@B.T: B stored (n, k), as nn.Linear's weight; A.T@B: A stored (k, m), as "
            "in a weight's gradient"
            if layouts
            else ""
        )
        console.print(st)

    if c.transfers:
        tt = Table(title="host <-> device copies", title_justify="left")
        for col in ("copy", "host memory", "non_blocking", "MB", "GB/s", "spread", "host blocked"):
            tt.add_column(col, justify="left" if col in ("copy", "host memory") else "right")
        for x in c.transfers:
            spread = tuple(x.bandwidth_spread) if x.bandwidth_spread else None
            tt.add_row(
                x.direction.upper(),
                x.memory,
                str(x.non_blocking),
                f"{x.bytes / 1e6:.0f}",
                f"{x.bandwidth / 1e9:.1f}",
                spread_text(x.bandwidth, spread),
                f"{x.host_blocked_fraction:.1%}",
            )
        tt.caption = "host blocked: share of the copy during which the copy_ call had not returned"
        console.print(tt)
    rows = interconnect_rows(c)
    if rows:
        it = Table(title="GPU <-> GPU", title_justify="left")
        for col in ("link", "message", "GB/s"):
            it.add_column(col, justify="left" if col == "link" else "right")
        for label, message, bw in rows:
            it.add_row(label, message, f"{bw / 1e9:.0f}")
        it.caption = "all-reduce: nccl-tests bus bandwidth, 2(n-1)/n x algorithm bandwidth"
        console.print(it)
    for note in c.notes:
        console.print(f"[dim]not measured: {note}[/dim]")


def interconnect_rows(c: Ceilings) -> list[tuple[str, str, float]]:
    """(link, message size, bytes/s) for the GPU<->GPU figures measured on 2+ GPU machines."""
    ic = getattr(c, "interconnect", None) or {}
    rows: list[tuple[str, str, float]] = []
    if ic.get("peer_copy_bandwidth"):
        rows.append(("peer copy cuda:0 -> cuda:1", "-", float(ic["peer_copy_bandwidth"])))
    by_size = ic.get("allreduce_bus_bandwidth_by_size") or {}
    if not by_size and ic.get("allreduce_bus_bandwidth"):
        by_size = {str(ic.get("allreduce_bytes") or 0): ic["allreduce_bus_bandwidth"]}
    for size, bw in sorted(((int(k), float(v)) for k, v in by_size.items()), key=lambda r: r[0]):
        message = f"{size / (1 << 20):.0f} MiB" if size else "-"
        rows.append(("all-reduce (NCCL), bus", message, bw))
    return rows


def sweep_rows(c: Ceilings) -> list[tuple[str, dict[tuple[int, int, int], float]]]:
    """(compute key, {(m, n, k): FLOP/s, the best of its layouts}) per dtype of the matmul
    sweep, in display order; empty when the ceilings hold one timing per dtype (nothing to
    compare)."""
    merged: dict[str, dict[tuple[int, int, int], float]] = {}
    for key, _, rates in sweep_table(c):
        mine = merged.setdefault(key, {})
        for shape, rate in rates.items():
            mine[shape] = max(mine.get(shape, 0.0), rate)
    return list(merged.items())


def sweep_table(c: Ceilings) -> list[tuple[str, str, dict[tuple[int, int, int], float]]]:
    """(compute key, layout, {(m, n, k): FLOP/s} in the order timed) per dtype and operand
    layout of the matmul sweep ("A@B" for rows written before layouts were timed), in display
    order; empty when the ceilings hold one timing per dtype (nothing to compare)."""
    sweep = getattr(c, "matmul_sweep", None) or {}
    rows = []
    for key in COMPUTE_KEYS:
        runs = sorted(sweep.get(key) or [], key=lambda r: r.get("order", 0))
        by_layout: dict[str, dict[tuple[int, int, int], float]] = {}
        for r in runs:
            shape = (int(r["m"]), int(r["n"]), int(r["k"]))
            # ReLU'd operands (`device.measure._sweep`) are a row of their own
            lay = str(r.get("layout", "A@B")) + (f" {r['operands']}" if r.get("operands") else "")
            by_layout.setdefault(lay, {})[shape] = float(r["flops"])
            if r.get("burst_flops") is not None:  # the same shape in bursts on an idle GPU
                by_layout.setdefault(f"{lay} burst", {})[shape] = float(r["burst_flops"])
            if r.get("kernel_flops") is not None:  # those bursts by their kernels' clock
                by_layout.setdefault(f"{lay} kernel clock", {})[shape] = float(r["kernel_flops"])
        rows += [(key, layout, rates) for layout, rates in sorted(by_layout.items())]
    timings = {}
    for key, _, rates in rows:
        timings[key] = timings.get(key, 0) + len(rates)
    return rows if any(n > 1 for n in timings.values()) else []
