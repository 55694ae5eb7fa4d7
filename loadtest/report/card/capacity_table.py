"""The card's capacities in full, right under its Terms: each row's figure as every table prints it, its upper end (or
its repeats' range) and the other setups on the device with a higher figure, which the card's one-figure cell leaves
out (#68 item 7). Each value is the card row's own (`loadtest.report.card.records.CardRow`), computed once.

Not for: the card (`loadtest.report.card.card`) or the figures' rule (`loadtest.report.answers.figure_text`).
"""

from __future__ import annotations

from loadtest.report.blocks import DEVICES, Table
from loadtest.report.card.card import Card
from loadtest.report.card.records import CardRow
from loadtest.report.formatting import MISSING
from loadtest.report.formatting import number as fmt

TITLE = "The card's capacities in full"
HEADER = ("target", "device", "best setup", "capacity req/s", "upper end req/s", "higher on the device")


def _range(row: CardRow) -> str:
    if row.range_rps is not None:
        return f"typical of {row.repeats} repeats, range {fmt(row.range_rps[0])}–{fmt(row.range_rps[1])}"
    return fmt(row.failed_rps) if row.failed_rps is not None else MISSING


def capacity_row(row: CardRow) -> tuple[str, ...]:
    return (row.target.words(), DEVICES.get(row.device, row.device), row.setup or MISSING, row.state or "none",
            _range(row), row.higher or MISSING)


def capacity_table(card: Card | None) -> Table | None:
    """The table under the card's Terms; None without a row with a figure."""
    rows = tuple(capacity_row(r) for r in card.rows if r.capacity_rps is not None) if card else ()
    if not rows:
        return None
    return Table(TITLE, "Each card row's capacity as every table prints it (a higher pass without a confirmation in "
                 "brackets), the lowest rate above it shown to fail (with repeats, the lowest repeat's capacity to "
                 "the highest's upper end), and every other setup on the device whose figure is higher, named; the "
                 "card gives the first figure only.", HEADER, rows, anchor="card-capacities")


__all__ = ["HEADER", "TITLE", "capacity_row", "capacity_table"]
