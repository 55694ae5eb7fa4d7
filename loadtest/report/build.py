"""The report built: every table and figure computed once from the records, in the page's order; rendering
(`loadtest.report.page`) only formats them.

Order: first the answer (`loadtest.report.headline`: the card, the findings and the answer tables, or plainly that
no capacity search was run), then the charts (`loadtest.report.charts.assembly`: capacity against the objective,
latency vs offered load with the capacity found, throughput vs load, latency vs throughput, server batch sizes; after
a shape sweep, the replica shapes), then the details (`loadtest.report.sections.detail_blocks`), among them what was
measured, stated once per configuration. Invalid and failed cells are drawn hollow or as crosses and listed with
their reasons, never dropped.

Not for: writing the files (`loadtest.report.page`) or measuring anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from loadtest.evidence.records import CellResult
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import answer
from loadtest.report.blocks import Figure, Table
from loadtest.report.card.card import targets_of
from loadtest.report.charts.assembly import colours_of, curves, shapes_chart
from loadtest.report.charts.first_screen import ceiling_chart, objective_chart
from loadtest.report.configs import config_labels, config_of
from loadtest.report.figures import Figures, figures_of
from loadtest.report.glossary import glossary_table
from loadtest.report.headline import DEFAULT_P99_MS, Summary, lead_of, summarise
from loadtest.report.sections.detail_blocks import detail_blocks, intro_lines, series_names, shape_blocks
from loadtest.report.series import group_series
from loadtest.report.shape_sizing import ShapePoint, shape_curves
from loadtest.report.sizing.instances import SPARE_INSTANCES, Pricing


@dataclass(frozen=True)
class Report:
    title: str
    summary: Summary  # the answer: first screen of the page, first lines of the summary
    intro: tuple[str, ...]
    blocks: tuple[Table | Figure, ...] = field(default_factory=tuple)
    figures: tuple[Figures, ...] = ()  # per configuration and request batch: what figures.csv and .json carry
    shapes: tuple[ShapePoint, ...] = ()  # each replica shape measured (a shape sweep): figures.json's "shapes"


def build_report(results: Sequence[CellResult], compare: Sequence[CellResult] = (), sources: Sequence[Path] = (),
                 *, p99_ms: float | None = None, pricing: Pricing | None = None,
                 targets: Sequence[Target] | None = None, spare: int = SPARE_INSTANCES) -> Report:
    """Every table and figure of the report, computed once; rendering only formats them."""
    answers = answer(results)
    labels = config_labels(config_of(c) for c in results)
    series = group_series(results)
    names = series_names(series, labels)
    objective = p99_ms if p99_ms is not None else DEFAULT_P99_MS
    shapes = shape_curves(answers.searches)
    colours = colours_of(labels)
    drawn = targets or targets_of(answers, pricing, p99_ms)
    figures = figures_of(results, answers, labels)
    blocks = [*curves(results, answers, labels, colours, series, names, objective, drawn),
              *shape_blocks(shapes, shapes_chart(shapes, labels, colours)),
              *detail_blocks(results, compare, answers, labels, series, names, figures, objective),
              glossary_table(labels)]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    intro = intro_lines(results, compare, sources, series, labels, answers, now)
    summary = summarise(results, answers, labels, p99_ms, pricing, figures, targets)
    summary = replace(summary, lead=lead_of(summary.headline), chart=ceiling_chart(figures, answers, labels, colours),
                      cost_chart=objective_chart(answers, summary.card, pricing, targets, p99_ms))
    return Report("Inference load test report", summary, intro, tuple(blocks), tuple(figures.values()),
                  tuple(p for c in shapes for p in c.points))


__all__ = ["Report", "build_report"]
