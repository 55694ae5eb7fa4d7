"""The report's charts read at 1280 px and draw what the tables print (issue #58, item 5).

Each report is built from a fixture with matplotlib's figures kept open, then drawn again here with every text's box
recorded as matplotlib lays it out: no text lies over another, no legend over a plotting area, each configuration
has one colour in every chart, the capacity chart draws the objective table's values (lower bounds hollow with an
arrow up, the target's rate as a line), and the first chart is a share on a linear axis from 0 with its 50% line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from unittest import mock

import matplotlib.pyplot as plt
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from loadtest.report import page
from loadtest.report.answers.answers import answer
from loadtest.report.build import Report
from loadtest.report.charts.assembly import capacity_lines, colours_of
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import ceiling_bars, figures_of
from loadtest.report.sections.objective_table import objective_table
from loadtest.report.series import read_all
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

# (fixture, target req/s or None): one run with two request batches and lower bounds, the paired H200 run, and a
# run sized for a target (the capacity chart's target line, the USD/h chart)
REPORTS = {"h100-run": None, "h200-paired": None, "capacity-run": 5000.0}


def report_figures(run: str, target_rps: float | None) -> tuple[Report, list[Figure]]:
    """The report of a fixture and every matplotlib figure it drew, left open (`png` closes them otherwise)."""
    plt.close("all")
    with mock.patch.object(plt, "close", lambda *_: None):
        report = page.read_report([FIXTURES / run / "results.jsonl"], target_rps=target_rps,
                                  prices=FIXTURES / "prices.toml")
    return report, [plt.figure(n) for n in plt.get_fignums()]


@pytest.fixture(scope="module", params=sorted(REPORTS))
def drawn(request) -> Iterator[tuple[str, Report, list[Figure]]]:
    report, figures = report_figures(request.param, REPORTS[request.param])
    yield request.param, report, figures
    plt.close("all")


def texts_of(fig: Figure) -> list[tuple[str, Bbox]]:
    """Every text the figure draws (tick labels in view, labels, titles, annotations, legend entries) and its box
    in pixels, as drawn at the report's DPI."""
    seen: list[tuple[str, Bbox]] = []
    draw = Text.draw

    def recording(self, renderer):
        draw(self, renderer)
        if self.get_visible() and self.get_text().strip():
            seen.append((self.get_text(), self.get_window_extent(renderer)))

    fig.set_dpi(100)
    with mock.patch.object(Text, "draw", recording):
        fig.canvas.draw()
    return seen


def overlap(a: Bbox, b: Bbox, slack: float = 1.0) -> bool:
    """Whether two boxes share more than `slack` pixels each way (touching glyph edges do not count)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > slack and min(a.y1, b.y1) - max(a.y0, b.y0) > slack


def name_of(fig: Figure) -> str:
    ax = fig.axes[0]
    return f"{ax.get_title()!r} / {ax.get_xlabel()!r}"


def test_no_chart_text_lies_over_another(drawn):
    run, _, figures = drawn
    assert len(figures) >= 6
    for fig in figures:
        texts = texts_of(fig)
        clashes = [(a, b) for i, (a, box_a) in enumerate(texts) for b, box_b in texts[i + 1:] if overlap(box_a, box_b)]
        assert clashes == [], (run, name_of(fig), clashes)


def test_every_legend_is_off_the_plotting_area_and_its_text(drawn):
    run, _, figures = drawn
    for fig in figures:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
        for legend in legends:
            box = legend.get_window_extent(renderer)
            for ax in fig.axes:
                if ax.get_visible():
                    assert not overlap(box, ax.get_window_extent(renderer)), (run, name_of(fig))
            own = {t.get_text() for t in legend.get_texts()}
            others = [text for text, b in texts_of(fig) if text not in own and overlap(box, b)]
            assert others == [], (run, name_of(fig), others)


CONFIG = re.compile(r"^(S\d+ )?(?P<config>[^,]+)")


def test_each_configuration_has_one_colour_in_every_chart(drawn):
    """Every legend entry naming a configuration, and every bar of the first chart, is in its colour."""
    run, _, figures = drawn
    labels = config_labels(config_of(c) for c in read_all([FIXTURES / run / "results.jsonl"]))
    colours = colours_of(labels)
    assert len(set(colours.values())) == len(colours)
    named = 0
    for fig in figures:
        for legend in fig.legends:
            for handle, text in zip(legend.legend_handles, legend.get_texts()):
                config = CONFIG.match(text.get_text())["config"]
                if config in colours:
                    assert to_hex(handle.get_color()) == colours[config], (run, name_of(fig), text.get_text())
                    named += 1
        ax = fig.axes[0]
        if ax.get_xlabel().startswith("served ÷ the device alone"):
            bars = [to_hex(p.get_facecolor()) for p in ax.patches]
            shown = [t.get_text() for t in ax.get_yticklabels()]  # top down, as the bars were drawn
            unmeasured = {round(a.xy[1]) for a in ax.texts if a.get_text() == "device alone not measured"}
            rows = [t for t, y in zip(shown, ax.get_yticks()) if round(y) not in unmeasured]
            assert bars == [colours[t.split(",")[0]] for t in rows], run
    assert named >= len(colours)


def chart(figures: list[Figure], xlabel: str) -> list[Figure]:
    return [f for f in figures if f.axes and f.axes[0].get_xlabel().startswith(xlabel)]


def test_the_first_chart_is_a_share_of_the_device_alone_from_zero_with_the_half_line(drawn):
    run, report, figures = drawn
    [fig] = chart(figures, "served ÷ the device alone")
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= 1.0
    assert any(list(line.get_xdata()) == [0.5, 0.5] for line in ax.get_lines())  # the 50% line
    widths = sorted(round(p.get_width(), 3) for p in ax.patches)
    shares = sorted(round(f.served.share, 3) for f in report.figures if f.served and f.at.startswith("capacity"))
    assert widths == shares, run  # figures.csv's served ÷ device alone, each configuration's answer


def test_the_first_charts_bars_read_each_figures_share_and_configuration():
    """`ceiling_bars` hands the chart `Figures.served.share` itself (computed once, in figures.py) and the
    configuration whose colour the bar takes, not a label to parse."""
    cells = read_all([FIXTURES / "h200-paired" / "results.jsonl"])
    answers, labels = answer(cells), config_labels(config_of(c) for c in cells)
    figures = figures_of(cells, answers, labels)
    bars = ceiling_bars(figures, answers)
    assert len(bars) == 4
    for bar in bars:
        served = figures[(bar.config, 1)].served
        assert served is not None and bar.share == served.share and bar.label.startswith(labels[bar.config])


def test_capacity_chart_draws_the_objective_tables_values(drawn):
    """Each line's points are the objective table's cells (the number, and `≥` as a hollow marker with an arrow up);
    the target's rate is a dashed line where a target is given."""
    run, _, figures = drawn
    cells = read_all([FIXTURES / run / "results.jsonl"])
    answers, labels = answer(cells), config_labels(config_of(c) for c in cells)
    table = objective_table(answers, labels)
    assert table is not None
    assert table.header[-1] == "tool ceiling"  # the objectives' columns are between it and the first two
    objectives = [float(h.split("≤ ")[1].split(" ")[0]) for h in table.header[2:-1]]
    lines = capacity_lines(answers.searches, labels, colours_of(labels))
    for line, row in zip(lines, table.rows):
        assert (line.label, str(line.request_batch)) == row[:2]
        printed = {o: text for o, text in zip(objectives, row[2:-1]) if re.search(r"\d", text)}
        assert {p.p99_objective_ms for p in line.points} == set(printed), (run, row)
        for p in line.points:
            figures_printed = re.findall(r"(≥ )?([\d,]+\.?\d*) (confirmed|passed)", printed[p.p99_objective_ms])
            assert [(float(rate.replace(",", "")), kind == "confirmed", bool(at_least))
                    for at_least, rate, kind in figures_printed] == [
                (pytest.approx(rate, abs=0.06), confirmed, lower) for rate, confirmed, lower in p.marks], (run, row)
        for confirmed in (True, False):  # each series never falls as the objective loosens
            series = [rate for p in line.points for rate, c, _ in p.marks if c == confirmed]
            assert series == sorted(series), (run, row)
    [fig] = [f for f in chart(figures, "p99 objective ms") if f.axes[0].get_ylabel() == "capacity req/s"]
    bounds = sum(lower for line in lines for p in line.points for _, _, lower in p.marks)
    arrows = [a for ax in fig.axes for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    hollow = [m for ax in fig.axes for m in ax.get_lines() if m.get_markerfacecolor() in ("white", (1, 1, 1, 1))]
    assert len(arrows) == len(hollow) == bounds
    if run == "h100-run":
        assert bounds > 0 and len(fig.axes) == 2  # request batches 1 and 32, each a panel
    for ax in fig.axes:  # the target at each request batch searched: a line, or named where far above the data
        drawn = [line for line in ax.get_lines() if list(line.get_ydata()) == [5000.0, 5000.0]]
        named = [t for t in ax.texts if "5,000 req/s: above the chart" in t.get_text()]
        assert (len(drawn), len(named)) in (((1, 0), (0, 1)) if REPORTS[run] else ((0, 0),))


def test_a_target_far_above_every_capacity_is_named_not_drawn_to_scale():
    """A target of 10,000 req/s beside capacities near 500 would flatten them into the axis: it is named instead."""
    from loadtest.report.charts.answers import CapacityLine, CapacityPoint, capacity_figure

    line = CapacityLine("cpu", "#1f77b4", 1, (CapacityPoint(25.0, 480.0, 520.0, False, False),
                                             CapacityPoint(50.0, 500.0, None, True, True)))
    plt.close("all")
    with mock.patch.object(plt, "close", lambda *_: None):
        assert capacity_figure([line], [(1, 10_000.0, 25.0)]) is not None
        assert capacity_figure([line], [(1, 1_000.0, 25.0)]) is not None
    far, near = (plt.figure(n).axes[0] for n in plt.get_fignums())
    plt.close("all")
    assert far.get_ylim()[1] < 1_000 and any("10,000 req/s: above the chart" in t.get_text() for t in far.texts)
    assert [list(h.get_ydata()) for h in near.get_lines() if h.get_linestyle() == "--"] == [[1_000.0, 1_000.0]]
    assert near.get_ylim()[1] > 1_000


def test_the_overlap_check_catches_text_over_text():
    """The checks above can fail: two labels written at one place overlap."""
    fig, ax = plt.subplots()
    ax.text(0.5, 0.5, "capacity 583 req/s")
    ax.text(0.52, 0.5, "p99 ≤ 25 ms")
    texts = [b for t, b in texts_of(fig) if t in ("capacity 583 req/s", "p99 ≤ 25 ms")]
    plt.close(fig)
    assert overlap(*texts)

