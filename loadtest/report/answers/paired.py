"""Comparisons read back: each repeat's ratio from its own searches, the ratios' spread over the repeats, and
how far the machine's speed moved while they were measured (the reference cells, `loadtest.search.comparison`).

A paired comparison's searches ran at the same time, their cells interleaved, so the machine's drift lands on
both sides of the ratio; one searched one after the other is shown too (`paired` False), without a drift. Per
repeat, the batching gain (best batching-enabled ÷ batching-off capacity on a device) and the GPU/CPU ratio are
`loadtest.report.answers.answers`' own, with their range from the two searches' brackets. Over the repeats the ratio
is their median and its range spans every repeat's range: the pairs' spread. A range that holds ×1.0 is "no
measurable difference", never a gain. Pairing cancels a drift that slows both servers alike; where the repeats'
ratios follow their reference speed (|r| >= 0.8 over four or more: `SpeedLink`), the ratio itself moves with the
machine's speed, and the description says so.

Not for: running a comparison (`loadtest.search.capacity_search`) or the report's layout.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import ComparisonTag
from loadtest.report.answers.answers import (
    Gain,
    SearchAnswer,
    device_answers,
    device_ratios,
    is_reference,
    lower_bound,
    search_answers,
)
from loadtest.report.answers.answers import own as at_own_objective
from loadtest.report.answers.drift import SpeedLink, Speeds, answer_index, speed_link
from loadtest.report.answers.movement import Drift, drift_of
from loadtest.report.blocks import Table
from loadtest.report.formatting import number as fmt
from loadtest.report.formatting import ratio_value

GPU_CPU = "GPU/CPU"


@dataclass(frozen=True)
class RepeatRatio:
    """One repeat's ratio with its range from the two searches' brackets (an end None: not bounded there)."""

    repeat: int
    ratio: float | None
    low: float | None
    high: float | None
    numerator: SearchAnswer | None
    denominator: SearchAnswer | None
    reason: str = ""  # why there is no ratio
    drift: Drift | None = None  # the reference cells of this repeat
    residual: float = 0.0  # the speed change between the cells the range stands on that it allows for (0.07: 7%)
    upper_moved: float = 0.0  # of it, the speed change between an answer's cell and its upper end's

    def describe(self) -> str:
        """`×2.50 (×1.12–×5.59)`, or only its bound where an end is open (`at least ×0.90`)."""
        if self.ratio is None:
            return f"— {self.reason}"
        return ratio_value(self.ratio, self.low, self.high)

    @property
    def bracket_width(self) -> float | None:
        """high ÷ low as the two searches' brackets give it alone, before the machine's speed change widens it
        (`_ratio_of`); None where an end is open."""
        n, d = self.numerator, self.denominator
        if self.low is None or self.high is None or n is None or d is None:
            return None
        if not (n.capacity_rps and d.capacity_rps and n.upper_rps and d.upper_rps):
            return None
        return n.upper_rps / n.capacity_rps * (d.upper_rps / d.capacity_rps)


@dataclass(frozen=True)
class WidthParts:
    """What makes a comparison's range as wide as it is (high ÷ low = brackets × drift × spread)."""

    width: float  # high ÷ low of the comparison's range
    brackets: float  # of its widest repeat: the two searches' brackets alone
    drift: float  # that repeat's widening for the machine's speed change between the cells it stands on
    spread: float  # the repeats' ranges apart from one another (1.0 with one repeat)

    def words(self) -> str:
        """`×2.76 wide: the searches' brackets ×2.67, the machine's speed between its cells ×1.03`."""
        spread = f", the repeats' spread ×{self.spread:.2f}" if self.spread >= 1.005 else ""
        return (f"×{self.width:.2f} wide: the searches' brackets ×{self.brackets:.2f}, the machine's speed between "
                f"its cells ×{self.drift:.2f}{spread}")


@dataclass(frozen=True)
class PairedRatio:
    """One comparison's ratio (a device's batching gain, or GPU/CPU) over its repeats."""

    what: str  # "batching gain on cpu" or GPU_CPU
    request_batch_size: int
    p99_objective_ms: float
    paired: bool  # interleaved (False: searched one after the other)
    repeats: tuple[RepeatRatio, ...]
    drift: Drift | None  # every reference cell of the comparison

    @property
    def key(self) -> tuple[str, int, float]:
        """What is compared, at which request batch and objective: one ratio per key in a run."""
        return self.what, self.request_batch_size, self.p99_objective_ms

    @property
    def ratios(self) -> list[float]:
        return [r.ratio for r in self.repeats if r.ratio is not None]

    @property
    def ratio(self) -> float | None:
        """The median of the repeats' ratios."""
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def low(self) -> float | None:
        """The lowest end of the repeats' ranges; None (open) where a repeat's range has no low end."""
        ends = [r.low for r in self.repeats if r.ratio is not None]
        return None if not ends or None in ends else min(e for e in ends if e is not None)

    @property
    def high(self) -> float | None:
        """The highest end of the repeats' ranges; None (open) where a repeat's has no high end."""
        ends = [r.high for r in self.repeats if r.ratio is not None]
        return None if not ends or None in ends else max(e for e in ends if e is not None)

    @property
    def residual(self) -> float:
        return max((r.residual for r in self.repeats), default=0.0)

    @property
    def upper_moved(self) -> float:
        return max((r.upper_moved for r in self.repeats), default=0.0)

    @property
    def speed_link(self) -> SpeedLink | None:
        """How the repeats' ratios went with their own reference cells' speed (None: too few to say)."""
        return speed_link(self.repeats, "repeats")

    @property
    def no_difference(self) -> bool:
        """A two-sided range that holds ×1.0: no measurable difference (`holds_one`)."""
        return holds_one(self.ratio, self.low, self.high)

    @property
    def repeats_disagree(self) -> bool:
        """Two repeats whose ranges do not overlap: the machine measured them differently."""
        return ranges_apart(self.repeats)

    @property
    def without_majority(self) -> bool:
        """No ratio lies in the ranges of more than half the repeats: their median stands on no agreement (two
        repeats apart; of three, none overlapping another). Ranges that share a value pairwise share one in
        common (they are intervals), so the deepest point is at one of their low ends."""
        ranges = open_ranges(self.repeats)
        deepest = max((sum(low <= x <= high for low, high in ranges) for x, _ in ranges), default=0)
        return deepest * 2 <= len(ranges)

    @property
    def bounded(self) -> bool:
        """Both ends known: the ratio has an estimate; else (a capacity a lower bound, or a pass cut by time) only
        its known end is a figure."""
        return self.low is not None and self.high is not None

    def value(self) -> str:
        """`×1.62 (×1.55–×1.70)`, or only the bound where an end is open (`at least ×0.50`): never a point estimate
        beside an open range."""
        return ratio_value(self.ratio, self.low, self.high)

    def width_parts(self) -> WidthParts | None:
        """What its range's width is made of, from its widest repeat; None where an end is open."""
        if self.ratio is None or self.low is None or self.high is None:
            return None
        measured = [r for r in self.repeats if r.bracket_width is not None and r.low and r.high]
        if not measured:
            return None
        widest = max(measured, key=lambda r: (r.high or 0.0) / (r.low or 1.0))
        own = (widest.high or 0.0) / (widest.low or 1.0)
        brackets = widest.bracket_width or 1.0
        return WidthParts(self.high / self.low, brackets, own / brackets, self.high / self.low / own)

    def short(self) -> str:
        """`×1.62 (×1.55–×1.70), paired, median of 3 repeats`: the ratio as a table cell gives it."""
        n = len(self.repeats)
        how = "paired" if self.paired else "not paired"
        verdict = "no measurable difference: " if self.no_difference else ""
        disagree = ", their ranges apart" if self.repeats_disagree else ""
        return f"{verdict}{self.value()}, {how}" + (f", median of {n} repeats{disagree}" if n > 1 else "")

    def describe(self) -> str:
        """`batching gain on cpu at p99 ≤ 10 ms (request batch 1), paired over 5 repeats: ×1.62 (×1.55–×1.70;
        each: ...); this machine's speed moved 18% ...`."""
        how = "paired" if self.paired else "searched one after the other, not paired"
        n = len(self.repeats)
        head = (f"{self.what} at p99 ≤ {self.p99_objective_ms:g} ms (request batch {self.request_batch_size}), "
                f"{how}{f' over {n} repeats' if n > 1 else ''}: ")
        if self.ratio is None:
            return head + "; ".join(dict.fromkeys(f"— {r.reason}" for r in self.repeats))
        each = f"; each repeat: {', '.join(r.describe() for r in self.repeats)}" if n > 1 else ""
        if self.repeats_disagree:
            each += " (the repeats disagree: two ranges do not overlap)"
        verdict = "no measurable difference, " if self.no_difference else ""
        value = self.value()
        if not self.bounded:
            value += " (a capacity that is a lower bound has no estimate)"
        link = self.speed_link
        moved = f"; {link.describe()}" if link is not None and link.moves else ""
        return f"{head}{verdict}{value}{each}; {self.drift_text()}{moved}."

    def drift_text(self) -> str:
        """The one drift figure a ratio carries: what its range allows for, else what the machine moved."""
        if self.residual >= 0.005 and self.upper_moved >= 0.005:
            return (f"its range allows for this machine's speed moving {self.residual:.0%} between the cells it stands "
                    "on (the two answers and their upper ends)")
        if self.residual >= 0.005:
            return f"its range allows for this machine's speed moving {self.residual:.0%} between the two answers"
        if self.drift is None or self.drift.moved is None:
            return "the machine's drift was not measured (no reference cell)"
        return f"this machine's speed moved {self.drift.moved:.0%} during the comparison"


def holds_one(ratio: float | None, low: float | None, high: float | None) -> bool:
    """A two-sided range that holds ×1.0: no measurable difference (an open range is a bound, not a verdict)."""
    return ratio is not None and low is not None and high is not None and low <= 1.0 <= high


def open_ranges(measured: Sequence[RepeatRatio | PairedRatio]) -> list[tuple[float, float]]:
    """Each range of those with a ratio, an open end reaching as far as it may."""
    return [(m.low if m.low is not None else 0.0, m.high if m.high is not None else float("inf"))
            for m in measured if m.ratio is not None]


def ranges_apart(measured: Sequence[RepeatRatio | PairedRatio]) -> bool:
    """Two of the ranges (repeats', or runs' ratios) do not overlap."""
    ranges = open_ranges(measured)
    return any(a_high < b_low for _, a_high in ranges for b_low, _ in ranges)


# ----------------------------------------------------------------------------- from the records


def comparison_of(cell: CellResult) -> ComparisonTag | None:
    """The comparison a cell belongs to (`search.comparison`), None for none."""
    return cell.search.comparison if cell.search else None


def paired_ratios(results: Sequence[CellResult]) -> list[PairedRatio]:
    """Every comparison's batching gains and GPU/CPU ratio over its repeats, by request batch size."""
    groups: dict[str, list[CellResult]] = {}
    for cell in results:
        if (tag := comparison_of(cell)) and tag.id:
            groups.setdefault(tag.id, []).append(cell)
    out = []
    for cells in groups.values():
        out += _comparison_ratios(cells)
    return sorted(out, key=lambda p: (p.request_batch_size, p.p99_objective_ms, p.what))


def without_majority(results: Sequence[CellResult], comparison_id: str) -> bool:
    """Whether a ratio of comparison `comparison_id` has repeats without a majority that agree
    (`PairedRatio.without_majority`): what a capacity run asks before it runs another repeat (`--max-repeats`)."""
    own = [c for c in results if (tag := comparison_of(c)) is not None and tag.id == comparison_id]
    return any(p.without_majority for p in paired_ratios(own))


def _comparison_ratios(cells: Sequence[CellResult]) -> list[PairedRatio]:
    searched = [c for c in cells if not is_reference(c)]
    references = [c for c in cells if is_reference(c)]
    comparison = comparison_of(cells[0])
    assert comparison is not None  # `paired_ratios` groups cells by their comparison
    by_repeat: dict[int, list[SearchAnswer]] = {}
    repeat_of = {c.tag.id: _repeat(c) for c in searched}
    paired = comparison.paired
    for answer in map(at_own_objective, search_answers(searched)):  # each at its objective by the report's one rule
        by_repeat.setdefault(repeat_of[answer.search_id], []).append(answer)
    ratios: dict[tuple[str, int, float], list[RepeatRatio]] = {}
    servers = list(comparison.servers)
    for repeat, answers in sorted(by_repeat.items()):
        own = [c for c in references if _repeat(c) == repeat]
        for key, ratio in _repeat_ratios(repeat, answers, Speeds(own, _upper_cells(searched, answers)), servers):
            ratios.setdefault(key, []).append(ratio)
    whole = drift_of(references)
    return [PairedRatio(what, batch, objective, paired, tuple(repeats), whole)
            for (what, batch, objective), repeats in ratios.items()]


def _repeat_ratios(repeat: int, answers: Sequence[SearchAnswer], speeds: Speeds, servers: Sequence[str]):
    """(what, request batch, objective) and the repeat's ratio, for each batching gain and GPU/CPU ratio it has;
    servers that are neither (the same device and batching): each one's capacity ÷ the first server's."""
    devices = device_answers(answers)
    found = False
    for d in devices:
        if any(s.config.batching_on for s in d.searches) and any(not s.config.batching_on for s in d.searches):
            found = True
            yield (f"batching gain on {d.device}", d.request_batch_size, d.p99_objective_ms), \
                _from_gain(repeat, d.gain, speeds)
    for r in device_ratios(devices):
        found = True
        if r.ratio is None or r.gpu is None or r.cpu is None:
            yield (GPU_CPU, r.request_batch_size, r.p99_objective_ms), \
                RepeatRatio(repeat, None, None, None, r.gpu, r.cpu, r.reason, speeds.drift)
        else:
            yield (GPU_CPU, r.request_batch_size, r.p99_objective_ms), _ratio_of(repeat, r.gpu, r.cpu, speeds)
    if found:
        return
    order = {name: i for i, name in enumerate(servers)}
    ranked = sorted(answers, key=lambda a: (order.get(a.config.name, len(order)), a.search_id))
    for other in ranked[1:]:
        base = ranked[0]
        yield (f"{other.config.name} ÷ {base.config.name}", base.request_batch_size, base.p99_objective_ms), \
            _ratio_of(repeat, other, base, speeds)


def _from_gain(repeat: int, gain: Gain, speeds: Speeds) -> RepeatRatio:
    if gain.ratio is None or gain.batching is None or gain.off is None:
        return RepeatRatio(repeat, None, None, None, gain.batching, gain.off, gain.reason, speeds.drift)
    return _ratio_of(repeat, gain.batching, gain.off, speeds)


def _ratio_of(repeat: int, numerator: SearchAnswer, denominator: SearchAnswer, speeds: Speeds) -> RepeatRatio:
    """numerator ÷ denominator capacity, its range from both brackets, widened by the machine's speed change
    between the two answers' cells (the reference cells around each) and, on each end, between that end's answer
    and its upper end (a bracket whose fail came from slower minutes than its pass says less); an end left open
    where a capacity is a lower bound (the load generator was the limit)."""
    if not numerator.capacity_rps or not denominator.capacity_rps:
        missing = " and ".join(s.config.name for s in (numerator, denominator) if not s.capacity_rps)
        return RepeatRatio(repeat, None, None, None, numerator, denominator, f"{missing} met no objective here",
                           speeds.drift)
    between = speeds.between(answer_index(numerator), answer_index(denominator))
    num_gap, den_gap = speeds.to_upper(numerator), speeds.to_upper(denominator)
    low = numerator.capacity_rps / denominator.upper_rps / ((1 + between) * (1 + den_gap)) \
        if denominator.upper_rps else None
    high = numerator.upper_rps / denominator.capacity_rps * (1 + between) * (1 + num_gap) \
        if numerator.upper_rps else None
    residual = (1 + between) * (1 + max(num_gap, den_gap)) - 1
    return RepeatRatio(repeat, numerator.capacity_rps / denominator.capacity_rps,
                       None if lower_bound(denominator) else low, None if lower_bound(numerator) else high,
                       numerator, denominator, "", speeds.drift, residual, max(num_gap, den_gap))


def _repeat(cell: CellResult) -> int:
    comparison = comparison_of(cell)
    return comparison.repeat if comparison else 1


def _upper_cells(cells: Sequence[CellResult], answers: Sequence[SearchAnswer]) -> dict[str, int]:
    """Each search's last cell at its upper end (the lowest rate above its answer shown to fail)."""
    out = {}
    for a in answers:
        at = [c.cell_index for c in cells if c.tag.id == a.search_id
              and a.upper_rps is not None and c.tag.offered_rps == a.upper_rps]
        if at:
            out[a.search_id] = max(at)
    return out


# ----------------------------------------------------------------------------- shown


def paired_lines(results: Sequence[CellResult]) -> tuple[str, ...]:
    """One sentence per comparison's ratio (the report's headline and `capacity`'s console end)."""
    return tuple(p.describe() for p in paired_ratios(results))


def by_key(ratios: Sequence[PairedRatio]) -> dict[tuple[str, int, float], PairedRatio]:
    return {p.key: p for p in ratios}


def paired_table(ratios: Sequence[PairedRatio]) -> Table | None:
    """Every repeat of every comparison (`paired_ratios`): its ratio, range, both capacities and the drift while
    it ran."""
    rows = []
    for p in ratios:
        for r in p.repeats:
            moved = r.drift.moved if r.drift else None
            rows.append((p.what, str(p.request_batch_size), f"{p.p99_objective_ms:g}", "yes" if p.paired else "no",
                         str(r.repeat), r.describe(), _capacity(r.numerator), _capacity(r.denominator),
                         "—" if moved is None else f"{moved:.0%}"))
    if not rows:
        return None
    return Table("Comparisons: each repeat's ratio",
                 "Paired: the servers compared were up at once and their cells alternated one server at a time "
                 "(one order, then the reverse), so the machine's drift lands on both sides of each ratio. Range: "
                 "from the two searches' brackets (the lowest and highest ratio their passing and failing rates "
                 "allow), widened by the speed change between the two answers' cells (the drift the pairing left "
                 "in) and between each answer and its upper end. Drift: how far the machine's speed (the first "
                 "server's throughput, 4 users back to back: its service rate) moved within the repeat, fastest ÷ "
                 "slowest − 1. "
                 "A two-sided range holding ×1.0 is no measurable difference; a range open at one end is a bound, "
                 "with no estimate.",
                 ("ratio", "request batch", "p99 objective ms", "paired", "repeat", "ratio (range)",
                  "numerator req/s", "denominator req/s", "drift"), tuple(rows))


def _capacity(search: SearchAnswer | None) -> str:
    if search is None or search.capacity_rps is None:
        return "—"
    return f"{search.config.name}: {fmt(search.capacity_rps)}"
