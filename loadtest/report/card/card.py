"""The card a report opens with: for buying or not, one row per target and device, one figure per quantity.

A buyer brings targets ("5,000 req/s at p99 ≤ 10 ms, 1 image a request"); the card answers each on one screen,
as Model Analyzer's summary opens with its recommendation:

- a title: FOR BUYING or NOT FOR BUYING, what was measured (the server: TF Serving's containers or the embedded
  stand-in and its runtime; the machine: its CPU and vCPUs, its GPU), and, where not for buying, why in a few words;
- a table, one row per target and device: the best setup (where replica shapes were measured, the cheapest shape
  and how many replicas an instance holds, `loadtest.report.shape_sizing.sized_on`), its capacity with the rate that
  failed above it, p99 there, what bounded it with its tool ceiling, said once (the one verdict,
  `loadtest.report.answers.verdict`), then boxes (a range, from the capacity's range and the headroom), USD/h and USD
  per million requests where for buying (the device or the production server bounded it); a confirmed row not for
  buying gives only the most, marked "≤" (a server at least this fast needs no more); an unconfirmed row no boxes;
  where nothing is priced, what it served of the device alone;
- at most one comparison line per target (GPU/CPU, batching on ÷ off: each ratio once, with its range), and
  "Run next:" where not for buying.

The title says FOR BUYING when each target's cheapest row is for buying. `Card.as_dict()` is what figures.json
holds; `Card.lines()` is what report.md, report.html, the console and the bundle's run.log print.

Not for: the answers (`loadtest.report.answers.answers`), replicas and prices (`loadtest.report.sizing`), what
bounded an answer in detail (`loadtest.report.answers.bound`) or the page (`loadtest.report.page`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from loadtest.evidence.records import CellResult
from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, answer
from loadtest.report.answers.paired import PairedRatio, by_key, paired_ratios
from loadtest.report.answers.tool_ceiling import NAME as TOOL_CEILING
from loadtest.report.blocks import DEVICES
from loadtest.report.card.comparison import comparison_line, setup_settled, width_notes
from loadtest.report.card.decision import run_next, server_flags, stand_in_again
from loadtest.report.card.records import CardRow
from loadtest.report.card.rows import card_row, devices_at
from loadtest.report.card.words import (
    AT_MOST,
    BOUNDED_BY,
    LOWER_BOUND,
    SHAPED_SETUP,
    SHAPES,
    SHARED_CORES,
    STAND_IN,
    TERMS,
    UPPER_END,
    memory_note,
)
from loadtest.report.card.words import title as card_title
from loadtest.report.configs import Config, models_named
from loadtest.report.formatting import money
from loadtest.report.formatting import number as fmt
from loadtest.report.sizing.instances import Pricing, with_replicas

HEADER = ("target", "device", "best setup", "capacity req/s", "p99 upper estimate ms", BOUNDED_BY)
PRICED_HEADER = ("boxes", "USD/h", "USD per million requests")
UNPRICED_HEADER = ("served ÷ device alone",)


@dataclass(frozen=True)
class Card:
    title: str
    for_buying: bool
    rows: tuple[CardRow, ...]
    comparisons: tuple[str, ...] = ()
    run_next: str = ""
    notes: tuple[str, ...] = ()  # below the card: per million images where a request holds several
    currency: str = "USD"
    priced: bool = False  # the table has box and price columns
    ratios: dict = field(default_factory=dict)  # each ratio shown, as figures: {"GPU/CPU at ...": {ratio, low, high}}

    def header(self) -> tuple[str, ...]:
        money_columns = tuple(h.replace("USD", self.currency) for h in PRICED_HEADER)
        return HEADER + (money_columns if self.priced else UNPRICED_HEADER)

    def table_rows(self) -> list[tuple[str, ...]]:
        return [_cells(row, self.priced) for row in self.rows]

    def lines(self, notes: bool = True) -> list[str]:
        """The card in Markdown: the title, the table, the comparisons and what to run next; then the notes (report.md
        puts them under its first heading, off the first screen)."""
        out = [f"# {self.title}", "", "| " + " | ".join(self.header()) + " |", "|" + "---|" * len(self.header())]
        out += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in self.table_rows()]
        tail = [*self.comparisons, *([f"Run next: {self.run_next}"] if self.run_next else [])]
        out += ["", *tail] if tail else []
        return out + (["", *self.notes] if self.notes and notes else [])

    def words_outside_table(self) -> int:
        """Words of the title, the comparisons and "Run next" (a command in backticks, copied not read, is one)."""
        lines = (self.title, *self.comparisons, *([f"Run next: {self.run_next}"] if self.run_next else []))
        return sum(len(re.sub(r"`[^`]*`", "command", line).split()) for line in lines)

    def terms(self) -> list[str]:
        """What each word on the card means, once (`TERMS`), for the columns and lines it has."""
        used = [*HEADER, TOOL_CEILING, *(PRICED_HEADER if self.priced else UNPRICED_HEADER), "for buying",
                *(["ranges"] if self.comparisons else []),
                *([AT_MOST] if any(r.at_most and r.boxes for r in self.rows) else []),
                *([SHAPES] if any(r.replica_cores for r in self.rows) else []),
                *([SHARED_CORES] if any(r.shared_cores for r in self.rows) else [])]
        used += [*([STAND_IN] if STAND_IN in self.title else []), UPPER_END, LOWER_BOUND]
        meanings = {**TERMS, "best setup": SHAPED_SETUP} if SHAPES in used else TERMS
        return [f"{term}: {meanings[term]}." for term in used if term in meanings]

    def as_dict(self) -> dict:
        return {"title": self.title, "for_buying": self.for_buying, "header": list(self.header()),
                "rows": [r.as_dict() for r in self.rows], "comparisons": list(self.comparisons),
                "run_next": self.run_next, "notes": list(self.notes), "ratios": self.ratios, "lines": self.lines()}


def _cells(row: CardRow, priced: bool) -> tuple[str, ...]:
    capacity = row.figure or "none"  # one figure: a higher pass, the upper end, other setups: the table under it
    base = (row.target.words(), DEVICES.get(row.device, row.device), _setup_cell(row), capacity,
            fmt(row.p99_ms, 2) if row.p99_ms is not None else "—", row.bounded_by or "—")
    if not priced:
        return (*base, _share(row))
    if row.boxes is None:
        return (*base, row.why_not or "—", "—", "—")
    low, high = row.boxes
    count = f"{low}" if low == high else f"{low}–{high}"
    spare = f" + {row.spare} spare" if row.spare else ""
    plural = "" if high + row.spare == 1 else "s"
    boxes = f"{count}{spare} × {row.instance}" if row.instance else f"{count}{spare} replica{plural}"
    most = "≤ " if row.at_most else ""  # not for buying: the most a server at least this fast needs
    return (*base, most + boxes, most + fmt(row.usd_per_hour, 2), most + money(row.usd_per_m_requests))


def _setup_cell(row: CardRow) -> str:
    """`batching off`; with a replica shape, `batching off, 2-core replicas (shared cores), 8 per general-16`."""
    if not row.setup or row.replica_cores is None:
        return row.setup or "—"
    shared = f" ({SHARED_CORES})" if row.shared_cores else ""
    each = f", {row.per_instance} per {row.instance}" if row.per_instance and row.instance else ""
    return f"{row.setup}, {row.replica_cores}-core replicas{shared}{each}"


def _share(row: CardRow) -> str:
    if row.served_share is None:
        return "not measured" if row.capacity_rps is not None else "—"
    return f"{row.served_share:.0%}"


# ----------------------------------------------------------------------------- building it


def targets_of(answers: Answers, pricing: Pricing | None, p99_objective_ms: float | None = None) -> tuple[Target, ...]:
    """Each objective and request batch searched (or only `p99_objective_ms`), at the pricing's rate."""
    keys = sorted({(d.p99_objective_ms, d.request_batch_size) for d in answers.devices
                   if p99_objective_ms is None or d.p99_objective_ms == p99_objective_ms})
    return tuple(Target(p99, batch, pricing.target_rps if pricing else None) for p99, batch in keys)


def card_for(results: Sequence[CellResult], pricing: Pricing | None = None, targets: Sequence[Target] | None = None,
             answers: Answers | None = None, paired: Mapping[tuple, PairedRatio] | None = None,
             p99_objective_ms: float | None = None) -> Card | None:
    """The card of these records (None without a capacity search at `p99_objective_ms`, None: at any), naming the
    model measured unless it is the demo's. `targets`: what it answers (default: each objective and request batch
    searched, at the pricing's rate); `answers`, `paired`: these records' own, where the caller has them already."""
    answers = answer(results) if answers is None else answers
    if not any(p99_objective_ms in (None, d.p99_objective_ms) for d in answers.devices):
        return None
    pricing = with_replicas(pricing, results)
    paired = by_key(paired_ratios(results)) if paired is None else paired
    card = card_of(answers, pricing, paired,
                   targets_of(answers, pricing, p99_objective_ms) if targets is None else targets,
                   server_flags(results))
    models = models_named(results)
    return replace(card, title=card.title.replace(" — ", f" — model {models}, ", 1)) if models else card


def card_of(answers: Answers, pricing: Pricing | None, paired: Mapping[tuple, PairedRatio],
            targets: Sequence[Target], flags: Sequence[str] = ()) -> Card:
    """The card for these targets from the run's answers; rows for each device searched at a target's objective
    and request batch (or, where none was searched there, answered from the same cells)."""
    rows: list[CardRow] = []
    prices = pricing.prices.source if pricing else ""
    comparisons: list[str] = []
    wide: list[str] = []  # comparisons too wide to decide on, and why
    ratios: dict = {}
    nexts: list[str] = []
    for target in targets:
        here = devices_at(answers, target)
        found = [setup_settled(card_row(target, d, pricing, answers), answers, paired) for d in here]
        rows += found
        line = comparison_line(target, here, found, paired, ratios, answers)
        if line:
            comparisons.append(line)
        wide += width_notes(target, here, paired)
        if not _target_for_buying(found) and here:
            nexts.append(run_next(_configs(answers), targets, prices))
    idle = _idle_replicas(rows)
    if idle:  # priced on cores it did not use: measure smaller replica shapes
        nexts = [run_next(_configs(answers), targets, prices, shapes=True)]
    priced = any(r.boxes is not None for r in rows)
    for_buying = bool(targets) and all(_target_for_buying([r for r in rows if r.target == t]) for t in targets)
    example = priced and pricing is not None and pricing.prices.example
    heading = card_title(for_buying, rows, _configs(answers), example, pricing)
    notes = tuple(f"{r.target.words()}, {DEVICES.get(r.device, r.device)}: " + (
        f"{money(r.usd_per_m_images)} {pricing.prices.currency if pricing else 'USD'} per million images."
        if r.usd_per_m_images is not None else f"not priced: {r.refused}.") for r in rows
        if (r.usd_per_m_images is not None and r.target.batch > 1) or r.refused) + memory_note(rows) + tuple(
        f"{r.target.words()}, {DEVICES.get(r.device, r.device)}: {r.moved}." for r in rows if r.moved) + tuple(
        wide) + tuple(filter(None, [stand_in_again(_configs(answers), targets, prices, flags, idle) if nexts else ""]))
    return Card(heading, for_buying, tuple(rows), tuple(comparisons), nexts[0] if nexts else "", notes,
                pricing.prices.currency if pricing else "USD", priced, ratios)


def _configs(answers: Answers) -> list[Config]:
    return list(dict.fromkeys(s.config for s in answers.searches))


def _idle_replicas(rows: Sequence[CardRow]) -> bool:
    """A priced CPU row's replica busy on under half the cores it was given, no replica shape (a sweep's) measured."""
    return any(r.sizing is not None and r.sizing.idle and r.replica_cores is None and r.device == "cpu" for r in rows)


def _target_for_buying(rows: Sequence[CardRow]) -> bool:
    """A target is for buying when its cheapest priced row is (every priced row is: prices only go where it is)."""
    return any(r.for_buying for r in rows)


__all__ = ["Card", "CardRow", "Target", "card_for", "card_of", "targets_of"]
