"""The first screen's two charts: each answer as a share of its device alone (beside the card), and, below a card for
buying, each target's USD/h against the p99 objective (the card's arithmetic at every objective).

Not for: the charts below (`loadtest.report.charts.assembly`) or drawing (`loadtest.report.charts.answers`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers
from loadtest.report.blocks import Figure
from loadtest.report.card.card import Card, targets_of
from loadtest.report.card.objective_costs import objective_curves
from loadtest.report.configs import Config
from loadtest.report.figures import Figures, ceiling_bars
from loadtest.report.sizing.instances import Pricing


def objective_chart(answers: Answers, card: Card | None, pricing: Pricing | None,
                    targets: Sequence[Target] | None, p99_ms: float | None) -> Figure | None:
    """Below a card for buying: each target's USD/h per device against the p99 objective; None otherwise (the
    capacities are `capacity_chart`'s, per configuration)."""
    from loadtest.report.charts import answers as answer_plots

    if card is None or not card.for_buying or pricing is None:
        return None
    curves = objective_curves(answers, targets or targets_of(answers, pricing, p99_ms), pricing, True)
    figure = answer_plots.objective_figure(curves, f"{pricing.prices.currency}/h")
    if figure is None:
        return None
    return Figure("USD/h for each target at each p99 objective", "Per target and device, at each p99 objective the "
                  "cells answer: what the best setup's boxes for the target's rate cost an hour (the card's "
                  "arithmetic). Greys: a device's best setup, which may be another configuration at each objective.",
                  figure)


def ceiling_chart(figures: Mapping[tuple[Config, int], Figures], answers: Answers, labels: Mapping[Config, str],
                  colours: Mapping[str, str]) -> Figure | None:
    """The first screen's chart: each searched configuration's answer as a share of the device alone (its
    `Figures.served`), in its configuration's colour; None without a capacity search."""
    from loadtest.report.charts import answers as answer_plots

    bars = ceiling_bars(figures, answers)
    if not bars:
        return None
    unmeasured = " The device alone was not measured here, so there is no share to draw." \
        if all(b.share is None for b in bars) else ""
    return Figure("What the server served, against the device alone",
                  "Per configuration and request batch: images/s served at its answer as a share of the model alone "
                  "on the device at the batch the server ran (linear, from 0; the whisker reaches the answer's upper "
                  "end, the lowest rate shown to fail; the dashed line is 50%). A short bar: the serving path, "
                  "not the device, bounded that answer." + unmeasured,
                  answer_plots.ceiling_figure(bars, [colours[labels[b.config]] for b in bars]))


__all__ = ["ceiling_chart", "objective_chart"]
