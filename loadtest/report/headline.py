"""The answer the report leads with (`Summary`): the card, the findings, the answer tables, computed once.

Its first screen in HTML and its first lines in Markdown: the card (`loadtest.report.card`), why none met where
none did, the findings (`loadtest.report.findings`), the answers at every objective, and the host's own floor; then
the answer table (`loadtest.report.answer_table`), the paired comparisons and the objective table. Without capacity
searches it says so plainly and shows the best open-loop rate measured passing per configuration, as a lower bound.
`console_end` is what `capacity` prints at its end, from the same answers.

Not for: deriving the answers (`loadtest.report.answers.answers`, `loadtest.report.answers.sources`) or layout
(`loadtest.report.page`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from loadtest.evidence.records import CellResult
from loadtest.judge.goals import Target
from loadtest.report.answer_table import device_table, lower_bound_table
from loadtest.report.answers.answers import Answers, answer
from loadtest.report.answers.paired import by_key, paired_ratios, paired_table
from loadtest.report.blocks import Figure, Table
from loadtest.report.card.capacity_table import capacity_table
from loadtest.report.card.card import Card, card_for
from loadtest.report.card.sizing_table import sizing_table
from loadtest.report.configs import Config, config_labels, config_of, models_named
from loadtest.report.figures import Figures, console_lines, figures_of
from loadtest.report.findings import Labels, device_bounds, every_finding
from loadtest.report.sections.objective_table import objective_table
from loadtest.report.sizing.instances import Pricing, with_replicas

DEFAULT_P99_MS = 50.0  # the objective without a capacity search or a p99 asked for (`make size`'s default)
NO_SEARCH = "no capacity search in these results: run make capacity or make tune"


@dataclass(frozen=True)
class Summary:
    headline: tuple[str, ...]  # sentences, the first one the answer
    tables: tuple[Table, ...]
    lead: str = ""  # the answer in one sentence: the first of the headline's first line (HTML's first screen)
    chart: Figure | None = None  # the server against the device alone, per configuration (HTML's first screen)
    card: Card | None = None  # the first screen: for buying or not, per target and device (`loadtest.report.card.card`)
    cost_chart: Figure | None = None  # per target and device, USD/h (or capacity) against the p99 objective
    sizing: Table | None = None  # the card's boxes worked, under its Terms (`loadtest.report.card.sizing_table`)
    capacities: Table | None = None  # the card's capacities in full, above it (`loadtest.report.card.capacity_table`)


def model_named(results: Sequence[CellResult], lines: tuple[str, ...]) -> tuple[str, ...]:
    """`lines` with the first naming the model(s) measured ("model ranker: ..."), unless only the demo's."""
    models = models_named(results)
    return (f"model {models}: {lines[0]}", *lines[1:]) if lines and models else lines


def summarise(results: Sequence[CellResult], answers: Answers, labels: Labels, p99_objective_ms: float | None = None,
              pricing: Pricing | None = None, figures: Mapping[tuple[Config, int], Figures] | None = None,
              targets: Sequence[Target] | None = None) -> Summary:
    """The answer at `p99_objective_ms` (None: every objective searched), naming the model unless it is the demo's.
    `figures`: `figures_of` these results, when the caller has them already; `targets`: what the card answers
    (default: each objective and request batch searched, at the pricing's rate)."""
    figures = figures_of(results, answers, labels) if figures is None else figures
    summary = _summarise(results, answers, labels, p99_objective_ms, pricing, figures, targets)
    models = models_named(results)
    tables = tuple(replace(t, title=f"{t.title} (model {models})") for t in summary.tables) if models else \
        summary.tables
    return replace(summary, headline=model_named(results, summary.headline), tables=tables)


def _summarise(results: Sequence[CellResult], answers: Answers, labels: Labels, p99_objective_ms: float | None,
               pricing: Pricing | None, figures: Mapping[tuple[Config, int], Figures],
               targets: Sequence[Target] | None = None) -> Summary:
    devices = [d for d in answers.devices if p99_objective_ms is None or d.p99_objective_ms == p99_objective_ms]
    pricing = with_replicas(pricing, results)
    if devices:
        compared = paired_ratios(results)
        keyed = by_key(compared)
        by_objective = objective_table(answers, labels, keyed)
        card = card_for(results, pricing, targets, answers, keyed, p99_objective_ms)
        lines = every_finding(devices, labels, results, figures, answers, keyed, p99_objective_ms)
        table = paired_table(compared)
        sizing = sizing_table(card, pricing, devices)
        return Summary(lines,
                       (device_table(devices, answers.ratios, labels, pricing, keyed, sizing is not None,
                                     answers.ceilings),
                        *((table,) if table else ()), *((by_objective,) if by_objective else ())), card=card,
                       sizing=sizing, capacities=capacity_table(card))
    objective = p99_objective_ms if p99_objective_ms is not None else DEFAULT_P99_MS
    if answers.searches:
        searched = ", ".join(sorted({f"{s.p99_objective_ms:g} ms" for s in answers.searches}))
        first = f"no capacity search at p99 ≤ {objective:g} ms in these results (searched: {searched})."
    else:
        first = f"{NO_SEARCH}."
    return Summary((first, f"Below: the best open-loop rate measured passing p99 ≤ {objective:g} ms per "
                           "configuration, a lower bound."),
                   (lower_bound_table(results, labels, objective),))


def lead_of(headline: Sequence[str]) -> str:
    """The first sentence of the first line (a sentence ends at a full stop before a capital)."""
    return re.split(r"(?<=\.)\s+(?=[A-Z])", headline[0], maxsplit=1)[0] if headline else ""


def bound_lines(results: Sequence[CellResult], answers: Answers, labels: Labels,
                figures: Mapping[tuple[Config, int], Figures]) -> tuple[str, ...]:
    """Only what bounded each device's answer (what `capacity` prints before a single answer), naming the model."""
    return model_named(results, device_bounds(results, answers, labels, figures))


def console_end(results: Sequence[CellResult], pricing: Pricing | None,
                targets: Sequence[Target] | None = None) -> tuple[str, ...]:
    """What `capacity` (and `demo`) print at the end: what bounded each answer, the figures table, then the card
    (last, before each search's one-line answer). The answers and figures are computed once."""
    answers = answer(results)
    labels = config_labels(config_of(cell) for cell in results)
    figures = figures_of(results, answers, labels)
    card = card_for(results, pricing, targets, answers)
    bounds = bound_lines(results, answers, labels, figures)
    return (*bounds, *([""] if bounds else []), *console_lines(list(figures.values())),
            *(("", *card.lines()) if card is not None else ()))
