"""Replica shapes: what a shape sweep (`capacity --shapes 1,2`) measured, and which shape a target is sized on.

A shape sweep runs one configuration (its `family`, "cpu-off") as one server per replica shape k, pinned to k cores
with k gRPC frontends and named `cpu-off-2c` (`loadtest.evidence.search_tag.ShapeTag`). From its searches:

- per family, device, request batch and objective, the curve of capacity against cores per replica, each shape by
  its `typical` search: its capacity with the rate shown to fail above it, linear from one core
  (k × capacity_1), and the scaling efficiency capacity_k ÷ (k × capacity_1) with its range from both brackets
  (low: capacity_k ÷ (k × upper_1); high: upper_k ÷ (k × capacity_1)). An end is open where its bracket is, or where
  the capacity it needs bounded is a lower bound (the shape shared the load generator's cores, or the load
  generator was the limit): a lower-bound k leaves the high end open, a lower-bound 1 the low end;
- which search a target is sized on (`sized_on`): on a device with shape-swept searches, the cheapest priced among
  every configuration's and shape's `typical` answer (a tie on USD/h: the smaller shape: more replicas, a smaller
  failure unit); without them, the device's best (the highest capacity), as before. A shape not measured is never
  priced: nothing between or beyond the measured shapes is inferred;
- the pricing words of the answer table's caption: where a device's shapes were measured (two or more), that they
  were and each was priced; where one shape was, the assumption as before, that it repeats linearly.

Pure functions over `SearchAnswer`s. Not for: the card's row (`loadtest.report.card.card`), the report's section
(`loadtest.report.sections.shapes_table`), replicas and prices (`loadtest.report.sizing`), or measuring the shapes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from loadtest.judge.goals import Target
from loadtest.report.answers.answers import DeviceAnswer, SearchAnswer, capacity, lower_bound, typical
from loadtest.report.blocks import DEVICES
from loadtest.report.configs import Config
from loadtest.report.sizing.fleet import capacity_range, fleet
from loadtest.report.sizing.instances import Pricing, Replica

UNKNOWN_REPLICA = Replica(None, "", 0, "", "unknown")
SHARED = "lower bound: shared the load generator's cores"
LINEAR_UNIT = ("instance-hour: the cheapest instance holding one replica, floor(vCPUs / replica cores) or GPUs / "
               "replica GPUs per instance, assumed to scale linearly across its cores or GPUs; a replica no instance "
               "holds is not priced")


@dataclass(frozen=True)
class ShapePoint:
    """One replica shape of a family at one request batch and objective, by its `typical` search."""

    family: str  # "cpu-off"
    server: str  # "cpu-off-2c"
    device: str
    request_batch: int
    p99_objective_ms: float
    cores: int  # cores per replica, k
    capacity_rps: float | None  # None: this shape did not meet the objective
    upper_rps: float | None  # the lowest rate above it shown to fail; None: none (or a lower bound)
    above_failed: bool  # that rate failed (False: it stayed inconclusive)
    shares_loadgen: bool  # some of its cores were the load generator's: its capacity is a lower bound
    at_least: bool  # the load generator was the limit: its capacity is a lower bound
    linear_rps: float | None  # k × capacity_1; None without a 1-core capacity
    efficiency: float | None  # capacity_k ÷ (k × capacity_1)
    efficiency_low: float | None  # None: open (or no efficiency)
    efficiency_high: float | None
    config: Config = field(compare=False, repr=False)  # its server's: the colour every chart draws it in

    @property
    def lower_bound(self) -> bool:
        return self.shares_loadgen or self.at_least

    def as_dict(self) -> dict:
        """One point of figures.json's "shapes": one value a key."""
        return {"family": self.family, "server": self.server, "device": self.device, "batch": self.request_batch,
                "p99_objective_ms": self.p99_objective_ms, "cores": self.cores, "capacity_rps": self.capacity_rps,
                "upper_rps": self.upper_rps, "linear_rps": self.linear_rps, "efficiency": _round(self.efficiency),
                "efficiency_low": _round(self.efficiency_low), "efficiency_high": _round(self.efficiency_high),
                "shares_loadgen": self.shares_loadgen, "at_least": self.at_least}


@dataclass(frozen=True)
class ShapeCurve:
    """A family's shapes at one device, request batch and objective, fewest cores first."""

    family: str
    device: str
    request_batch: int
    p99_objective_ms: float
    points: tuple[ShapePoint, ...]

    @property
    def label(self) -> str:
        return f"{self.family}, req batch {self.request_batch}, p99 ≤ {self.p99_objective_ms:g} ms"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _shares(s: SearchAnswer) -> bool:
    return s.shape is not None and s.shape.shares_loadgen


def _bound(s: SearchAnswer) -> bool:
    """Its capacity is a lower bound: it shared the load generator's cores, or the load generator was the limit."""
    return _shares(s) or lower_bound(s)


def _cores(s: SearchAnswer) -> int:
    assert s.shape is not None
    return s.shape.cores


# ----------------------------------------------------------------------------- the curves


def efficiency(k: SearchAnswer, one: SearchAnswer | None) -> tuple[float | None, float | None, float | None]:
    """capacity_k ÷ (k × capacity_1), its low and high ends; 1 for the 1-core shape itself; Nones without both."""
    if one is None or not one.met or not k.met:
        return None, None, None
    if k is one:
        return 1.0, 1.0, 1.0
    cores, c1, ck = _cores(k), capacity(one), capacity(k)
    low = None if _bound(one) or one.upper_rps is None else ck / (cores * one.upper_rps)
    high = None if _bound(k) or k.upper_rps is None else k.upper_rps / (cores * c1)
    return ck / (cores * c1), low, high


def shape_point(k: SearchAnswer, one: SearchAnswer | None) -> ShapePoint:
    assert k.shape is not None
    value, low, high = efficiency(k, one)
    linear = k.shape.cores * capacity(one) if one is not None and one.met else None
    upper = k.upper_rps
    return ShapePoint(k.shape.family, k.shape.server_name, k.config.device, k.request_batch_size,
                      k.p99_objective_ms, k.shape.cores, k.capacity_rps, upper,
                      upper is not None and upper == k.lowest_failing_rps, _shares(k), lower_bound(k), linear,
                      value, low, high, k.config)


def shape_curves(searches: Iterable[SearchAnswer]) -> list[ShapeCurve]:
    """Per family, device (and its host), request batch and objective: each shape's point, fewest cores first."""
    groups: dict[tuple, list[SearchAnswer]] = {}
    for s in typical(s for s in searches if s.shape is not None):
        assert s.shape is not None
        key = (s.shape.family, s.config.device, s.config.device_name, s.config.host, s.request_batch_size,
               s.p99_objective_ms)
        groups.setdefault(key, []).append(s)
    curves = []
    for (family, device, _, _, batch, p99), group in sorted(groups.items()):
        shapes = sorted(group, key=_cores)
        one = next((s for s in shapes if _cores(s) == 1), None)
        curves.append(ShapeCurve(family, device, batch, p99, tuple(shape_point(s, one) for s in shapes)))
    return curves


# ----------------------------------------------------------------------------- sizing on a shape


def per_hour(s: SearchAnswer, target: Target, pricing: Pricing | None) -> float | None:
    """USD/h of the replicas `s`'s capacity needs for the target's rate, with the headroom and the spare, as the card
    prices it (`loadtest.report.sizing.fleet.fleet`); None where it has no capacity, there is no rate or price, or no
    instance holds its replica."""
    capacities = capacity_range(s)
    if pricing is None or not target.rate_rps or capacities is None:
        return None
    replica = pricing.replicas.get(s.config, UNKNOWN_REPLICA)
    return fleet(target.rate_rps, capacities, pricing.headroom, target.rate_rps * target.batch, pricing.prices,
                 s.config, replica, spare=pricing.spare).priced.costs.per_hour


def _replica_cores(s: SearchAnswer, pricing: Pricing | None) -> float:
    """Cores per replica: its shape's, else its recorded replica's (unknown: 1)."""
    if s.shape is not None:
        return float(s.shape.cores)
    cpus = pricing.replicas.get(s.config, UNKNOWN_REPLICA).cpus if pricing is not None else None
    return cpus or 1.0


def sized_on(d: DeviceAnswer, target: Target, pricing: Pricing | None) -> SearchAnswer | None:
    """The answer a target is sized on at this device: without shape-swept searches, its best (the highest
    capacity); with them, the cheapest priced `typical` answer met, a tie going to the smaller shape; where none is
    priced (no rate, no price list, or no instance holds any), the most capacity a core, the smaller shape on a tie."""
    if not any(s.shape is not None for s in d.searches):
        return d.best
    met = [s for s in typical(d.searches) if s.met and s.capacity_rps]
    costs = [(cost, s) for s in met if (cost := per_hour(s, target, pricing)) is not None]
    if costs:
        return min(costs, key=lambda c: (round(c[0], 9), _replica_cores(c[1], pricing), -capacity(c[1])))[1]
    return min(met, key=lambda s: (-capacity(s) / _replica_cores(s, pricing), _replica_cores(s, pricing)),
               default=None)


# ----------------------------------------------------------------------------- words


def measured_cores(searches: Iterable[SearchAnswer]) -> tuple[int, ...]:
    """The replica shapes measured among these searches, fewest cores first; () where fewer than two were (one
    shape is a replica like any other: assumed to repeat across an instance)."""
    cores = sorted({s.shape.cores for s in searches if s.shape is not None})
    return tuple(cores) if len(cores) > 1 else ()


def measured_by_device(devices: Iterable[DeviceAnswer]) -> dict[str, tuple[int, ...]]:
    """Per device whose shapes were measured (two or more), the shapes: cores per replica."""
    searches: dict[str, list[SearchAnswer]] = {}
    for d in devices:
        searches.setdefault(d.device, []).extend(d.searches)
    return {device: cores for device, found in searches.items() if (cores := measured_cores(found))}


def cores_words(cores: Sequence[int]) -> str:
    """`1, 2 cores`."""
    return f"{', '.join(map(str, cores))} core{'' if cores == (1,) else 's'}"


def instance_hour_words(measured: Mapping[str, tuple[int, ...]], devices: Iterable[str]) -> str:
    """How an instance-hour prices replicas: as before (`LINEAR_UNIT`) where no device's shapes were measured; else
    each measured device's shapes, each priced, and the assumption only for the devices whose shapes were not."""
    if not measured:
        return LINEAR_UNIT
    parts = ["instance-hour: the cheapest instance holding one replica, floor(vCPUs / replica cores) or GPUs / "
             "replica GPUs per instance"]
    parts += [f"{DEVICES.get(device, device)} replica shapes measured: {cores_words(cores)}; each priced, the "
              "cheapest taken, its replicas on separate cores of an instance"
              for device, cores in sorted(measured.items())]
    assumed = sorted({DEVICES.get(d, d) for d in devices if d not in measured})
    if assumed:
        parts.append(f"{' and '.join(assumed)}: one replica measured, assumed to scale linearly across an instance's "
                     "cores or GPUs")
    return "; ".join([*parts, "a replica no instance holds is not priced"])


__all__ = ["SHARED", "ShapeCurve", "ShapePoint", "efficiency", "instance_hour_words", "measured_by_device",
           "measured_cores", "per_hour", "shape_curves", "sized_on"]
