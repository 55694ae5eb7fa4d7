"""The report: results turned into a self-contained HTML page and a Markdown summary that lead with the answer.

Reads one or more `results.jsonl` files (optionally a second set to compare against) and writes
`report.html` (plots embedded as base64 PNG, inline CSS, no script, no external URL: it opens
offline), `report.md`, and the figures of every configuration (`figures.csv`, `figures.json`:
`loadtest.report.figures`, the same values the tables print) beside the first results file, under
new names (`report-2.html`, `figures-2.csv`, ...) when earlier reports exist: nothing is overwritten.

Order: first the answer (`loadtest.report.headline`: the batching gain and capacity under the
objective per device, or plainly that no capacity search was run), then the curves (latency vs
offered load with the capacity found, throughput vs load, latency vs throughput, server batch
sizes; after a shape sweep, the replica shapes: `loadtest.report.sections.shapes_table`), then the
details (`loadtest.report.sections.details`), among them what was measured, stated once
per configuration. Invalid and failed cells are drawn hollow or as crosses and listed with their
reasons, never dropped.

The HTML page is rendered from a Jinja2 template (`templates/report.html.j2`, autoescaped); the
Markdown summary is written directly (it is a file format of its own, not a drawn table).

Not for: sizing (`loadtest.report.sizing.size`, whose arithmetic the answer's replicas and cost use),
grouping into series (`loadtest.report.series`) or measuring anything.

    mnist-bench report RESULTS.jsonl... [--compare OTHER.jsonl...] [--out DIR]
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import jinja2

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus, LoadMode
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, answer
from loadtest.report.blocks import Figure, Table
from loadtest.report.card.card import Card, targets_of
from loadtest.report.card.objective_costs import objective_curves
from loadtest.report.configs import Config, config_labels, config_of
from loadtest.report.figures import Figures, ceiling_bars, console_lines, csv_text, figures_of
from loadtest.report.glossary import glossary_table, glossed, header_link
from loadtest.report.headline import DEFAULT_P99_MS, Summary, lead_of, summarise
from loadtest.report.sections import details, noise_table, request_time, versions_table
from loadtest.report.sections.objective_table import rates_table
from loadtest.report.sections.shapes_table import shapes_blocks
from loadtest.report.series import group_series, load_level, read_all, usable
from loadtest.report.shape_sizing import ShapePoint, shape_curves
from loadtest.report.sizing import size
from loadtest.report.sizing.instances import SPARE_INSTANCES, Pricing
from loadtest.report.sizing.prices import DEFAULT_PRICES, load_prices

if TYPE_CHECKING:
    from loadtest.report.plots import OfferedLine


@dataclass(frozen=True)
class Report:
    title: str
    summary: Summary  # the answer: first screen of the page, first lines of the summary
    intro: tuple[str, ...]
    blocks: tuple[Table | Figure, ...] = field(default_factory=tuple)
    figures: tuple[Figures, ...] = ()  # per configuration and request batch: what figures.csv and .json carry
    shapes: tuple[ShapePoint, ...] = ()  # each replica shape measured (a shape sweep): figures.json's "shapes"


# ----------------------------------------------------------------------------- assembly


def offered_lines(results: Sequence[CellResult], answers: Answers, labels: dict[Config, str],
                  p99_ms: float | None = None) -> list[OfferedLine]:
    """One latency-vs-offered-load panel per configuration × request batch with open-loop cells; the
    objectives drawn are those searched there, else `p99_ms` (the summary's lower bounds are at it)."""
    from loadtest.report.plots import OfferedLine  # matplotlib is slow to import; only the report needs it

    groups: dict[tuple[Config, int], list[CellResult]] = {}
    for c in results:
        if c.load.mode == LoadMode.OPEN and c.load.rate_rps is not None:  # a search that never ran offered none
            groups.setdefault((config_of(c), c.load.request_batch_size), []).append(c)
    lines = []
    for (config, batch), cells in sorted(groups.items()):
        searches = [s for s in answers.searches if (s.config, s.request_batch_size) == (config, batch)]
        lines.append(OfferedLine(f"{labels[config]}, req batch {batch}",
                                 tuple(sorted(cells, key=lambda c: (load_level(c), c.cell_index))),
                                 tuple((s.p99_objective_ms, s.capacity_rps) for s in searches if s.capacity_rps),
                                 tuple(sorted({s.p99_objective_ms for s in searches}))
                                 or ((p99_ms,) if p99_ms is not None else ())))
    return lines


def rate_panels(answers: Answers, labels: dict[Config, str]) -> list:
    """Per request batch: one curve per search (its pooled rates) and the objectives answered."""
    from loadtest.report.plots import RateCurve

    panels = []
    for batch in sorted({s.request_batch_size for s in answers.searches}):
        here = [s for s in answers.searches if s.request_batch_size == batch and s.rates]
        curves = [RateCurve(labels[s.config], s.rates, tuple((a.p99_objective_ms, a.capacity_rps) for a in s.objectives
                                                             if a.capacity_rps is not None)) for s in here]
        objectives = sorted({a.p99_objective_ms for s in here for a in s.objectives})
        panels.append((batch, curves, objectives))
    return panels


def curves(results: Sequence[CellResult], answers: Answers, labels: dict[Config, str], series: list,
           series_names: list[str], p99_ms: float) -> list[Table | Figure]:
    from loadtest.report import plots  # matplotlib is slow to import; only the report needs it

    offered_png = plots.offered_latency_figure(offered_lines(results, answers, labels, p99_ms))
    batch_png = plots.batch_figure(series, series_names)
    rates_png = plots.rate_latency_figure(rate_panels(answers, labels))
    searched = [Figure("Latency against throughput, per configuration", "Each capacity search's rates, every window "
                       "at a rate pooled: p99 (solid) and p50 (dashed) against the achieved req/s, one line per "
                       "configuration, one panel per request batch; the dotted lines are the objectives its cells "
                       "were answered at (the table \"Capacity at each p99 objective\" gives each capacity). Hollow: "
                       "an overloaded rate (the server did not keep up: never a capacity or a peak).", rates_png)] \
        if rates_png else []
    return [
        *searched,
        Figure("Latency vs offered load", "p99 (solid) and p50 (dashed) against the offered rate of every open-loop "
               "cell (sweeps and searches), per configuration and request batch size; the dotted line is the p99 "
               "objective (searched, else the one the answer above uses), the dash-dot line the capacity a search "
               "confirmed. Hollow: invalid cell; cross: failed cell."
               if offered_png else "No open-loop cells in these results.", offered_png),
        Figure("Throughput vs load", "Achieved throughput against concurrency (closed loop) or offered rate "
               "(open loop). Hollow: invalid cell; cross: failed cell.",
               plots.throughput_figure(series, series_names)),
        Figure("Latency vs throughput", "p50 and p99 against achieved throughput (log latency axis). Hollow: "
               "invalid cell; failed cells have no latency (see the tables).",
               plots.latency_figure(series, series_names)),
        Figure("Server-side batch sizes", "Batch sizes the server processed, from its metrics during each cell."
               if batch_png else "No server-side batch sizes were recorded in these results (the server exposed "
               "no batching metrics).", batch_png),
    ]


def build_report(results: Sequence[CellResult], compare: Sequence[CellResult] = (), sources: Sequence[Path] = (),
                 *, p99_ms: float | None = None, pricing: Pricing | None = None,
                 targets: Sequence[Target] | None = None, spare: int = SPARE_INSTANCES) -> Report:
    """Every table and figure of the report, computed once; rendering only formats them."""
    answers = answer(results)
    labels = config_labels(config_of(c) for c in results)
    series = group_series(results)
    names = details.series_labels(series, labels)
    objective = p99_ms if p99_ms is not None else DEFAULT_P99_MS
    shapes = shape_curves(answers.searches)
    blocks: list[Table | Figure] = [*curves(results, answers, labels, series, names, objective), *shapes_blocks(shapes)]
    if answers.searches:
        blocks.append(details.searches_table(answers.searches, labels))
        rates = rates_table(answers, labels)
        blocks += [rates] if rates else []
    figures = figures_of(results, answers, labels)
    blocks.append(request_time.request_time_table(figures))
    objectives = answers.objectives_ms() or (objective,)
    blocks.append(noise_table.noise_table(results, labels, objectives))
    blocks += [details.configurations_table(results, labels), details.peak_table(series, names, labels, figures),
               details.cells_table(series, names, only_unusable=True)]
    if compare:
        blocks.append(details.compare_table(results, compare))
    blocks += [details.cells_table(series, names, only_unusable=False), glossary_table(labels)]
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    intro = (f"Generated {now} from {', '.join(str(p) for p in sources) or 'results'}"
             f" ({len(results)} cells in {len(series)} series, {len(labels)} configuration(s), "
             f"{len(answers.searches)} capacity search(es)"
             f"{f'; compared with {len(compare)} cells' if compare else ''}).",
             f"{sum(usable(c) for c in results)} valid, "
             f"{sum(c.status == CellStatus.OK and not usable(c) for c in results)} invalid, "
             f"{sum(c.status != CellStatus.OK for c in results)} failed cells.",
             *versions_table.notes(results))  # a model written by a newer TensorFlow than its server, or unknown
    summary = summarise(results, answers, labels, p99_ms, pricing, figures, targets)
    summary = replace(summary, lead=lead_of(summary.headline), chart=ceiling_chart(figures, answers),
                      cost_chart=objective_chart(answers, summary.card, pricing, targets, p99_ms))
    return Report("Inference load test report", summary, intro, tuple(blocks), tuple(figures.values()),
                  tuple(p for c in shapes for p in c.points))


def objective_chart(answers: Answers, card: Card | None, pricing: Pricing | None,
                    targets: Sequence[Target] | None, p99_ms: float | None) -> Figure | None:
    """Below the card: each target's USD/h per device against the p99 objective (capacity where not for buying)."""
    from loadtest.report import plots

    if card is None:
        return None
    priced = card.for_buying
    curves = objective_curves(answers, targets or targets_of(answers, pricing, p99_ms), pricing, priced)
    what = "USD/h for each target" if priced else "Capacity"
    unit = f"{pricing.prices.currency}/h" if priced and pricing else "capacity req/s"
    figure = plots.objective_figure(curves, unit)
    if figure is None:
        return None
    return Figure(f"{what} at each p99 objective", "Per target and device, at each p99 objective the cells answer: "
                  + ("what the best setup's boxes for the target's rate cost an hour (the card's arithmetic)."
                     if priced else "the best setup's capacity (not for buying: no price)."), figure)


def ceiling_chart(figures: dict[tuple[Config, int], Figures], answers: Answers) -> Figure | None:
    """The first screen's chart: each searched configuration's answer beside the device alone; None without a
    capacity search."""
    from loadtest.report import plots

    bars = ceiling_bars(figures, answers)
    if not bars:
        return None
    return Figure("What the server served, against the device alone",
                  "Per configuration and request batch: images/s served at its answer (the whisker reaches the "
                  "answer's upper end, the lowest rate that did not pass) beside the model alone on the device at "
                  "the batch the server ran (hatched; absent where not measured). A bar far short of its hatched "
                  "one: the serving path, not the device, bounded that answer.", plots.ceiling_figure(bars))


# ----------------------------------------------------------------------------- rendering

TEMPLATES = jinja2.Environment(loader=jinja2.PackageLoader("loadtest.report", "templates"),
                               autoescape=True, keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True,
                               undefined=jinja2.StrictUndefined)
TEMPLATES.filters.update(glossed=glossed, header_link=header_link)  # terms linked to the glossary's rows


def png_data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render_html(report: Report) -> str:
    """The self-contained page: inline CSS, plots as base64 PNGs, no script, no external URL."""
    blocks = [{"table": b if isinstance(b, Table) else None, "figure": b if isinstance(b, Figure) else None,
               "src": png_data_uri(b.png) if isinstance(b, Figure) and b.png else ""} for b in report.blocks]
    chart = report.summary.chart
    chart_src = png_data_uri(chart.png) if chart is not None and chart.png else ""
    cost = report.summary.cost_chart
    cost_src = png_data_uri(cost.png) if cost is not None and cost.png else ""
    return TEMPLATES.get_template("report.html.j2").render(report=report, answer=report.summary, blocks=blocks,
                                                          chart_src=chart_src, cost_src=cost_src)


def md_cell(value: str) -> str:
    return value.replace("|", "\\|").replace("\n", " ")


def md_rows(t: Table) -> list[str]:
    lines = ["| " + " | ".join(t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in t.rows]
    if not t.rows:
        lines.append("| " + " | ".join(["(none)"] + [""] * (len(t.header) - 1)) + " |")
    return lines


def md_table(t: Table) -> str:
    return "\n".join([f"## {t.title}", "", t.caption, "", *md_rows(t)])


def render_markdown(report: Report, html_name: str) -> str:
    """The card first (its title the page's heading), then the findings and the answer table; then how it was made,
    then the summary tables."""
    card = report.summary.card
    parts = [*card.lines(), "", f"The chart, each answer beside its device alone: [{html_name}]({html_name}).", "",
             "## Terms of the card", "", *(f"- {term}" for term in card.terms()), "", "## Findings", ""] \
        if card is not None else [f"# {report.title}", ""]
    parts += [item for line in report.summary.headline for item in (line, "")]
    for t in report.summary.tables:
        parts += [*md_rows(t), "", f"{t.title}. {t.caption}", ""]
    parts += [*report.intro, "", f"Plots and every cell: [{html_name}]({html_name}); what each term means: "
              f"[its Terms]({html_name}#terms)."]
    parts += ["\n" + md_table(b) for b in report.blocks if isinstance(b, Table) and b.in_summary]
    return "\n".join(parts) + "\n"


# ----------------------------------------------------------------------------- files & CLI


def output_paths(out_dir: Path) -> tuple[Path, Path, Path, Path]:
    """report.html/report.md/figures.csv/figures.json, or the first report-N/figures-N set where none exists yet."""
    for n in itertools.count(1):
        suffix = "" if n == 1 else f"-{n}"
        paths = (out_dir / f"report{suffix}.html", out_dir / f"report{suffix}.md", out_dir / f"figures{suffix}.csv",
                 out_dir / f"figures{suffix}.json")
        if not any(p.exists() for p in paths):
            return paths
    raise AssertionError("unreachable")


def figures_json(report: Report) -> str:
    """`figures.json`: the card (each figure it shows), the report's findings, then every configuration's figures;
    after a shape sweep, each replica shape's point ("shapes")."""
    card = report.summary.card
    shapes = {"shapes": [p.as_dict() for p in report.shapes]} if report.shapes else {}
    return json.dumps({"card": card.as_dict() if card is not None else None,
                       "headline": list(report.summary.headline),
                       "figures": [f.as_dict() for f in report.figures], **shapes}, indent=2, ensure_ascii=False) + "\n"


def write_report(report: Report, out_dir: Path) -> tuple[Path, Path, Path, Path]:
    """The report's four files under new names; returns their paths (HTML, Markdown, CSV, JSON)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    html_path, md_path, csv_path, json_path = output_paths(out_dir)
    for path, text in ((html_path, render_html(report)), (md_path, render_markdown(report, html_path.name)),
                       (csv_path, csv_text(report.figures)), (json_path, figures_json(report))):
        with path.open("x") as out:  # "x": never overwrite, even if a file appeared meanwhile
            out.write(text)
    return html_path, md_path, csv_path, json_path


def pricing_from(p99_ms: float | None, target_rps: float | None, prices: Path, headroom: float,
                 spare: int = SPARE_INSTANCES) -> Pricing | None:
    """The target load and prices to size with, `spare` instances beyond the target's (None without a target);
    AnalysisError names a bad input."""
    if target_rps is None:
        if p99_ms is not None:
            size.check_objective(p99_ms, 1.0, "rps", headroom)
        return None
    size.check_objective(p99_ms if p99_ms is not None else DEFAULT_P99_MS, target_rps, "rps", headroom)
    return Pricing(target_rps, headroom, load_prices(prices), spare=spare)


def run(results: Sequence[Path], compare: Sequence[Path] = (), out: Path | None = None, *,
        p99_ms: float | None = None, target_rps: float | None = None, prices: Path = DEFAULT_PRICES,
        headroom: float = 0.2, targets: Sequence[Target] | None = None,
        spare: int = SPARE_INSTANCES) -> tuple[Path, Path, Path, Path]:
    """Read, build, write; returns the paths of the HTML, Markdown, CSV and JSON files. Raises AnalysisError, OSError.

    `p99_ms`: the objective the answer is given at (None: every objective searched; without a search,
    50 ms). `target_rps`, `prices`, `headroom`, `spare`: with a target, the answer adds replicas and cost.
    """
    report = read_report(results, compare, p99_ms=p99_ms, target_rps=target_rps, prices=prices, headroom=headroom,
                         targets=targets, spare=spare)
    return write_report(report, Path(out) if out else Path(results[0]).parent)


def read_report(results: Sequence[Path], compare: Sequence[Path] = (), *, p99_ms: float | None = None,
                target_rps: float | None = None, prices: Path = DEFAULT_PRICES, headroom: float = 0.2,
                targets: Sequence[Target] | None = None, spare: int = SPARE_INSTANCES) -> Report:
    """The report of these results files, built, not written (`targets`: what the card answers; their rates size
    it). Raises AnalysisError, OSError."""
    rates = [t.rate_rps for t in targets or () if t.rate_rps]
    pricing = pricing_from(p99_ms, target_rps if target_rps is not None or not rates else rates[0], prices, headroom,
                           spare)
    others = read_all(compare) if compare else []
    return build_report(read_all(results), others, [*results, *compare], p99_ms=p99_ms, pricing=pricing,
                        targets=targets)


def console_text(report: Report) -> str:
    """What the `report` command prints: the card (else the report's first sentences), then the figures."""
    card = report.summary.card
    return "\n".join([*(card.lines() if card is not None else report.summary.headline), "",
                      *console_lines(report.figures)])
