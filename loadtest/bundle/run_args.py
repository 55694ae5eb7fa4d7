"""The bundle's `run.py` command line: what one call on the lent GPU machine measures, in what budget, and
where it writes (at most 8 files under `--out`, never over an earlier run's).

Also what follows from it: the plan's estimates (`costs`, `reference_s`) and the cores (`core_split`).
`--shapes` makes the call a shape sweep of its own (`loadtest.bundle.shape_sweep_call`): the CPU only, at request
batch 1 unless `--batches` says otherwise, no profile and no tuning.
Not for: running it (`loadtest.bundle.device_run`) or planning the budget (`loadtest.bundle.budget`).
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from loadtest.bundle import budget

# the report's default (`loadtest.report.sizing.instances.SPARE_INSTANCES`), kept here so that reading the arguments
# imports nothing the bundle has not installed yet; tests/loadtest/bundle/test_run_args.py holds them equal
SPARE_INSTANCES = 1

DEVICES = ("gpu", "cpu")
EXAMPLE_PRICES = "loadtest/prices.example.toml"  # in the bundle's project/
REPORT_S = 30.0  # estimate: the report after the searches
# Every server's flags: model.keras on JAX on a CPU (`mnist-bench bench runtime-calls`), on PyTorch's CUDA
# graphs on a GPU.
BACKENDS = {"cpu": "jax", "gpu": "torch"}
SERVER_FLAGS = f"--server-flags=--backend {BACKENDS['cpu']} --gpu_backend {BACKENDS['gpu']}"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="CPU vs GPU capacity from the device bundle, offline, in a budget")
    parser.add_argument("--out", type=Path, required=True, help="at most 8 files, written as the run goes")
    parser.add_argument("--work", type=Path, default=None, help="the subprocesses' files (default: work/<time>/)")
    parser.add_argument("--budget-min", type=float, default=9.0, help="the whole run, planned before it starts")
    parser.add_argument("--devices", default=None,
                        help="comma-separated: gpu, cpu (in priority order; default gpu,cpu)")
    parser.add_argument("--batches", default=None,
                        help="request batch sizes, in priority order (default 1,32; a shape sweep's 1)")
    parser.add_argument("--p99-ms", dest="p99_objective_ms", type=float, default=10.0,
                        help="the online target's objective (request batch 1)")
    parser.add_argument("--batch-p99-ms", dest="batch_p99_objective_ms", type=float, default=50.0,
                        help="the batch targets' objective (each request batch above 1)")
    parser.add_argument("--measure-s", type=float, default=1.5)
    parser.add_argument("--max-steps", type=int, default=8, help="cells per search at most")
    parser.add_argument("--max-minutes", type=float, default=0.35,
                        help="per search (the search answers its best pass when stopped by time)")
    parser.add_argument("--max-rate-s", type=float, default=6.0, help="measured seconds at one rate at most")
    parser.add_argument("--confidence", type=float, default=0.99, help="every verdict's (capacity --confidence)")
    parser.add_argument("--start-s", type=float, default=15.0,
                        help="estimate: one server's start and stop (the smoke test's measured start, if longer)")
    parser.add_argument("--profile-s", type=float, default=0.0, help="py-spy's sampling (0: no profile)")
    parser.add_argument("--smoke-s", type=float, default=60.0,
                        help="the smoke test's time, its server's start included (it stops the run when it fails)")
    parser.add_argument("--target-rps", type=float, default=1000.0,
                        help="every target's rate (req/s): the card sizes and prices each")
    parser.add_argument("--prices", type=Path, default=None,
                        help=f"price file for --target-rps (default: the shipped {EXAMPLE_PRICES})")
    parser.add_argument("--spare-instances", type=int, default=SPARE_INSTANCES,
                        help="instances beyond those a target needs, so it is still served with these lost (N + 1 "
                        "by default; 0 allowed): passed to capacity and report")
    parser.add_argument("--loadgen-cores", type=int, default=0,
                        help="cores for Locust (default: sized by the smoke test's CPU costs; a quarter without them)")
    parser.add_argument("--no-tool-ceiling", dest="tool_ceiling", action="store_false",
                        help="no tool ceiling (each configuration's null-backend twin after the searches): its time "
                        "goes to the searches (with it, the default 9 minutes keep request batch 1 only)")
    parser.add_argument("--sequential", action="store_true",
                        help="search each configuration alone, one after the other, instead of all up at once with "
                        "their cells interleaved (paired: the GPU/CPU ratio and batching gains from the same minutes)")
    parser.add_argument("--tune-minutes", type=float, default=0.0,
                        help="also tune the batching on each device for this long, at the first batch (0: no tuning)")
    parser.add_argument("--shapes", default=None, metavar="auto|1,2,4",
                        help="this call runs only the CPU configurations' replica-shape sweep (capacity --shapes): "
                        "each searched on k cores, one gRPC frontend a core; the plan keeps the shapes that fit")
    args = parser.parse_args(argv)
    problem = shape_sweep_problem(args)
    if problem:
        parser.error(problem)
    if args.devices is None:
        args.devices = "cpu" if args.shapes else "gpu,cpu"
    if args.batches is None:
        args.batches = "1" if args.shapes else "1,32"
    unknown = set(args.devices.split(",")) - set(DEVICES)
    if unknown:
        parser.error(f"--devices: unknown {sorted(unknown)}; choose from {', '.join(DEVICES)}")
    if args.spare_instances < 0:
        parser.error(f"--spare-instances must be a whole number >= 0, got {args.spare_instances}")
    if args.prices is not None and not args.prices.is_file():
        parser.error(f"--prices {args.prices}: no such file")
    if (args.out / "device-run.json").exists():
        parser.error(f"--out {args.out} already holds a run (device-run.json): nothing overwrites one")
    return args


def shape_sweep_problem(args: argparse.Namespace) -> str:
    """Why `--shapes` cannot go with the other flags given; "" when it can (or was not given). Only its form is
    checked here (`loadtest.measure.shape_cores.parse_shapes` reads it once the wheels are installed)."""
    if args.shapes is None:
        return ""
    if not re.fullmatch(r"auto|[1-9]\d*(,[1-9]\d*)*", args.shapes.strip().lower().replace(" ", "")):
        return f"--shapes {args.shapes!r}: expected auto or CORES,CORES,... (e.g. 1,2,4)"
    if args.devices not in (None, "cpu"):
        return f"--shapes sweeps the CPU configurations only: --devices {args.devices} is not for this call"
    if args.profile_s > 0 or args.tune_minutes > 0:
        return "--shapes: a shape sweep is a call of its own: no profile (--profile-s), no tuning (--tune-minutes)"
    return ""


WARMUP_S = 0.5  # the plan's `[run] warmup_s` (`device_run.write_plan`)


def search_s(args: argparse.Namespace) -> float:
    """One search at most (`budget.search_bound_s`)."""
    return budget.search_bound_s(args.max_minutes, args.max_steps, WARMUP_S, args.max_rate_s)


def costs(args: argparse.Namespace, devices: int) -> budget.Costs:
    """The plan's estimates: a search at most, a server start, and what is reserved after the searches."""
    return budget.Costs(search_s(args), args.start_s, reserve_s=after_searches_s(args, devices),
                        twin_cell_s=twin_cell_s(args))


def sweep_costs(args: argparse.Namespace) -> budget.Costs:
    """A shape sweep's estimates: a search at most, a server start, and the report after them."""
    # no twin costs: the sweep's capacity run keeps its tool ceiling's share within --shapes-budget-min (`run_budget`)
    return budget.Costs(search_s(args), args.start_s, reserve_s=REPORT_S)


def twin_cell_s(args: argparse.Namespace) -> float:
    """A tool-ceiling twin's check cell, one open-loop cell of the plan's windows (`loadtest.search.tool_ceiling_run`);
    0 with `--no-tool-ceiling`."""
    return budget.CELL_OVERHEAD_S + WARMUP_S + args.measure_s if args.tool_ceiling else 0.0


def reference_s(args: argparse.Namespace) -> float:
    """A paired comparison's reference cells at most, per request batch (`budget.reference_bound_s`)."""
    shortest_cell_s = budget.CELL_OVERHEAD_S + WARMUP_S + args.measure_s
    return budget.reference_bound_s(search_s(args), shortest_cell_s, args.max_steps)


def after_searches_s(args: argparse.Namespace, devices: int) -> float:
    """The report, the profile (a start, its sampling, the load's start and drain) and any tuning."""
    profile_s = args.start_s + args.profile_s + 20.0 if args.profile_s > 0 else 0.0
    tune_s = (args.tune_minutes * 60 + args.start_s) * devices if args.tune_minutes > 0 else 0.0
    return REPORT_S + profile_s + tune_s


def core_split(loadgen_cores: int) -> tuple[str, str, int]:
    """(server cores, load-generator cores, Locust processes): the last cores go to Locust."""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        return "", "", 1
    count = loadgen_cores or max(1, len(cores) // 4)
    count = min(count, len(cores) - 1)
    server, loadgen = cores[:-count], cores[-count:]
    return ",".join(map(str, server)), ",".join(map(str, loadgen)), count
