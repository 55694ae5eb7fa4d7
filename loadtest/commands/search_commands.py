"""The commands that search rather than sweep: `capacity` (the highest rate under a p99 objective) and
`tune` (the batching configuration with the highest such capacity).

Both take the sweep's flags for the servers (`--serve`, `--target`, ...) and the plan's `[run]`
fields (`loadtest.commands.sweep_commands`), measure into a fresh `results/<UTC time>/`, build its report, and exit 1
when the objective was not met (0 when it was, 130 on Ctrl-C after keeping every finished cell).
`capacity` exits 0 when every search answered a passing rate, confirmed or not (the answer line says
which); on Ctrl-C or SIGTERM it still prints what the searches answered, then exits 130. Its console
ends with, per search, the rate table and one line per objective (`--objectives`).

Not for: the searches themselves (`loadtest.search.capacity`, `loadtest.search.tuning`) or wiring them
to servers (`loadtest.search.capacity_search`, `loadtest.search.tune_run`).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from loadtest.commands.sweep_commands import (
    CHOICE_OPTIONS,
    DEFAULT_PLAN,
    LIST_OPTIONS,
    RUN_OPTIONS,
    build_report,
    interrupted,
    layered_plan,
    run_overrides,
    server_choice,
    server_choices,
    sizing_options,
)
from loadtest.evidence.objective import Objective
from loadtest.evidence.records import CellResult
from loadtest.judge.confidence import DEFAULT_CONFIDENCE
from loadtest.judge.goals import Target, goal_text, objectives_by_batch, parse_goal
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import Interrupted
from loadtest.measure.targets import SweepError
from loadtest.report.series import AnalysisError
from loadtest.search.run_budget import TOOL_CEILING_SHARE
from serving.deploy.process import pinned_cores
from serving.endpoint import Device

if TYPE_CHECKING:
    from loadtest.search.capacity_search import CapacityRequest


def search_options(function: Any) -> Any:
    """The objective, the request batch sizes and the bounds of every capacity search."""
    options = [
        click.option("--p99-ms", "objective", type=click.FloatRange(min=0, min_open=True), default=None,
                     callback=lambda ctx, param, value: None if value is None else Objective(value),
                     help="the latency objective (capacity: not needed with --goal)"),
        click.option("--plan", "plan_path", type=click.Path(path_type=Path), default=DEFAULT_PLAN,
                     show_default=True, help="plan file whose [run] settings every cell uses (its grid is not used)"),
        click.option("--results-dir", type=click.Path(path_type=Path), default=Path("results"), show_default=True),
        click.option("--precision", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.05,
                     show_default=True,
                     help="stop when (lowest failing - highest passing) / highest passing <= this"),
        click.option("--start-rps", type=click.FloatRange(min=0, min_open=True), default=None,
                     help="first offered rate (default: half a short closed-loop probe's throughput)"),
        click.option("--min-rps", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
                     help="below this rate the objective is called unmet"),
        click.option("--max-steps", type=click.IntRange(min=2), default=20, show_default=True,
                     help="cells at most, per search"),
        click.option("--max-minutes", type=click.FloatRange(min=0, min_open=True), default=15.0,
                     show_default=True, help="per search"),
        click.option("--confirm-factor", type=click.FloatRange(min=1), default=3.0, show_default=True,
                     help="the confirmation's window, in measure-s"),
        click.option("--confidence", type=click.FloatRange(0.5, 1, max_open=True), default=DEFAULT_CONFIDENCE,
                     show_default=True, help="every verdict's: a rate passes when p99 <= the objective at this "
                     "confidence (MLPerf's early-stopping rule), fails when p99 > it at this confidence"),
        click.option("--max-rate-s", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
                     help="measured seconds at one rate at most: an inconclusive rate is measured longer up to this"),
        click.option("--objectives", default=None, metavar="MS,MS,...",
                     help="p99 objectives every search's cells are also answered at (default: the plan's [capacity] "
                     "objectives, else 5,10,25,50,100)"),
        click.option("--report/--no-report", default=True, help="build the HTML/Markdown report afterwards"),
    ]
    for option in reversed(options):
        function = option(function)
    return server_choices(run_overrides(function))


def parse_objectives(text: str | None, plan: plans.Plan) -> tuple[float, ...]:
    """`--objectives 5,10,25` as p99s in ms, lowest first; None: the plan's `[capacity] objectives`."""
    if text is None:
        return plan.capacity.objectives_ms()
    try:
        objectives = tuple(sorted({float(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise click.BadParameter(f"{text!r}: expected MS,MS,... (p99s in ms)", param_hint="--objectives") from None
    if not objectives or any(not o > 0 for o in objectives):
        raise click.BadParameter(f"{text!r}: expected positive p99s in ms", param_hint="--objectives")
    return objectives


SEARCH_BOUNDS = ("precision", "start_rps", "min_rps", "max_steps", "confirm_factor", "confidence", "max_rate_s")


def capacity_request(plan: plans.Plan, values: dict[str, Any]) -> CapacityRequest:
    """What to search, built once from the parsed flags (`search_options`) and the layered plan; a usage error
    without an objective (--p99-ms, or a target's)."""
    from loadtest.search.capacity_search import CapacityRequest

    if values["objective"] is None:
        raise click.UsageError("Missing option '--p99-ms' (or a target: --goal RATE:P99_MS:BATCH)")
    return CapacityRequest(plan=plan, objective=values["objective"], max_s=values["max_minutes"] * 60,
                           objectives=parse_objectives(values["objectives"], plan),
                           **{name: values[name] for name in SEARCH_BOUNDS})


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM takes Ctrl-C's path while the block runs (the running cell recorded, the search answered);
    the previous handler is restored after."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def objective_lines(results: Sequence[CellResult], outcomes: Sequence[Any], objectives: tuple[float, ...]) -> str:
    """Per search: its rate table, then one line per objective (`p99 <= 25 ms: 933 req/s (confirmed ...)`), and
    for an objective without an answer whose slow requests kept it out of reach (the host, the server, or the
    client and wire: `loadtest.report.sections.noise_table`)."""
    from loadtest.evidence.tables import plain_table
    from loadtest.judge.objectives import objective_answers, rate_table
    from loadtest.report.sections.noise_table import search_noise_lines

    blocks = []
    for outcome in outcomes:
        cells = [c for c in results if c.search and c.search.id == outcome.search_id]
        rows = rate_table(cells)
        if not rows:
            continue
        title = f"search {outcome.search_id}: {outcome.server}, request batch {outcome.batch_size}"
        own = outcome.objective.p99_ms if outcome.objective else objectives[0]
        answers = objective_answers(cells, {*objectives, own})
        noise = search_noise_lines(cells, [(a.p99_objective_ms, a.capacity_rps is not None) for a in answers])
        blocks.append("\n".join([title, plain_table(rate_view(rows), 10_000), *(a.line() for a in answers), *noise]))
    return "\n\n".join(blocks)


def rate_view(rows: Sequence[Any]) -> Table:
    """`loadtest.report.answers.answers.RateRow`s as a console table."""
    table = Table(box=None, pad_edge=False)
    for name in ("offered req/s", "req/s", "img/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "N", "windows",
                 "overloaded"):
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(f"{r.offered_rps:g}", f"{r.achieved_rps:.1f}", f"{r.achieved_ips:.1f}",
                      *("—" if v is None else f"{v:.3f}" for v in (r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms)),
                      str(r.requests), str(r.windows), "yes" if r.overloaded else "no")
    return table


@click.command("capacity")
@click.option("--batch", "batch_sizes", type=click.IntRange(min=1), multiple=True, default=(1,), show_default=True,
              help="images per request (repeatable: one search per batch size)")
@click.option("--unmet-ok", is_flag=True, help="exit 0 when every search ran, met or not (an unmet one is an answer)")
@click.option("--repeat", "repeats", type=click.IntRange(min=1), default=1, show_default=True,
              help="run the whole comparison this many times: the report gives each repeat's ratio and their spread")
@click.option("--max-repeats", type=click.IntRange(min=1), default=None,
              help="then one more repeat, up to this many, while no ratio lies in the ranges of more than half "
              "the repeats (two repeats apart; default: --repeat, none more)")
@click.option("--sequential", is_flag=True,
              help="several servers: search them one after the other, each stopped before the next, instead of "
              "paired (all up at once, their cells interleaved, a reference cell showing the machine's drift)")
@click.option("--shapes", default=None, metavar="auto|CORES,...",
              help="replica shapes: search each configuration given 1, 2, ... cores (one frontend per core), so "
              "sizing prices each measured shape; auto: 1, 2, 4, ... up to the cores beside the load generator's "
              "(default: the plan's [capacity] shapes, else none)")
@click.option("--shapes-budget-min", type=click.FloatRange(min=0, min_open=True), default=None,
              help="the shape sweep's whole time: each search an equal share (default: the plan's [capacity] "
              "shapes_budget_min, else each search its --max-minutes)")
@click.option("--budget-min", type=click.FloatRange(min=0, min_open=True), default=None,
              help="the whole run's time, its report included: its searches and repeats share it, and a repeat that "
              "does not fit is not started (default: the plan's [capacity] budget_min, else none)")
@click.option("--verbose", "-v", is_flag=True,
              help="print each cell's line as it is measured (always in the run's console.log); by default the "
              "console shows one line per search as it narrows: its range, how wide, its budget left")
@click.option("--no-tool-ceiling", "tool_ceiling", is_flag=True, flag_value=False, default=True,
              help="skip the tool ceiling: each configuration's twin (the null backend, same cores and Locust "
              "processes) checked at 2x its answers after the searches (default: measured, within "
              f"{TOOL_CEILING_SHARE:.0%} of --budget-min)")
@search_options
@sizing_options
@click.pass_context
def capacity_command(ctx: click.Context, batch_sizes: tuple[int, ...], unmet_ok: bool, repeats: int,
                     max_repeats: int | None, sequential: bool, shapes: str | None, shapes_budget_min: float | None,
                     budget_min: float | None, verbose: bool, tool_ceiling: bool, plan_path: Path, results_dir: Path,
                     report: bool, target_rps: float | None, prices: Path, headroom: float, spare: int,
                     goals: tuple[Target, ...], **values: Any) -> None:
    """The highest open-loop rate each server serves at p99 <= --p99-ms: bracket, bisect, confirm.

    One search per server (running, or started by the tool with --serve) and per --batch. Several servers are
    compared paired: all up at once on the cores they are measured on, their cells alternating one server at a
    time, so each ratio comes from the same minutes (--sequential: one after the other). With targets (--goal, or
    the plan's [capacity] goals), one search per server and per target, at the target's objective and request
    batch; the card answers each target. With --shapes, each configuration is searched once per replica shape
    and the card prices every measured shape, the cheapest taken."""
    from loadtest.measure.servers import server_slots
    from loadtest.report.answers.paired import without_majority
    from loadtest.report.page import pricing_from
    from loadtest.search.capacity_search import Capacities
    from loadtest.search.comparison import Repeats
    from loadtest.search.shape_sweep import shape_sweep

    began = time.monotonic()
    if max_repeats is not None and max_repeats < repeats:
        raise click.UsageError(f"--max-repeats {max_repeats} is fewer than --repeat {repeats}")
    choice = server_choice(values)
    run = None
    try:
        plan = layered_plan(plan_path, choice, _run_flags(values))
        plan, sweep = shape_sweep(plan, shapes, shapes_budget_min)
        if budget_min is not None:
            plan = replace(plan, capacity=replace(plan.capacity, budget_min=budget_min))
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    goals = goals or tuple(parse_goal(g) for g in plan.capacity.goals)
    if goals:  # each target searched at its objective and request batch (`CapacityRequest.searches_at`)
        plan, batch_sizes = with_goals(plan, goals), tuple(sorted({g.batch for g in goals}))
        target_rps = target_rps or next((g.rate_rps for g in goals if g.rate_rps), None)
        values["objective"] = values["objective"] or Objective(min(g.p99_objective_ms for g in goals))
    try:  # a bad target or price file is said before anything is measured
        pricing = pricing_from(values["objective"].p99_ms if values["objective"] else None, target_rps, prices,
                               headroom, spare)
    except (AnalysisError, OSError) as exc:
        raise click.UsageError(str(exc)) from None
    targets = goals or None
    try:
        request = capacity_request(plan, values)
        slots = server_slots(plan, choice.state_file)
        if sweep is not None:
            slots = sweep.slots(slots)
            click.echo("\n".join(sweep.lines()))
        run = Capacities(request, slots, batch_sizes, results_dir, plan_path=str(plan_path),
                         interleaved=not sequential, repeats=Repeats(repeats, max_repeats or repeats, without_majority),
                         tool_ceiling=tool_ceiling, verbose=verbose,
                         budget_s=searches_budget_s(plan, sweep.budget_s if sweep else None, began))
        with sigterm_as_interrupt():
            outcomes = run.run()
    except (Interrupted, KeyboardInterrupt):
        if run is not None:  # what the searches answered before the interruption
            _capacity_end(run.cells.results, run.outcomes, request, False, pricing, targets)
        interrupted(ctx, "capacity")
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"results: {run.cells.jsonl_path}")
    if report and run.cells.results:
        build_report(run.cells.jsonl_path, "capacity", target_rps=target_rps, prices=prices, headroom=headroom,
                     targets=targets, spare=spare)
    _capacity_end(run.cells.results, outcomes, request, True, pricing, targets)
    if not outcomes or not (unmet_ok or all(o.passed for o in outcomes)):
        ctx.exit(1)


def searches_budget_s(plan: plans.Plan, sweep_s: float | None, began: float,
                      clock: Callable[[], float] = time.monotonic) -> float | None:
    """The searches' whole time: what the run's budget (`[capacity] budget_min`, `--budget-min`'s) leaves after the
    time spent since `began` (on `clock`) and the report's reserve (`loadtest.search.run_budget.searches_s`), within
    a shape sweep's budget (`sweep_s`); None where neither is set. The run's budget is said on the console."""
    from loadtest.search.run_budget import REPORT_S, searches_s

    if not plan.capacity.budget_min:
        return sweep_s
    spent_s = clock() - began
    own_s = searches_s(plan.capacity.budget_min * 60, spent_s)
    click.echo(f"the run's time budget: {plan.capacity.budget_min:g} min: {spent_s:.0f} s spent before the searches, "
               f"{REPORT_S:.0f} s kept for the report, {own_s:.0f} s for the searches")
    return own_s if sweep_s is None else min(own_s, sweep_s)


def with_goals(plan: plans.Plan, goals: Sequence[Target]) -> plans.Plan:
    """The plan with its targets (each searched at its objective and request batch), each request batch's default
    objective the strictest target's there, and every target's objective among those its cells are answered at."""
    by_batch = {**plan.capacity.p99_ms_by_batch, **{str(b): p for b, p in objectives_by_batch(goals).items()}}
    answered = tuple(sorted({*plan.capacity.objectives_ms(), *(g.p99_objective_ms for g in goals)}))
    return replace(plan, capacity=replace(plan.capacity, p99_ms_by_batch=by_batch, objectives=answered,
                                          goals=tuple(goal_text(g) for g in goals)))


def _capacity_end(results: Sequence[CellResult], outcomes: Sequence[Any], request: Any, bounds: bool,
                  pricing: Any = None, targets: Sequence[Target] | None = None) -> None:
    """Every search's rate table and objective lines, what bounded the answers, then each search's answer."""
    from loadtest.report.answers.paired import paired_lines
    from loadtest.report.headline import console_end
    from loadtest.search.capacity_output import outcome_line

    named = len(outcomes) > 1
    tables = objective_lines(results, outcomes, request.objectives)
    if tables:
        click.echo(tables)
    # The decision, then what bounded each answer (the model on its device, or the serving path), then each
    # configuration's figures (the values the report, figures.csv and figures.json carry), before any capacity.
    lines = console_end(results, pricing, targets) if bounds else paired_lines(results)
    if lines:
        click.echo("\n".join(lines))
    click.echo("\n".join(outcome_line(o, request.objective, named) for o in outcomes))


def _run_flags(values: dict[str, Any]) -> dict[str, Any]:
    """The `[run]` overrides among a command's keyword arguments (the rest stay in `values`)."""
    names = [name for name, _ in (*RUN_OPTIONS, *CHOICE_OPTIONS)] + list(LIST_OPTIONS)
    return {name: values.pop(name) for name in names if name in values}


def parse_ladders(items: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """`--ladder max_batch_size=8,64,256` (repeatable); an empty list (`FIELD=`) leaves a field untuned."""
    ladders = {}
    for item in items:
        name, eq, values = item.partition("=")
        try:
            ladders[name.strip()] = tuple(int(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"{item!r}: expected FIELD=INT,INT,...", param_hint="--ladder") from None
        if not eq:
            raise click.BadParameter(f"{item!r}: expected FIELD=INT,INT,...", param_hint="--ladder")
    return ladders


@click.command("tune")
@click.option("--device", type=click.Choice([d.value for d in Device]), default=Device.CPU.value, show_default=True)
@click.option("--batch", "batch_size", type=click.IntRange(min=1), default=1, show_default=True,
              help="images per request (the clients' batch size)")
@click.option("--budget-min", type=click.FloatRange(min=0, min_open=True), default=20.0, show_default=True,
              help="wall time for the whole tuning")
@click.option("--max-configs", type=click.IntRange(min=2), default=24, show_default=True,
              help="configurations at most, batching off and the advice included")
@click.option("--start-profile", default=None, help="serving-config profile to start from (default: the device's)")
@click.option("--ladder", "ladders", multiple=True, metavar="FIELD=V1,V2,...",
              help="candidate values of one tuned field (repeatable; FIELD= leaves it untuned)")
@click.option("--min-gain", type=click.FloatRange(0, 1, max_open=True), default=0.05, show_default=True,
              help="a change must raise capacity by more than this share to be kept (below is noise)")
@click.option("--sequential", is_flag=True,
              help="evaluate each configuration alone, in turn, instead of each challenger beside the incumbent "
              "(paired: both up at once, their cells interleaved; about twice the searches, drift cancelled)")
@search_options
@click.pass_context
def tune_command(ctx: click.Context, device: str, batch_size: int, budget_min: float, max_configs: int,
                 start_profile: str | None, ladders: tuple[str, ...], min_gain: float, sequential: bool,
                 plan_path: Path, results_dir: Path, report: bool, **values: Any) -> None:
    """The batching configuration with the highest capacity at p99 <= --p99-ms on one device.

    Starts from TF Serving's advice (the device's profile), measures batching off, then moves one
    BatchingParameters field at a time, keeping what raises capacity; each configuration is a
    server the tool starts, searches and stops, each challenger beside the incumbent (paired)."""
    from loadtest.search.tune_run import TuneRequest, TuneRun
    from loadtest.search.tuning import TuneSettings
    from loadtest.search.tuning_output import answer_text

    choice = server_choice(values)
    if choice.serve or choice.targets or choice.servers:
        raise click.UsageError("tune starts its own servers: --serve/--target/--server do not apply")
    try:
        plan = layered_plan(plan_path, choice, _run_flags(values), starts_servers=True)
        searches = capacity_request(plan, values)
        settings = TuneSettings(objective=searches.objective_at(batch_size), device=Device(device),
                                cores=pinned_cores(plan.launch.server_cpus), batch_size=batch_size,
                                ladders=parse_ladders(ladders), min_gain=min_gain, max_evaluations=max_configs,
                                max_s=budget_min * 60)
        settings.check()
        request = TuneRequest(searches, settings, start_profile or device, not sequential)
        tune = TuneRun(request, results_dir, plan_path=str(plan_path))
        answer, files = tune.run()
    except Interrupted:
        interrupted(ctx, "tune")
    except (plans.PlanError, SweepError, ValueError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"results: {tune.searches.cells.jsonl_path}")
    if report and tune.searches.cells.results:
        build_report(tune.searches.cells.jsonl_path, "tune")
    from loadtest.report.card.card import card_for  # the report stage's card, before the answer lines as capacity's

    card = card_for(tune.searches.cells.results) if tune.searches.cells.results else None
    if card is not None:
        click.echo("\n".join([*card.lines(), ""]))
    click.echo(answer_text(answer, files))  # its answer lines last: the parameters file's path the very last
    if answer.winner is None:
        ctx.exit(1)


SEARCH_COMMANDS: list[click.Command] = [capacity_command, tune_command]
