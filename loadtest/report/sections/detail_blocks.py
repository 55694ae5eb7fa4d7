"""The report's detail sections in the page's order, and the lines that say what the report was made from.

Below the charts: the replica shapes (table, then its chart), every search with its tool ceiling, the rate table,
where each request's time went, host and server noise, the configurations stated once, the peaks, the invalid and
failed cells, a comparison with other results where asked, and every cell.

Not for: what each section holds (its own module), the charts (`loadtest.report.charts`) or the page around them
(`loadtest.report.page`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from loadtest.evidence.records import CellResult
from loadtest.evidence.vocab import CellStatus
from loadtest.report.answers.answers import Answers
from loadtest.report.blocks import Figure, Table
from loadtest.report.configs import Config
from loadtest.report.figures import Figures
from loadtest.report.sections import details, noise_table, request_time, versions_table
from loadtest.report.sections.objective_table import rates_table
from loadtest.report.sections.shapes_table import shapes_table
from loadtest.report.series import Series, usable
from loadtest.report.shape_sizing import ShapeCurve

Labels = dict[Config, str]


def series_names(series: Sequence[Series], labels: Labels) -> list[str]:
    """Each series' name as every chart and table below names it (`S<n> <configuration>, ...`)."""
    return details.series_labels(series, labels)


def shape_blocks(shapes: Sequence[ShapeCurve], chart: Figure | None) -> list[Table | Figure]:
    """The replica shapes' table, then their chart; nothing without a shape sweep."""
    return [b for b in (shapes_table(shapes), chart) if b is not None]


def detail_blocks(results: Sequence[CellResult], compare: Sequence[CellResult], answers: Answers, labels: Labels,
                  series: Sequence[Series], names: Sequence[str], figures: Mapping[tuple[Config, int], Figures],
                  objective_ms: float) -> list[Table | Figure]:
    """Every detail table after the charts, in the page's order."""
    blocks: list[Table | Figure] = []
    if answers.searches:
        blocks.append(details.searches_table(answers.searches, labels, answers.ceilings))
        rates = rates_table(answers, labels)
        blocks += [rates] if rates else []
    blocks.append(request_time.request_time_table(figures))
    blocks.append(noise_table.noise_table(results, labels, answers.objectives_ms() or (objective_ms,)))
    blocks += [details.configurations_table(results, labels), details.peak_table(series, names, labels, figures),
               details.cells_table(series, names, only_unusable=True)]
    if compare:
        blocks.append(details.compare_table(results, compare))
    return [*blocks, details.cells_table(series, names, only_unusable=False)]


def intro_lines(results: Sequence[CellResult], compare: Sequence[CellResult], sources: Sequence[Path],
                series: Sequence[Series], labels: Labels, answers: Answers, now: str) -> tuple[str, ...]:
    """What the report was made from, when (`now`), and how many of its cells are valid, invalid and failed; a
    model written by a newer TensorFlow than its server (or an unknown one) said here."""
    return (f"Generated {now} from {', '.join(str(p) for p in sources) or 'results'}"
            f" ({len(results)} cells in {len(series)} series, {len(labels)} configuration(s), "
            f"{len(answers.searches)} capacity search(es)"
            f"{f'; compared with {len(compare)} cells' if compare else ''}).",
            f"{sum(usable(c) for c in results)} valid, "
            f"{sum(c.status == CellStatus.OK and not usable(c) for c in results)} invalid, "
            f"{sum(c.status != CellStatus.OK for c in results)} failed cells.",
            *versions_table.notes(results))


__all__ = ["detail_blocks", "intro_lines", "series_names", "shape_blocks"]
