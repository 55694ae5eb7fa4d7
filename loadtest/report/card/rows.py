"""The card's rows: one per target and device, its best answer with what bounded it (the one verdict,
`loadtest.report.answers.verdict`), its tool ceiling, and boxes and prices from one capacity (`loadtest.report.sizing`):
a range where for buying, else the most a server at least this fast needs ("≤").

Not for: the card around them (`loadtest.report.card.card`) or the comparisons under them
(`loadtest.report.card.comparison`).
"""

from __future__ import annotations

from dataclasses import replace

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import Answers, DeviceAnswer, SearchAnswer, capacity, lower_bound, typical
from loadtest.report.answers.figure_text import capacity_text, figure_only
from loadtest.report.answers.verdict import verdict_in
from loadtest.report.card.objective_costs import answers_by_objective
from loadtest.report.card.records import CardRow
from loadtest.report.configs import Config
from loadtest.report.device_use import busy_text
from loadtest.report.formatting import number as fmt
from loadtest.report.shape_sizing import UNKNOWN_REPLICA, sized_on
from loadtest.report.sizing.fleet import CapacityRange, capacity_range, fleet, moved_words, sizing_line
from loadtest.report.sizing.instances import Pricing
from serving.endpoint import ServerKind


def devices_at(answers: Answers, target: Target) -> list[DeviceAnswer]:
    """Each device's answer at the target's objective and request batch: a search's own, else from its cells."""
    by_key = answers_by_objective(answers)
    return [by_key[key] for key in sorted(by_key) if key[1:] == (target.batch, target.p99_objective_ms)]


def _setup_words(config: Config) -> str:
    return f"batching on (profile {config.batching_profile})" if config.batching_on else "batching off"


def _higher(d: DeviceAnswer, best: SearchAnswer) -> str:
    """Every other setup on the device whose table cell at this objective shows more than `best`'s figure, named
    (a higher unconfirmed pass never left out): `batching on (profile cpu) 874.5 passed`."""
    top = capacity(best)
    shown = [(s, r) for s in typical(d.searches) if s.config != best.config
             for r in (s.passed_rps, s.capacity_rps) if r is not None and r > top]
    return "; ".join(f"{_setup_words(s.config)} {fmt(r)} {'confirmed' if r == s.capacity_rps else 'passed'}"
                     for s, r in sorted(shown, key=lambda sr: -sr[1]))


def card_row(target: Target, d: DeviceAnswer, pricing: Pricing | None, answers: Answers) -> CardRow:
    """One row: its best answer, what bounded it (`verdict_in`, the one verdict) and its tool ceiling; boxes and
    prices where confirmed: a range where for buying, else the most a server at least this fast needs."""
    best = sized_on(d, target, pricing)
    if best is None or best.figure_rps is None:
        return CardRow(target, d.device, "", None, None, False, None, "", None, False,
                       why_not=f"none passed p99 ≤ {target.p99_objective_ms:g} ms")
    verdict = verdict_in(best, answers)
    capacities = capacity_range(best, d.searches)
    repeated = capacities is not None and capacities.repeats > 1
    row = CardRow(target, d.device, _setup_words(best.config), best.figure_rps, best.upper_rps, lower_bound(best),
                  best.estimate_ms,
                  busy_text(best.server_cpu_percent, best.gpu_utilization_percent, best.server_cpu_cores),
                  verdict.served.share if verdict.served else None, False,
                  state=capacity_text(best.at), figure=figure_only(best.at), higher=_higher(d, best),
                  replica_cores=best.shape.cores if best.shape else None,
                  shared_cores=bool(best.shape and best.shape.shares_loadgen), bounded=verdict.bounded.value,
                  verdict=verdict.text(), tool_ceiling=verdict.ceiling.value(),
                  bounded_by=verdict.with_ceiling_text(), at_most=not verdict.for_buying,
                  repeats=capacities.repeats if capacities else 1,
                  range_rps=(capacities.low_rps, capacities.high_rps) if capacities and repeated else None,
                  moved=moved_words(capacities) if capacities and capacities.moved else "",
                  stand_in=best.config.kind != ServerKind.CONTAINER,
                  confirmed=best.at is not None and best.at.confirmed_rps is not None)
    if not verdict.confirmed or not best.met:
        return replace(row, why_not=verdict.text())
    if pricing is None or not target.rate_rps or capacities is None:
        return replace(row, why_not="no target rate")
    return _priced(row, best, capacities, target, pricing)


def _priced(row: CardRow, best: SearchAnswer, capacities: CapacityRange, target: Target, pricing: Pricing) -> CardRow:
    """Boxes over the capacity's range (`loadtest.report.sizing.fleet`: fewest at its top, most at its bottom),
    priced at the capacity (of repeats, the typical one); a replica no instance holds gets no price."""
    assert target.rate_rps is not None
    replica = pricing.replicas.get(best.config, UNKNOWN_REPLICA)
    boxes = fleet(target.rate_rps, capacities, pricing.headroom, target.rate_rps * target.batch, pricing.prices,
                  best.config, replica, spare=pricing.spare, at_most=row.at_most)  # not for buying: range's bottom
    at = boxes.priced
    if at.refused or at.costs.per_hour is None:
        return replace(row, why_not="not priced", refused=at.refused or "the price list has no price for it")
    per_hour = at.costs.per_hour
    return replace(row, for_buying=not row.at_most, boxes=(boxes.fewest, boxes.most),
                   instance=at.placement.instance.name if at.placement else "", usd_per_hour=per_hour,
                   per_instance=at.placement.per_instance if at.placement and row.replica_cores else None,
                   usd_per_m_requests=per_hour / (target.rate_rps * 3600.0) * 1e6,
                   usd_per_m_images=at.costs.per_million, spare=pricing.spare,
                   memory_counted=bool(at.placement and at.placement.memory_counted),
                   sizing=sizing_line(boxes, replica, _busy_cores(best)))


def _busy_cores(best: SearchAnswer) -> float | None:
    """How many of its cores the server kept busy at its answer: its CPU % of the cores it could use."""
    if best.server_cpu_percent is None or best.server_cpu_cores is None:
        return None
    return best.server_cpu_percent / 100.0 * best.server_cpu_cores


__all__ = ["card_row", "devices_at"]
