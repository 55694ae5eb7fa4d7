"""The report's charts below its first screen assembled: which records each draws, in which configuration's colour,
under which caption.

Every chart takes its values from the records the tables print (the capacity against the objective from each
search's `ObjectiveAnswer`s, as the objective table) and one mapping, configuration label -> colour
(`loadtest.report.charts.style.config_colours`), built once here. matplotlib is imported only when a chart is drawn
(it is slow to import).

Not for: the first screen's charts (`loadtest.report.charts.first_screen`), drawing (`loadtest.report.charts.cells`,
`loadtest.report.charts.answers`) or the page around the charts (`loadtest.report.build`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import LoadMode
from loadtest.judge.goals import Target
from loadtest.judge.objectives import Bound, ObjectiveAnswer
from loadtest.report.answers.answers import Answers, SearchAnswer
from loadtest.report.blocks import Figure
from loadtest.report.configs import Config, config_of
from loadtest.report.sections.objective_table import repeat_labels
from loadtest.report.sections.shapes_table import TITLE as SHAPES_TITLE
from loadtest.report.series import Series, load_level
from loadtest.report.shape_sizing import ShapeCurve

if TYPE_CHECKING:
    from loadtest.report.charts.answers import CapacityLine, CapacityPoint, RateCurve
    from loadtest.report.charts.cells import OfferedLine

Labels = dict[Config, str]
Colours = dict[str, str]  # configuration label -> its colour in every chart


def colours_of(labels: Labels) -> Colours:
    """The report's one configuration -> colour mapping, in `config_labels`' order."""
    from loadtest.report.charts.style import config_colours

    return config_colours(labels.values())


# ----------------------------------------------------------------------------- what each chart draws


def offered_lines(results: Sequence[CellResult], answers: Answers, labels: Labels, colours: Colours,
                  p99_ms: float | None = None) -> list[OfferedLine]:
    """One latency-vs-offered-load panel per configuration × request batch with open-loop cells; the
    objectives drawn are those searched there, else `p99_ms` (the summary's lower bounds are at it)."""
    from loadtest.report.charts.cells import OfferedLine

    groups: dict[tuple[Config, int], list[CellResult]] = {}
    for c in results:
        if c.load.mode == LoadMode.OPEN and c.load.rate_rps is not None:  # a search that never ran offered none
            groups.setdefault((config_of(c), c.load.request_batch_size), []).append(c)
    lines = []
    for (config, batch), cells in sorted(groups.items()):
        searches = [s for s in answers.searches if (s.config, s.request_batch_size) == (config, batch)]
        lines.append(OfferedLine(f"{labels[config]}, req batch {batch}", colours[labels[config]],
                                 tuple(sorted(cells, key=lambda c: (load_level(c), c.cell_index))),
                                 tuple((s.p99_objective_ms, s.capacity_rps) for s in searches if s.capacity_rps),
                                 tuple(sorted({s.p99_objective_ms for s in searches}))
                                 or ((p99_ms,) if p99_ms is not None else ())))
    return lines


def rate_panels(answers: Answers, labels: Labels, colours: Colours) -> list[tuple[int, list[RateCurve], list[float]]]:
    """Per request batch: one curve per search (its pooled rates) and the objectives answered."""
    from loadtest.report.charts.answers import RateCurve

    panels = []
    for batch in sorted({s.request_batch_size for s in answers.searches}):
        here = [s for s in answers.searches if s.request_batch_size == batch and s.rates]
        curves = [RateCurve(labels[s.config], colours[labels[s.config]], s.rates) for s in here]
        objectives = sorted({a.p99_objective_ms for s in here for a in s.objectives})
        panels.append((batch, curves, objectives))
    return panels


def capacity_lines(searches: Sequence[SearchAnswer], labels: Labels, colours: Colours) -> list[CapacityLine]:
    """The objective table's rows (`loadtest.report.sections.objective_table`: its labels, each search's answer at
    each objective, as its cell leads with it) as lines; objectives without a capacity are left out."""
    from loadtest.report.charts.answers import CapacityLine

    return [CapacityLine(name, colours[labels[s.config]], s.request_batch_size,
                         tuple(capacity_point(a) for a in s.objectives if a.capacity_rps is not None))
            for s, name in zip(searches, repeat_labels(searches, labels))]


def capacity_point(at: ObjectiveAnswer) -> CapacityPoint:
    """The figures a table cell prints (`answers.figure_text.capacity_text`): the confirmed capacity, and the pass
    above it, each a lower bound where that figure carries the "≥"."""
    from loadtest.report.charts.answers import CapacityPoint

    assert at.capacity_rps is not None
    bounded = at.bound != Bound.NONE
    passed = at.passed_rps if at.confirmed_rps is not None else at.capacity_rps
    return CapacityPoint(at.p99_objective_ms, at.confirmed_rps, passed, bounded and passed is None, bounded)


def target_rates(targets: Iterable[Target]) -> list[tuple[int, float, float]]:
    """(request batch, rate req/s, p99 objective ms) of each target with a rate."""
    return sorted({(t.batch, t.rate_rps, t.p99_objective_ms) for t in targets if t.rate_rps})


# ----------------------------------------------------------------------------- the charts and their captions


def capacity_chart(answers: Answers, labels: Labels, colours: Colours, targets: Sequence[Target]) -> list[Figure]:
    """Capacity against the p99 objective, per configuration, the objective table's values; [] without one."""
    from loadtest.report.charts import answers as answer_plots

    rates = target_rates(targets)
    png = answer_plots.capacity_figure(capacity_lines(answers.searches, labels, colours), rates)
    if png is None:
        return []
    return [Figure("Capacity against the p99 objective, per configuration",
                   "The table \"Capacity at each p99 objective\" drawn: per configuration and request batch, the "
                   "capacity at each objective its cells were answered at, one colour per configuration as in every "
                   "chart. Filled circles joined: confirmed; filled diamonds joined by dots: the pass above it, not "
                   "confirmed; hollow with an arrow up (≥ in the table): a lower bound, no higher rate failed there. "
                   "An objective where nothing passed has no point."
                   + (" Dashed: the target's rate (named instead where it is far above every capacity)."
                      if rates else ""), png)]


def curves(results: Sequence[CellResult], answers: Answers, labels: Labels, colours: Colours, series: list[Series],
           series_names: list[str], p99_ms: float, targets: Sequence[Target]) -> list[Figure]:
    """The charts after the answer: capacity against the objective, the searches' rates, then the cells'."""
    from loadtest.report.charts import answers as answer_plots
    from loadtest.report.charts import cells as plots

    series_colours = [colours[labels[config_of(s.cells[0])]] for s in series]
    offered_png = plots.offered_latency_figure(offered_lines(results, answers, labels, colours, p99_ms))
    batch_png = plots.batch_figure(series, series_names, series_colours)
    rates_png = answer_plots.rate_latency_figure(rate_panels(answers, labels, colours))
    searched = [Figure("Latency against throughput, per configuration", "Each capacity search's rates, every window "
                       "at a rate pooled: p99 (solid) and p50 (dashed) against the achieved req/s, one line per "
                       "configuration, one panel per request batch; the dotted lines are the objectives its cells "
                       "were answered at (the table \"Capacity at each p99 objective\" gives each capacity). Hollow: "
                       "an overloaded rate (the server did not keep up: never a capacity or a peak).", rates_png)] \
        if rates_png else []
    style = ("Each configuration has one colour in every chart; a square marks a closed loop, a circle an open "
             "loop, and the line style the request batch.")
    return [
        *capacity_chart(answers, labels, colours, targets),
        *searched,
        Figure("Latency vs offered load", "p99 (solid) and p50 (dashed) against the offered rate of every open-loop "
               "cell (sweeps and searches), per configuration and request batch size; the dotted line is the p99 "
               "objective (searched, else the one the answer above uses), the dash-dot line the capacity a search "
               "confirmed. Hollow: invalid cell; cross: failed cell."
               if offered_png else "No open-loop cells in these results.", offered_png),
        Figure("Throughput vs load", "Achieved throughput against concurrency (closed loop) or offered rate "
               f"(open loop), both log. Hollow: invalid cell; cross: failed cell. {style}",
               plots.throughput_figure(series, series_names, series_colours)),
        Figure("Latency vs throughput", "p50 and p99 against achieved throughput (log axes). Hollow: "
               f"invalid cell; failed cells have no latency (see the tables). {style}",
               plots.latency_figure(series, series_names, series_colours)),
        Figure("Server-side batch sizes", "Batch sizes the server processed, from its metrics during each cell: the "
               "mean against throughput, and the share of batches of each size at each series' highest load (a "
               f"hatched outline where that cell was invalid). {style}"
               if batch_png else "No server-side batch sizes were recorded in these results (the server exposed "
               "no batching metrics).", batch_png),
    ]


def shapes_chart(curves: Sequence[ShapeCurve], labels: Mapping[Config, str], colours: Mapping[str, str]
                  ) -> Figure | None:
    """Capacity against cores per replica, one line per family, request batch and objective, each shape in its
    configuration's colour (`colours`: configuration label -> colour, as every chart), with the perfect-linear line
    from its 1-core capacity; None without a shape sweep."""
    from loadtest.report.charts import cells as plots

    drawn = [c for c in curves if any(p.capacity_rps for p in c.points)]
    if not drawn:
        return None
    named = [[(labels[p.config], colours[labels[p.config]]) for p in c.points] for c in drawn]
    return Figure(f"{SHAPES_TITLE}: capacity against cores per replica",
                  "Per configuration family, request batch and objective (a dark line, its marker naming the family): "
                  "each shape's capacity, in its configuration's colour as in every chart (the whisker reaches "
                  "the lowest rate above it shown to fail; hollow, without one: a lower bound, it shared the load "
                  "generator's cores or the load generator was the limit) and, dashed, linear from its 1-core capacity "
                  "(k × capacity at 1 core).", plots.shapes_figure(drawn, named))
