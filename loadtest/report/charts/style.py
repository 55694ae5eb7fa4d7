"""What every chart of the report shares: one colour per configuration, axes labelled so they read at 1280 px,
legends under the plotting area, and the PNG each figure becomes.

One mapping, configuration label -> colour (`config_colours`), is built once per report and handed to every chart,
so a configuration has the same colour in each. Within a colour, the load mode is the marker (closed loop: square,
open loop: circle) and the request batch the line style (`series_style`).

Not for: what a chart draws (`loadtest.report.charts.cells`, `loadtest.report.charts.answers`).
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterable, Sequence

import matplotlib

matplotlib.use("Agg")  # no display here or in CI; must precede pyplot
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter, NullLocator  # noqa: E402

from loadtest.evidence.vocab import LoadMode  # noqa: E402

DPI = 100
# matplotlib's tab10, then tab20's lighter shades: distinct colours for up to 20 configurations
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2", "#c7c7c7",
           "#dbdb8d", "#9edae5")
GREY = "#7f7f7f"
MARKERS = {LoadMode.CLOSED: "s", LoadMode.OPEN: "o"}
LINESTYLES = ("-", "--", ":", "-.")


def config_colours(labels: Iterable[str]) -> dict[str, str]:
    """One colour per configuration label, in the order given (`config_labels`' order: sorted configurations)."""
    return {label: PALETTE[i % len(PALETTE)] for i, label in enumerate(dict.fromkeys(labels))}


def series_style(mode: str, batch: int, batches: Sequence[int]) -> dict:
    """The marker of a load mode and the line style of a request batch (rank among `batches`)."""
    rank = sorted(set(batches)).index(batch) if batch in batches else 0
    return {"marker": MARKERS.get(LoadMode(mode), "o"), "linestyle": LINESTYLES[rank % len(LINESTYLES)]}


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


PLAIN = FuncFormatter(lambda v, _: f"{v:g}")


def plain_log(axis) -> None:
    """Log axis labelled 50, 100, 2000 rather than 5×10¹, with labels far enough apart to read: 1-2-5 steps over up
    to two decades, decades only over more, and at most five round values where it spans less than a factor of 3
    (there log and linear steps look alike, and 1-2-5 would leave one label or none)."""
    low, high = sorted(axis.get_view_interval())
    if low > 0 and high / low < 3:
        axis.set_major_locator(MaxNLocator(nbins=4, steps=[1, 2, 2.5, 5, 10]))
    else:
        wide = low > 0 and high / low > 100
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,) if wide else (1.0, 2.0, 5.0)))
    axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(NullFormatter())


def log_scale(ax, which: str, values) -> None:
    """Log scale when there is something positive to scale: a run whose every cell failed or answered nothing has
    only zeros, and matplotlib refuses a log axis over them."""
    if any(v is not None and v > 0 for v in values):
        getattr(ax, f"set_{which}scale")("log")
        plain_log(getattr(ax, f"{which}axis"))


def levels_x(ax, levels) -> None:
    """Log load axis: ticked at the measured levels (1, 2, 4 users) where they are spaced apart (each at least 1.5×
    the one before), else at 1-2-5 steps (offered rates: 406, 528.8, 583 ... would print over each other)."""
    ticks = sorted({v for v in levels if v > 0})
    if not ticks:
        return
    ax.set_xscale("log")
    if all(b / a >= 1.5 for a, b in zip(ticks, ticks[1:])):
        ax.set_xticks(ticks, [f"{v:g}" for v in ticks])
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        plain_log(ax.xaxis)


def widen_log(ax, which: str) -> None:
    """A log axis over one value (every cell at one rate) widened to a range matplotlib draws with a tick."""
    if getattr(ax, f"get_{which}scale")() != "log":
        return
    low, high = sorted(getattr(ax, f"get_{which}lim")())
    if high / low < 1.5:
        getattr(ax, f"set_{which}lim")(low / 1.5, high * 1.5)


def legend_below(fig, handles, columns: int = 2) -> None:
    """The figure's one legend, under its panels and their axis labels: never over a bar, a line or a label. Call it
    once the panels are labelled (where their labels end is measured)."""
    renderer = fig.canvas.get_renderer()  # get_tightbbox lays the labels out itself: no draw needed beforehand
    drawn = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    bottom = min((box.y0 for box in drawn if box is not None), default=0.0)
    below = fig.transFigure.inverted().transform((0.0, bottom))[1] - 0.02
    fig.legend(handles=handles, loc="upper center", ncol=min(columns, max(len(handles), 1)), fontsize=8,
               bbox_to_anchor=(0.5, min(below, 0.0)), frameon=False, handlelength=3)


def grid_shape(count: int, columns: int = 3) -> tuple[int, int]:
    """Rows and columns for `count` panels, at most `columns` abreast."""
    across = min(columns, count)
    return math.ceil(count / across), across
