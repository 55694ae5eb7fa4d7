"""The load test's commands: `loadtest` (the sweep), `report`, `size` and `ui` (Locust's web UI), and
the flags every measuring command shares (`capacity` and `tune`, in `loadtest.commands.search_commands`, use them).

`COMMANDS` lists them for the `mnist-bench` root group (`loadtest.commands.main`). Each command parses its
flags and calls the `run()` of the module that does the work, which raises; the commands turn
those errors into `click.ClickException` (exit 1, for what the user must fix in files or servers)
or a usage error (exit 2, a bad flag), which the root command prints as one line. The sweep exits
1 when a cell failed and 130 when interrupted (Ctrl-C), after keeping every finished cell.

The sweep's flags are the last layer of the plan's configuration (`loadtest.measure.plan`): they
replace the plan file's `[run]` fields and its servers.

Not for: the work itself (`loadtest.measure.cell_sweep`, `loadtest.report.page`/`size`, `loadtest.load.ui`).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

import click

from loadtest.evidence.vocab import Arrival, CellStatus, Check, Protocol
from loadtest.load import ui
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import Interrupted, Sweep
from loadtest.measure.servers import parse_serve, server_slots
from loadtest.measure.targets import SweepError, resolve_targets
from loadtest.report.series import AnalysisError
from loadtest.report.sizing.instances import SPARE_INSTANCES
from loadtest.report.sizing.prices import DEFAULT_PRICES

DEFAULT_PLAN = Path("loadtest/plans/quick.toml")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before the probe imports TensorFlow: keep the console readable


# ----------------------------------------------------------------------------- loadtest (the sweep)

RUN_OPTIONS = (("warmup_s", float), ("measure_s", float), ("processes", int), ("request_timeout_s", float),
               ("samples", str), ("model_name", str), ("model_base_path", str), ("signature", str),
               ("input_data", str), ("input_seed", int), ("int_range", str))
CHOICE_OPTIONS = (("protocol", Protocol), ("check", Check), ("arrival", Arrival))
LIST_OPTIONS = ("input_shapes",)
RUN_HELP = {
    "model_name": "the served model's name (any TF Serving model; default mnist)",
    "model_base_path": "servers the tool starts (--serve, tune): the model's directory, <dir>/<model name> "
                       "holding <version>/",
    "signature": "the signature requests name (default serving_default)",
    "input_data": "auto, samples (the MNIST digits), random, zeros, or PATH.npz (one array per input name, rows = "
                  "samples; optional expected:<output> arrays)",
    "input_seed": "seed of random inputs", "int_range": "random integer inputs: LO,HI (HI excluded; default 0,100)",
}


def _given(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...] | None:
    return value or None  # not given: the plan's value stands


def run_overrides(function: Any) -> Any:
    """The `[run]` fields a flag may replace: --warmup-s, --measure-s, ..., --model-name, --input-data,
    --input-shape, --protocol, --check, --arrival."""
    function = click.option("--input-shape", "input_shapes", multiple=True, metavar="NAME:DIMS", callback=_given,
                            help="dims after the batch dimension of an input with -1 in them, e.g. features:4,4 "
                                 "(repeatable; default 1 for each -1)")(function)
    for name, enum in reversed(CHOICE_OPTIONS):
        function = click.option("--" + name, name, type=click.Choice([m.value for m in enum]),
                                help=f"override [run] {name}")(function)
    for name, kind in reversed(RUN_OPTIONS):
        function = click.option("--" + name.replace("_", "-"), name, type=kind,
                                help=RUN_HELP.get(name, f"override [run] {name}"))(function)
    return function


def server_choices(function: Any) -> Any:
    """Which servers: running ones (--server, --target/--rest-url) or configurations to start (--serve)."""
    options = [
        click.option("--server", "servers", multiple=True, help="state-file server name (repeatable)"),
        click.option("--target", "targets", multiple=True,
                     help="explicit gRPC HOST:PORT instead of the state file (repeatable)"),
        click.option("--rest-url", "rest_urls", multiple=True,
                     help="REST base URL of each --target, in order (metrics, REST load)"),
        click.option("--serve", "serve", multiple=True, metavar="DEVICE/PROFILE[+FIELD=VALUE,...]",
                     help="start this configuration, measure it, stop it (repeatable; e.g. cpu/off, cpu/cpu)"),
        click.option("--server-flags", default=None,
                     help="embedded-server flags for --serve servers, e.g. '--backend null --null_delay_ms 5'"),
        click.option("--models-dir", default=None, help="models directory for --serve servers"),
        click.option("--serving-config", default=None, help="serving TOML for --serve servers (its profiles)"),
        click.option("--state-file", type=click.Path(path_type=Path), default=None,
                     help="default: $SERVING_STATE_FILE or .state/servers.json"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


@dataclass(frozen=True)
class ServerChoice:
    """The server flags of a command, as given."""

    servers: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    rest_urls: tuple[str, ...] = ()
    serve: tuple[str, ...] = ()
    server_flags: str | None = None
    models_dir: str | None = None
    serving_config: str | None = None
    state_file: Path | None = None


def server_choice(values: dict[str, Any]) -> ServerChoice:
    """Pop the `server_choices` flags out of a command's keyword arguments."""
    return ServerChoice(**{name: values.pop(name) for name in ServerChoice.__dataclass_fields__})


@click.command("loadtest")
@click.option("--plan", "plan_path", type=click.Path(path_type=Path), default=DEFAULT_PLAN, show_default=True,
              help="plan file (TOML)")
@server_choices
@click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
@click.option("--report/--no-report", default=True, help="build the HTML/Markdown report after the sweep")
@run_overrides
@click.pass_context
def sweep_command(ctx: click.Context, plan_path: Path, results_dir: Path, report: bool, **overrides: Any) -> None:
    """Run a sweep plan against the running servers, --target addresses, or --serve configurations."""
    choice = server_choice(overrides)
    try:
        sweep = run(plan_path, choice, results_dir=results_dir, report=report, overrides=overrides)
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


def run(plan_path: Path, choice: ServerChoice = ServerChoice(), *, results_dir: Path = Path("results"),
        report: bool = True, overrides: dict[str, Any] | None = None) -> Sweep:
    """Layer the plan, resolve its servers, run the sweep (and its report); raises on any error."""
    plan = layered_plan(plan_path, choice, overrides)
    sweep = Sweep(plan, server_slots(plan, choice.state_file), results_dir, plan_path=str(plan_path))
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


def layered_plan(plan_path: Path, choice: ServerChoice, overrides: dict[str, Any] | None,
                 starts_servers: bool = False) -> plans.Plan:
    """The plan file under the environment and the command line; its servers narrowed, given or to start."""
    plan = plans.with_overrides(plans.load_plan(plan_path), **(overrides or {}))
    if choice.serve and (choice.targets or choice.servers):
        raise plans.PlanError("--serve starts its own servers: give it without --target/--server")
    if choice.targets:
        plan = replace(plan, targets=plans.explicit_targets(list(choice.targets), list(choice.rest_urls),
                                                            plan.run.model_name), configs=())
    if choice.servers:
        plan = replace(plan, server_names=tuple(choice.servers), configs=())
    if choice.serve:
        plan = replace(plan, configs=tuple(map(parse_serve, choice.serve)))
    plan = replace(plan, launch=launch_overrides(plan.launch, choice))
    if not (starts_servers or plan.targets or plan.configs):  # the state file's: their model is checked first
        resolve_targets(plan, choice.state_file)
    check_inputs(plan.run)
    return plan


def check_inputs(run: plans.RunSettings) -> None:
    """The inputs' files are there and readable before any server starts (`check_input_files`)."""
    from loadtest.load.inputs import InputError, check_input_files

    try:
        check_input_files(plans.input_kind(run), run.input_data, run.samples)
    except InputError as exc:
        raise SweepError(str(exc)) from None


def launch_overrides(launch: plans.LaunchSettings, choice: ServerChoice) -> plans.LaunchSettings:
    """--server-flags, --models-dir and --serving-config over the plan's [servers.launch]."""
    if choice.server_flags is not None:
        launch = replace(launch, server_flags=tuple(shlex.split(choice.server_flags)))
    if choice.models_dir:
        launch = replace(launch, models_dir=choice.models_dir)
    if choice.serving_config:
        launch = replace(launch, serving_config=choice.serving_config)
    return launch


def build_report_for(sweep: Sweep) -> None:
    """The report of what this sweep recorded, also after failed or interrupted cells."""
    if sweep.results:
        build_report(sweep.jsonl_path, "loadtest")


SPARE_OPTION = click.option(
    "--spare-instances", "spare", type=click.IntRange(min=0), default=SPARE_INSTANCES, show_default=True,
    help="instances beyond those the target needs, so it is still served with that many lost (N + 1 by default)")


def sizing_options(function: Any) -> Any:
    """--target-rps, --prices, --headroom, --spare-instances: the decision then says how many replicas, on which
    instances, at what cost (the report and `capacity` take them; the device bundle the first three)."""
    options = [
        click.option("--target-rps", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="target load in requests/s: the decision adds replicas and cost per million images"),
        click.option("--prices", type=click.Path(path_type=Path), default=DEFAULT_PRICES, show_default=True,
                     help="price file (TOML) for --target-rps"),
        click.option("--headroom", type=click.FloatRange(0, 1, max_open=True), default=0.2, show_default=True,
                     help="share of each replica's capacity kept free, for bursts"),
        SPARE_OPTION,
        click.option("--goal", "goals", multiple=True, callback=_goals,
                     help="a target, RATE:P99_MS:BATCH (repeatable; 5000:10:1 is 5,000 req/s at p99 <= 10 ms, 1 image "
                     "a request): the card answers each; capacity searches each at its objective and batch"),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _goals(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> tuple[Any, ...]:
    from loadtest.judge.goals import parse_goal

    try:
        return tuple(parse_goal(v) for v in values)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def build_report(jsonl_path: Path, command: str, **sizing: Any) -> None:
    """The report of a results file just written (`sizing`: `report.run`'s target_rps, prices, headroom); a
    failure to build it is said, not raised."""
    from loadtest.report import page as report  # matplotlib is only needed once there is something to plot

    try:
        echo_report_paths(*report.run([jsonl_path], **sizing))
    except Exception as exc:  # the results are on disk whatever the report does; keep the command's exit status
        click.echo(f"{command}: report not built ({type(exc).__name__}: {exc}); "
                   f"run `make report RESULTS={jsonl_path}`", err=True)


def echo_report_paths(html_path: Path, md_path: Path, csv_path: Path, json_path: Path) -> None:
    click.echo(f"report: {html_path}\nsummary: {md_path}\nfigures: {csv_path}, {json_path}")


# ----------------------------------------------------------------------------- report


@click.command("report")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--compare", multiple=True, type=click.Path(path_type=Path),
              help="results.jsonl of another run to compare against (repeatable)")
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="output folder (default: beside the first results)")
@click.option("--p99-ms", type=float, default=None,
              help="the objective the answer is given at (default: every objective searched)")
@sizing_options
def report_command(results: tuple[Path, ...], compare: tuple[Path, ...], out: Path | None, p99_ms: float | None,
                   target_rps: float | None, prices: Path, headroom: float, spare: int, goals: tuple[Any, ...]) -> None:
    """Write report.html (the decision, plots, every cell), report.md (the decision, summary) and figures.csv/.json
    (each configuration's figures) from results; print the decision and the figures."""
    from loadtest.report import page as report  # matplotlib is slow to import: only when a report is asked for

    try:
        built = report.read_report(results, compare, p99_ms=p99_ms, target_rps=target_rps, prices=prices,
                                   headroom=headroom, targets=goals or None, spare=spare)
        paths = report.write_report(built, Path(out) if out else Path(results[0]).parent)
    except (AnalysisError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(report.console_text(built))
    echo_report_paths(*paths)


# ----------------------------------------------------------------------------- size


@click.command("size")
@click.argument("results", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--p99-ms", type=float, required=True, help="latency objective: p99 <= this")
@click.option("--target-rps", type=float, default=None, help="target load in requests/s")
@click.option("--target-ips", type=float, default=None, help="target load in images/s")
@click.option("--headroom", type=float, default=0.2, show_default=True,
              help="share of each replica's capacity kept free, for bursts")
@SPARE_OPTION
@click.option("--prices", type=click.Path(path_type=Path), default=DEFAULT_PRICES, help="price file (TOML)")
@click.option("--batch", "batch_size", type=click.IntRange(min=1), default=None,
              help="the clients' request batch size to size at (default: the smallest measured)")
@click.option("--json", "as_json", is_flag=True, help="print the answers as JSON")
def size_command(results: tuple[Path, ...], p99_ms: float, target_rps: float | None, target_ips: float | None,
                 headroom: float, spare: int, prices: Path, batch_size: int | None, as_json: bool) -> None:
    """Replicas and cost per device meeting a p99 objective at a target load, from sweep results."""
    from loadtest.report.sizing import size

    if target_rps is not None and target_ips is not None:
        raise click.UsageError("--target-rps and --target-ips are mutually exclusive")
    try:
        objective = size.objective_from(p99_ms, target_rps, target_ips, headroom, spare)
    except AnalysisError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        _, text = size.run(results, objective, prices, as_json, batch_size=batch_size)
    except AnalysisError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(text)


# ----------------------------------------------------------------------------- ui


@click.command("ui", context_settings={"ignore_unknown_options": True})
@click.option("--server", default=None, help="state-file server name (default: the first)")
@click.option("--host", default="", help="grpc://HOST:PORT instead of the state file")
@click.option("--model-name", default="", help="the served model (default: the state file's, else mnist)")
@click.option("--input-data", default="auto", show_default=True,
              help="auto (MNIST digits for mnist, random for any other model), samples, random, zeros or PATH.npz")
@click.option("--samples", default="models/mnist-samples.npz", show_default=True)
@click.option("--web-port", type=int, default=8089, show_default=True)
@click.argument("extra", nargs=-1, type=click.UNPROCESSED)
def ui_command(server: str | None, host: str, model_name: str, input_data: str, samples: str, web_port: int,
               extra: tuple[str, ...]) -> None:
    """Locust's web UI on the same locustfile, against a running server (extra arguments go to Locust)."""
    try:
        ui.run(ui.ui_target(server, host, model_name, input_data, samples), web_port, list(extra))
    except (ui.UiError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


COMMANDS: list[click.Command] = [sweep_command, report_command, size_command, ui_command]
