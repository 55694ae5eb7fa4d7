"""The report's charts of answers (what the searches found), drawn with matplotlib's Agg backend as PNG bytes.

- `ceiling_figure`: the first screen's chart, per configuration and request batch what the server served at its
  answer as a share of the device alone, on a linear axis from 0 with the 50% line.
- `capacity_figure`: capacity against the p99 objective per configuration, the objective table's own values (confirmed
  and passed as two series, a lower bound hollow with an arrow up), and each target's rate as a line.
- `rate_latency_figure`: each search's pooled rates, latency against achieved req/s.
- `objective_figure`: per target and device, USD/h against the p99 objective (the card's arithmetic).

Each configuration keeps its colour (`loadtest.report.charts.style.config_colours`); legends sit under the panels.

Not for: the charts of cells (`loadtest.report.charts.cells`) or choosing the values drawn
(`loadtest.report.charts.assembly` hands them over from the records the tables print).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from loadtest.report.charts.style import GREY, LINESTYLES, legend_below, log_scale, plain_log, plt, png
from loadtest.report.figures import CeilingBar

from matplotlib.lines import Line2D  # isort: skip  # after chart_style, which chooses the Agg backend
from matplotlib.patches import Patch  # isort: skip
from matplotlib.ticker import FuncFormatter, NullLocator  # isort: skip
from matplotlib.transforms import offset_copy  # isort: skip

PERCENT = FuncFormatter(lambda v, _: f"{v:.0%}")
USD_PER_HOUR = FuncFormatter(lambda v, _: f"{v:,.2f}")  # as the card and `size` print it
TARGET = "#222222"
TARGET_REACH = 3.0  # a target's rate is drawn as a line up to this many times the highest capacity; above, named


# ----------------------------------------------------------------------------- served ÷ device alone


def ceiling_figure(bars: Sequence[CeilingBar], colours: Sequence[str]) -> bytes | None:
    """Per configuration and request batch, served ÷ device alone at its answer (a bar in its configuration's colour,
    the whisker up to the answer's upper end, its share printed beside it) on a linear axis from 0, the 50% line
    dashed; a configuration without the device alone measured says so in its row. None without bars."""
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=(8.5, 0.5 * len(bars) + 1.3))  # with its labels, within the page's 900 px
    rows = range(len(bars))[::-1]
    shares = [(b.share, b.high_share) for b in bars]
    for row, (share, high), colour in zip(rows, shares, colours, strict=True):
        if share is None:
            ax.annotate("device alone not measured", (0, row), xytext=(6, 0), textcoords="offset points",
                        va="center", fontsize=8, color=GREY)
            continue
        whisker = None if high is None else [[0], [max(high - share, 0)]]
        ax.barh(row, share, height=0.55, color=colour, xerr=whisker, capsize=4, error_kw={"ecolor": "#333"})
        ax.annotate(f"{share:.1%}", (max(share, high or 0), row), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=8)
    ax.set_yticks(list(rows), [b.label for b in bars], fontsize=9)
    ax.set_ylim(-0.6, len(bars) - 0.4)  # each row its own band, bars drawn or not
    top = max((v for pair in shares for v in pair if v is not None), default=0.0)
    ax.set_xlim(0, max(1.0, top * 1.15))
    ax.xaxis.set_major_formatter(PERCENT)
    ax.axvline(0.5, color="firebrick", linestyle="--", linewidth=1)
    ax.set_xlabel("served ÷ the device alone (linear, from 0)")
    ax.grid(alpha=0.3, axis="x")
    legend_below(fig, [Patch(color=GREY, label="served at its answer, as a share of the device alone"),
                       Line2D([], [], color="#333", marker="|", markersize=8, label="whisker: up to its upper end"),
                       Line2D([], [], color="firebrick", linestyle="--", label="50%: half of the device alone")],
                 columns=3)
    return png(fig)


# ----------------------------------------------------------------------------- capacity at each p99 objective


@dataclass(frozen=True)
class CapacityPoint:
    """One configuration's cell of the objective table at one objective: its confirmed figure and the pass above it,
    each a lower bound where the table prints its `≥`."""

    p99_objective_ms: float
    confirmed_rps: float | None  # the highest rate confirmed there (None: none confirmed)
    passed_rps: float | None  # the highest pass above it, not confirmed (None: none)
    confirmed_lower: bool = False  # `≥` on the confirmed figure: no higher rate failed, none passed above it
    passed_lower: bool = False  # `≥` on the pass: no higher rate failed

    @property
    def marks(self) -> tuple[tuple[float, bool, bool], ...]:
        """(req/s, confirmed, a lower bound) of each figure drawn."""
        out = [(self.confirmed_rps, True, self.confirmed_lower), (self.passed_rps, False, self.passed_lower)]
        return tuple((rate, confirmed, lower) for rate, confirmed, lower in out if rate is not None)


@dataclass(frozen=True)
class CapacityLine:
    """One row of the objective table drawn: a configuration (or its repeat) at one request batch."""

    label: str
    colour: str  # its configuration's
    request_batch: int
    points: tuple[CapacityPoint, ...]  # lowest objective first; objectives with no capacity left out


def _capacity_line(ax, line: CapacityLine, style: str) -> None:
    """Confirmed figures joined in the line's style with filled circles, passes above them joined by a thin dotted
    line with filled diamonds: two series, each never falling as the objective loosens (the table's figures are
    carried up, `loadtest.judge.objectives.carried`); any lower bound hollow with an arrow up."""
    for confirmed, width, dash in ((True, 1.5, style), (False, 1.0, ":")):
        drawn = [(p.p99_objective_ms, rate) for p in line.points for rate, c, _ in p.marks if c == confirmed]
        if len(drawn) > 1:
            ax.plot(*zip(*drawn), color=line.colour, linestyle=dash, linewidth=width)
    up = offset_copy(ax.transData, fig=ax.figure, x=0, y=18, units="points")
    for p in line.points:
        for rate, confirmed, lower in p.marks:
            ax.plot(p.p99_objective_ms, rate, marker="o" if confirmed else "D", markersize=7, color=line.colour,
                    markerfacecolor="white" if lower else line.colour, markeredgewidth=1.5)
            if lower:
                ax.annotate("", xy=(p.p99_objective_ms, rate), xycoords=up, xytext=(p.p99_objective_ms, rate),
                            textcoords="data", arrowprops={"arrowstyle": "-|>", "color": line.colour, "lw": 1.5,
                                                           "shrinkA": 4, "shrinkB": 0})


def _capacity_panel(ax, batch: int, lines: Sequence[CapacityLine], targets: Sequence[tuple[float, float]]) -> None:
    seen: dict[str, int] = {}
    for line in lines:
        seen[line.colour] = seen.get(line.colour, -1) + 1  # a configuration's repeats: its colour, another style
        _capacity_line(ax, line, LINESTYLES[seen[line.colour] % len(LINESTYLES)])
    top = max(rate for line in lines for p in line.points for rate, _, _ in p.marks) * 1.18
    for rate, _ in targets:
        if rate <= top * TARGET_REACH:
            ax.axhline(rate, color=TARGET, linestyle="--", linewidth=1.2)
            top = max(top, rate * 1.18)
        else:  # drawn to scale, it would flatten every capacity into the axis
            ax.annotate(f"target {rate:,g} req/s: above the chart", (0.99, 0.97), xycoords="axes fraction",
                        ha="right", va="top", fontsize=8, color=TARGET)
    objectives = sorted({p.p99_objective_ms for line in lines for p in line.points})
    log_scale(ax, "x", objectives)
    if objectives:
        ax.set_xticks(objectives, [f"{o:g}" for o in objectives])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xlim(objectives[0] / 1.3, objectives[-1] * 1.3)
    ax.set_ylim(bottom=0, top=top)
    ax.set_title(f"request batch {batch}", fontsize=10)
    ax.set_xlabel("p99 objective ms (log)")
    ax.set_ylabel("capacity req/s")
    ax.grid(alpha=0.3)


def capacity_figure(lines: Sequence[CapacityLine], targets: Sequence[tuple[int, float, float]]) -> bytes | None:
    """Capacity req/s against the p99 objective, one panel per request batch, one line per row of the objective
    table; `targets`: (request batch, rate req/s, p99 objective ms) of each target with a rate, drawn as a dashed
    line (named in the panel instead where it is over `TARGET_REACH` times the highest capacity). None without a
    capacity."""
    lines = [line for line in lines if line.points]
    if not lines:
        return None
    batches = sorted({line.request_batch for line in lines})
    fig, axes = plt.subplots(1, len(batches), figsize=(max(6.0, 5.2 * len(batches)), 3.8), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    for ax, batch in zip(axes[0], batches):
        _capacity_panel(ax, batch, [line for line in lines if line.request_batch == batch],
                        [(rate, ms) for b, rate, ms in targets if b == batch])
    named = {line.label: line.colour for line in lines}  # the panel names the request batch
    handles = [Line2D([], [], color=colour, label=label) for label, colour in named.items()]
    handles += [Line2D([], [], color=GREY, marker="o", label="confirmed"),
                Line2D([], [], color=GREY, marker="D", linestyle=":", label="passed, not confirmed"),
                Line2D([], [], color=GREY, marker="o", markerfacecolor="white", linestyle="",
                       label="hollow, arrow up: ≥, a lower bound (no higher rate failed)")]
    words = {f"target {rate:,g} req/s (p99 ≤ {ms:g} ms)" for b, rate, ms in targets if b in batches}
    handles += [Line2D([], [], color=TARGET, linestyle="--", label=text) for text in sorted(words)]
    legend_below(fig, handles, columns=3)
    return png(fig)


# ----------------------------------------------------------------------------- latency against throughput, per rate


@dataclass(frozen=True)
class RateCurve:
    """One search's rates (`loadtest.judge.objectives.RateRow`, every window at a rate pooled)."""

    label: str
    colour: str  # its configuration's
    rows: tuple  # RateRow, lowest offered rate first


def _rate_curve(ax, curve: RateCurve) -> None:
    kept = [r for r in curve.rows if r.p99_ms is not None]
    steady = [(r.achieved_rps, r.p99_ms) for r in kept if not r.overloaded]
    if steady:
        ax.plot(*zip(*steady), color=curve.colour, marker="o", markersize=5, label=curve.label)
    queued = [(r.achieved_rps, r.p99_ms) for r in kept if r.overloaded]
    if queued:
        ax.plot(*zip(*queued), color=curve.colour, marker="o", markersize=7, linestyle="", markerfacecolor="none")
    p50 = [(r.achieved_rps, r.p50_ms) for r in kept if not r.overloaded and r.p50_ms is not None]
    if p50:
        ax.plot(*zip(*p50), color=curve.colour, linestyle="--", alpha=0.6)


def rate_latency_figure(panels: Sequence[tuple[int, Sequence[RateCurve], Sequence[float]]]) -> bytes | None:
    """p99 (solid) and p50 (dashed) against achieved req/s, one line per configuration, one panel per request
    batch, every objective answered dotted and named at the left edge (Model Analyzer's throughput-against-latency
    chart, from the pooled rates). None without rates."""
    panels = [p for p in panels if any(c.rows for c in p[1])]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(max(7.0, 5.8 * len(panels)), 4.4), squeeze=False)
    fig.subplots_adjust(wspace=0.3)
    for ax, (batch, curves, objectives) in zip(axes[0], panels):
        for curve in curves:
            _rate_curve(ax, curve)
        for objective in objectives:
            ax.axhline(objective, color="firebrick", linestyle=":", linewidth=1)
            ax.annotate(f"{objective:g} ms", (0.0, objective), xycoords=("axes fraction", "data"), xytext=(3, 1),
                        textcoords="offset points", ha="left", va="bottom", fontsize=7, color="firebrick")
        ax.set_title(f"request batch {batch}", fontsize=10)
        ax.set_xlabel("achieved throughput (req/s, log)")
        ax.set_ylabel("latency (ms, log)")
        ax.grid(alpha=0.3, which="both")
        log_scale(ax, "x", [r.achieved_rps for c in curves for r in c.rows])
        log_scale(ax, "y", [r.p99_ms for c in curves for r in c.rows] + list(objectives))
    named = {c.label: c.colour for _, curves, _ in panels for c in curves}
    handles = [Line2D([], [], color=colour, marker="o", label=label) for label, colour in named.items()]
    handles += [Line2D([], [], color=GREY, marker="o", label="p99 of every window at a rate"),
                Line2D([], [], color=GREY, linestyle="--", label="p50"),
                Line2D([], [], marker="o", color=GREY, markerfacecolor="none", linestyle="", label="overloaded rate"),
                Line2D([], [], color="firebrick", linestyle=":", label="p99 objective")]
    legend_below(fig, handles, columns=4)
    return png(fig)


# ----------------------------------------------------------------------------- USD/h at each p99 objective


class LabelledPoints(Protocol):
    """A labelled line of (x, y) points: the card's cost curves (`loadtest.report.card.objective_costs`), drawn here
    without this room importing the card's."""

    @property
    def label(self) -> str: ...

    @property
    def points(self) -> tuple[tuple[float, float], ...]: ...


def objective_figure(curves: Sequence[LabelledPoints], ylabel: str) -> bytes | None:
    """Per target and device, USD/h against the p99 objective: what loosening it is worth, its axis in 2 decimals as
    every USD/h the report prints. A curve is a device's best setup, not one configuration, so it is drawn in greys
    (a colour means a configuration)."""
    if not curves:
        return None
    fig, ax = plt.subplots(figsize=(9, 3.6))
    for index, curve in enumerate(curves):
        xs, ys = zip(*curve.points)
        ax.plot(xs, ys, marker="os^Dv"[index % 5], color=("#222222", GREY)[index % 2],
                linestyle=LINESTYLES[index % len(LINESTYLES)], label=curve.label)
    ax.set_xscale("log")
    plain_log(ax.xaxis)
    ticks = sorted({p for c in curves for p, _ in c.points})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("p99 objective ms (log)")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(USD_PER_HOUR)
    ax.grid(alpha=0.3)
    legend_below(fig, ax.get_legend_handles_labels()[0], columns=3)
    return png(fig)
