"""Command line of the sweep: `python -m loadtest --plan loadtest/plans/quick.toml [...]`.

The last layer of the plan's configuration: flags given here replace the plan file's `[run]`
fields and its servers. `run()` raises; `main()` turns errors into one line and an exit code
(0 all cells measured, 1 an error or failed cells, 130 interrupted).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

from loadtest.sweep import plan as plans
from loadtest.sweep.runner import Interrupted, Sweep, SweepError, resolve_targets

DEFAULT_PLAN = Path("loadtest/plans/quick.toml")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the probe imports TensorFlow: keep the console readable


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m loadtest", description=__doc__.splitlines()[0])
    parser.add_argument("--plan", type=Path, default=DEFAULT_PLAN, help="plan file (TOML)")
    parser.add_argument("--server", action="append", default=[], help="state-file server name (repeatable)")
    parser.add_argument("--target", action="append", default=[],
                        help="explicit gRPC HOST:PORT instead of the state file (repeatable)")
    parser.add_argument("--rest-url", action="append", default=[],
                        help="REST base URL of each --target, in order (metrics, REST load)")
    parser.add_argument("--state-file", type=Path, default=None, help="default: $SERVING_STATE_FILE or .state/")
    parser.add_argument("--results-dir", type=Path, default=Path("results"))
    parser.add_argument("--no-report", dest="report", action="store_false",
                        help="skip the HTML/Markdown report normally built after the sweep")
    for name, kind in (("warmup_s", float), ("measure_s", float), ("processes", int), ("protocol", str),
                       ("check", str), ("samples", str), ("arrival", str), ("request_timeout_s", float)):
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None,
                            help=f"override [run] {name}")
    return parser


def targets_from_args(targets: list[str], rest_urls: list[str]) -> tuple:
    if len(rest_urls) > len(targets):
        raise plans.PlanError("--rest-url given more often than --target")
    rest = rest_urls + [""] * (len(targets) - len(rest_urls))
    return tuple(plans.ExplicitTarget(name=f"target{i}", grpc=t, rest=r) for i, (t, r) in enumerate(zip(targets, rest)))


def run(argv: list[str] | None = None) -> Sweep:
    args = build_parser().parse_args(argv)
    plan = plans.load_plan(args.plan)
    plan = plans.with_overrides(plan, warmup_s=args.warmup_s, measure_s=args.measure_s, processes=args.processes,
                                protocol=args.protocol, check=args.check, samples=args.samples,
                                arrival=args.arrival, request_timeout_s=args.request_timeout_s)
    if args.target:
        plan = replace(plan, targets=targets_from_args(args.target, args.rest_url))
    if args.server:
        plan = replace(plan, server_names=tuple(args.server))
    if not Path(plan.run.samples).exists():
        raise SweepError(f"sample digits {plan.run.samples} not found; run `make export` first")
    targets = resolve_targets(plan, args.state_file)
    sweep = Sweep(plan, targets, args.results_dir, plan_path=str(args.plan))
    try:
        sweep.run()
    finally:
        if args.report:
            build_report_for(sweep)
    return sweep


def build_report_for(sweep: Sweep) -> None:
    """The report of what this sweep recorded, also after failed or interrupted cells."""
    if not sweep.results:
        return
    from loadtest.analysis import report  # matplotlib is only needed once there is something to plot

    try:
        report.main([str(sweep.jsonl_path)])
    except Exception as exc:  # the results are on disk whatever the report does; keep the sweep's exit status
        print(f"loadtest: report not built ({type(exc).__name__}: {exc}); "
              f"run `make report RESULTS={sweep.jsonl_path}`", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    try:
        sweep = run(argv)
    except Interrupted:
        print("loadtest: interrupted; the running cell is recorded as failed, earlier cells are kept",
              file=sys.stderr)
        return 130
    except KeyboardInterrupt:
        print("loadtest: interrupted between cells; every finished cell is kept", file=sys.stderr)
        return 130
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        print(f"loadtest: {exc}", file=sys.stderr)
        return 1
    failed = [r for r in sweep.results if r.status == "failed"]
    print(f"results: {sweep.jsonl_path}")
    if failed:
        print(f"loadtest: {len(failed)} of {len(sweep.results)} cells failed "
              f"(first: {failed[0].failure_reason})", file=sys.stderr)
        return 1
    return 0
