"""The report's charts of cells, drawn with matplotlib's Agg backend and returned as PNG bytes.

Each draws one line per series (device × batching profile × request batch size × load mode): its configuration's
colour (`loadtest.report.charts.style.config_colours`), its load mode's marker and its request batch's line style,
except the latency-vs-offered-load figure: one panel per configuration × request batch size, with the capacity a
search found marked on it. Valid cells are filled markers joined by the line; invalid cells are hollow markers,
failed cells are crosses at the foot of the axis: shown, never dropped. Legends sit under the panels.

Not for: deciding what is valid (the sweep did), the charts of answers (`loadtest.report.charts.answers`) or laying
out the report (`loadtest.report.page`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, LoadMode
from loadtest.report.charts.style import (
    GREY,
    grid_shape,
    legend_below,
    levels_x,
    log_scale,
    plain_log,
    plt,
    png,
    series_style,
    widen_log,
)
from loadtest.report.series import Series, level_name, load_level, usable
from loadtest.report.shape_sizing import ShapeCurve

from matplotlib.lines import Line2D  # isort: skip  # after chart_style, which chooses the Agg backend
from matplotlib.patches import Patch  # isort: skip

FAMILY = "#333333"  # a shape family's line: its points carry their configurations' colours


def cell_kinds() -> list[Line2D]:
    """The legend's entries for what a marker's fill says about its cell."""
    return [Line2D([], [], marker="o", color=GREY, linestyle="", label="valid cell"),
            Line2D([], [], marker="o", color=GREY, markerfacecolor="none", linestyle="",
                   label="invalid cell (see table)"),
            Line2D([], [], marker="x", color=GREY, linestyle="", label="failed cell")]


def _style(s: Series, series: Sequence[Series]) -> dict:
    return series_style(s.key.mode, s.key.request_batch_size, [x.key.request_batch_size for x in series])


def series_handles(series: Sequence[Series], labels: Sequence[str], colours: Sequence[str]) -> list[Line2D]:
    """One legend entry per series, drawn as its line is."""
    return [Line2D([], [], color=colours[i], label=labels[i], **_style(s, series)) for i, s in enumerate(series)]


def scatter(ax, x, y, colour: str, cells, style: dict | None = None) -> None:
    """Filled valid points on a line; hollow invalid points; crosses for failed cells, drawn at the foot of the axis
    since they have no throughput or latency to place them by."""
    style = style or {"marker": "o", "linestyle": "-"}
    good = [(a, b) for a, b, c in zip(x, y, cells) if usable(c)]
    if good:
        ax.plot(*zip(*good), color=colour, markersize=5, **style)
    bad = [(a, b) for a, b, c in zip(x, y, cells) if not usable(c) and c.status == CellStatus.OK]
    if bad:
        ax.plot(*zip(*bad), color=colour, marker=style["marker"], markersize=7, linestyle="", markerfacecolor="none",
                markeredgewidth=1.5)
    failed = [a for a, c in zip(x, cells) if c.status != CellStatus.OK]
    if failed:
        ax.plot(failed, [0.03] * len(failed), color=colour, marker="x", markersize=8, linestyle="",
                transform=ax.get_xaxis_transform(), clip_on=False)


def throughput_figure(series: Sequence[Series], labels: Sequence[str], colours: Sequence[str]) -> bytes:
    """Throughput (images/s) against concurrency or offered rate, one panel per load mode."""
    modes = [m for m in (LoadMode.CLOSED, LoadMode.OPEN) if any(s.key.mode == m for s in series)]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    for ax, mode in zip(axes[0], modes):
        for i, s in enumerate(series):
            if s.key.mode == mode:
                scatter(ax, [load_level(c) for c in s.cells], [c.throughput_ips for c in s.cells], colours[i],
                        s.cells, _style(s, series))
        levels_x(ax, [load_level(c) for s in series if s.key.mode == mode for c in s.cells])
        ax.set_xlabel(f"{level_name(mode)}, log")
        ax.set_ylabel("throughput (images/s, log)")
        ax.set_title(f"Throughput vs {level_name(mode)}", fontsize=10)
        ax.grid(alpha=0.3)
        log_scale(ax, "y", [c.throughput_ips for s in series if s.key.mode == mode for c in s.cells])
    legend_below(fig, [*series_handles(series, labels, colours), *cell_kinds()])
    return png(fig)


def latency_figure(series: Sequence[Series], labels: Sequence[str], colours: Sequence[str]) -> bytes:
    """p50 and p99 latency against achieved throughput; failed cells have no latency to draw."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(wspace=0.3)
    for ax, (field, name) in zip(axes, (("latency_p50_ms", "p50"), ("latency_p99_ms", "p99"))):
        drawn = [c for s in series for c in s.cells if getattr(c, field) is not None]
        for i, s in enumerate(series):
            cells = [c for c in s.cells if getattr(c, field) is not None]
            scatter(ax, [c.throughput_ips for c in cells], [getattr(c, field) for c in cells], colours[i], cells,
                    _style(s, series))
        ax.set_xlabel("throughput (images/s, log)")
        ax.set_ylabel(f"{name} latency (ms, log)")
        ax.set_title(f"{name} latency vs throughput", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        log_scale(ax, "x", [c.throughput_ips for c in drawn])
        log_scale(ax, "y", [getattr(c, field) for c in drawn])
    legend_below(fig, [*series_handles(series, labels, colours), *cell_kinds()])
    return png(fig)


def has_batch_data(s: Series) -> bool:
    return any(c.server_batch_sizes for c in s.cells)


def _batch_shares(ax, indexed: Sequence[tuple[int, Series]], colours: Sequence[str]) -> None:
    """Per series, the share of batches of each size at its highest load: a filled bar for a valid cell, a hatched
    outline for an invalid one."""
    sizes = sorted({int(b) for _, s in indexed for c in s.cells for b in c.server_batch_sizes})
    width = 0.8 / len(indexed)
    for slot, (i, s) in enumerate(indexed):
        top = [c for c in s.cells if c.server_batch_sizes][-1]
        total = sum(top.server_batch_sizes.values())
        shares = [top.server_batch_sizes.get(str(b), 0) / total for b in sizes]
        ax.bar([x + slot * width - 0.4 + width / 2 for x in range(len(sizes))], shares, width=width,
               color=colours[i], hatch=None if usable(top) else "//", edgecolor=colours[i], fill=usable(top))
    ax.set_xticks(range(len(sizes)), [str(b) for b in sizes])
    ax.set_xlabel("server batch size (images)")
    ax.set_ylabel("share of batches")
    ax.set_ylim(0, 1.05)
    ax.set_title("Batch sizes at each series' highest load", fontsize=10)
    ax.grid(alpha=0.3, axis="y")


def batch_figure(series: Sequence[Series], labels: Sequence[str], colours: Sequence[str]) -> bytes | None:
    """Mean server-side batch size against throughput, and the batch size distribution at the highest load of each
    series (where batching has the most to merge). None without data."""
    indexed = [(i, s) for i, s in enumerate(series) if has_batch_data(s)]
    if not indexed:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(wspace=0.3)
    for i, s in indexed:
        cells = [c for c in s.cells if c.server_batch_size_mean is not None and c.throughput_ips > 0]
        scatter(left, [c.throughput_ips for c in cells], [c.server_batch_size_mean for c in cells], colours[i], cells,
                _style(s, series))
    left.set_xscale("log")
    left.set_xlabel("throughput (images/s, log)")
    left.set_ylabel("mean server batch size (images)")
    left.set_title("Mean server-side batch size vs throughput", fontsize=10)
    left.grid(alpha=0.3)
    plain_log(left.xaxis)
    _batch_shares(right, indexed, colours)
    shown = [i for i, _ in indexed]
    handles = series_handles([series[i] for i in shown], [labels[i] for i in shown], [colours[i] for i in shown])
    legend_below(fig, [*handles, *cell_kinds(),
                       Patch(facecolor="none", edgecolor=GREY, hatch="//", label="hatched bar: its cell was invalid")])
    return png(fig)


# ----------------------------------------------------------------------------- latency vs offered load


@dataclass(frozen=True)
class OfferedLine:
    """One configuration at one request batch size: its open-loop cells and what its searches found."""

    label: str
    colour: str  # its configuration's (`config_colours`)
    cells: tuple[CellResult, ...]  # open loop, by offered rate
    capacities: tuple[tuple[float, float], ...]  # (p99 objective ms, capacity req/s) of each met search
    objectives: tuple[float, ...]  # every p99 objective searched, met or not


def _capacity_mark(ax, objective: float, capacity: float) -> None:
    """The capacity's dash-dot line, its words beside it on the side with room (inside the panel)."""
    ax.axvline(capacity, color="green", linestyle="-.", linewidth=1.2)
    low, high = ax.get_xlim()
    log = ax.get_xscale() == "log"
    where = (math.log(capacity / low) / math.log(high / low)) if log else (capacity - low) / (high - low)
    ax.annotate(f"capacity {capacity:g} req/s\n(p99 ≤ {objective:g} ms)", (capacity, 0.97),
                xycoords=("data", "axes fraction"), xytext=(3 if where < 0.5 else -3, 0), textcoords="offset points",
                ha="left" if where < 0.5 else "right", va="top", fontsize=7, color="green")


def _offered_panel(ax, line: OfferedLine) -> None:
    rate = [load_level(c) for c in line.cells]
    timed = [(r, c) for r, c in zip(rate, line.cells) if c.latency_p99_ms is not None or c.status != CellStatus.OK]
    scatter(ax, [r for r, _ in timed], [c.latency_p99_ms or 0.0 for _, c in timed], line.colour, [c for _, c in timed])
    p50 = [(r, c.latency_p50_ms) for r, c in timed if usable(c) and c.latency_p50_ms is not None]
    if p50:
        ax.plot(*zip(*p50), color=line.colour, linestyle="--", marker=".", alpha=0.7)
    for objective in line.objectives:
        ax.axhline(objective, color="firebrick", linestyle=":", linewidth=1)
    ax.set_title(line.label, fontsize=9)
    ax.set_xlabel("offered rate (req/s, log)")
    ax.set_ylabel("latency (ms, log)")
    ax.grid(alpha=0.3, which="both")
    log_scale(ax, "x", rate + [c for _, c in line.capacities])
    log_scale(ax, "y", [c.latency_p99_ms for _, c in timed] + list(line.objectives))
    if ax.get_xscale() == "log":
        widen_log(ax, "x")
        plain_log(ax.xaxis)  # again: which labels fit depends on the widened range
    for objective, capacity in line.capacities:
        _capacity_mark(ax, objective, capacity)


def offered_latency_figure(lines: Sequence[OfferedLine]) -> bytes | None:
    """p99 (solid) and p50 (dashed) against offered rate, one panel per configuration × request batch, the p99
    objective (dotted) and the capacity found (dash-dot) marked. None without open-loop cells."""
    if not lines:
        return None
    rows, columns = grid_shape(len(lines))
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    fig.subplots_adjust(wspace=0.4, hspace=0.55)
    for ax, line in zip(axes.flat, lines):
        _offered_panel(ax, line)
    for ax in list(axes.flat)[len(lines):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color=GREY, marker="o", label="p99"),
               Line2D([], [], color=GREY, linestyle="--", marker=".", label="p50"),
               Line2D([], [], color="firebrick", linestyle=":", label="p99 objective"),
               Line2D([], [], color="green", linestyle="-.", label="capacity found by a search"),
               *cell_kinds()[1:]]
    legend_below(fig, handles, columns=3)
    return png(fig)


# ----------------------------------------------------------------------------- replica shapes


def shapes_figure(curves: Sequence[ShapeCurve], configs: Sequence[Sequence[tuple[str, str]]]) -> bytes:
    """Capacity against cores per replica, one dark line per family (its marker tells families apart), each shape's
    point in its configuration's colour (`configs`: per curve, each point's configuration label and colour; a shape
    is a server of its own); whisker:
    up to the rate shown to fail; hollow: a lower bound, no whisker: what its cores alone serve may lie above
    it. Dashed grey: the perfect-linear line from its 1-core capacity."""
    fig, ax = plt.subplots(figsize=(7, 4))
    handles: list = []
    named: dict[str, str] = {}
    for index, (curve, named_colours) in enumerate(zip(curves, configs, strict=True)):
        marker = "osD^v"[index % 5]
        met = [(p, p.capacity_rps, *named) for p, named in zip(curve.points, named_colours, strict=True)
               if p.capacity_rps]
        ax.plot([p.cores for p, *_ in met], [rps for _, rps, *_ in met], color=FAMILY, linewidth=1.2)
        for p, rps, label, colour in met:
            whisker = None if p.upper_rps is None or p.lower_bound else [[0.0], [max(p.upper_rps - rps, 0.0)]]
            ax.errorbar(p.cores, rps, yerr=whisker, color=colour, marker=marker, markersize=7, capsize=4,
                        markeredgecolor=colour, markerfacecolor="none" if p.lower_bound else colour)
            named.setdefault(label, colour)
        linear = [(p.cores, p.linear_rps) for p in curve.points if p.linear_rps is not None]
        if linear:
            ax.plot(*zip(*linear), color=GREY, linestyle="--", alpha=0.6)
        handles.append(Line2D([], [], color=FAMILY, marker=marker, markerfacecolor=FAMILY, label=curve.label))
    cores = sorted({p.cores for c in curves for p in c.points})
    ax.set_xticks(cores, [f"{k}" for k in cores])
    ax.set_xlabel("cores per replica")
    ax.set_ylabel("capacity req/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    legend_below(fig, [*handles, *(Patch(color=colour, label=server) for server, colour in named.items()),
                       Line2D([], [], color=GREY, linestyle="--", label="linear from 1 core"),
                       Line2D([], [], marker="o", color=GREY, markerfacecolor="none", linestyle="",
                              label="lower bound")])
    return png(fig)
