"""Replicas in the units people rent: what one measured replica is, and how many fit an instance.

A replica is one measured server with the resources its record says it had
(`CellResult.server_resources`: the cores it was pinned to or its container's CPU limit, the CPU
model, its GPUs). Records made before that field fall back on the telemetry's `server_cpu_cores`,
else the plan's `server_cpus` for a server the sweep started, and on the device name.

An instance holds floor(vCPUs / replica cores) CPU replicas, or GPUs / replica GPUs GPU replicas,
assuming the measured replica repeats linearly across the instance's cores (or GPUs): unless one
replica fills the instance, that is an assumption, not a measurement, and sizing says so. Where a
shape sweep measured the configuration at several replica shapes (`measured_shapes`), each shape is a
replica of its own; sizing then says the shapes were measured and the replica repeats on separate cores
(`shape_note`), not that it scales linearly. A replica
that maps onto no instance is refused with the reason, never priced: cores unknown, no instance
with a GPU of that name or a CPU of that model, or every such instance smaller than one replica.

Pure functions over records and a price book. Not for: replicas and their cost (`loadtest.report.sizing.size`),
reading prices (`loadtest.report.sizing.prices`), or recording the resources (`loadtest.measure.resources`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from loadtest.evidence.records import CellResult
from loadtest.evidence.search_tag import ShapeTag
from loadtest.report.configs import Config, config_of
from loadtest.report.sizing.prices import Instance, PriceBook
from serving.deploy.process import pinned_cores


@dataclass(frozen=True, order=True)
class Replica:
    """One measured server's resources."""

    cpus: float | None  # cores it could use; None: not known
    cpu_model: str
    gpus: int
    gpu_name: str
    source: str  # where `cpus` comes from: "pinned cores 0", "container cpuset 0-1", "container CPU limit", ...

    def cores(self) -> str:
        return "cores unknown" if self.cpus is None else f"{self.cpus:g} core{'' if self.cpus == 1 else 's'}"

    def describe(self) -> str:
        """ "1 core of AMD EPYC", "1 × NVIDIA H100 80GB HBM3 with 12 cores"."""
        if self.gpus:
            return f"{self.gpus} × {self.gpu_name}" + (f" with {self.cores()}" if self.cpus is not None else "")
        return f"{self.cores()} of {self.cpu_model or 'an unrecorded CPU'}"


def _plan_cores(cell: CellResult) -> float | None:
    """The plan's `server_cpus` count, for a server the sweep started (a plan with configurations)."""
    plan = cell.provenance.plan  # older records hold the plan's path only
    cpus = cell.provenance.launch().get("server_cpus")
    if not (cpus and isinstance(cpus, str) and isinstance(plan, dict) and plan.get("configs")):
        return None
    try:
        return float(pinned_cores(cpus) or 0) or None
    except ValueError:
        return None


def _fallback(cell: CellResult) -> Replica:
    """A record from before `server_resources`: the telemetry's cores, else the plan's, and the device."""
    s = cell.server
    gpu = s.device == "gpu"
    cpu_model = s.device_name if s.device == "cpu" else cell.provenance.cpu_model or ""
    cpus: float | None = cell.server_cpu_cores
    if cpus:
        source = "the telemetry's server_cpu_cores"
    else:
        cpus = _plan_cores(cell)
        source = "the plan's server_cpus" if cpus is not None else "unknown"
    return Replica(cpus, cpu_model, 1 if gpu else 0, s.device_name if gpu else "", source)


def replica_of(cell: CellResult) -> Replica:
    r = cell.server_resources
    if not r:
        return _fallback(cell)
    return Replica(None if r.cpus is None else float(r.cpus), r.cpu_model, int(r.gpus), r.gpu_name, r.source)


def replicas_by_config(results: Sequence[CellResult]) -> dict[Config, Replica]:
    """Each configuration's replica: the one most of its records describe."""
    seen: dict[Config, Counter[Replica]] = {}
    for cell in results:
        seen.setdefault(config_of(cell), Counter())[replica_of(cell)] += 1
    return {config: counts.most_common(1)[0][0] for config, counts in seen.items()}


# ----------------------------------------------------------------------------- onto instances


def per_instance(replica: Replica, instance: Instance) -> int:
    """How many replicas one instance holds (0: smaller than one), assuming linear repetition."""
    if replica.gpus:
        return instance.gpus // replica.gpus
    assert replica.cpus is not None and replica.cpus > 0
    return math.floor(round(instance.vcpus / replica.cpus, 9))


def candidates(replica: Replica, instances: Sequence[Instance]) -> list[Instance] | str:
    """The instances that could hold this replica, or why none could."""
    if replica.gpus:
        same = [i for i in instances if i.gpus and i.gpu.lower() == replica.gpu_name.lower()]
        if not same:
            named = sorted({i.gpu for i in instances if i.gpus})
            return (f"no instance in the price file has a {replica.gpu_name or 'GPU of an unrecorded name'} GPU"
                    + (f" (priced GPUs: {', '.join(named)})" if named else " (it prices no GPU instance)"))
        return same
    if replica.cpus is None or replica.cpus <= 0:
        return ("the replica's cores are unknown (a server given by address, with no CPU telemetry): "
                "cannot say how many fit an instance")
    model = replica.cpu_model.lower()
    same = [i for i in instances if not i.gpus and (not i.cpu or i.cpu.lower() in model)]
    if not same:
        return f"no CPU-only instance in the price file has a {replica.cpu_model or 'CPU of an unrecorded model'} CPU"
    return same


@dataclass(frozen=True)
class Placement:
    """Replicas on instances of one type: the cheapest that holds them."""

    instance: Instance
    per_instance: int  # replicas one instance holds
    instances: int  # ceil(replicas / per_instance)
    cost_per_hour: float

    @property
    def assumed_linear(self) -> bool:
        """More than one replica per instance: throughput assumed to scale with the instance's cores or GPUs."""
        return self.per_instance > 1


def instances_needed(replicas: int, holds: int) -> int:
    return math.ceil(replicas / holds)


def place(replica: Replica, replicas: int, instances: Sequence[Instance]) -> Placement | str:
    """The cheapest instance type for `replicas` of `replica`, or why none can hold one (refused, not priced)."""
    found = candidates(replica, instances)
    if isinstance(found, str):
        return found
    fits = [(i, n) for i in found if (n := per_instance(replica, i)) > 0]
    if not fits:
        unit = f"{replica.gpus} GPU(s)" if replica.gpus else replica.cores()
        largest = max(found, key=lambda i: (i.gpus, i.vcpus))
        return (f"every instance for it is smaller than one replica ({unit}; largest: {largest.name}, "
                f"{largest.describe()})")
    options = [Placement(i, n, instances_needed(replicas, n), instances_needed(replicas, n) * i.price_per_hour)
               for i, n in fits]
    return min(options, key=lambda p: (p.cost_per_hour, p.instances, p.instance.name))


def linear_note(replica: Replica, placed: Placement) -> str:
    """What the placement assumes ("" when one measured replica fills the instance)."""
    if not placed.assumed_linear:
        return ""
    across, unit = ("GPUs", f"{replica.gpus}-GPU") if replica.gpus else ("cores", f"{replica.cpus:g}-core")
    return (f"{placed.per_instance} replicas per {placed.instance.name} ({placed.instance.describe()}) assumes "
            f"throughput scales linearly across its {across} from a {unit} measurement; no server of that size "
            "was measured")


def measured_shapes(results: Sequence[CellResult]) -> dict[Config, tuple[int, ...]]:
    """Each shape-swept configuration whose family was measured at two or more replica shapes: those shapes
    (cores per replica, fewest first). One shape alone is not a curve: it is sized as any replica is."""
    family: dict[tuple[str, str, str], set[int]] = {}
    configs: dict[Config, ShapeTag] = {}
    for cell in results:
        shape = cell.search.shape if cell.search else None
        if shape is not None:
            config = config_of(cell)
            configs[config] = shape
            family.setdefault((shape.family, config.device, config.host), set()).add(shape.cores)
    found = {c: tuple(sorted(family[(s.family, c.device, c.host)])) for c, s in configs.items()}
    return {config: cores for config, cores in found.items() if len(cores) > 1}


def shape_note(replica: Replica, placed: Placement, shapes: Sequence[int]) -> str:
    """What a placement of one measured shape repeats ("" when one replica fills the instance)."""
    if not placed.assumed_linear:
        return ""
    return (f"{placed.per_instance} replicas per {placed.instance.name} ({placed.instance.describe()}): the measured "
            f"{replica.cpus:g}-core replica repeated on separate cores (replica shapes measured: "
            f"{', '.join(map(str, shapes))} cores, each sized)")


@dataclass(frozen=True)
class Pricing:
    """A target load and prices: the answer then says how many replicas, on which instances, at what cost."""

    target_rps: float
    headroom: float
    prices: PriceBook
    replicas: Mapping[Config, Replica] = field(default_factory=dict)  # what one replica is (`with_replicas` fills it)


def with_replicas(pricing: Pricing | None, results: Sequence[CellResult]) -> Pricing | None:
    """`pricing` with what one replica of each configuration is, from these records, unless it says already."""
    if pricing is None or pricing.replicas:
        return pricing
    return replace(pricing, replicas=replicas_by_config(results))
