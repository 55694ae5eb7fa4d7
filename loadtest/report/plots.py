"""The report's figures, drawn with matplotlib's Agg backend and returned as PNG bytes.

Each figure draws one line per series (device × batching profile × request batch size × load
mode) in the same colour across figures, except the latency-vs-offered-load figure: one panel per
configuration × request batch size, with the capacity a search found marked on it. Valid cells
are filled markers joined by the line; invalid cells are hollow markers, failed cells are crosses
at zero: shown, never dropped.

Not for: deciding what is valid (the sweep did) or laying out the report (`loadtest.report.page`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import matplotlib

matplotlib.use("Agg")  # no display here or in CI; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator  # noqa: E402

from loadtest.evidence.records import CellResult  # noqa: E402
from loadtest.evidence.vocab import CellStatus, LoadMode  # noqa: E402
from loadtest.report.figures import CeilingBar  # noqa: E402
from loadtest.report.series import Series, level_name, load_level, usable  # noqa: E402
from loadtest.report.shape_sizing import ShapeCurve  # noqa: E402

DPI = 100
PALETTE = plt.get_cmap("tab20").colors  # type: ignore[attr-defined]


def colour(index: int):
    return PALETTE[(index * 2) % len(PALETTE)] if index < 10 else PALETTE[(index * 2 + 1) % len(PALETTE)]


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def _plain_log(axis) -> None:
    """Log axis labelled 50, 100, 2000 rather than 5×10¹; minor labels only within one decade."""
    axis.set_major_formatter(PLAIN)
    low, high = sorted(axis.get_view_interval())
    axis.set_minor_formatter(PLAIN if low > 0 and high / low < 10 else NullFormatter())


def _log_scale(ax, which: str, values) -> None:
    """Log scale when there is something positive to scale: a run whose every cell failed or
    answered nothing has only zeros, and matplotlib refuses a log axis over them."""
    if any(v is not None and v > 0 for v in values):
        getattr(ax, f"set_{which}scale")("log")
        _plain_log(getattr(ax, f"{which}axis"))


def _levels_x(ax, levels) -> None:
    """Log-2 load axis ticked at the measured levels (1, 2, 4 ... or the offered rates)."""
    ax.set_xscale("log", base=2)
    ticks = sorted({v for v in levels if v > 0})
    if ticks:
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
    ax.xaxis.set_minor_locator(NullLocator())


def _marker_legend(ax) -> None:
    handles = [Line2D([], [], marker="o", color="grey", linestyle="", label="valid cell"),
               Line2D([], [], marker="o", color="grey", markerfacecolor="none", linestyle="",
                      label="invalid cell (see table)"),
               Line2D([], [], marker="x", color="grey", linestyle="", label="failed cell")]
    ax.legend(handles=handles, loc="best", fontsize=8, framealpha=0.8)


def _series_legend(fig, indices: Sequence[int], labels: Sequence[str]) -> None:
    """One legend under the panels: series index i keeps colour(i) in every figure."""
    handles = [Line2D([], [], color=colour(i), marker="o", label=labels[i]) for i in indices]
    fig.legend(handles=handles, loc="upper center", ncol=2, fontsize=8, bbox_to_anchor=(0.5, 0.0))


def _scatter(ax, x, y, index: int, cells) -> None:
    """Filled valid points on a line; hollow invalid points; crosses for failed cells, drawn
    at the foot of the axis since they have no throughput or latency to place them by."""
    good = [(a, b) for a, b, c in zip(x, y, cells) if usable(c)]
    if good:
        ax.plot(*zip(*good), color=colour(index), marker="o", markersize=5)
    bad = [(a, b) for a, b, c in zip(x, y, cells) if not usable(c) and c.status == CellStatus.OK]
    if bad:
        ax.plot(*zip(*bad), color=colour(index), marker="o", markersize=7, linestyle="",
                markerfacecolor="none", markeredgewidth=1.5)
    failed = [a for a, c in zip(x, cells) if c.status != CellStatus.OK]
    if failed:
        ax.plot(failed, [0.03] * len(failed), color=colour(index), marker="x", markersize=8,
                linestyle="", transform=ax.get_xaxis_transform(), clip_on=False)


def throughput_figure(series: Sequence[Series], labels: Sequence[str]) -> bytes:
    """Throughput (images/s) against concurrency or offered rate, one panel per load mode."""
    modes = [m for m in (LoadMode.CLOSED, LoadMode.OPEN) if any(s.key.mode == m for s in series)]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4.2), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    for ax, mode in zip(axes[0], modes):
        for i, s in enumerate(series):
            if s.key.mode == mode:
                _scatter(ax, [load_level(c) for c in s.cells], [c.throughput_ips for c in s.cells],
                         i, s.cells)
        _levels_x(ax, [load_level(c) for s in series if s.key.mode == mode for c in s.cells])
        ax.set_xlabel(level_name(mode))
        ax.set_ylabel("throughput (images/s, log)")
        ax.set_title(f"Throughput vs {level_name(mode)}", fontsize=10)
        ax.grid(alpha=0.3)
        _log_scale(ax, "y", [c.throughput_ips for s in series if s.key.mode == mode for c in s.cells])
        _marker_legend(ax)
    _series_legend(fig, range(len(series)), labels)
    return png(fig)


def latency_figure(series: Sequence[Series], labels: Sequence[str]) -> bytes:
    """p50 and p99 latency against achieved throughput; failed cells have no latency to draw."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(wspace=0.3)
    for ax, (field, name) in zip(axes, (("latency_p50_ms", "p50"), ("latency_p99_ms", "p99"))):
        drawn = [c for s in series for c in s.cells if getattr(c, field) is not None]
        for i, s in enumerate(series):
            cells = [c for c in s.cells if getattr(c, field) is not None]
            _scatter(ax, [c.throughput_ips for c in cells], [getattr(c, field) for c in cells],
                     i, cells)
        ax.set_xlabel("throughput (images/s, log)")
        ax.set_ylabel(f"{name} latency (ms)")
        ax.set_title(f"{name} latency vs throughput", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        _log_scale(ax, "x", [c.throughput_ips for c in drawn])
        _log_scale(ax, "y", [getattr(c, field) for c in drawn])
        _marker_legend(ax)
    _series_legend(fig, range(len(series)), labels)
    return png(fig)


def has_batch_data(s: Series) -> bool:
    return any(c.server_batch_sizes for c in s.cells)


def batch_figure(series: Sequence[Series], labels: Sequence[str]) -> bytes | None:
    """Mean server-side batch size against throughput, and the batch size distribution at the
    highest load of each series (where batching has the most to merge). None without data."""
    indexed = [(i, s) for i, s in enumerate(series) if has_batch_data(s)]
    if not indexed:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    fig.subplots_adjust(wspace=0.3)
    for i, s in indexed:
        cells = [c for c in s.cells if c.server_batch_size_mean is not None and c.throughput_ips > 0]
        _scatter(left, [c.throughput_ips for c in cells], [c.server_batch_size_mean for c in cells],
                 i, cells)
    left.set_xscale("log")
    left.set_xlabel("throughput (images/s, log)")
    left.set_ylabel("mean server batch size (images)")
    left.set_title("Mean server-side batch size vs throughput", fontsize=10)
    left.grid(alpha=0.3)
    _plain_log(left.xaxis)
    sizes = sorted({int(b) for _, s in indexed for c in s.cells for b in c.server_batch_sizes})
    width = 0.8 / len(indexed)
    for slot, (i, s) in enumerate(indexed):
        top = [c for c in s.cells if c.server_batch_sizes][-1]
        total = sum(top.server_batch_sizes.values())
        shares = [top.server_batch_sizes.get(str(b), 0) / total for b in sizes]
        right.bar([x + slot * width - 0.4 + width / 2 for x in range(len(sizes))], shares,
                  width=width, color=colour(i), hatch=None if usable(top) else "//",
                  edgecolor=colour(i), fill=usable(top))
    right.set_xticks(range(len(sizes)), [str(b) for b in sizes])
    right.set_xlabel("server batch size (images)")
    right.set_ylabel("share of batches")
    right.set_title("Batch sizes at each series' highest load (hatched: invalid cell)", fontsize=10)
    right.grid(alpha=0.3, axis="y")
    _series_legend(fig, [i for i, _ in indexed], labels)
    return png(fig)


# ----------------------------------------------------------------------------- latency vs offered load


@dataclass(frozen=True)
class OfferedLine:
    """One configuration at one request batch size: its open-loop cells and what its searches found."""

    label: str
    cells: tuple[CellResult, ...]  # open loop, by offered rate
    capacities: tuple[tuple[float, float], ...]  # (p99 objective ms, capacity req/s) of each met search
    objectives: tuple[float, ...]  # every p99 objective searched, met or not


def _offered_panel(ax, line: OfferedLine, index: int) -> None:
    rate = [load_level(c) for c in line.cells]
    timed = [(r, c) for r, c in zip(rate, line.cells) if c.latency_p99_ms is not None or c.status != CellStatus.OK]
    _scatter(ax, [r for r, _ in timed], [c.latency_p99_ms or 0.0 for _, c in timed], index, [c for _, c in timed])
    p50 = [(r, c.latency_p50_ms) for r, c in timed if usable(c) and c.latency_p50_ms is not None]
    if p50:
        ax.plot(*zip(*p50), color=colour(index), linestyle="--", marker=".", alpha=0.7)
    for objective in line.objectives:
        ax.axhline(objective, color="firebrick", linestyle=":", linewidth=1)
    for objective, capacity in line.capacities:
        ax.axvline(capacity, color="green", linestyle="-.", linewidth=1.2)
        ax.annotate(f"capacity {capacity:g} req/s\n(p99 ≤ {objective:g} ms)", (capacity, 0.97),
                    xycoords=("data", "axes fraction"), ha="right", va="top", fontsize=7, color="green")
    ax.set_title(line.label, fontsize=9)
    ax.set_xlabel("offered rate (req/s, log)")
    ax.set_ylabel("latency (ms, log)")
    ax.grid(alpha=0.3, which="both")
    _log_scale(ax, "x", rate + [c for _, c in line.capacities])
    _log_scale(ax, "y", [c.latency_p99_ms for _, c in timed] + list(line.objectives))
    low, high = sorted(ax.get_xlim())
    if ax.get_xscale() == "log" and high / low < 1.5:  # every cell at one rate: a range matplotlib can draw
        low, high = low / 1.5, high * 1.5
        ax.set_xlim(low, high)
    if ax.get_xscale() == "log" and high / low > 3:  # minor labels would overlap: label 1-2-5 steps instead
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.xaxis.set_minor_formatter(NullFormatter())


def offered_latency_figure(lines: Sequence[OfferedLine]) -> bytes | None:
    """p99 (solid) and p50 (dashed) against offered rate, one panel per configuration × request batch,
    the p99 objective (dotted) and the capacity found (dash-dot) marked. None without open-loop cells."""
    if not lines:
        return None
    columns = min(3, len(lines))
    rows = math.ceil(len(lines) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.4 * rows), squeeze=False)
    fig.subplots_adjust(wspace=0.35, hspace=0.5)
    for i, (ax, line) in enumerate(zip(axes.flat, lines)):
        _offered_panel(ax, line, i)
    for ax in list(axes.flat)[len(lines):]:
        ax.set_visible(False)
    handles = [Line2D([], [], color="grey", marker="o", label="p99"),
               Line2D([], [], color="grey", linestyle="--", marker=".", label="p50"),
               Line2D([], [], color="firebrick", linestyle=":", label="p99 objective"),
               Line2D([], [], color="green", linestyle="-.", label="capacity found by a search"),
               Line2D([], [], marker="o", color="grey", markerfacecolor="none", linestyle="", label="invalid cell"),
               Line2D([], [], marker="x", color="grey", linestyle="", label="failed cell")]
    fig.legend(handles=handles, loc="upper center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return png(fig)


# ----------------------------------------------------------------------------- latency against throughput, per rate


@dataclass(frozen=True)
class RateCurve:
    """One search's rates (`loadtest.judge.objectives.RateRow`, every window at a rate pooled)."""

    label: str
    rows: tuple  # RateRow, lowest offered rate first
    capacities: tuple[tuple[float, float], ...]  # (p99 objective ms, capacity req/s) where answered


def _rate_curve(ax, curve: RateCurve, index: int) -> None:
    kept = [r for r in curve.rows if r.p99_ms is not None]
    steady = [(r.achieved_rps, r.p99_ms) for r in kept if not r.overloaded]
    if steady:
        ax.plot(*zip(*steady), color=colour(index), marker="o", markersize=5, label=curve.label)
    queued = [(r.achieved_rps, r.p99_ms) for r in kept if r.overloaded]
    if queued:
        ax.plot(*zip(*queued), color=colour(index), marker="o", markersize=7, linestyle="", markerfacecolor="none")
    p50 = [(r.achieved_rps, r.p50_ms) for r in kept if not r.overloaded and r.p50_ms is not None]
    if p50:
        ax.plot(*zip(*p50), color=colour(index), linestyle="--", alpha=0.6)


def rate_latency_figure(panels: Sequence[tuple[int, Sequence[RateCurve], Sequence[float]]]) -> bytes | None:
    """p99 (solid) and p50 (dashed) against achieved req/s, one line per configuration, one panel per request
    batch, every objective answered dotted (Model Analyzer's throughput-against-latency chart, from the pooled
    rates). None without rates."""
    panels = [p for p in panels if any(c.rows for c in p[1])]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(5.8 * len(panels), 4.4), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    for ax, (batch, curves, objectives) in zip(axes[0], panels):
        for i, curve in enumerate(curves):
            _rate_curve(ax, curve, i)
        for objective in objectives:
            ax.axhline(objective, color="firebrick", linestyle=":", linewidth=1)
            ax.annotate(f"{objective:g} ms", (1.0, objective), xycoords=("axes fraction", "data"), ha="right",
                        va="bottom", fontsize=7, color="firebrick")
        ax.set_title(f"request batch {batch}", fontsize=10)
        ax.set_xlabel("achieved throughput (req/s, log)")
        ax.set_ylabel("latency (ms, log)")
        ax.grid(alpha=0.3, which="both")
        _log_scale(ax, "x", [r.achieved_rps for c in curves for r in c.rows])
        _log_scale(ax, "y", [r.p99_ms for c in curves for r in c.rows] + list(objectives))
        ax.legend(loc="upper left", fontsize=8, framealpha=0.8)
    handles = [Line2D([], [], color="grey", marker="o", label="p99 of every window at a rate"),
               Line2D([], [], color="grey", linestyle="--", label="p50"),
               Line2D([], [], marker="o", color="grey", markerfacecolor="none", linestyle="", label="overloaded rate"),
               Line2D([], [], color="firebrick", linestyle=":", label="p99 objective")]
    fig.legend(handles=handles, loc="upper center", ncol=4, fontsize=8, bbox_to_anchor=(0.5, 0.0))
    return png(fig)


def ceiling_figure(bars: Sequence[CeilingBar]) -> bytes | None:
    """The report's first chart: per configuration and request batch, what the server served at its answer (a
    bar, its range up to the upper end as a whisker) beside the device alone (a hollow bar): the gap between
    the server and the device at a glance. None without bars."""
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(bars) + 1.2))
    rows = range(len(bars))[::-1]
    for row, bar in zip(rows, bars, strict=True):
        if bar.alone_ips:
            ax.barh(row, bar.alone_ips, height=0.7, color="none", edgecolor="#888", hatch="//", linewidth=1)
        whisker = None if bar.high_ips is None else [[0], [max(bar.high_ips - bar.served_ips, 0)]]
        ax.barh(row, bar.served_ips, height=0.45, color=colour(0), xerr=whisker, capsize=4,
                error_kw={"ecolor": "#333"})
    ax.set_yticks(list(rows), [b.label for b in bars], fontsize=9)
    values = [v for b in bars for v in (b.served_ips, b.high_ips, b.alone_ips) if v is not None and v > 0]
    _log_scale(ax, "x", values)
    if values:  # bars start at a round decade below the smallest: a short bar is not drawn as a sliver
        ax.set_xlim(left=10 ** math.floor(math.log10(min(values) * 0.999)))
    ax.set_xlabel("images/s (log)")
    ax.grid(alpha=0.3, axis="x")
    ax.legend(handles=[Patch(color=colour(0), label="served at its answer (whisker: up to its upper end)"),
                       Patch(facecolor="none", edgecolor="#888", hatch="//", label="the device alone")],
              loc="lower right", fontsize=8, framealpha=0.9)
    return png(fig)


class LabelledPoints(Protocol):
    """A labelled line of (x, y) points: the card's cost curves (`loadtest.report.card.objective_costs`), drawn here
    without this room importing the card's."""

    @property
    def label(self) -> str: ...

    @property
    def points(self) -> tuple[tuple[float, float], ...]: ...


def objective_figure(curves: Sequence[LabelledPoints], ylabel: str) -> bytes | None:
    """Per target and device, USD/h (or capacity) against the p99 objective: what loosening it is worth."""
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for index, curve in enumerate(curves):
        xs, ys = zip(*curve.points)
        ax.plot(xs, ys, marker="o", color=colour(index), label=curve.label)
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.set_xticks([p for c in curves for p, _ in c.points], minor=False)
    ax.set_xlabel("p99 objective ms (log)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    return png(fig)


def shapes_figure(curves: Sequence[ShapeCurve]) -> bytes:
    """Capacity against cores per replica, one line per curve (whisker: up to the rate that did not pass; hollow: a
    lower bound, no whisker: what its cores alone serve may lie above it), and dashed the perfect-linear line from
    its 1-core capacity."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for index, curve in enumerate(curves):
        met = [(p, p.capacity_rps) for p in curve.points if p.capacity_rps]
        ax.plot([p.cores for p, _ in met], [rps for _, rps in met], color=colour(index), label=curve.label)
        for p, rps in met:
            whisker = None if p.upper_rps is None or p.lower_bound else [[0.0], [max(p.upper_rps - rps, 0.0)]]
            ax.errorbar(p.cores, rps, yerr=whisker, color=colour(index), marker="o", capsize=4,
                        markerfacecolor="none" if p.lower_bound else colour(index))
        linear = [(p.cores, p.linear_rps) for p in curve.points if p.linear_rps is not None]
        if linear:
            ax.plot(*zip(*linear), color=colour(index), linestyle="--", alpha=0.6)
    cores = sorted({p.cores for c in curves for p in c.points})
    ax.set_xticks(cores, [f"{k}" for k in cores])
    ax.set_xlabel("cores per replica")
    ax.set_ylabel("capacity req/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    handles = [*ax.get_legend_handles_labels()[0],
               Line2D([], [], color="grey", linestyle="--", label="linear from 1 core"),
               Line2D([], [], marker="o", color="grey", markerfacecolor="none", linestyle="", label="lower bound")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", framealpha=0.8)
    return png(fig)
