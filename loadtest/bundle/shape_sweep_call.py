"""A device run's replica-shape sweep (`run.py --shapes auto|1,2,4`): a call of its own that searches the CPU
configurations once per replica shape, within the call's budget.

The default run compares the devices; this call asks how the CPU's capacity grows with the cores one replica is
given. After the install, the probes and the smoke test of `cpu-cpu` (which sizes Locust's cores, as in the
default run), it:

1. reads which shapes the machine holds (`loadtest.measure.shape_cores.plan_shapes`, from the cores the run's plan file
   pins, as `capacity` reads them): a server of k cores on the server's first cores, the load generator on its own;
2. plans them to what is left of the budget (`loadtest.bundle.budget.plan_shapes`) and prints and records which fit,
   naming those that do not fit it and those larger than the machine; neither is passed to `capacity`;
3. runs one `mnist-bench capacity --shapes K,... --shapes-budget-min M` over the CPU configurations the default run
   measures (batching `off` and the CPU's profile), at the bundle's targets and prices, M giving each search an
   equal share of exactly the `--max-minutes` it was planned with; its results are copied into `--out` as it goes;
4. writes the report, as the default run does. No profile and no tuning.

Standard library only where `run.py` imports it (before its wheels are installed); `loadtest.measure.shape_cores` is
imported once the sweep plans (it needs psutil: the image's, else the bundle's). Not for: the default run
(`loadtest.bundle.device_run`) or which cores a shape gets (`loadtest.measure.shape_cores`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tomllib
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from loadtest.bundle import budget, run_outputs
from loadtest.bundle.run_args import reference_s, sweep_costs

if TYPE_CHECKING:
    from loadtest.measure.shape_cores import ShapePlan

CONFIGURATIONS = ("cpu/off", "cpu/cpu")  # the CPU's configurations in the default run: batching off, its profile
NAME = "shapes"  # the capacity run's name: its results folder and its exit code's key


class SweepRun(Protocol):
    """What the sweep uses of a device run (`device_run.DeviceRun`)."""

    args: argparse.Namespace
    work: Path
    env: dict[str, str]
    record: run_outputs.RunRecord
    copier: run_outputs.ResultsCopier

    def left_s(self) -> float: ...

    def say(self, line: str) -> None: ...

    def command(self, name: str, command: list[str], timeout_s: float, echoed: bool = True) -> int: ...

    def capacity_command(self, plan_file: Path, name: str, serves: list[str], batches: list[int]) -> list[str]: ...

    def report(self) -> None: ...


def batches_of(args: argparse.Namespace) -> list[int]:
    return [int(b) for b in args.batches.split(",") if b]


def pinned_cpus(plan_file: Path) -> tuple[str, str]:
    """(the server's cores, the load generator's) as the run's plan file pins them; "" where it pins none."""
    plan = tomllib.loads(plan_file.read_text())
    return plan.get("servers", {}).get("launch", {}).get("server_cpus", ""), plan["run"].get("loadgen_cpus", "")


def machine_shapes(asked: str, cores: Sequence[int], server_cpus: str, loadgen_cpus: str) -> ShapePlan:
    """The shapes asked for that `cores` hold (`loadtest.measure.shape_cores.plan_shapes`), and those refused."""
    from loadtest.measure.shape_cores import parse_shapes, plan_shapes

    return plan_shapes(parse_shapes(asked), cores, server_cpus, loadgen_cpus)


def plan(args: argparse.Namespace, machine: ShapePlan, budget_s: float) -> budget.ShapesPlan:
    """The machine's shapes planned to `budget_s`: both configurations at every request batch, paired (their
    reference cells counted) unless `--sequential`."""
    paired = len(CONFIGURATIONS) > 1 and not args.sequential
    return budget.plan_shapes([s.cores for s in machine.shapes], len(CONFIGURATIONS), len(batches_of(args)),
                              sweep_costs(args), budget_s, reference_s(args) if paired else 0.0)


def kept_shapes(machine: ShapePlan, planned: budget.ShapesPlan) -> ShapePlan:
    """The machine's plan less the shapes the budget left out (those larger than the machine still named)."""
    return replace(machine, shapes=tuple(s for s in machine.shapes if s.cores in planned.kept))


def plan_lines(machine: ShapePlan, planned: budget.ShapesPlan) -> list[str]:
    """The plan as printed: the budget's estimates and shapes kept, the cores each gets, what is not measured."""
    kept = kept_shapes(machine, planned)
    cores = kept.lines() if kept.shapes else [f"replica shape not measured: {why}" for why in kept.refused]
    return planned.describe() + [f"  {line}" for line in cores]


def plan_record(machine: ShapePlan, planned: budget.ShapesPlan) -> dict:
    """The plan as `device-run.json` keeps it: the budget's, each kept shape's cores, what was refused."""
    kept = kept_shapes(machine, planned)
    return {**planned.to_dict(), "shapes": [asdict(s) for s in kept.shapes], "loadgen_cpus": machine.loadgen_cpus,
            "refused_shapes": list(machine.refused)}


def capacity_flags(args: argparse.Namespace, planned: budget.ShapesPlan) -> list[str]:
    """What turns a capacity run into the sweep: the shapes kept only, and the sweep's own minutes."""
    flags = ["--shapes", ",".join(map(str, planned.kept)),
             "--shapes-budget-min", f"{planned.sweep_minutes(args.max_minutes):g}"]
    return flags + (["--sequential"] if args.sequential else [])


def use_bundle_packages(env: dict[str, str]) -> None:
    """The subprocesses' path (the bundle's installed wheels, its project, its protos) after this Python's own, so
    that the plan can import `loadtest.measure.shape_cores`."""
    sys.path.extend(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path)


def plan_and_record(run: SweepRun, plan_file: Path, cores: Sequence[int] | None = None) -> budget.ShapesPlan:
    """Plan the sweep to what is left of the call (on `cores`, by default this process's), print and record it."""
    use_bundle_packages(run.env)
    machine = machine_shapes(run.args.shapes, cores or sorted(os.sched_getaffinity(0)), *pinned_cpus(plan_file))
    planned = plan(run.args, machine, run.left_s())
    for line in plan_lines(machine, planned):
        run.say(f"run.py: plan: {line}")
    run.record["plan"] = plan_record(machine, planned)
    run.record["left_out"] = [*run.record["plan"]["left_out_shapes"], *({"reason": r} for r in machine.refused)]
    run.record.write()
    return planned


def sweep(run: SweepRun, plan_file: Path, cores: Sequence[int] | None = None) -> int:
    """The sweep's plan, its one capacity run (stopped at its planned time) and the report; the call's exit code."""
    run.record["profile"] = {"ok": False, "why": "not profiled: a shape sweep is a call of its own"}
    planned = plan_and_record(run, plan_file, cores)
    if not planned.kept:
        run.say("run.py: no replica shape fits the budget: nothing searched")
        return 1
    reserve = planned.costs.reserve_s + planned.costs.margin * run.left_s()
    command = [*run.capacity_command(plan_file, NAME, list(CONFIGURATIONS), batches_of(run.args)),
               *capacity_flags(run.args, planned)]
    run.copier.start()
    try:
        run.command(NAME, command, min(planned.planned_s, run.left_s() - reserve))
    finally:
        run.copier.stop()
    run.record["results_lines"] = run.copier.lines
    run.report()
    run.record.update(run_outputs.figures_record(run.work / "report" / "figures.json"))
    for line in run_outputs.answer_lines(run.record.get("by_configuration", {})):  # the capacity run said the card
        run.say(f"run.py: {line}")
    codes = run.record["exit_codes"]
    return 0 if codes and all(c == 0 for c in codes.values()) else 1
