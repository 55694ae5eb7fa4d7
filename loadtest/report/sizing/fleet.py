"""A configuration's boxes for a target, one sizing path for the card, the replica shapes, `size` and the bundle
(issue #60, item 5): the replicas a capacity needs and their cost (`priced`), the capacity sized on and the range its
boxes cover (`capacity_range`), and both together (`fleet`).

- **Replicas**: ceil(target ÷ (capacity × (1 − headroom))), the headroom for bursts; placed on the cheapest instance
  type that holds one (`loadtest.report.sizing.instances.place`) with the spare instances, or, for an older price
  file, priced per replica with the spare replicas.
- **The capacity sized on**: the search chosen (`loadtest.report.answers.answers.typical`: of repeated searches,
  their lower median); the price is for the boxes at it.
- **The range** (`CapacityRange`): with repeats (the same configuration searched several times at one request batch
  and objective), from the lowest repeat's capacity to the highest repeat's upper end; without, the chosen search's
  bracket (its capacity to its upper end; the capacity alone where it is a lower bound or has no upper end). The
  boxes run from the fewest (at the range's top) to the most (at its bottom).
- **Moved**: where the repeats' capacities fall outside the chosen search's bracket, by how much (the card's notes).

Not for: how many replicas an instance holds (`loadtest.report.sizing.instances`), the `size` command's options and
text (`loadtest.report.sizing.size`) or which search a device is sized on (`loadtest.report.shape_sizing.sized_on`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from loadtest.report.answers.answers import SearchAnswer, lower_bound
from loadtest.report.configs import Config
from loadtest.report.sizing.instances import CORES, GPUS, MEMORY, Placement, Replica, fits, place
from loadtest.report.sizing.prices import PriceBook

# ----------------------------------------------------------------------------- replicas and their cost


def replicas_needed(target: float, capacity: float, headroom: float) -> int:
    """ceil(target / (capacity × (1 − headroom))), rounded first so 5.0000000001 stays 5."""
    return math.ceil(round(target / (capacity * (1.0 - headroom)), 9))


def cost_per_hour(price_per_hour: float, replicas: int) -> float:
    return price_per_hour * replicas


def cost_per_million(hourly_cost: float, inferences_per_s: float) -> float:
    """Cost of one million images when serving `inferences_per_s` for an hour."""
    return hourly_cost / (inferences_per_s * 3600.0) * 1e6


@dataclass(frozen=True)
class Costs:
    replicas: int
    per_hour: float | None  # None without a price
    per_million: float | None  # per million images (images) at the target load


def costs(target: float, capacity: float, headroom: float, images_per_s: float, price: float | None,
          spare: int = 0) -> Costs:
    """Replicas for `target` at `capacity` per replica, and their cost at `price` per replica-hour with `spare`
    replicas more (each replica its own machine: the failure unit)."""
    replicas = replicas_needed(target, capacity, headroom)
    hourly = cost_per_hour(price, replicas + spare) if price is not None else None
    return Costs(replicas, hourly, cost_per_million(hourly, images_per_s) if hourly is not None else None)


@dataclass(frozen=True)
class Priced:
    """Replicas and what they cost: on instances (`placement`), or per replica (an older price file)."""

    costs: Costs
    price_per_hour: float | None  # one instance (one replica's machine in an older price file)
    placement: Placement | None  # None: per replica, or refused
    refused: str  # why the replica maps onto no priced instance ("" otherwise)


def priced(target: float, capacity: float, headroom: float, images_per_s: float, prices: PriceBook,
           config: Config, replica: Replica, *, spare: int) -> Priced:
    """Replicas of `replica` for `target`, priced per instance with `spare` instances more (or per replica for an
    older price file, `spare` replicas more)."""
    if prices.per_replica:
        price = prices.lookup(config.device, config.device_name)
        return Priced(costs(target, capacity, headroom, images_per_s, price, spare), price, None, "")
    replicas = replicas_needed(target, capacity, headroom)
    placed = place(replica, replicas, prices.instances, spare=spare)
    if isinstance(placed, str):
        return Priced(Costs(replicas, None, None), None, None, placed)
    per_million = cost_per_million(placed.cost_per_hour, images_per_s)
    return Priced(Costs(replicas, placed.cost_per_hour, per_million), placed.instance.price_per_hour, placed, "")


# ----------------------------------------------------------------------------- the capacity and its range


@dataclass(frozen=True)
class CapacityRange:
    """The capacity a configuration is sized on (req/s) and the range its boxes cover."""

    capacity_rps: float  # the chosen search's (of repeats, the lower median's): the price is for it
    low_rps: float  # the lowest repeat's capacity; without repeats, the capacity
    high_rps: float  # the highest repeat's upper end; without repeats, the upper end (the capacity for a lower bound)
    repeats: int = 1  # the searches it stands on
    bracket_high_rps: float | None = None  # the chosen search's own upper end; None: a lower bound, or none measured
    top_rps: float | None = None  # the highest repeat's capacity (None: the capacity)

    @property
    def spread_top(self) -> float:
        return self.top_rps if self.top_rps is not None else self.capacity_rps

    @property
    def moved(self) -> bool:
        """Repeats put a capacity outside the chosen search's bracket (below its capacity, above its upper end)."""
        top = self.bracket_high_rps if self.bracket_high_rps is not None else self.capacity_rps
        return self.repeats > 1 and (self.low_rps < self.capacity_rps or self.spread_top > top)

    def scaled(self, factor: float) -> CapacityRange:
        """The same range in another unit (images/s: × images a request)."""
        high = None if self.bracket_high_rps is None else self.bracket_high_rps * factor
        return CapacityRange(self.capacity_rps * factor, self.low_rps * factor, self.high_rps * factor, self.repeats,
                             high, self.spread_top * factor)


def _upper(s: SearchAnswer) -> float | None:
    """A search's upper end, None where its capacity is a lower bound (nothing above it is known)."""
    return None if lower_bound(s) else s.upper_rps


def capacity_range(chosen: SearchAnswer, repeats: Sequence[SearchAnswer] = ()) -> CapacityRange | None:
    """The range of `chosen` (a met search) and its repeats (searches of its configuration, request batch and objective,
    `chosen` among them or not); the repeats that met count. None where `chosen` has no capacity."""
    if chosen.capacity_rps is None:
        return None
    key = (chosen.config, chosen.request_batch_size, chosen.p99_objective_ms)
    group = [s for s in repeats if s.capacity_rps is not None
             and (s.config, s.request_batch_size, s.p99_objective_ms) == key and s is not chosen] + [chosen]
    caps = [s.capacity_rps for s in group if s.capacity_rps is not None]
    ends = [_upper(s) or s.capacity_rps for s in group if s.capacity_rps is not None]
    return CapacityRange(chosen.capacity_rps, min(caps), max(ends), len(group), _upper(chosen), max(caps))


def moved_words(r: CapacityRange) -> str:
    """`repeats' capacities 391.8–539.4 req/s (×1.38), outside the bracket of the one priced (464.1–480.0)`."""
    bracket = (f"{r.capacity_rps:,.1f}–{r.bracket_high_rps:,.1f}" if r.bracket_high_rps is not None
               else f"≥ {r.capacity_rps:,.1f}")
    return (f"the {r.repeats} repeats' capacities ran {r.low_rps:,.1f}–{r.spread_top:,.1f} req/s "
            f"(×{r.spread_top / r.low_rps:.2f}), beyond the bracket of the one priced ({bracket})")


@dataclass(frozen=True)
class Fleet:
    """The boxes for a target: priced at the capacity sized on, and the range's fewest and most."""

    range: CapacityRange
    priced: Priced  # at `range.capacity_rps`: its replicas, placement and USD/h
    fewest: int  # instances (or replicas, per-replica prices) at the range's top, the spare apart
    most: int  # at the range's bottom, the spare apart
    bottom: Priced | None = None  # at `range.low_rps`: what the most boxes cost

    @property
    def typical(self) -> int:
        """The boxes the price is for, the spare apart."""
        return _boxes(self.priced, self.priced)

    def at_bottom(self) -> Fleet:
        """This fleet priced at the range's bottom: a "≤" row's boxes (the most a server at least this fast needs)
        and its USD/h from one placement, never the most boxes beside the typical capacity's price."""
        low = self.bottom or self.priced
        boxes = _boxes(low, low)
        return replace(self, priced=low, fewest=boxes, most=boxes)


def _boxes(at: Priced, on: Priced) -> int:
    """Instances of the type `on` was placed on that serve the target (each end of the range counts the same
    instance; the spare apart), else replicas (a price file that prices replicas)."""
    if on.placement is None:
        return at.costs.replicas
    return math.ceil(at.costs.replicas / on.placement.per_instance)


def fleet(target: float, capacities: CapacityRange, headroom: float, images_per_s: float, prices: PriceBook,
          config: Config, replica: Replica, *, spare: int, at_most: bool = False) -> Fleet:
    """`target` (in the range's unit) served by replicas of `replica`: priced at the capacity sized on, the boxes'
    range from the range's ends (`priced` each); `at_most` (an answer not for buying): at the range's bottom alone,
    the most boxes a server at least this fast needs (`Fleet.at_bottom`)."""
    def at(rate: float) -> Priced:
        return priced(target, rate, headroom, images_per_s, prices, config, replica, spare=spare)

    chosen, bottom = at(capacities.capacity_rps), at(capacities.low_rps)
    boxes = Fleet(capacities, chosen, _boxes(at(capacities.high_rps), chosen), _boxes(bottom, chosen), bottom)
    return boxes.at_bottom() if at_most else boxes


# ----------------------------------------------------------------------------- the arithmetic, one line


IDLE_SHARE = 0.5  # a replica busy on under this share of its cores is priced on cores it did not use


@dataclass(frozen=True)
class SizingLine:
    """The card's sizing arithmetic for one row: the instance, what limits its replicas, and the fleet."""

    instance: str
    vcpus: float
    memory_gib: float | None  # None: not given in the price list
    by_cores: int | None  # replicas one instance holds by each resource; None: it does not limit (or unknown)
    by_memory: int | None
    by_gpus: int | None
    binding: str  # "cores", "memory" or "GPUs": the fewest
    replicas: int  # replicas needed at the capacity priced
    instances: int  # serving the target, the spare apart
    spare: int
    usd_per_hour: float
    cores_given: float | None = None  # the replica's cores, each held on an instance (None: not known)
    cores_busy: float | None = None  # how many of them it kept busy at its answer (None: not measured)

    @property
    def idle(self) -> bool:
        """Busy on under `IDLE_SHARE` of the cores it was given: priced on cores it did not use."""
        return (self.cores_given is not None and self.cores_busy is not None
                and self.cores_busy < IDLE_SHARE * self.cores_given)

    def idle_words(self) -> str:
        """`12 cores given, 1.1 busy` where `idle`, else ""."""
        return f"{self.cores_given:g} cores given, {self.cores_busy:.1f} busy" if self.idle else ""


def sizing_line(f: Fleet, replica: Replica, busy_cores: float | None = None) -> SizingLine | None:
    """`f`'s arithmetic on its instance, with `busy_cores` of the replica's kept busy at the answer; None where priced
    per replica or refused (no instance)."""
    placed = f.priced.placement
    if placed is None:
        return None
    counts = fits(replica, placed.instance)
    return SizingLine(placed.instance.name, placed.instance.vcpus, placed.instance.memory_gib, counts.get(CORES),
                      counts.get(MEMORY), counts.get(GPUS), placed.binding, f.priced.costs.replicas, placed.serving,
                      placed.spare, placed.cost_per_hour, replica.cpus, busy_cores)


__all__ = ["CapacityRange", "Costs", "Fleet", "Priced", "SizingLine", "capacity_range", "cost_per_hour",
           "cost_per_million", "costs", "fleet", "moved_words", "priced", "replicas_needed", "sizing_line"]
