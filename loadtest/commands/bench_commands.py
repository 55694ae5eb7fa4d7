"""`mnist-bench bench server|runtimes|loadgen|probe|reproduce|drift|calibrate|queue-search|…`: the benchmarks' CLI.

    mnist-bench bench server|runtimes|loadgen --model-base-path models/mnist --samples models/mnist-samples.npz
    mnist-bench bench probe --model-base-path models/mnist
    mnist-bench bench reproduce --runs 5 -- CAPACITY ARGS   (make bench-demo: the demo's comparison)
    mnist-bench bench drift --runs 3   (make bench-drift: two identical servers compared under a planted drift)
    mnist-bench bench calibrate --runs 10   (make bench-calibrate: ranges held against queueing theory's answers)
    mnist-bench bench queue-search --searches 100   (make bench-queue-search: the search against simulated queues)

The commands only parse options and print the outcome; the benchmarks' modules do the work and raise, which becomes
one `click.ClickException` line (exit 1); a malformed option is a usage error (exit 2). Their imports (TensorFlow,
JAX, gRPC, Locust's runner) wait until a command runs, so the root command starts fast. Not for: the in-process
baseline child (`python -m loadtest.benchmarks.serving_path.inprocess`, internal) or what is measured.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import click

POSITIVE_S = click.FloatRange(min=0.0, min_open=True)
DIRECTORY = click.Path(path_type=Path, file_okay=False)
FILE = click.Path(path_type=Path, dir_okay=False)


def cpu_list(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """A `taskset -c` core list of single cores, e.g. "0" or "0,2" (the client pins itself to it too)."""
    cores = value.split(",")
    if not all(core.strip().isdigit() for core in cores):
        raise click.BadParameter(f"{value!r} is not a comma-separated list of core numbers, e.g. 0 or 0,2")
    return ",".join(core.strip() for core in cores)


def require(*paths: Path | None) -> None:
    """The model and samples `make export` writes: a missing one is a user error (exit 1), not bad usage."""
    missing = [str(p) for p in paths if p is not None and not p.exists()]
    if missing:
        raise click.ClickException(f"{' and '.join(missing)} missing; run `make export` first")


@click.group("bench")
def bench() -> None:
    """Benchmarks: the embedded server's own overhead, and the load generator's."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def model_and_cores(model_help: str, server_cpu_help: str):
    """The options every server benchmark shares: the model, its samples, and the pinned cores."""
    options = [
        click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
                     help=model_help),
        click.option("--samples", type=FILE, default=None, help="npz with `images` (default: random pixels)"),
        click.option("--server-cpu", callback=cpu_list, metavar="CORES", default="0", show_default=True,
                     help=server_cpu_help),
        click.option("--client-cpu", callback=cpu_list, metavar="CORES", default="1", show_default=True,
                     help="cores the load client (this process) is pinned to"),
    ]

    def decorate(command):
        for option in reversed(options):
            command = option(command)
        return command
    return decorate


@bench.command("server")
@model_and_cores("the model's base directory (version subdirectories), as `make export` writes it",
                 "cores every server and the in-process baseline are pinned to")
@click.option("--warmup-s", type=click.FloatRange(min=0.0), default=1.0, show_default=True)
@click.option("--duration-s", type=POSITIVE_S, default=4.0, show_default=True, help="measured seconds per phase")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True,
              help="rounds of all phases; the ratios are their medians")
@click.option("--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="append the summary as one JSON line to this file")
def server(**options) -> None:
    """The server's three performance ratios (served vs in-process, batching vs none, model vs null)."""
    from loadtest.benchmarks.serving_path.bench_records import BenchOptions
    from loadtest.benchmarks.serving_path.bench_summary import format_summary
    from loadtest.benchmarks.serving_path.inprocess import InProcessFailed
    from loadtest.benchmarks.serving_path.overhead import BenchError, run
    from serving.deploy.process import ServerNotReady

    settings = BenchOptions(**options)
    require(settings.model_base_path, settings.samples)
    try:
        summary = run(settings)
    except (BenchError, InProcessFailed, ServerNotReady, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(format_summary(summary))


@bench.command("runtimes")
@model_and_cores("the model's base directory; its newest version needs model.keras for the jax backend",
                 "cores every server is pinned to")
@click.option("--warmup-s", type=click.FloatRange(min=0.0), default=0.5, show_default=True)
@click.option("--duration-s", type=POSITIVE_S, default=3.0, show_default=True, help="measured seconds per phase")
@click.option("--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="append the summary as one JSON line to this file")
def runtimes(**options) -> None:
    """TensorFlow vs JAX as the server's runtime: served img/s at request batch 1 and 64, batching off and on."""
    from loadtest.benchmarks.serving_path import runtime_compare as bench_runtimes
    from loadtest.benchmarks.serving_path.bench_records import BenchOptions
    from loadtest.benchmarks.serving_path.overhead import BenchError
    from serving.deploy.process import ServerNotReady

    settings = BenchOptions(**options, rounds=1)
    require(settings.model_base_path, settings.samples)
    try:
        summary = bench_runtimes.run(settings)
    except (BenchError, ServerNotReady, OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(bench_runtimes.format_summary(summary))


@bench.command("loadgen")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the model's base directory (the null backend reads no weights, but the server needs it)")
@click.option("--samples", type=FILE, default=Path("models/mnist-samples.npz"), show_default=True,
              help="the digits Locust sends (written by `make export`)")
@click.option("--server-cpu", callback=cpu_list, metavar="CORES", default="0", show_default=True,
              help="cores the server is pinned to")
@click.option("--loadgen-cpu", callback=cpu_list, metavar="CORES", default="1", show_default=True,
              help="cores the Locust process is pinned to")
@click.option("--seconds", type=POSITIVE_S, default=5.0, show_default=True, help="measured seconds per run")
@click.option("--open-rate", type=POSITIVE_S, default=100.0, show_default=True,
              help="open loop's requests/s: under the 5 ms server's 200/s")
@click.option("--h2load/--no-h2load", "against_h2load", default=True, show_default=True,
              help="also hold our figures against h2load's (Debian's nghttp2-client)")
def loadgen(against_h2load: bool, **options) -> None:
    """What one Locust process sustains and how exactly it measures, against the null backend and h2load."""
    from loadtest.benchmarks import loadgen as bench_loadgen
    from loadtest.benchmarks import reference, tool_ceiling_bench
    from loadtest.benchmarks.h2load import H2loadError
    from loadtest.benchmarks.loadgen import LoadgenBenchError, LoadgenOptions
    from serving.deploy.process import ServerNotReady

    settings = LoadgenOptions(**options)
    require(settings.model_base_path, settings.samples)
    work = Path(tempfile.mkdtemp(prefix="loadtest-bench-"))
    try:
        bench_loadgen.run(settings, work, echo=click.echo)
        if against_h2load:
            reference.run(settings, work, echo=click.echo)
        tool_ceiling_bench.run(settings, work, click.echo, against_h2load)
    except (LoadgenBenchError, H2loadError, ServerNotReady, OSError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc


def h2load_bench_options(server_cpu_help: str, rounds_help: str) -> Callable:
    """The options a benchmark of servers driven by h2load shares: the model, samples, both sides' cores, timing."""
    options = [
        click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
                     help="the model's base directory (version subdirectories), as `make export` writes it"),
        click.option("--samples", type=FILE, default=None, help="npz with `images` (default: random pixels)"),
        click.option("--server-cpu", callback=cpu_list, metavar="CORES", default="0,1", show_default=True,
                     help=server_cpu_help),
        click.option("--client-cpu", callback=cpu_list, metavar="CORES", default="1", show_default=True,
                     help="cores h2load is pinned to"),
        click.option("--warmup-s", type=click.FloatRange(min=0.0), default=1.0, show_default=True),
        click.option("--duration-s", type=POSITIVE_S, default=4.0, show_default=True, help="measured seconds per run"),
        click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True, help=rounds_help),
    ]

    def apply(function: Callable) -> Callable:
        for option in reversed(options):
            function = option(function)
        return function
    return apply


@bench.command("workers")
@h2load_bench_options("cores both servers (1 and 2 frontends) are pinned to",
                      "interleaved pairs (1 frontend, then 2); the ratios are their medians")
def workers(**options) -> None:
    """--workers 2 against 1: closed-loop throughput (null backend and the model), CPU per request, hand-off."""
    from loadtest.benchmarks.h2load import H2loadError
    from loadtest.benchmarks.serving_path import workers as bench_workers
    from serving.deploy.process import ServerNotReady

    settings = bench_workers.WorkersOptions(**options)
    require(settings.model_base_path, settings.samples)
    try:
        bench_workers.run(settings, echo=click.echo)
    except (H2loadError, ServerNotReady, OSError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("shapes")
@h2load_bench_options("cores a shape k takes the first k of", "interleaved rounds of every shape")
@click.option("--shape", "shapes", type=click.IntRange(min=1), multiple=True, default=(1, 2), show_default=True,
              help="cores (and frontends) of a replica; repeatable, 1 among them")
@click.option("--cpu-ms", type=POSITIVE_S, default=2.0, show_default=True,
              help="CPU time each request spends in the null backend (--null_cpu_ms)")
def shapes(**options) -> None:
    """Replica shapes: what k cores serve against k times one core (scaling efficiency), null backend spending CPU."""
    from loadtest.benchmarks.h2load import H2loadError
    from loadtest.benchmarks.serving_path import shapes_bench as bench_shapes
    from serving.deploy.process import ServerNotReady

    settings = bench_shapes.ShapesOptions(**{**options, "shapes": tuple(options["shapes"])})
    require(settings.model_base_path, settings.samples)
    try:
        bench_shapes.run(settings, echo=click.echo)
    except (H2loadError, ServerNotReady, OSError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("runtime-calls")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the model's base directory; its newest version needs model.keras")
@click.option("--cpu", callback=cpu_list, metavar="CORES", default="0", show_default=True,
              help="cores every child process is pinned to")
@click.option("--device", type=click.Choice(["cpu", "gpu"]), default="cpu", show_default=True)
@click.option("--seconds", type=POSITIVE_S, default=3.0, show_default=True, help="timed per request batch")
@click.option("--rounds", type=click.IntRange(min=1), default=3, show_default=True)
def runtime_calls(**options) -> None:
    """JAX against PyTorch (the torch backend): µs a model call at request batch 1 and 32, same cores."""
    from loadtest.benchmarks.serving_path import runtime_calls as calls

    settings = calls.CallsOptions(**options)
    try:
        calls.run(settings, echo=click.echo)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise click.ClickException(str(exc)) from exc


@bench.command("soak")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the model's base directory (version subdirectories), as `make export` writes it")
@click.option("--samples", type=FILE, default=Path("models/mnist-samples.npz"), show_default=True,
              help="npz with `images` and `labels` (answers are checked)")
@click.option("--server-cpu", callback=cpu_list, metavar="CORES", default="0,1", show_default=True)
@click.option("--loadgen-cpu", callback=cpu_list, metavar="CORES", default="1", show_default=True)
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--p99-ms", "p99_objective_ms", type=click.FloatRange(min=0.0, min_open=True), default=25.0,
              show_default=True, help="the objective the capacity is confirmed at")
@click.option("--minutes", type=click.IntRange(min=2), default=10, show_default=True, help="one-minute cells held")
def soak(**options) -> None:
    """Capacity confirmed in this run, then minutes at 80% of it: p99 a minute, every request answered, no process
    growing (RSS and descriptors at the end within 10% of minute 2). Exits 1 when any of that fails."""
    from loadtest.benchmarks import soak as bench_soak
    from serving.deploy.process import ServerNotReady

    settings = bench_soak.SoakOptions(**options)
    require(settings.model_base_path, settings.samples)
    try:
        passed = bench_soak.run(settings, Path(tempfile.mkdtemp(prefix="loadtest-soak-")), echo=click.echo)
    except (ServerNotReady, OSError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    if not passed:
        raise SystemExit(1)


@bench.command("probe")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the model's base directory (the null backend reads no weights, but the server needs it)")
@click.option("--server-cpu", callback=cpu_list, metavar="CORES", default="0", show_default=True,
              help="cores the server and its probe are pinned to")
@click.option("--client-cpu", callback=cpu_list, metavar="CORES", default="1", show_default=True,
              help="cores the load client (this process) and its probe are pinned to")
@click.option("--duration-s", type=POSITIVE_S, default=3.0, show_default=True, help="measured seconds per phase")
@click.option("--rounds", type=click.IntRange(min=1), default=4, show_default=True,
              help="rounds of A (no probe) then B (probe); the ratios are their medians")
def probe(**options) -> None:
    """What the host probe costs: its CPU, and the server's throughput and p99 with it against without it."""
    from loadtest.benchmarks import host_probe
    from serving.deploy.process import ServerNotReady

    settings = host_probe.ProbeBenchOptions(**options)
    require(settings.model_base_path)
    try:
        summary = host_probe.run(settings, echo=click.echo)
    except (ServerNotReady, OSError, ValueError, RuntimeError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(host_probe.format_summary(summary))


@bench.command("reproduce", context_settings={"ignore_unknown_options": True})
@click.option("--runs", type=click.IntRange(min=2), default=5, show_default=True,
              help="`mnist-bench capacity` runs in a row, the same arguments each time")
@click.option("--results-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="where each run's results go (default: results/reproduce-<UTC time>)")
@click.option("--read", "read_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="measure nothing: the summary of the runs already under this directory")
@click.argument("capacity_args", nargs=-1, type=click.UNPROCESSED)
def reproduce(runs: int, results_dir: Path | None, read_dir: Path | None, capacity_args: tuple[str, ...]) -> None:
    """Does a comparison reproduce? The same `capacity` run several times: each run's ratios with their ranges and
    drift, then whether every range overlaps every other and the largest ÷ smallest ratio.

    Give capacity's arguments after `--`, e.g. `-- --plan loadtest/plans/demo.toml --p99-ms 50 --batch 16`."""
    from loadtest.benchmarks import reproduce as repeats
    from loadtest.measure.cell_sweep import utc_stamp

    if read_dir is not None:
        try:
            click.echo(repeats.read(read_dir))
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        return
    if not capacity_args:
        raise click.UsageError("give capacity's arguments after `--` (or --read DIR)")
    if "--results-dir" in capacity_args:
        raise click.UsageError("give --results-dir before `--`: each run gets its own directory under it")
    out = results_dir or Path("results") / f"reproduce-{utc_stamp()}"
    click.echo(f"{runs} runs of `mnist-bench capacity {' '.join(capacity_args)}`; results under {out}")
    click.echo(repeats.run(runs, out, capacity_args))


@bench.command("drift")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="paired capacity runs")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the exported model both servers load")
@click.option("--samples", type=FILE, default=Path("models/mnist-samples.npz"), show_default=True,
              help="npz of the requests' images")
@click.option("--results-dir", type=DIRECTORY, default=None, help="default: results/drift-<UTC time>")
def drift(runs: int, model_base_path: Path, samples: Path, results_dir: Path | None) -> None:
    """Two identical servers on core 0 compared paired while a SCHED_FIFO loop takes a growing share of core 0
    (Locust on core 1): each run's ratio, whether it lies within ×0.87–×1.15 with a range holding ×1.0."""
    from loadtest.benchmarks import paired_drift as drifting
    from loadtest.benchmarks.planted import Refused
    from loadtest.measure.cell_sweep import utc_stamp

    require(model_base_path, samples)
    if not {0, 1} <= os.sched_getaffinity(0):
        raise click.ClickException("needs cores 0 and 1: one for the servers, one for the load")
    out = results_dir or Path("results") / f"drift-{utc_stamp()}"
    click.echo(f"{runs} paired runs of two identical servers under a planted drift; results under {out}")
    try:
        click.echo(drifting.run(runs, out, drifting.Setup(model_base_path, samples)))
    except Refused as exc:
        raise click.ClickException(f"cannot plant the drift: {exc}") from None


@bench.command("calibrate")
@click.option("--runs", type=click.IntRange(min=1), default=10, show_default=True, help="runs of every pair")
@click.option("--model-base-path", type=DIRECTORY, default=Path("models/mnist"), show_default=True,
              help="the exported model whose signature the null servers read")
@click.option("--samples", type=FILE, default=Path("models/mnist-samples.npz"), show_default=True,
              help="npz of the requests' images")
@click.option("--results-dir", type=DIRECTORY, default=None, help="default: results/calibrate-<UTC time>")
@click.option("--read", "read_dir", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
              help="measure nothing: the summary of the runs already under this directory")
def calibrate(runs: int, model_base_path: Path, samples: Path, results_dir: Path | None,
              read_dir: Path | None) -> None:
    """Ranges held against answers known in advance: null servers with a planted delay (an M/G/1 queue each) compared
    paired, each capacity's and ratio's range against queueing theory's value: how often it holds, how wide."""
    from loadtest.benchmarks import calibrate as calibration
    from loadtest.measure.cell_sweep import utc_stamp

    if read_dir is not None:
        try:
            click.echo(calibration.read(read_dir))
        except ValueError as exc:
            raise click.ClickException(str(exc)) from None
        return
    require(model_base_path, samples)
    if not {0, 1} <= os.sched_getaffinity(0):
        raise click.ClickException("needs cores 0 and 1: one for the servers, one for the load")
    out = results_dir or Path("results") / f"calibrate-{utc_stamp()}"
    click.echo(f"{runs} runs of {len(calibration.PAIRS)} pairs of null servers held against queueing theory; "
               f"results under {out}")
    try:
        click.echo(calibration.run(runs, out, calibration.Setup(model_base_path.resolve(), samples.resolve())))
    except (OSError, RuntimeError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None


@bench.command("queue-search")
@click.option("--searches", type=click.IntRange(min=1), default=100, show_default=True,
              help="searches per case and rule")
@click.option("--budget-s", type=POSITIVE_S, default=100.0, show_default=True,
              help="each search's time (simulated seconds, each cell's overhead included)")
@click.option("--precision", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.1,
              show_default=True, help="the search's precision")
def queue_search(searches: int, budget_s: float, precision: float) -> None:
    """The capacity search against simulated M/D/1 queues (Lindley's recursion), whose capacity theory gives: how often
    its range holds it and how wide it is, with the effective N (slow requests in clusters counted as fewer) and
    without (every request independent, the rule before issue #67). No server, no Locust: seconds a case."""
    from loadtest.benchmarks import queue_search as simulated

    simulated.run(list(simulated.CASES), searches, budget_s, precision, echo=click.echo)


@bench.command("mutation-score")
@click.option("--mutants", "mutants_dir", type=DIRECTORY, default=Path("mutants"), show_default=True)
@click.option("--only", multiple=True, metavar="GLOB", help="mutmut's names, e.g. 'loadtest.judge.tool_ceiling.*'")
@click.option("--min-score", type=click.FloatRange(min=0, max=1), default=None, help="exit 1 below this share")
def mutation_score(mutants_dir: Path, only: tuple[str, ...], min_score: float | None) -> None:
    """make mutation's score: killed ÷ counted (prose-only string mutants left out), and each survivor."""
    from loadtest.benchmarks import mutation_score as mutation

    score = mutation.read_mutants(mutants_dir, only)
    mutation.report(score, mutation.TARGET if min_score is None else min_score, echo=click.echo)
    if score.score is None or (min_score is not None and score.score < min_score):
        raise SystemExit(1)
