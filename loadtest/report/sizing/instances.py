"""Replicas in the units people rent: what one measured replica is, and how many fit an instance.

A replica is one measured server with the resources its record says it had
(`CellResult.server_resources`: the cores it was pinned to or its container's CPU limit, the CPU
model, its GPUs) and the memory it held (`CellResult.server_pss_mib`: its processes' PSS, shared pages
counted once; the highest over its configuration's records). Records made before those fields fall back
on the telemetry's `server_cpu_cores`, else the plan's `server_cpus` for a server the sweep started, and on
the device name; their memory is unknown.

An instance holds the fewest of three counts (`fits`): floor((vCPUs − reserve_vcpus) ÷ replica cores), for a
GPU replica too (the host cores it was pinned to); floor((memory_gib − reserve_gib) ÷ (replica memory × 1.1))
where both memories are known (unknown: memory does not limit, and sizing says so); and GPUs ÷ replica GPUs.
It assumes the measured replica repeats linearly across the instance: unless one replica fills the
instance, that is an assumption, not a measurement, and sizing says so. Where a
shape sweep measured the configuration at several replica shapes (`measured_shapes`), each shape is a
replica of its own; sizing then says the shapes were measured and the replica repeats on separate cores
(`shape_note`), not that it scales linearly. A replica
that maps onto no instance is refused with the reason, never priced: cores unknown, no instance
with a GPU of that name or a CPU of that model, or every such instance too small for one replica (naming
the resource that did not fit).

The instance is the failure unit: a fleet is the instances that serve the target plus `spare` more
(`SPARE_INSTANCES`, N + 1 by default), so the target is still served with that many instances lost; the
headroom covers bursts only.

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
    memory_mib: float | None = None  # what its processes held together (PSS); None: not recorded

    def cores(self) -> str:
        return "cores unknown" if self.cpus is None else f"{self.cpus:g} core{'' if self.cpus == 1 else 's'}"

    def describe(self) -> str:
        """ "1 core of AMD EPYC", "1 × NVIDIA H100 80GB HBM3 with 12 cores pinned" (cores it was pinned to, which it
        holds on an instance however little busy it ran them; "with 12 cores" from another source)."""
        if self.gpus:
            pinned = " pinned" if self.source.startswith(("pinned", "container cpuset")) else ""
            return f"{self.gpus} × {self.gpu_name}" + (f" with {self.cores()}{pinned}" if self.cpus is not None else "")
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
    """Each configuration's replica: the one most of its records describe, holding the most memory any of its
    records measured (None where none did)."""
    seen: dict[Config, Counter[Replica]] = {}
    memory: dict[Config, list[float]] = {}
    for cell in results:
        config = config_of(cell)
        seen.setdefault(config, Counter())[replica_of(cell)] += 1
        if cell.server_pss_mib:
            memory.setdefault(config, []).append(cell.server_pss_mib)
    return {config: replace(counts.most_common(1)[0][0], memory_mib=max(memory.get(config, ()), default=None))
            for config, counts in seen.items()}


# ----------------------------------------------------------------------------- onto instances


SPARE_INSTANCES = 1  # N + 1: the target still served with one instance lost
MEMORY_MARGIN = 0.10  # a replica's memory plus 10%: what it held at its peak is not all it may ever hold
CORES, MEMORY, GPUS = "cores", "memory", "GPUs"


def _whole(x: float) -> int:
    return math.floor(round(x, 9))  # rounded first so 15.9999999999 stays 16


def fits(replica: Replica, instance: Instance) -> dict[str, int]:
    """Replicas one instance holds by each resource that limits them: its vCPUs less
    the reserve ÷ the replica's cores (a GPU replica's host cores too; not counted where unknown), its memory less
    the reserve ÷ (the replica's memory + 10%) where both are known, its GPUs ÷ the replica's."""
    counts = {}
    if replica.cpus:
        counts[CORES] = _whole((instance.vcpus - instance.reserve_vcpus) / replica.cpus)
    if replica.memory_mib and instance.memory_gib is not None:
        free_mib = (instance.memory_gib - instance.reserve_gib) * 1024
        counts[MEMORY] = _whole(free_mib / (replica.memory_mib * (1 + MEMORY_MARGIN)))
    if replica.gpus:
        counts[GPUS] = instance.gpus // replica.gpus
    return counts


def per_instance(replica: Replica, instance: Instance) -> int:
    """How many replicas one instance holds (0: too small for one), assuming linear repetition."""
    return min(fits(replica, instance).values(), default=0)


def binding(replica: Replica, instance: Instance) -> str:
    """The resource that sets how many replicas an instance holds ("cores", "memory" or "GPUs"; a tie: the GPUs,
    then memory)."""
    counts = fits(replica, instance)
    return min(reversed(list(counts)), key=lambda name: counts[name], default="")


def shortfall(replica: Replica, instance: Instance) -> str:
    """Why one replica does not fit this instance: each resource short, with what it needs and what is free."""
    counts, short = fits(replica, instance), []
    if counts.get(CORES) == 0:
        short.append(f"host cores (needs {replica.cpus:g}, {instance.vcpus - instance.reserve_vcpus:g} vCPUs free)")
    if counts.get(MEMORY) == 0 and replica.memory_mib and instance.memory_gib is not None:
        needs = replica.memory_mib * (1 + MEMORY_MARGIN) / 1024
        short.append(f"memory (needs {needs:.1f} GiB, {instance.memory_gib - instance.reserve_gib:g} GiB free)")
    if counts.get(GPUS) == 0:
        short.append(f"GPUs (needs {replica.gpus}, has {instance.gpus})")
    return f"{instance.name}: " + ", ".join(short)


def candidates(replica: Replica, instances: Sequence[Instance]) -> list[Instance] | str:
    """The instances that could hold this replica, or why none could."""
    model = replica.cpu_model.lower()
    if replica.gpus:
        gpus = [i for i in instances if i.gpus and i.gpu.lower() == replica.gpu_name.lower()]
        same = [i for i in gpus if not i.cpu or i.cpu.lower() in model]
        if gpus and not same:
            return (f"no {replica.gpu_name} instance in the price file has a "
                    f"{replica.cpu_model or 'CPU of an unrecorded model'} CPU")
        if not same:
            named = sorted({i.gpu for i in instances if i.gpus})
            return (f"no instance in the price file has a {replica.gpu_name or 'GPU of an unrecorded name'} GPU"
                    + (f" (priced GPUs: {', '.join(named)})" if named else " (it prices no GPU instance)"))
        return same
    if replica.cpus is None or replica.cpus <= 0:
        return ("the replica's cores are unknown (a server given by address, with no CPU telemetry): "
                "cannot say how many fit an instance")
    same = [i for i in instances if not i.gpus and (not i.cpu or i.cpu.lower() in model)]
    if not same:
        return f"no CPU-only instance in the price file has a {replica.cpu_model or 'CPU of an unrecorded model'} CPU"
    return same


@dataclass(frozen=True)
class Placement:
    """Replicas on instances of one type: the cheapest that holds them, with the spare instances."""

    instance: Instance
    per_instance: int  # replicas one instance holds
    instances: int  # ceil(replicas / per_instance) + spare
    cost_per_hour: float  # of all `instances`, the spare included
    spare: int = 0  # instances beyond those that serve the target: it is still served with these lost
    binding: str = ""  # the resource that set `per_instance`: "cores", "memory" or "GPUs"
    memory_counted: bool = False  # both the replica's and the instance's memory were known

    @property
    def serving(self) -> int:
        """The instances that serve the target: `instances` less the spare."""
        return self.instances - self.spare

    @property
    def assumed_linear(self) -> bool:
        """More than one replica per instance: throughput assumed to scale with the instance's cores or GPUs."""
        return self.per_instance > 1


def instances_needed(replicas: int, holds: int) -> int:
    return math.ceil(replicas / holds)


def placed_on(replica: Replica, replicas: int, instance: Instance, holds: int, spare: int) -> Placement:
    """`replicas` of `replica` on instances of one type holding `holds` each, plus `spare` instances."""
    count = instances_needed(replicas, holds) + spare
    return Placement(instance, holds, count, count * instance.price_per_hour, spare, binding(replica, instance),
                     MEMORY in fits(replica, instance))


def place(replica: Replica, replicas: int, instances: Sequence[Instance], *, spare: int) -> Placement | str:
    """The cheapest instance type for `replicas` of `replica` with `spare` instances more, or why none can hold one
    (refused, not priced: each instance and the resource it lacks)."""
    found = candidates(replica, instances)
    if isinstance(found, str):
        return found
    holding = [(i, n) for i in found if (n := per_instance(replica, i)) > 0]
    if not holding:
        return (f"no instance for it holds one replica ({replica.describe()}): "
                + "; ".join(shortfall(replica, i) for i in found))
    options = [placed_on(replica, replicas, i, n, spare) for i, n in holding]
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
    headroom: float  # for bursts: each replica's capacity kept free
    prices: PriceBook
    replicas: Mapping[Config, Replica] = field(default_factory=dict)  # what one replica is (`with_replicas` fills it)
    spare: int = SPARE_INSTANCES  # instances beyond those the target needs (N + spare)


def with_replicas(pricing: Pricing | None, results: Sequence[CellResult]) -> Pricing | None:
    """`pricing` with what one replica of each configuration is, from these records, unless it says already."""
    if pricing is None or pricing.replicas:
        return pricing
    return replace(pricing, replicas=replicas_by_config(results))
