"""Hardware sizing: how many replicas of which configuration meet a latency objective at a target load.

At one request batch size (the smallest measured unless asked for), every configuration measured there (server kind
× device × batching × versions: `loadtest.report.configs.Config`) gets a per-replica capacity from the best evidence
it has, labelled with its source (`loadtest.report.answers.sources`: a capacity search, else the open-loop grid,
else a closed-loop lower bound), then replicas (the headroom for bursts), and from a price file the user edits, the
instances that hold them with the spare (N + 1 by default: `loadtest.report.sizing.instances`), their cost per hour
and per million images. A replica no priced instance can hold is refused with the reason, not priced. An older
price file prices replicas, not instances, and the answer says so. A shape sweep's shapes (`cpu-off-1c`,
`cpu-off-2c`: `loadtest.report.shape_sizing`) are options of their own, each sized on its measured capacity; their
note names the shapes measured instead of assuming that a replica scales linearly.

Devices and batching configurations are compared at that one request batch size only. Measured points are the
evidence: nothing is interpolated or extrapolated, invalid or failed cells are never used (they are listed), a real
capacity ranks before a lower bound, and where the measurements cannot answer, the answer says so.

Not for: drawing plots or writing the report (`loadtest.report.page`), choosing the capacity's
source (`loadtest.report.answers.sources`), reading prices (`loadtest.report.sizing.prices`), or measuring.

    mnist-bench size --p99-ms 50 --target-rps 5000 [--batch 1] [--headroom 0.2] [--spare-instances 1] \
        [--prices loadtest/prices.example.toml] results/*/results.jsonl
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from rich.table import Table

from loadtest.evidence.records import CellResult
from loadtest.evidence.tables import plain_table
from loadtest.report.answers.sources import ConfigCapacity, Source, capacities, request_batches
from loadtest.report.configs import Config, config_labels, config_of
from loadtest.report.formatting import money, number
from loadtest.report.series import AnalysisError, read_all
from loadtest.report.sizing.fleet import CapacityRange, capacity_range, fleet
from loadtest.report.sizing.instances import (
    SPARE_INSTANCES,
    Replica,
    linear_note,
    measured_shapes,
    replicas_by_config,
    shape_note,
)
from loadtest.report.sizing.prices import DEFAULT_PRICES, PriceBook, load_prices
from serving.endpoint import server_with_runtime

UNITS = {"rps": "requests/s", "ips": "images/s"}


# ----------------------------------------------------------------------------- answers


@dataclass(frozen=True)
class SizingGoal:
    """What `size` answers for: a p99 objective, a target load (req/s or images/s), headroom for bursts and spare
    instances (the p99 alone is `loadtest.evidence.objective.Objective`)."""

    p99_ms: float
    target: float
    unit: str  # "rps" or "ips"
    headroom: float  # for bursts
    spare: int = SPARE_INSTANCES  # instances beyond those the target needs: N + spare

    def describe(self) -> str:
        return (f"p99 <= {self.p99_ms:g} ms at {self.target:g} {UNITS[self.unit]}, "
                f"headroom {self.headroom:.0%} for bursts, N + {self.spare} spare instance(s)")

    def images_per_s(self, request_batch_size: int) -> float:
        return self.target * (request_batch_size if self.unit == "rps" else 1)


@dataclass(frozen=True)
class SizingAnswer:
    """One option: a configuration at the chosen request batch size, sized for the objective."""

    config: Config
    label: str  # the configuration's short label (`configs.config_labels`)
    request_batch_size: int
    meets: bool  # False: the measurements cannot answer for this option (see note)
    capacity: float | None  # per replica, in the objective's unit, p99 within the objective
    source: str  # a `sources.Source` value; "" when there was no evidence
    lower_bound: bool  # capacity may be higher (closed loop, all rates passed, or a stricter search)
    replicas: int | None
    price_per_hour: float | None  # one instance (an older price file: one replica's machine)
    cost_per_hour: float | None
    cost_per_million: float | None  # per million images (images) at the target load
    note: str
    cells_used: int
    cells_not_used: tuple[str, ...]  # "level L: reason" for each invalid or failed cell
    rank: int | None = None  # 1 = the preferred option among those that meet
    replica: str = ""  # what one replica is: "1 core of AMD EPYC", "1 × NVIDIA H100 80GB HBM3 with 12 cores"
    instance: str = ""  # the instance type the replicas are priced on ("" per replica, or refused)
    per_instance: int | None = None  # replicas one instance holds
    instances: int | None = None  # ceil(replicas / per_instance) + spare
    spare: int = 0  # of `instances` (an older price file: replicas priced beyond `replicas`)
    binding: str = ""  # the resource that set `per_instance`: "cores", "memory", "GPUs"
    memory_counted: bool = False  # the replica's and the instance's memory were both known
    assumption: str = ""  # what the pricing assumes (linear scaling across an instance), "" when nothing
    refused: str = ""  # why this replica maps onto no priced instance: not priced
    fewest: int | None = None  # instances (per replica: replicas) serving the target at the range's top, spare apart
    most: int | None = None  # at the range's bottom (`loadtest.report.sizing.fleet`)
    capacity_range: tuple[float, float] | None = None  # the range the boxes cover, in the objective's unit
    repeats: int = 1  # the searches the capacity stands on
    bounded: str = ""  # a search's answer: what bounded it, the card's verdict (`sources.ConfigCapacity.bounded`)
    at_most: bool = False  # not for buying (that verdict's): boxes and cost are the most a server this fast needs

    @property
    def how(self) -> str:
        """The source, and "(lower bound)" where the source's label does not already say so."""
        bound = self.lower_bound and self.source != Source.CLOSED
        state = ", not confirmed" if self.source in (Source.GRID, Source.CLOSED) else ""
        return self.source + state + (" (lower bound)" if bound else "")

    def server(self) -> str:
        config = self.config
        return f"{config.device} {server_with_runtime(config.kind, config.runtime)}, batching {config.batching_profile}"


def size_option(found: ConfigCapacity, label: str, objective: SizingGoal, prices: PriceBook,
                replica: Replica, shapes: Sequence[int] = ()) -> SizingAnswer:
    """Replicas, instances and cost of one configuration; `meets` False where the data cannot say. `shapes`: the
    replica shapes its family was measured at, where a shape sweep measured two or more (its assumption then
    names them instead of assuming linear scaling)."""
    c = found.config
    capacity = found.capacity_rps if objective.unit == "rps" else found.capacity_ips
    base = SizingAnswer(c, label, found.request_batch_size, False, None, found.source or "", found.lower_bound,
                        None, None, None, None, found.note, found.cells_used, found.cells_not_used,
                        replica=replica.describe(), bounded=found.bounded, at_most=found.for_buying is False)
    if capacity is None or capacity <= 0:
        return base if capacity is None else replace(base, note=f"{found.note}; no throughput measured")
    boxes = fleet(objective.target, _range(found, capacity), objective.headroom,
                  objective.images_per_s(found.request_batch_size), prices, c, replica, spare=objective.spare,
                  at_most=base.at_most)  # not for buying: the most boxes and their cost, as the card
    p, placed = boxes.priced, boxes.priced.placement
    unpriced = prices.per_replica and p.price_per_hour is None
    note = found.note + (f"; no price for {c.device_name!r} or device {c.device!r}" if unpriced else "")
    answer = replace(base, meets=True, capacity=capacity, replicas=p.costs.replicas, price_per_hour=p.price_per_hour,
                     cost_per_hour=p.costs.per_hour, cost_per_million=p.costs.per_million, note=note,
                     refused=p.refused, spare=objective.spare, fewest=boxes.fewest, most=boxes.most,
                     capacity_range=(boxes.range.low_rps, boxes.range.high_rps), repeats=boxes.range.repeats)
    if placed is None:
        return answer
    return replace(answer, instance=placed.instance.name, per_instance=placed.per_instance,
                   instances=placed.instances, binding=placed.binding, memory_counted=placed.memory_counted,
                   assumption=shape_note(replica, placed, shapes) if shapes else linear_note(replica, placed))


def _range(found: ConfigCapacity, capacity: float) -> CapacityRange:
    """The range the boxes cover, in the objective's unit: the card's (`fleet.capacity_range`) for a search's
    capacity; a grid's or closed loop's capacity alone (no bracket)."""
    searched = capacity_range(found.search, found.repeats) if found.search is not None else None
    if searched is None or not found.capacity_rps:
        return CapacityRange(capacity, capacity, capacity)
    return searched.scaled(capacity / found.capacity_rps)


def rank_answers(answers: Sequence[SizingAnswer]) -> list[SizingAnswer]:
    """Real capacities first, then lower bounds; priced ones cheapest first; then those that cannot answer."""
    def order(a: SizingAnswer):
        return (not a.meets, a.lower_bound, a.cost_per_hour is None, a.cost_per_hour or 0.0,
                a.replicas or 0, -(a.capacity or 0.0), a.label)
    out, rank = [], 0
    for answer in sorted(answers, key=order):
        if answer.meets:
            rank += 1
            answer = replace(answer, rank=rank)
        out.append(answer)
    return out


def chosen_batch(results: Sequence[CellResult], batch_size: int | None) -> int:
    """The request batch size to size at: the one asked for, else the smallest measured."""
    measured = request_batches(results)
    if not measured:
        raise AnalysisError("no cells to size from")
    if batch_size is None:
        return measured[0]
    if batch_size not in measured:
        raise AnalysisError(f"no cells at request batch {batch_size}; measured: {', '.join(map(str, measured))}")
    return batch_size


def size(results: Sequence[CellResult], objective: SizingGoal, prices: PriceBook,
         batch_size: int | None = None) -> list[SizingAnswer]:
    """Every configuration measured at the chosen request batch size, sized and ranked."""
    batch = chosen_batch(results, batch_size)
    labels = config_labels(config_of(c) for c in results)
    replicas = replicas_by_config(results)
    shapes = measured_shapes(results)
    return rank_answers([size_option(found, labels[found.config], objective, prices, replicas[found.config],
                                     shapes.get(found.config, ()))
                         for found in capacities(results, batch, objective.p99_ms)])


def cheapest(answers: Sequence[SizingAnswer]) -> SizingAnswer | None:
    """The cheapest priced option that meets, from a real capacity when any has one, else a lower bound."""
    priced = [a for a in answers if a.meets and a.cost_per_hour is not None]
    pool = [a for a in priced if not a.lower_bound] or priced
    return min(pool, key=lambda a: (a.cost_per_hour, a.replicas)) if pool else None


# ----------------------------------------------------------------------------- text


def fleet_text(a: SizingAnswer) -> str:
    """ "1 + 1 spare × general-16": the instances that serve the target, and the spare; over the capacity's range,
    "9–10 + 1 spare × general-16" (the card's boxes)."""
    serving = (a.instances or 0) - a.spare
    low, high = a.fewest or serving, max(a.most or serving, serving)
    count = f"{low}–{high}" if low != high else f"{serving}"
    return f"{_most(a)}{count}{f' + {a.spare} spare' if a.spare else ''} × {a.instance}"


def _most(a: SizingAnswer) -> str:
    """ "≤ " before a figure of boxes or money where the answer is not for buying, as the card prints it."""
    return "≤ " if a.at_most else ""


def instances_text(a: SizingAnswer) -> str:
    """ "1 + 1 spare × general-16 (16 per instance, by cores)"; "not priced" when refused; "—" per replica."""
    if a.refused:
        return "not priced: refused"
    return f"{fleet_text(a)} ({a.per_instance} per instance, by {a.binding})" if a.instance else "—"


def answer_table(answers: Sequence[SizingAnswer], unit: str, prices: PriceBook) -> str:
    """The options that meet the objective, ranked, as a plain-text table ("" when none does)."""
    table = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 2, 0, 0))
    on_instances = not prices.per_replica
    for name in ("rank", "option", "server", "replica", f"capacity {unit}", "source", "replicas",
                 *(("instances",) if on_instances else ()), f"{prices.currency}/h", f"{prices.currency}/M images"):
        table.add_column(name, no_wrap=True)
    for a in answers:
        if a.meets:
            table.add_row(str(a.rank), a.label, a.server(), a.replica, f"{a.capacity:,.1f}", a.how,
                          f"{_most(a)}{a.replicas}", *((instances_text(a),) if on_instances else ()),
                          _most(a) + number(a.cost_per_hour, 2), _most(a) + money(a.cost_per_million))
    return plain_table(table, 10_000) if table.row_count else ""


SOURCES_LEGEND = ("source: capacity search = a search's confirmed answer at this objective (the report's rule); "
                  "open-loop, measured grid = the highest passing offered rate a sweep measured, not confirmed; "
                  "closed-loop: lower bound = a closed loop's throughput, "
                  "not an open-loop capacity; (lower bound) = capacity may be higher.")


def format_answers(answers: Sequence[SizingAnswer], objective: SizingGoal, prices: PriceBook,
                   measured_batches: Sequence[int] = ()) -> str:
    """The plain-text answer: a ranked table, the cheapest option, and what could not be sized."""
    batch = answers[0].request_batch_size if answers else None
    others = [b for b in measured_batches if b != batch]
    lines = [f"Sizing for {objective.describe()}, at request batch {batch}"
             + (f" (also measured: {', '.join(map(str, others))}; pick one with --batch)" if others else "")
             + f": replicas = ceil(target / (capacity x {1 - objective.headroom:g})) (the headroom covers bursts; "
             f"{objective.spare} spare instance(s) cover instances lost); a replica is one measured "
             "server (the cores it was pinned to or its container's CPU limit, its GPUs), each assumed to "
             "perform as the measured one; a search's capacity is its confirmed rate (p99 within the objective at "
             "its stated confidence), never an unconfirmed one.", prices.line()]
    table = answer_table(answers, UNITS[objective.unit], prices)
    if table:
        lines += ["", table, SOURCES_LEGEND]
    lines += ["", _verdict(answers, prices.currency, UNITS[objective.unit], bool(table))]
    return "\n".join(lines + _notes(answers))


def _on_instances(a: SizingAnswer) -> str:
    if not a.instance:
        return ""
    return f" of {a.replica} on {fleet_text(a)} ({a.per_instance} replica(s) per instance, by {a.binding})"


def _verdict(answers: Sequence[SizingAnswer], currency: str, unit: str, any_meets: bool) -> str:
    best = cheapest(answers)
    if best is not None:
        only_bounds = " (only lower bounds measured: a capacity search would say more)" if best.lower_bound else ""
        cheaper = [a.label for a in answers if a.lower_bound and a.cost_per_hour is not None
                   and a.cost_per_hour < (best.cost_per_hour or 0.0)]
        bounds = (f" Cheaper with only a lower bound, so ranked after it: {', '.join(cheaper)}."
                  if cheaper and not best.lower_bound else "")
        assumed = f" Assumed: {best.assumption}." if best.assumption else ""
        most = _most(best)
        lead = ("NOT FOR BUYING, the most a server at least this fast needs" if best.at_most
                else "Cheapest meeting the objective")
        return (f"{lead}{only_bounds}: {best.label} ({best.server()}) on "
                f"{best.config.device_name}, request batch {best.request_batch_size}: {most}{best.replicas} replica(s)"
                f"{_on_instances(best)}, "
                f"{most}{number(best.cost_per_hour, 2)} {currency}/h, {most}{money(best.cost_per_million)} {currency} "
                f"per million images; capacity {best.capacity:,.1f} {unit} from {best.how}.{bounds}{assumed}"
                + (f" Bounded by {best.bounded}." if best.bounded else ""))
    if any(a.refused for a in answers):
        return "Options meet the objective but none maps onto an instance in the price file: see Not priced below."
    if any_meets:
        return "Options meet the objective but none has a price in the price file."
    return "No measured option meets the objective: the measurements cannot answer."


def _notes(answers: Sequence[SizingAnswer]) -> list[str]:
    lines = []
    refused = [a for a in answers if a.refused]
    if refused:
        lines += ["", "Not priced (the replica maps onto no instance in the price file):"]
        lines += [f"  {a.label} ({a.replica}): {a.refused}" for a in refused]
    unknown = [a.label for a in answers if a.instance and not a.memory_counted]
    if unknown:
        lines += ["", "Memory not counted (the replica's memory or the instance's memory_gib is not known: memory "
                      f"does not limit replicas per instance): {', '.join(unknown)}"]
    assumed = [a for a in answers if a.assumption]
    if assumed:
        lines += ["", "Assumed, not measured:"]
        lines += [f"  {a.label}: {a.assumption}" for a in assumed]
    cannot = [a for a in answers if not a.meets]
    if cannot:
        lines += ["", "Cannot answer from these measurements:"]
        lines += [f"  {a.label} ({a.config.device_name or 'device name not recorded'}): "
                  f"{a.source or 'no evidence'}: {a.note}" for a in cannot]
    notes = [a for a in answers if a.meets]
    if notes:
        lines += ["", "Where each capacity comes from:"]
        lines += [f"  {a.label}: {a.how}: {a.note}" for a in notes]
    skipped = [(a, s) for a in answers for s in a.cells_not_used]
    if skipped:
        lines += ["", f"Not used ({len(skipped)} invalid or failed cells):"]
        lines += [f"  {a.label}, {s}" for a, s in skipped]
    return lines


# ----------------------------------------------------------------------------- entry point


def check_objective(p99_ms: float, target: float, unit: str, headroom: float) -> None:
    """AnalysisError naming the flag out of range."""
    if not (math.isfinite(p99_ms) and p99_ms > 0):
        raise AnalysisError(f"--p99-ms must be a positive number of milliseconds, got {p99_ms:g}")
    if not (math.isfinite(target) and target > 0):
        raise AnalysisError(f"--target-{unit} must be positive, got {target:g}")
    if not (0 <= headroom < 1):
        raise AnalysisError(f"--headroom must be in [0, 1), got {headroom:g}")


def objective_from(p99_ms: float, target_rps: float | None, target_ips: float | None, headroom: float,
                   spare: int = SPARE_INSTANCES) -> SizingGoal:
    """The objective the flags describe; AnalysisError names a flag out of range."""
    unit, target = ("rps", target_rps) if target_rps is not None else ("ips", target_ips)
    if target is None:
        raise AnalysisError("one of the arguments --target-rps --target-ips is required")
    check_objective(p99_ms, target, unit, headroom)
    if isinstance(spare, bool) or not isinstance(spare, int) or spare < 0:
        raise AnalysisError(f"--spare-instances must be a whole number >= 0, got {spare!r}")
    return SizingGoal(p99_ms, target, unit, headroom, spare)


def run(results: Sequence[Path], objective: SizingGoal, prices: Path = DEFAULT_PRICES, as_json: bool = False, *,
        batch_size: int | None = None) -> tuple[list[SizingAnswer], str]:
    """Read, size at one request batch size; returns the answers and their text (JSON or the table).

    `batch_size`: the request batch size to compare at (None: the smallest measured). Raises AnalysisError.
    """
    book = load_prices(prices)
    cells = read_all(results)
    answers = size(cells, objective, book, batch_size)
    if as_json:
        return answers, json.dumps([{**asdict(a), "how": a.how} for a in answers], indent=2)
    return answers, format_answers(answers, objective, book, request_batches(cells))
