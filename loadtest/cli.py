"""The load test's commands: `loadtest` (the sweep), `capacity`, `report`, `size` and `ui` (Locust's web UI).

`COMMANDS` lists them for the `mnist-bench` root group (`loadtest.main`). Each command parses its
flags and calls the `run()` of the module that does the work, which raises; the commands turn
those errors into `click.ClickException` (exit 1, for what the user must fix in files or servers)
or a usage error (exit 2, a bad flag), which the root command prints as one line. The sweep exits
1 when a cell failed and 130 when interrupted (Ctrl-C), after keeping every finished cell.

The sweep's flags are the last layer of the plan's configuration (`loadtest.sweep.plan`): they
replace the plan file's `[run]` fields and its servers.

Not for: the work itself (`loadtest.sweep.runner`, `loadtest.analysis.report`/`size`, `loadtest.load.ui`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

import click

from loadtest.analysis.prices import DEFAULT_PRICES
from loadtest.analysis.series import AnalysisError
from loadtest.load import ui
from loadtest.sweep import plan as plans
from loadtest.sweep.runner import Interrupted, Sweep, SweepError
from loadtest.sweep.targets import resolve_targets
from loadtest.vocab import Arrival, CellStatus, Check, Protocol
from serving.endpoint import ServedEndpoint

DEFAULT_PLAN = Path("loadtest/plans/quick.toml")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the probe imports TensorFlow: keep the console readable


# ----------------------------------------------------------------------------- loadtest (the sweep)

RUN_OPTIONS = (("warmup_s", float), ("measure_s", float), ("processes", int), ("request_timeout_s", float),
               ("samples", str))
CHOICE_OPTIONS = (("protocol", Protocol), ("check", Check), ("arrival", Arrival))


def run_overrides(function: Any) -> Any:
    """The `[run]` fields a flag may replace: --warmup-s, --measure-s, ..., --protocol, --check, --arrival."""
    for name, enum in reversed(CHOICE_OPTIONS):
        function = click.option("--" + name, name, type=click.Choice([m.value for m in enum]),
                                help=f"override [run] {name}")(function)
    for name, kind in reversed(RUN_OPTIONS):
        function = click.option("--" + name.replace("_", "-"), name, type=kind, help=f"override [run] {name}")(function)
    return function


@click.command("loadtest")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), default=DEFAULT_PLAN, show_default=True,
              help="plan file (TOML)")
@click.option("--server", "servers", multiple=True, help="state-file server name (repeatable)")
@click.option("--target", "targets", multiple=True,
              help="explicit gRPC HOST:PORT instead of the state file (repeatable)")
@click.option("--rest-url", "rest_urls", multiple=True,
              help="REST base URL of each --target, in order (metrics, REST load)")
@click.option("--state-file", type=click.Path(path_type=Path), default=None,
              help="default: $SERVING_STATE_FILE or .state/servers.json")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--report/--no-report", default=True, help="build the HTML/Markdown report after the sweep")
@run_overrides
@click.pass_context
def sweep_command(ctx: click.Context, plan_path: Path, servers: tuple[str, ...], targets: tuple[str, ...],
                  rest_urls: tuple[str, ...], state_file: Path | None, results_dir: Path, report: bool,
                  **overrides: Any) -> None:
    """Run a sweep plan against the running servers (or --target addresses)."""
    try:
        sweep = run(plan_path, servers=servers, targets=targets, rest_urls=rest_urls, state_file=state_file,
                    results_dir=results_dir, report=report, overrides=overrides)
    except Interrupted:
        interrupted(ctx, "loadtest")
    except KeyboardInterrupt:
        click.echo("loadtest: interrupted between cells; every finished cell is kept", err=True)
        ctx.exit(130)
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"results: {sweep.jsonl_path}")
    failed = [r for r in sweep.results if r.status == CellStatus.FAILED]
    if failed:
        raise click.ClickException(
            f"{len(failed)} of {len(sweep.results)} cells failed (first: {failed[0].failure_reason})")


def run(plan_path: Path, *, servers: Sequence[str] = (), targets: Sequence[str] = (), rest_urls: Sequence[str] = (),
        state_file: Path | None = None, results_dir: Path = Path("results"), report: bool = True,
        overrides: dict[str, Any] | None = None) -> Sweep:
    """Layer the plan, resolve its servers, run the sweep (and its report); raises on any error."""
    plan = layered_plan(plan_path, servers, targets, rest_urls, overrides)
    sweep = Sweep(plan, resolve_targets(plan, state_file), results_dir, plan_path=str(plan_path))
    try:
        sweep.run()
    finally:
        if report:
            build_report_for(sweep)
    return sweep


def interrupted(ctx: click.Context, command: str) -> NoReturn:
    """Ctrl-C during a cell: it is recorded as failed; exit 130 (the shell's status for SIGINT)."""
    click.echo(f"{command}: interrupted; the running cell is recorded as failed, earlier cells are kept", err=True)
    ctx.exit(130)


def layered_plan(plan_path: Path, servers: Sequence[str], targets: Sequence[str], rest_urls: Sequence[str],
                 overrides: dict[str, Any] | None) -> plans.Plan:
    """The plan file under the environment and the command line; its servers narrowed or given."""
    plan = plans.with_overrides(plans.load_plan(plan_path), **(overrides or {}))
    if targets:
        plan = replace(plan, targets=plans.explicit_targets(list(targets), list(rest_urls), plan.run.model_name))
    if servers:
        plan = replace(plan, server_names=tuple(servers))
    if not Path(plan.run.samples).exists():
        raise SweepError(f"sample digits {plan.run.samples} not found; run `make export` first")
    return plan


def build_report_for(sweep: Sweep) -> None:
    """The report of what this sweep recorded, also after failed or interrupted cells."""
    if not sweep.results:
        return
    from loadtest.analysis import report  # matplotlib is only needed once there is something to plot

    try:
        echo_report_paths(*report.run([sweep.jsonl_path]))
    except Exception as exc:  # the results are on disk whatever the report does; keep the sweep's exit status
        click.echo(f"loadtest: report not built ({type(exc).__name__}: {exc}); "
                   f"run `make report RESULTS={sweep.jsonl_path}`", err=True)


def echo_report_paths(html_path: Path, md_path: Path) -> None:
    click.echo(f"report: {html_path}\nsummary: {md_path}")


# ----------------------------------------------------------------------------- report


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--compare", multiple=True, type=click.Path(path_type=Path),
              help="results.jsonl of another run to compare against (repeatable)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output folder (default: beside the first results)")
def report_command(results: tuple[Path, ...], compare: tuple[Path, ...], out: Path | None) -> None:
    """Write report.html (plots, every cell) and report.md (summary) from sweep results."""
    from loadtest.analysis import report  # matplotlib is slow to import: only when a report is asked for

    try:
        paths = report.run(results, compare, out)
    except (AnalysisError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    echo_report_paths(*paths)


# ----------------------------------------------------------------------------- size


@click.command("size")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--p99-ms", type=float, required=True, help="latency objective: p99 <= this")
@click.option("--target-rps", type=float, default=None, help="target load in requests/s")
@click.option("--target-ips", type=float, default=None, help="target load in images/s")
@click.option("--headroom", type=float, default=0.2, show_default=True,
              help="share of each replica's capacity kept free")
@click.option("--prices", type=click.Path(path_type=Path), default=DEFAULT_PRICES, help="price file (TOML)")
@click.option("--json", "as_json", is_flag=True, help="print the answers as JSON")
def size_command(results: tuple[Path, ...], p99_ms: float, target_rps: float | None, target_ips: float | None,
                 headroom: float, prices: Path, as_json: bool) -> None:
    """Replicas and cost per device meeting a p99 objective at a target load, from sweep results."""
    from loadtest.analysis import size

    if target_rps is not None and target_ips is not None:
        raise click.UsageError("--target-rps and --target-ips are mutually exclusive")
    try:
        objective = size.objective_from(p99_ms, target_rps, target_ips, headroom)
    except AnalysisError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        _, text = size.run(results, objective, prices, as_json)
    except AnalysisError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(text)


# ----------------------------------------------------------------------------- capacity


@click.command("capacity")
@click.option("--p99-ms", type=click.FloatRange(min=0, min_open=True), required=True, help="the latency objective")
@click.option("--batch", "batch_size", type=click.IntRange(min=1), default=1, show_default=True,
              help="images per request")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), default=DEFAULT_PLAN, show_default=True,
              help="plan file whose [run] settings every cell uses (its grid is not used)")
@click.option("--server", "servers", multiple=True, help="state-file server name (the one to search)")
@click.option("--target", "targets", multiple=True, help="explicit gRPC HOST:PORT instead of the state file")
@click.option("--rest-url", "rest_urls", multiple=True, help="REST base URL of the --target (metrics, REST load)")
@click.option("--state-file", type=click.Path(path_type=Path), default=None,
              help="default: $SERVING_STATE_FILE or .state/servers.json")
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
              show_default=True, help="stop when (lowest failing - highest passing) / highest passing <= this")
@click.option("--start-rps", type=click.FloatRange(min=0, min_open=True), default=None,
              help="first offered rate (default: half a short closed-loop probe's throughput)")
@click.option("--min-rps", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="below this rate the objective is called unmet")
@click.option("--max-steps", type=click.IntRange(min=2), default=20, show_default=True, help="cells at most")
@click.option("--max-minutes", type=click.FloatRange(min=0, min_open=True), default=15.0, show_default=True)
@click.option("--confirm-factor", type=click.FloatRange(min=1), default=3.0, show_default=True,
              help="the confirmation's window, in measure-s")
@run_overrides
@click.pass_context
def capacity_command(ctx: click.Context, p99_ms: float, batch_size: int, plan_path: Path, servers: tuple[str, ...],
                     targets: tuple[str, ...], rest_urls: tuple[str, ...], state_file: Path | None,
                     results_dir: Path, precision: float, start_rps: float | None, min_rps: float, max_steps: int,
                     max_minutes: float, confirm_factor: float, **overrides: Any) -> None:
    """The highest open-loop rate one server serves at p99 <= --p99-ms: bracket, bisect, confirm."""
    from loadtest.sweep.capacity_search import CapacityRequest, CapacityRun, answer_text

    try:
        plan = layered_plan(plan_path, servers, targets, rest_urls, overrides)
        target = one_target(resolve_targets(plan, state_file))
        request = CapacityRequest(plan, target, p99_ms, batch_size, precision, start_rps, min_rps, max_steps,
                                  max_minutes * 60, confirm_factor)
        search = CapacityRun(request, results_dir, plan_path=str(plan_path))
        answer = search.run()
    except Interrupted:
        interrupted(ctx, "capacity")
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"results: {search.cells.jsonl_path}")
    click.echo(answer_text(answer))
    if not answer.met:
        ctx.exit(1)


def one_target(targets: list[ServedEndpoint]) -> ServedEndpoint:
    if len(targets) != 1:
        raise SweepError(f"a capacity search measures one server; {len(targets)} given or recorded "
                         f"({', '.join(t.name for t in targets)}): pick one with --server NAME or --target")
    return targets[0]


# ----------------------------------------------------------------------------- ui


@click.command("ui", context_settings={"ignore_unknown_options": True})
@click.option("--server", default=None, help="state-file server name (default: the first)")
@click.option("--host", default="", help="grpc://HOST:PORT instead of the state file")
@click.option("--samples", default="models/mnist-samples.npz", show_default=True)
@click.option("--web-port", type=int, default=8089, show_default=True)
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def ui_command(server: str | None, host: str, samples: str, web_port: int, extra: tuple[str, ...]) -> None:
    """Locust's web UI on the same locustfile, against a running server (extra arguments go to Locust)."""
    try:
        ui.run(server=server, host=host, samples=samples, web_port=web_port, extra=list(extra))
    except (ui.UiError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


COMMANDS: list[click.Command] = [sweep_command, capacity_command, report_command, size_command, ui_command]
