"""The report: results turned into a self-contained HTML page and a Markdown summary that lead with the answer.

Reads one or more `results.jsonl` files (optionally a second set to compare against) and writes
`report.html` (plots embedded as base64 PNG, inline CSS, no script, no external URL: it opens
offline), `report.md`, and the figures of every configuration (`figures.csv`, `figures.json`:
`loadtest.report.figures`, the same values the tables print) beside the first results file, under
new names (`report-2.html`, `figures-2.csv`, ...) when earlier reports exist: nothing is overwritten.

The report is built once (`loadtest.report.build`: the answer first, then the charts, then the details); this
module renders and writes it.

The HTML page is rendered from a Jinja2 template (`templates/report.html.j2`, autoescaped); the
Markdown summary is written directly (it is a file format of its own, not a drawn table).

Not for: building the report (`loadtest.report.build`), sizing (`loadtest.report.sizing.size`, whose arithmetic the
answer's replicas and cost use), what each chart draws (`loadtest.report.charts.assembly`) or measuring anything.

    mnist-bench report RESULTS.jsonl... [--compare OTHER.jsonl...] [--out DIR]
"""

from __future__ import annotations

import base64
import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import jinja2

from loadtest.judge.goals import Target
from loadtest.report.blocks import Figure, Table
from loadtest.report.build import Report, build_report
from loadtest.report.figures import console_lines, csv_text
from loadtest.report.glossary import glossed, header_link
from loadtest.report.headline import DEFAULT_P99_MS
from loadtest.report.series import read_all
from loadtest.report.sizing import size
from loadtest.report.sizing.instances import SPARE_INSTANCES, Pricing
from loadtest.report.sizing.prices import DEFAULT_PRICES, load_prices

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
    """The card first (its title the page's heading; its notes and the chart's link under its Terms, so the first
    screen holds only the card), then the findings and the answer table; then how it was made, then the summary
    tables."""
    card = report.summary.card
    worked = [line for t in (report.summary.capacities, report.summary.sizing) if t is not None
              for line in (f"## {t.title}", "", *md_rows(t), "", t.caption, "")]
    parts = [*card.lines(notes=False), "", "## Terms of the card", "", *(item for n in card.notes for item in (n, "")),
             f"The chart, each answer beside its device alone: [{html_name}]({html_name}).", "",
             *(f"- {term}" for term in card.terms()), "", *worked, "## Findings", ""] \
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
