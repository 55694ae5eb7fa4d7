"""A capacity run as a shape sweep: every configuration searched once per replica shape, within a budget.

`capacity --shapes 1,2` (or `auto`, or the plan's `[capacity] shapes`) turns each configuration the tool starts
into one server per shape (`loadtest.measure.shape_cores`: k cores, one frontend per core), all searched in one run,
paired as several servers always are (all up, their cells interleaved: only one is loaded at a time, so shapes
that overlap on cores do not slow one another). The load generator is pinned to the cores the shapes plan gives
it. `--shapes-budget-min` (`[capacity] shapes_budget_min`) is the whole sweep's time: each search gets an equal
share (`loadtest.search.capacity_search.Capacities.budget_s`).

Not for: which cores a shape gets (`loadtest.measure.shape_cores`) or pricing the shapes (`loadtest.report`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from loadtest.measure import plan as plans
from loadtest.measure.servers import Slot, ToStart
from loadtest.measure.shape_cores import ShapePlan, machine_cores, parse_shapes, plan_shapes


@dataclass(frozen=True)
class ShapeSweep:
    """The shapes a run measures (and those refused), and the sweep's time budget (None: each search its own)."""

    shapes: ShapePlan
    budget_s: float | None

    def slots(self, slots: Sequence[Slot]) -> list[Slot]:
        """Each configuration once per shape; a running server cannot be given cores (PlanError)."""
        running = [s.name for s in slots if not isinstance(s, ToStart)]
        if running:
            raise plans.PlanError(f"--shapes starts each configuration on its own cores: give configurations "
                                  f"(--serve cpu/off, [servers] configs), not running servers ({', '.join(running)})")
        return [slot.shaped(shape) for slot in slots if isinstance(slot, ToStart) for shape in self.shapes.shapes]

    def lines(self) -> list[str]:
        budget = f"; the sweep's budget {self.budget_s / 60:g} min" if self.budget_s else ""
        first, *rest = self.shapes.lines()
        return [first + budget, *rest]


def shape_sweep(plan: plans.Plan, shapes: str | None, budget_min: float | None,
                cores: Sequence[int] | None = None) -> tuple[plans.Plan, ShapeSweep | None]:
    """The plan for a shape sweep (its load generator pinned, its shapes recorded) and the sweep; the plan as it
    is and None without shapes (the flag's, else the plan's). PlanError where no shape fits or one is malformed."""
    try:
        asked = parse_shapes(shapes) if shapes else plan.capacity.shapes
    except ValueError as exc:
        raise plans.PlanError(str(exc)) from None
    if not asked:
        return plan, None
    planned = plan_shapes(asked, cores if cores is not None else machine_cores(), plan.launch.server_cpus,
                          plan.run.loadgen_cpus)
    if not planned.shapes:
        raise plans.PlanError("no replica shape fits this machine: " + "; ".join(planned.refused))
    budget_min = budget_min if budget_min is not None else plan.capacity.shapes_budget_min
    capacity = replace(plan.capacity, shapes=tuple(s.cores for s in planned.shapes),
                       shapes_budget_min=budget_min or 0.0)
    plan = replace(plan, run=replace(plan.run, loadgen_cpus=planned.loadgen_cpus), capacity=capacity)
    return plan, ShapeSweep(planned, budget_min * 60 if budget_min else None)


__all__ = ["ShapeSweep", "shape_sweep"]
