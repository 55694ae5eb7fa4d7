"""A sweep plan: the grid of cells to measure, how long each runs, and which servers.

Layers, later wins, merged by the project's one mechanism (`serving.layering`): the dataclass
defaults below -> the plan file (TOML, `loadtest/plans/*.toml`) -> `LOADTEST_<FIELD>` environment
variables for the `[run]` fields (e.g. `LOADTEST_MEASURE_S=3`) -> command-line flags of the
`loadtest` command (`with_overrides`). Servers come from the state file that `make serve-*` writes
(`serving.deploy.state`), narrowed by `[servers] names`, or are given by address as targets
(`[servers] targets`, or `--target`), which become `ServedEndpoint`s like the state file's, or are
started by the tool itself, one configuration at a time (`[servers] configs`, `[servers.launch]`,
or `--serve`; see `loadtest.measure.servers`).

Fixed rules (validity thresholds, histogram precision) live in `loadtest.evidence.stats`, apart from what
users tune here. Not for: running anything (see `loadtest.measure.cell_sweep`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from loadtest.evidence.vocab import Arrival, Check, InputKind, LoadMode, Protocol
from loadtest.judge.conclusion import DEFAULT_OBJECTIVES_MS
from loadtest.judge.goals import parse_goal
from loadtest.load.inputs import InputError, InputOptions, effective_check, options_for, resolve_input_kind
from loadtest.measure.shape_cores import AUTO
from serving.deploy.config import split_base_path
from serving.deploy.process import cpu_list
from serving.endpoint import ServedEndpoint, ServerKind
from serving.layering import SettingsError, env_layer, field_variables, layered, read_toml, typed

SECTIONS = ("name", "run", "grid", "servers", "capacity")
SERVER_FIELDS = ("names", "targets", "configs", "launch")


class PlanError(SettingsError):
    """A plan that cannot be run; the message names the offending field, file or variable."""


@dataclass(frozen=True)
class RunSettings:
    """How each cell runs: the same for every cell of a plan."""

    warmup_s: float = 2.0
    measure_s: float = 5.0
    window_s: float = 1.0  # throughput windows for the stability check
    processes: int = 1  # Locust worker processes (1 = a single local process)
    protocol: Protocol = Protocol.GRPC
    arrival: Arrival = Arrival.POISSON  # open-loop cells
    arrival_seed: int = 1  # their schedule's seed: a capacity search measuring a rate again takes the next ones
    check: Check = Check.CLASSES  # "shape" for a null-backend server, whose zeros are not answers
    request_timeout_s: float = 10.0
    late_threshold_ms: float = 2.0
    dispatch_lag_limit_ms: float = 2.0  # open loop: a p99 dispatch lag above this flags the cell saturated
    dispatch_spin_share: float = 0.2  # open loop: wake early and spin to each send, at most this share of a gap
    max_in_flight: int = 512  # open loop, per process
    samples: str = "models/mnist-samples.npz"  # the MNIST demo's sample digits (input_data "samples")
    model_name: str = "mnist"
    signature: str = "serving_default"
    model_base_path: str = ""  # servers the tool starts: <dir>/<model_name> holding <version>/; "" = models_dir's
    input_data: str = InputKind.AUTO  # auto, samples, random, zeros, or the path of an .npz (one array per input)
    input_seed: int = 0  # random inputs
    int_range: str = "0,100"  # random integer inputs: LO,HI (HI excluded)
    input_shapes: tuple[str, ...] = ()  # "NAME:DIMS" for inputs with -1 dims past the batch, e.g. "features:4,4"
    startup_timeout_s: float = 90.0  # Locust start-up before the cell's clock runs
    loadgen_cpus: str = ""  # pin the Locust processes to these cores (`taskset -c`, e.g. "1"); "" = not pinned
    host_probe: bool = True  # a 1 ms sleep loop on the server's and the load generator's cores (`sweep.hiccups`)


@dataclass(frozen=True)
class Grid:
    batch_sizes: tuple[int, ...] = (1,)
    concurrency: tuple[int, ...] = (1,)  # closed-loop cells; empty for none
    rates_rps: tuple[float, ...] = ()  # open-loop cells; empty for none


@dataclass(frozen=True)
class TargetAddress:
    """How a plan file names a server by address: `{ name, grpc = "host:port", rest = "http://..." }`,
    optionally with what it is (a TF Serving container's metrics page does not say; the embedded
    server's does, and wins)."""

    name: str
    grpc: str
    rest: str = ""
    kind: str = ServerKind.UNKNOWN
    device: str = "unknown"
    device_name: str = ""
    batching_profile: str = "unknown"


@dataclass(frozen=True)
class PlannedServer:
    """A planned server, one entry of `[servers] configs` (or `--serve`) that the tool starts itself: `{ device =
    "cpu", batching = "cpu", set = { batch_timeout_micros = [0, 1000] } }`: a batching profile of the serving
    config with fields of TF Serving's BatchingParameters replaced; a list in `set` is a grid (one server per
    value)."""

    device: str = "cpu"
    batching: str = "off"
    set: dict = field(default_factory=dict)


@dataclass(frozen=True)
class LaunchSettings:
    """How the tool starts the configurations it was given (`[servers.launch]`)."""

    kind: str = "auto"  # a LaunchKind: the TF Serving container where Docker can, else the embedded server
    serving_config: str = ""  # serving TOML; "" = $SERVING_CONFIG or serving/serving.toml
    models_dir: str = ""  # "" = the serving config's
    server_flags: tuple[str, ...] = ()  # embedded-server flags, e.g. ["--backend", "null", "--null_delay_ms", "5"]
    server_cpus: str = ""  # pin the server to these cores, e.g. "0" (taskset or cpuset); its "cpu_cores" is their count
    start_timeout_s: float = 300.0


SWEEP_ONLY = ("goals", "shapes", "shapes_budget_min", "budget_min")  # [capacity] keys recorded only where set


@dataclass(frozen=True)
class CapacityObjectives:
    """`[capacity]`: the p99 objective of a capacity search per request batch size (`p99_ms_by_batch =
    { 32 = 25.0 }`), over the command's `--p99-ms` for those batch sizes; the plan file says why. And the
    p99 objectives every search's cells are also answered at (`objectives = [5, 10, 25, 50, 100]`; empty:
    `loadtest.judge.conclusion.DEFAULT_OBJECTIVES_MS`), under the command's `--objectives`."""

    p99_ms_by_batch: dict = field(default_factory=dict)  # request batch (a TOML key: text) -> p99 ms
    objectives: tuple[float, ...] = ()  # p99 ms
    goals: tuple[str, ...] = ()  # targets, RATE:P99_MS:BATCH (`loadtest.judge.goals`), under the command's --goal
    shapes: str | tuple[int, ...] = ()  # replica shapes, cores per replica, or "auto" (`loadtest.measure.shape_cores`)
    shapes_budget_min: float = 0.0  # the whole shape sweep's minutes (0: each search its own --max-minutes)
    budget_min: float = 0.0  # the whole run's minutes, report included (`capacity --budget-min`; 0: none)

    def p99_objective_ms(self, batch_size: int, default: float) -> float:
        return float(self.p99_ms_by_batch.get(str(batch_size), default))

    def objectives_ms(self) -> tuple[float, ...]:
        """The objectives a search's cells are answered at, lowest first."""
        return tuple(sorted({float(v) for v in self.objectives})) or DEFAULT_OBJECTIVES_MS


@dataclass(frozen=True)
class Plan:
    name: str = "plan"
    run: RunSettings = field(default_factory=RunSettings)
    grid: Grid = field(default_factory=Grid)
    server_names: tuple[str, ...] = ()  # from the state file; empty = every recorded server
    targets: tuple[ServedEndpoint, ...] = ()  # servers given by address, used instead of the state file
    configs: tuple[PlannedServer, ...] = ()  # servers the tool starts itself, instead of either
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    capacity: CapacityObjectives = field(default_factory=CapacityObjectives)

    def to_dict(self) -> dict:
        """The plan as recorded in `plan.json` and every result's provenance (targets by address)."""
        recorded = {"name": self.name, "run": asdict(self.run), "grid": asdict(self.grid),
                    "server_names": self.server_names, "targets": tuple(map(target_dict, self.targets))}
        if self.configs:
            recorded.update(configs=[asdict(c) for c in self.configs], launch=asdict(self.launch))
        c = self.capacity
        if c.p99_ms_by_batch or c.objectives or c.goals or c.shapes or c.budget_min:
            recorded.update(capacity={k: v for k, v in asdict(c).items() if v or k not in SWEEP_ONLY})
        return recorded


@dataclass(frozen=True)
class Cell:
    """One measurement: a server is chosen separately; this is the load put on it."""

    mode: LoadMode
    batch_size: int
    concurrency: int | None
    rate_rps: float | None


def cells(grid: Grid) -> list[Cell]:
    """Cells in sweep order: by batch size, closed loop by concurrency, then open loop by rate."""
    out = []
    for batch in grid.batch_sizes:
        out += [Cell(LoadMode.CLOSED, batch, users, None) for users in grid.concurrency]
        out += [Cell(LoadMode.OPEN, batch, None, float(rate)) for rate in grid.rates_rps]
    return out


# ----------------------------------------------------------------------------- inputs


def input_kind(run: RunSettings) -> InputKind:
    """Where the inputs come from (`resolve_input_kind`: `auto` is MNIST's digits for "mnist", else random)."""
    return resolve_input_kind(run.input_data, run.model_name)


def input_data(run: RunSettings) -> str:
    """What the load generator is given: samples, random, zeros or the .npz's absolute path."""
    return input_options(run).data


def run_check(run: RunSettings) -> Check:
    """The check the answers get: MNIST's `classes` means `outputs` for inputs made for any model."""
    return effective_check(run.check, input_kind(run))


def input_options(run: RunSettings) -> InputOptions:
    return options_for(input_kind(run), run.input_data, run.input_seed, run.int_range, run.input_shapes)


# ----------------------------------------------------------------------------- targets by address


def endpoint_at(name: str, grpc: str, rest: str = "", model_name: str = "mnist") -> ServedEndpoint:
    """A server known only by its addresses: `grpc` is HOST:PORT (or grpc://HOST:PORT), `rest` an
    http://HOST:PORT base URL or "" when unknown (then `rest_port` is 0). Kind, device and batching
    are "unknown" until the server's metrics page says otherwise (`loadtest.measure.targets`)."""
    host, grpc_port = _host_port(grpc.removeprefix("grpc://"), "target")
    rest_port = 0
    if rest:
        rest_host, rest_port = _host_port(rest.removeprefix("http://").rstrip("/"), "REST URL")
        if rest_host != host or not rest.startswith("http://"):
            raise PlanError(f"REST URL {rest!r} must be http://{host}:PORT, the host of target {grpc!r}")
    return ServedEndpoint(name=name, kind=ServerKind.UNKNOWN, device="unknown", device_name="", host=host,
                          grpc_port=grpc_port, rest_port=rest_port, model_name=model_name,
                          batching_profile="unknown")


def _host_port(address: str, what: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise PlanError(f"{what} {address!r} is not HOST:PORT")
    return host, int(port)


def target_dict(endpoint: ServedEndpoint) -> dict:
    """A target as plans have always recorded it (the results' provenance keeps this shape)."""
    return {"name": endpoint.name, "grpc": endpoint.grpc_target, "rest": endpoint.rest_url,
            "kind": endpoint.kind, "device": endpoint.device, "device_name": endpoint.device_name,
            "batching_profile": endpoint.batching_profile}


def explicit_targets(grpc_targets: list[str], rest_urls: list[str], model_name: str) -> tuple[ServedEndpoint, ...]:
    """`--target` addresses (named target0, target1, ...) with the `--rest-url` of each, in order."""
    if len(rest_urls) > len(grpc_targets):
        raise PlanError("--rest-url given more often than --target")
    rest = rest_urls + [""] * (len(grpc_targets) - len(rest_urls))
    return tuple(endpoint_at(f"target{i}", t, r, model_name) for i, (t, r) in enumerate(zip(grpc_targets, rest)))


# ----------------------------------------------------------------------------- layers


def load_plan(path: Path | None, env: Mapping[str, str] | None = None) -> Plan:
    """Defaults, then the TOML file (if any), then `LOADTEST_*` environment overrides; validated."""
    try:
        raw = read_toml(path, "plan file") if path is not None else {}
        variables = field_variables(RunSettings, "LOADTEST", ("run",))
        merged = layered(raw, env_layer(os.environ if env is None else env, variables))
        plan = _from_layers(merged, default_name=Path(path).stem if path else "plan")
    except PlanError:
        raise
    except SettingsError as exc:
        raise PlanError(str(exc)) from None
    validate(plan)
    return plan


def _from_layers(raw: Mapping[str, Any], default_name: str) -> Plan:
    unknown = set(raw) - set(SECTIONS)
    if unknown:
        raise PlanError(f"unknown plan section(s) {sorted(unknown)}; expected {', '.join(SECTIONS)}")
    run = typed(RunSettings, raw.get("run", {}), "run")
    grid = typed(Grid, raw.get("grid", {}), "grid")
    servers = raw.get("servers", {})
    unknown = set(servers) - set(SERVER_FIELDS)
    if unknown:
        raise PlanError(f"unknown [servers] field(s) {sorted(unknown)}; expected {', '.join(SERVER_FIELDS)}")
    addresses = [typed(TargetAddress, t, "servers.targets") for t in servers.get("targets", [])]
    targets = tuple(replace(endpoint_at(a.name, a.grpc, a.rest, run.model_name), kind=a.kind, device=a.device,
                            device_name=a.device_name, batching_profile=a.batching_profile) for a in addresses)
    configs = tuple(typed(PlannedServer, c, "servers.configs") for c in servers.get("configs", []))
    launch = typed(LaunchSettings, servers.get("launch", {}), "servers.launch")
    capacity = typed(CapacityObjectives, raw.get("capacity", {}), "capacity")
    return Plan(raw.get("name", default_name), run, grid, tuple(servers.get("names", [])), targets, configs, launch,
                capacity)


def with_overrides(plan: Plan, **run_changes: Any) -> Plan:
    """The command line's layer: replace [run] fields that were given (None = not given)."""
    changes = {k: v for k, v in run_changes.items() if v is not None}
    try:
        run = typed(RunSettings, layered(asdict(plan.run), changes), "run")
    except SettingsError as exc:
        raise PlanError(str(exc)) from None
    updated = replace(plan, run=run)
    validate(updated)
    return updated


# ----------------------------------------------------------------------------- validation


def validate(plan: Plan) -> None:
    _validate_run(plan.run)
    _validate_grid(plan.grid)
    _validate_objectives(plan.capacity)
    if plan.configs and plan.targets:
        raise PlanError("[servers] names both configs to start and targets by address: keep one")
    if plan.launch.start_timeout_s <= 0:
        raise PlanError(f"[servers.launch] start_timeout_s={plan.launch.start_timeout_s} must be positive")
    for where, cpus in (("[servers.launch] server_cpus", plan.launch.server_cpus),
                        ("[run] loadgen_cpus", plan.run.loadgen_cpus)):
        try:
            if cpus:
                cpu_list(cpus)
        except ValueError as exc:
            raise PlanError(f"{where}: {exc}") from None


def _validate_inputs(run: RunSettings) -> None:
    try:
        input_options(run)
    except InputError as exc:
        raise PlanError(f"[run] {exc}") from None
    if input_kind(run) == InputKind.SAMPLES and run.check == Check.OUTPUTS:
        raise PlanError("[run] check = outputs needs inputs made for the model: input_data random, zeros or an .npz")
    if run.model_base_path:
        try:
            split_base_path(run.model_base_path, run.model_name, "[run] model_base_path")
        except ValueError as exc:
            raise PlanError(str(exc)) from None


def _validate_run(run: RunSettings) -> None:
    _validate_inputs(run)
    positive = {"warmup_s": run.warmup_s >= 0, "measure_s": run.measure_s > 0, "window_s": run.window_s > 0,
                "processes": run.processes >= 1, "request_timeout_s": run.request_timeout_s > 0,
                "max_in_flight": run.max_in_flight >= 1, "late_threshold_ms": run.late_threshold_ms >= 0,
                "dispatch_lag_limit_ms": run.dispatch_lag_limit_ms > 0,
                "dispatch_spin_share": 0 <= run.dispatch_spin_share <= 1}
    for name, ok in positive.items():
        if not ok:
            raise PlanError(f"[run] {name}={getattr(run, name)} is out of range")
    if run.window_s > run.measure_s:
        raise PlanError(f"[run] window_s={run.window_s} is longer than measure_s={run.measure_s}")


def _validate_objectives(capacity: CapacityObjectives) -> None:
    for batch, p99_ms in capacity.p99_ms_by_batch.items():
        if not str(batch).isdigit() or int(batch) < 1 or not isinstance(p99_ms, (int, float)) or p99_ms <= 0:
            raise PlanError(f"[capacity] p99_ms_by_batch: {batch} = {p99_ms!r}: expected a request batch size "
                            "= a positive p99 in ms")
    if not isinstance(capacity.objectives, tuple) or any(
            isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0 for v in capacity.objectives):
        raise PlanError(f"[capacity] objectives = {capacity.objectives!r}: expected a list of positive p99s in ms")
    for goal in capacity.goals if isinstance(capacity.goals, tuple) else (repr(capacity.goals),):
        try:
            parse_goal(str(goal))
        except ValueError as exc:
            raise PlanError(f"[capacity] goals: {exc}") from None
    shapes = capacity.shapes
    if not (shapes in ((), AUTO) or (isinstance(shapes, tuple) and all(
            isinstance(k, int) and not isinstance(k, bool) and k >= 1 for k in shapes))):
        raise PlanError(f"[capacity] shapes = {shapes!r}: expected \"auto\" or a list of cores per replica, [1, 2, 4]")
    for key in ("shapes_budget_min", "budget_min"):
        minutes = getattr(capacity, key)
        if not (isinstance(minutes, (int, float)) and minutes >= 0):
            raise PlanError(f"[capacity] {key} = {minutes!r}: expected minutes >= 0")


def _validate_grid(grid: Grid) -> None:
    if not grid.batch_sizes or any(not isinstance(b, int) or b < 1 for b in grid.batch_sizes):
        raise PlanError(f"[grid] batch_sizes={list(grid.batch_sizes)} must be positive integers")
    if any(not isinstance(c, int) or c < 1 for c in grid.concurrency):
        raise PlanError(f"[grid] concurrency={list(grid.concurrency)} must be positive integers")
    if any(not isinstance(r, (int, float)) or r <= 0 for r in grid.rates_rps):
        raise PlanError(f"[grid] rates_rps={list(grid.rates_rps)} must be positive numbers")
    if not grid.concurrency and not grid.rates_rps:
        raise PlanError("[grid] needs concurrency levels (closed loop) or rates_rps (open loop)")
