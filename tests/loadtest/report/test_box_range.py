"""The box range covers what was measured, and the card's sizing table shows the arithmetic (#60, items 3-5).

One sizing path (`loadtest.report.sizing.fleet`) serves the card, `size` and the shapes: the capacity sized on (of
repeated searches, their lower median), the range the boxes cover (with repeats: the lowest repeat's capacity to
the highest repeat's upper end; without: the search's bracket) and, under the card's Terms, one line of arithmetic
per row with boxes. Every figure below is worked by hand in the comments.

Each search (`handmade.rates`) confirms its capacity c and fails at 1.1 × c, so its upper end is 1.1 × c. Every
replica is one pinned core; headroom 0.2 (a replica carries 0.8 × its capacity), N + 1 (one spare instance). The
repeated searches are a TF Serving container's, each with a tool-ceiling twin that carried 2 × its answer, so the
production server bounded them and the card gives their boxes as a range (a row not for buying gives only "≤ most").
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.evidence.cell_parts import ServerResources
from loadtest.evidence.records import CellResult
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import answer
from loadtest.report.build import build_report
from loadtest.report.card.capacity_table import capacity_row
from loadtest.report.card.card import card_for
from loadtest.report.card.sizing_table import HEADER, sizing_table
from loadtest.report.sizing import size
from loadtest.report.sizing.instances import Pricing, replicas_by_config
from loadtest.report.sizing.prices import load_prices
from tests.loadtest.report.handmade import rates, server, with_twin

TARGET = Target(10.0, 1, 4000.0)


def one_core(cells: list[CellResult], pss_mib: float | None = None) -> list[CellResult]:
    """The cells of a server pinned to one core, holding `pss_mib` MiB (None: not recorded)."""
    return [replace(c, server_resources=ServerResources(1.0, "Test CPU", 0, "", "pinned cores 0"),
                    server_pss_mib=pss_mib) for c in cells]


def repeated(*capacities: float) -> list[CellResult]:
    """A TF Serving container (cpu-cpu) searched once per capacity, each search's twin carrying twice its answer: a
    comparison's repeats (one configuration, batch and objective), for buying."""
    on = replace(server("cpu-cpu", "cpu"), kind="tfserving-container")
    return one_core([c for i, capacity in enumerate(capacities)
                     for c in with_twin(rates(on, capacity, f"rep-{i + 1}"), f"rep-{i + 1}")])


def prices(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text('currency = "USD"\nexample = false\n' + body)
    return path


SMALL_2 = '[instances."small-2"]\nvcpus = 2\nprice_per_hour = 0.20\n'


def card_row(cells: list[CellResult], book: Path):
    card = card_for(cells, Pricing(4000.0, 0.2, load_prices(book), replicas_by_config(cells), spare=1), [TARGET])
    assert card is not None
    [row] = card.rows
    return card, row, dict(zip(card.header(), card.table_rows()[0]))


def test_with_repeats_the_boxes_run_from_the_lowest_capacity_to_the_highest_upper_end(tmp_path):
    # repeats at 400, 500, 600 req/s (upper ends 440, 550, 660); the lower median of three: 500, the price's
    # range: 400 (the lowest capacity) to 660 (the highest upper end); 2 one-core replicas a small-2
    # priced at 500: 4000 / (500 x 0.8) = 10 replicas -> 5 instances + 1 spare = 6 x 0.20 = 1.20 USD/h
    # fewest, at 660: 4000 / 528 = 7.6 -> 8 replicas -> 4 instances; most, at 400: 4000 / 320 = 12.5 -> 13 -> 7
    card, row, shown = card_row(repeated(400.0, 500.0, 600.0), prices(tmp_path, SMALL_2))
    assert row.capacity_rps == 500.0 and row.repeats == 3 and row.range_rps == (400.0, pytest.approx(660.0))
    assert shown["capacity req/s"] == "500.0 confirmed"  # one figure; its range in the table under the card
    assert capacity_row(row)[3:5] == ("500.0 confirmed", "typical of 3 repeats, range 400.0–660.0")
    assert shown["boxes"] == "4–7 + 1 spare × small-2" and shown["USD/h"] == "1.20"
    # 400 lies below the bracket of the one priced (500–550): by how much, under the card (600 / 400 = x1.50)
    assert ("4,000 req/s · p99 ≤ 10 ms · 1 image, CPU: the 3 repeats' capacities ran 400.0–600.0 req/s (×1.50), "
            "beyond the bracket of the one priced (500.0–550.0).") in card.notes


def test_a_row_not_for_buying_prices_the_most_boxes_it_gives(tmp_path):
    # the same repeats on the embedded server with no twin: not for buying, so "≤ the most" boxes: at 400 req/s,
    # 13 replicas -> 7 small-2 + 1 spare = 8 x 0.20 = 1.60 USD/h, per million requests 1.60 / (4000 x 3600) x 1e6;
    # before, "≤ 7 + 1 spare" stood beside the typical repeat's 1.20 USD/h (6 instances)
    embedded = [replace(c, server=replace(c.server, kind="embedded")) for c in repeated(400.0, 500.0, 600.0)
                if not (c.search and c.search.checks)]
    _, row, shown = card_row(embedded, prices(tmp_path, SMALL_2))
    assert not row.for_buying and row.at_most
    assert shown["boxes"] == "≤ 7 + 1 spare × small-2" and shown["USD/h"] == "≤ 1.60"
    assert row.usd_per_m_requests == pytest.approx(1.60 / (4000 * 3600) * 1e6)


def test_repeats_within_the_bracket_are_not_noted(tmp_path):
    # 500 and 520: the lower median of two is 500 (bracket 500–550), and 520 lies inside it: no note; range 500 to
    # 572 (520 x 1.1): fewest at 572: 4000 / 457.6 = 8.7 -> 9 replicas -> 5 instances; most at 500: 10 -> 5
    card, row, shown = card_row(repeated(500.0, 520.0), prices(tmp_path, SMALL_2))
    assert row.range_rps == (500.0, pytest.approx(572.0)) and not row.moved
    assert shown["boxes"] == "5 + 1 spare × small-2"
    assert not any("repeats' capacities" in n for n in card.notes)


def test_without_repeats_the_boxes_span_the_bracket_as_before(tmp_path):
    # one search at 500 (upper end 550): fewest at 550: 4000 / 440 = 9.1 -> 10 replicas -> 5 instances;
    # most at 500: 10 -> 5; the capacity cell gives the upper end, not a range
    _, row, shown = card_row(repeated(500.0), prices(tmp_path, SMALL_2))
    assert row.repeats == 1 and row.range_rps is None
    assert shown["capacity req/s"] == "500.0 confirmed" and capacity_row(row)[4] == "550.0"
    assert shown["boxes"] == "5 + 1 spare × small-2"


def test_size_sizes_on_the_cards_capacity_over_the_cards_range(tmp_path):
    """`size` answers through the same path: 500 req/s (the lower median), 4–7 instances over 400–660, 1.20 USD/h."""
    cells, book = repeated(400.0, 500.0, 600.0), load_prices(prices(tmp_path, SMALL_2))
    [found] = size.size(cells, size.SizingGoal(10.0, 4000.0, "rps", 0.2, 1), book)
    assert found.capacity == 500.0 and found.replicas == 10 and found.cost_per_hour == pytest.approx(1.20)
    assert (found.fewest, found.most, found.repeats) == (4, 7, 3)
    assert found.capacity_range == (400.0, pytest.approx(660.0))
    assert size.instances_text(found) == "4–7 + 1 spare × small-2 (2 per instance, by cores)"


def test_the_sizing_table_gives_each_rows_arithmetic(tmp_path):
    # general-8: 8 vCPUs less a 1-vCPU reserve, 4 GiB; a one-core replica holding 1,500 MiB
    # by cores: (8 - 1) / 1 = 7; by memory: 4 x 1024 = 4096 MiB / (1500 x 1.1 = 1650) = 2.48 -> 2: memory binds
    # one search at 500: 4000 / (500 x 0.8) = 10 replicas; 10 / 2 = 5 instances + 1 spare = 6 x 0.40 = 2.40 USD/h
    book = prices(tmp_path, '[instances."general-8"]\nvcpus = 8\nmemory_gib = 4\nreserve_vcpus = 1\n'
                            'price_per_hour = 0.40\n')
    cells = one_core(rates(server("cpu-cpu", "cpu"), 500.0, "s1"), pss_mib=1500.0)
    pricing = Pricing(4000.0, 0.2, load_prices(book), replicas_by_config(cells), spare=1)
    card = card_for(cells, pricing, [TARGET])
    table = sizing_table(card, pricing, answer(cells).devices)
    assert table is not None and table.header == HEADER
    assert table.rows == (("4,000 req/s · p99 ≤ 10 ms · 1 image", "CPU", "general-8", "8", "4", "7", "2 (binding)",
                           "—", "10", "5 + 1", "2.40"),)
    assert "ceil(target ÷ (capacity × 0.8))" in table.caption and "+ 1 spare" in table.caption


def test_the_sizing_table_sits_under_the_cards_terms_and_the_formula_is_not_repeated(tmp_path):
    from loadtest.report import page

    cells = one_core(rates(server("cpu-cpu", "cpu"), 500.0, "s1"))
    book = prices(tmp_path, SMALL_2)
    md = page.render_markdown(build_report(cells, pricing=Pricing(4000.0, 0.2, load_prices(book), spare=1),
                                                targets=[TARGET]), "report.html")
    terms, table, findings = (md.index("## Terms of the card"), md.index("## Sizing: the card's boxes, worked"),
                              md.index("## Findings"))
    assert terms < table < findings
    assert md.count("ceil(target ÷ (capacity × 0.8))") == 1  # the rule once, under its table
    # small-2 holds 2 by cores; memory not recorded: not counted; 10 replicas -> 5 + 1 instances, 1.20 USD/h
    assert "| 4,000 req/s · p99 ≤ 10 ms · 1 image | CPU | small-2 | 2 | — | 2 (binding) | not counted | — | 10 | " \
           "5 + 1 | 1.20 |" in md
    html = page.render_html(build_report(cells, pricing=Pricing(4000.0, 0.2, load_prices(book), spare=1),
                                              targets=[TARGET]))
    assert html.index('id="card-terms"') < html.index('id="card-sizing"') < html.index("<h2>Findings</h2>")
