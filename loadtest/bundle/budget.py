"""Planning a device run to its time budget: which capacity searches fit, which are left out, and why.

A lent machine gives a call ≤ 10 minutes, and the bundle's first run planned up to 64 (`run.py`'s
defaults: four request batches, two configurations per device, up to 4 minutes a search, GPU and
CPU). So `run.py` plans before it starts, from an explicit estimate of each part:

- a search at most (`search_bound_s`): a capacity search checks its deadline (`--max-minutes`) and its
  step limit (`--max-steps`) before each cell, so it ends within its minutes plus the one cell it may
  have started just before the deadline, or within its steps (and the closed-loop probe before them),
  whichever is less; a cell at most is Locust's start, the warm-up and `--max-rate-s` of measuring;
- a configuration's server start (and stop), paid once for all the batches searched on it;
- the tool ceiling (`Costs.twin_cell_s`): each configuration's twin started after the searches, one check cell per
  search, and `TOOL_CEILING_SHARE` of the searches' time for a twin's own search where its check fails;
- a reserve for what runs after the searches whatever they are (report, profile, tuning), and a
  margin; `run.py` plans once it has installed and probed, with the time then left.

Paired (`plan_paired`, the run's default): every configuration kept is up at once and searched at every
request batch kept, their cells interleaved, with the comparison's reference cells around them
(`reference_bound_s`), so that the GPU/CPU ratio and each batching gain come from the same minutes. At
the first batch the configurations are kept in the order asked (GPU first; batching `off`, then the
device's profile) while each, with its server start, fits; each later batch is kept when all of them
fit there again, else left out whole (a comparison with a configuration missing at one batch would not
be the same comparison).

One after the other (`plan_to_budget`, `--sequential`): searches are taken in priority order
(`candidates`): per device, GPU first; per request batch, in the order asked; per configuration,
batching `off` then the device's profile, so that a short budget still compares the two
configurations at the first batch rather than searching one at every batch. Each is kept while it
fits what is left; one that does not is left out with the reason, and the next are still tried (a
search on a configuration already started costs no start).

A shape sweep (`plan_shapes`, `run.py --shapes`): the CPU configurations searched once per replica shape (k
cores each), smallest shape first. A shape costs its configurations' server starts, their searches at every
request batch and, paired, the reference cells at each batch (`shape_bound_s`): the same at every k, the searches
being bounded by time and steps, not by rate, and no shape starting slower than the smoke test's server on all the
server's cores. Each shape is kept while it fits what is left; those that do not are named with the reason.

Pure functions and frozen records, standard library only: `run.py` imports this module before it has
installed anything. Not for: running the searches (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

CELL_OVERHEAD_S = 6.0  # Locust's start, drain and the metrics scrapes around one cell (H100 run: ~5.5 s)
# A paired comparison's reference cell, as `loadtest.search.comparison` measures it (not imported: this module is
# standard library only; a test checks they agree): its warm-up and measured seconds, and every how many rounds.
REFERENCE_CELL_S = 0.3 + 1.0
REFERENCE_EVERY = 3
# The tool ceiling (`loadtest.search.tool_ceiling_run`): after its searches a capacity run starts each configuration's
# null-backend twin (one more server start), checks each answer with one cell, and searches the twin's own capacity
# within this share of the searches' time (`loadtest.search.run_budget.TOOL_CEILING_SHARE`: a test checks they agree).
TOOL_CEILING_SHARE = 0.15


@dataclass(frozen=True)
class Search:
    """One capacity search: a configuration (device and batching profile) at one request batch."""

    device: str
    profile: str
    batch: int

    @property
    def server(self) -> str:
        """The server's name as results record it (`gpu-off`)."""
        return f"{self.device}-{self.profile}"


@dataclass(frozen=True)
class Costs:
    """The estimate each part of a run is planned with, in seconds."""

    search_s: float  # one search at most (`search_bound_s`)
    start_s: float  # one configuration's server start and stop, with its process's start
    reserve_s: float  # after the searches (report, profile, tuning): spent whatever is searched
    margin: float = 0.1  # share of the budget left unplanned
    twin_cell_s: float = 0.0  # a tool-ceiling twin's check cell (0: no tool ceiling measured)

    @property
    def per_start_s(self) -> float:
        """A configuration's server start, and its twin's where the tool ceiling is measured."""
        return self.start_s * (2 if self.twin_cell_s else 1)

    @property
    def per_search_s(self) -> float:
        """A search at most, with its twin's check cell and its share of the twin's own search."""
        return self.search_s + (self.twin_cell_s + TOOL_CEILING_SHARE * self.search_s if self.twin_cell_s else 0.0)


@dataclass(frozen=True)
class LeftOut:
    search: Search
    reason: str


@dataclass(frozen=True)
class Plan:
    budget_s: float
    costs: Costs
    kept: tuple[Search, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    planned_s: float = 0.0  # searches and starts kept, reserve and margin excluded

    paired: bool = False  # every configuration kept up at once, searched at every batch kept (`plan_paired`)

    def batches(self) -> list[int]:
        """The request batches kept, in the order asked."""
        return list(dict.fromkeys(s.batch for s in self.kept))

    def configurations(self) -> list[tuple[str, str, list[int]]]:
        """(device, profile, batches) to run, in the order asked: one server start each."""
        grouped: dict[tuple[str, str], list[int]] = {}
        for search in sorted(self.kept, key=lambda s: (self._device_rank(s), s.profile != "off")):
            grouped.setdefault((search.device, search.profile), []).append(search.batch)
        return [(device, profile, batches) for (device, profile), batches in grouped.items()]

    def _device_rank(self, search: Search) -> int:
        devices = list(dict.fromkeys(s.device for s in (*self.kept, *(o.search for o in self.left_out))))
        return devices.index(search.device)

    def describe(self) -> list[str]:
        """What the plan keeps and leaves out, one line each."""
        c = self.costs
        twin = (f"; the tool ceiling: a twin's start {c.start_s:.0f} s, its check {c.twin_cell_s:.0f} s a search and "
                f"{TOOL_CEILING_SHARE:.0%} of the searches' time" if c.twin_cell_s else "")
        lines = [f"budget {self.budget_s:.0f} s: reserve {c.reserve_s:.0f} s (report, profile, tuning), "
                 f"margin {c.margin:.0%}; a search at most {c.search_s:.0f} s, a server start {c.start_s:.0f} s{twin}; "
                 f"{len(self.kept)} search(es) kept, {self.planned_s:.0f} s planned"
                 f"{', paired (all up at once, their cells interleaved)' if self.paired else ''}"]
        lines += [f"  {device}-{profile}: request batch {', '.join(map(str, batches))}"
                  for device, profile, batches in self.configurations()]
        lines += [f"  left out: {o.search.server} batch {o.search.batch}: {o.reason}" for o in self.left_out]
        return lines

    def to_dict(self) -> dict:
        return {"budget_s": self.budget_s, "costs": asdict(self.costs), "planned_s": round(self.planned_s, 1),
                "paired": self.paired,
                "kept": [asdict(s) for s in self.kept],
                "left_out": [{**asdict(o.search), "reason": o.reason} for o in self.left_out]}


def search_bound_s(max_minutes: float, max_steps: int, warmup_s: float, max_rate_s: float,
                   cell_overhead_s: float = CELL_OVERHEAD_S) -> float:
    """The longest one capacity search can take: its deadline plus one cell, or its probe and steps."""
    cell_s = cell_overhead_s + warmup_s + max_rate_s
    return min(max_minutes * 60 + cell_s, (max_steps + 1) * cell_s)


def reference_bound_s(search_s: float, shortest_cell_s: float, max_steps: int,
                      cell_overhead_s: float = CELL_OVERHEAD_S) -> float:
    """The most one paired comparison's reference cells take: one at its start and end, and one every
    `REFERENCE_EVERY` rounds, a round being one cell of each search; a search has at most its probe and
    `max_steps` cells, and no more than its time bound holds of its shortest cells."""
    rounds = min(max_steps + 1, math.ceil(search_s / shortest_cell_s))
    return (2 + rounds // REFERENCE_EVERY) * (cell_overhead_s + REFERENCE_CELL_S)


def candidates(devices: list[str], profiles: dict[str, list[str]], batches: list[int]) -> list[Search]:
    """Every search asked for, in priority order: device, then request batch, then configuration."""
    return [Search(device, profile, batch) for device in devices for batch in batches
            for profile in profiles[device]]


def plan_to_budget(wanted: list[Search], costs: Costs, budget_s: float) -> Plan:
    """Keep each search, in order, while it (with its server's start, the first time) fits what is left."""
    available = budget_s * (1 - costs.margin) - costs.reserve_s
    kept: list[Search] = []
    left_out: list[LeftOut] = []
    spent = 0.0
    for search in wanted:
        started = any(k.server == search.server for k in kept)
        cost = costs.per_search_s + (0.0 if started else costs.per_start_s)
        if spent + cost <= available:
            kept.append(search)
            spent += cost
        else:
            left = max(available - spent, 0.0)
            left_out.append(LeftOut(search, f"needs {cost:.0f} s{'' if started else ' with its server start'}, "
                                            f"{left:.0f} s of the budget left"))
    return Plan(budget_s, costs, tuple(kept), tuple(left_out), spent)


def plan_paired(configurations: list[tuple[str, str]], batches: list[int], costs: Costs, budget_s: float,
                reference_s: float) -> Plan:
    """Configurations (device, profile) kept at the first batch while each, with its start, fits (a second one
    adds the comparison's reference cells, `reference_s`); each later batch kept when all of them fit again."""
    available = budget_s * (1 - costs.margin) - costs.reserve_s
    kept: list[tuple[str, str]] = []
    left_out: list[LeftOut] = []
    spent = 0.0
    for device, profile in configurations:
        cost = costs.per_start_s + costs.per_search_s + (reference_s if len(kept) == 1 else 0.0)
        if spent + cost <= available:
            kept.append((device, profile))
            spent += cost
        else:
            reason = f"needs {cost:.0f} s with its server start, {max(available - spent, 0.0):.0f} s of the budget left"
            left_out += [LeftOut(Search(device, profile, b), reason) for b in batches]
    kept_batches = batches[:1] if kept else []
    for batch in batches[1:]:
        cost = len(kept) * costs.per_search_s + (reference_s if len(kept) > 1 else 0.0)
        if kept and spent + cost <= available:
            kept_batches.append(batch)
            spent += cost
        else:
            reason = (f"all {len(kept)} configurations at this batch need {cost:.0f} s, "
                      f"{max(available - spent, 0.0):.0f} s of the budget left")
            left_out += [LeftOut(Search(d, p, batch), reason) for d, p in kept]
    searches = tuple(Search(d, p, b) for b in kept_batches for d, p in kept)
    return Plan(budget_s, costs, searches, tuple(left_out), spent, paired=len(kept) > 1)


def batches_that_fit(count: int, costs: Costs, left_s: float) -> int:
    """How many of a configuration's `count` planned searches still fit `left_s` (checked at run time)."""
    if left_s < costs.per_start_s + costs.per_search_s:
        return 0
    return min(count, int((left_s - costs.per_start_s) // costs.per_search_s))


@dataclass(frozen=True)
class ShapeLeftOut:
    cores: int
    reason: str


@dataclass(frozen=True)
class ShapesPlan:
    """A shape sweep's plan: the shapes (cores per replica) kept in the budget, those left out and why."""

    budget_s: float
    costs: Costs
    shape_s: float  # one shape at most (`shape_bound_s`)
    searches_per_shape: int  # its configurations times its request batches
    kept: tuple[int, ...] = ()
    left_out: tuple[ShapeLeftOut, ...] = ()
    planned_s: float = 0.0  # the kept shapes' starts, searches and reference cells

    def sweep_minutes(self, max_minutes: float) -> float:
        """`capacity --shapes-budget-min`: an equal share of it is each search's `max_minutes`, what it was planned
        with."""
        return len(self.kept) * self.searches_per_shape * max_minutes

    def describe(self) -> list[str]:
        """What the plan keeps and leaves out, one line each."""
        c = self.costs
        kept = ", ".join(map(str, self.kept)) or "none"
        lines = [f"budget {self.budget_s:.0f} s: reserve {c.reserve_s:.0f} s (report), margin {c.margin:.0%}; "
                 f"a search at most {c.search_s:.0f} s, a server start {c.start_s:.0f} s; a replica shape at most "
                 f"{self.shape_s:.0f} s ({self.searches_per_shape} search(es) and their starts); "
                 f"shapes kept (cores per replica): {kept}, {self.planned_s:.0f} s planned"]
        return lines + [f"  left out: {o.cores} cores a replica: {o.reason}" for o in self.left_out]

    def to_dict(self) -> dict:
        return {"budget_s": self.budget_s, "costs": asdict(self.costs), "shape_s": round(self.shape_s, 1),
                "searches_per_shape": self.searches_per_shape, "planned_s": round(self.planned_s, 1),
                "kept_shapes": list(self.kept), "left_out_shapes": [asdict(o) for o in self.left_out]}


def shape_bound_s(configurations: int, batches: int, costs: Costs, reference_s: float) -> float:
    """One replica shape at most: each configuration's server start, its searches at every request batch, and
    `reference_s` at each batch (a paired comparison's reference cells; 0 for one configuration or searched one
    after the other)."""
    return configurations * (costs.per_start_s + batches * costs.per_search_s) + batches * reference_s


def plan_shapes(shapes: list[int], configurations: int, batches: int, costs: Costs, budget_s: float,
                reference_s: float) -> ShapesPlan:
    """Each shape, smallest first, kept while it fits what is left; one that does not is left out with the reason."""
    available = budget_s * (1 - costs.margin) - costs.reserve_s
    shape_s = shape_bound_s(configurations, batches, costs, reference_s)
    kept: list[int] = []
    left_out: list[ShapeLeftOut] = []
    for cores in sorted(shapes):
        spent = len(kept) * shape_s
        if spent + shape_s <= available:
            kept.append(cores)
        else:
            left_out.append(ShapeLeftOut(cores, f"needs {shape_s:.0f} s, {max(available - spent, 0.0):.0f} s of "
                                                f"the budget left"))
    return ShapesPlan(budget_s, costs, shape_s, configurations * batches, tuple(kept), tuple(left_out),
                      len(kept) * shape_s)
