"""A sweep plan: the grid of cells to measure, and how long each runs.

Layers, later wins: the dataclass defaults below -> the plan file (TOML, `loadtest/plans/*.toml`)
-> `LOADTEST_<FIELD>` environment variables for the `[run]` fields (e.g. `LOADTEST_MEASURE_S=3`)
-> command-line flags of `python -m loadtest`. Servers come from the state file that `make
serve-*` writes (`serving.deploy.state`), narrowed by `[servers] names`, or are given explicitly as
targets.

Fixed rules (validity thresholds, histogram precision) live in `loadtest.stats`, apart from what
users tune here. Not for: running anything (see `loadtest.sweep.runner`).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from loadtest import stats

LOAD_MODES = ("closed", "open")
ARRIVALS = tuple(stats.ARRIVAL_GAPS)
PROTOCOLS = ("grpc", "rest")


class PlanError(ValueError):
    """A plan that cannot be run; the message names the offending field."""


@dataclass(frozen=True)
class RunSettings:
    """How each cell runs: the same for every cell of a plan."""

    warmup_s: float = 2.0
    measure_s: float = 5.0
    window_s: float = 1.0  # throughput windows for the stability check
    processes: int = 1  # Locust worker processes (1 = a single local process)
    protocol: str = "grpc"
    arrival: str = "poisson"  # open-loop cells
    check: str = "classes"  # "shape" for a null-backend server, whose zeros are not answers
    request_timeout_s: float = 10.0
    late_threshold_ms: float = 2.0
    max_in_flight: int = 512  # open loop, per process
    samples: str = "models/mnist-samples.npz"
    model_name: str = "mnist"
    signature: str = "serving_default"
    startup_timeout_s: float = 90.0  # Locust start-up (imports TensorFlow) before the cell's clock runs


@dataclass(frozen=True)
class Grid:
    batch_sizes: tuple = (1,)
    concurrency: tuple = (1,)  # closed-loop cells; empty for none
    rates_rps: tuple = ()  # open-loop cells; empty for none


@dataclass(frozen=True)
class ExplicitTarget:
    """A server given by address instead of the state file."""

    name: str
    grpc: str  # host:port
    rest: str = ""  # http://host:port, for metrics; "" when unknown
    kind: str = "unknown"
    device: str = "unknown"
    device_name: str = ""
    batching_profile: str = "unknown"


@dataclass(frozen=True)
class Plan:
    name: str = "plan"
    run: RunSettings = field(default_factory=RunSettings)
    grid: Grid = field(default_factory=Grid)
    server_names: tuple = ()  # from the state file; empty = every recorded server
    targets: tuple = ()  # ExplicitTarget, used instead of the state file when given

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Cell:
    """One measurement: a server is chosen separately; this is the load put on it."""

    mode: str
    batch_size: int
    concurrency: int | None
    rate_rps: float | None


def cells(grid: Grid) -> list[Cell]:
    """Cells in sweep order: by batch size, closed loop by concurrency, then open loop by rate."""
    out = []
    for batch in grid.batch_sizes:
        out += [Cell("closed", batch, users, None) for users in grid.concurrency]
        out += [Cell("open", batch, None, float(rate)) for rate in grid.rates_rps]
    return out


def load_plan(path: Path | None, env: dict | None = None) -> Plan:
    """Defaults, then the TOML file (if any), then `LOADTEST_*` environment overrides; validated."""
    raw = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise PlanError(f"plan file {path} not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise PlanError(f"plan file {path}: {exc}") from None
    plan = _from_dict(raw, default_name=Path(path).stem if path else "plan")
    plan = replace(plan, run=_env_overrides(plan.run, os.environ if env is None else env))
    validate(plan)
    return plan


def _from_dict(raw: dict, default_name: str) -> Plan:
    unknown = set(raw) - {"name", "run", "grid", "servers"}
    if unknown:
        raise PlanError(f"unknown plan section(s) {sorted(unknown)}; expected name, run, grid, servers")
    run = _typed(RunSettings, raw.get("run", {}), "run")
    grid_raw = raw.get("grid", {})
    grid = _typed(Grid, {k: tuple(v) if isinstance(v, list) else v for k, v in grid_raw.items()}, "grid")
    servers = raw.get("servers", {})
    unknown = set(servers) - {"names", "targets"}
    if unknown:
        raise PlanError(f"unknown [servers] field(s) {sorted(unknown)}; expected names, targets")
    targets = tuple(_typed(ExplicitTarget, t, "servers.targets") for t in servers.get("targets", []))
    return Plan(raw.get("name", default_name), run, grid, tuple(servers.get("names", [])), targets)


def _typed(cls, values: dict, section: str):
    known = {f.name: f for f in fields(cls)}
    unknown = set(values) - set(known)
    if unknown:
        raise PlanError(f"unknown [{section}] field(s) {sorted(unknown)}; expected {sorted(known)}")
    try:
        return cls(**values)
    except TypeError as exc:
        raise PlanError(f"[{section}]: {exc}") from None


def _env_overrides(run: RunSettings, env) -> RunSettings:
    """`LOADTEST_<FIELD>` (upper case) replaces a [run] field, converted to the field's type."""
    changes = {}
    for f in fields(RunSettings):
        value = env.get(f"LOADTEST_{f.name.upper()}")
        if value is not None:
            changes[f.name] = _convert(value, type(getattr(run, f.name)), f"LOADTEST_{f.name.upper()}")
    return replace(run, **changes)


def _convert(value: str, kind: type, name: str):
    try:
        return kind(value)
    except ValueError:
        raise PlanError(f"{name}={value!r} is not a {kind.__name__}") from None


def with_overrides(plan: Plan, **run_changes) -> Plan:
    """The command line's layer: replace [run] fields that were given (None = not given)."""
    changes = {k: v for k, v in run_changes.items() if v is not None}
    updated = replace(plan, run=replace(plan.run, **changes))
    validate(updated)
    return updated


def validate(plan: Plan) -> None:
    run, grid = plan.run, plan.grid
    positive = {"warmup_s": run.warmup_s >= 0, "measure_s": run.measure_s > 0, "window_s": run.window_s > 0,
                "processes": run.processes >= 1, "request_timeout_s": run.request_timeout_s > 0,
                "max_in_flight": run.max_in_flight >= 1, "late_threshold_ms": run.late_threshold_ms >= 0}
    for name, ok in positive.items():
        if not ok:
            raise PlanError(f"[run] {name}={getattr(run, name)} is out of range")
    if run.window_s > run.measure_s:
        raise PlanError(f"[run] window_s={run.window_s} is longer than measure_s={run.measure_s}")
    _choice("protocol", run.protocol, PROTOCOLS)
    _choice("arrival", run.arrival, ARRIVALS)
    _choice("check", run.check, ("classes", "shape"))
    if not grid.batch_sizes or any(not isinstance(b, int) or b < 1 for b in grid.batch_sizes):
        raise PlanError(f"[grid] batch_sizes={list(grid.batch_sizes)} must be positive integers")
    if any(not isinstance(c, int) or c < 1 for c in grid.concurrency):
        raise PlanError(f"[grid] concurrency={list(grid.concurrency)} must be positive integers")
    if any(not isinstance(r, (int, float)) or r <= 0 for r in grid.rates_rps):
        raise PlanError(f"[grid] rates_rps={list(grid.rates_rps)} must be positive numbers")
    if not grid.concurrency and not grid.rates_rps:
        raise PlanError("[grid] needs concurrency levels (closed loop) or rates_rps (open loop)")


def _choice(name: str, value: str, allowed: tuple) -> None:
    if value not in allowed:
        raise PlanError(f"[run] {name}={value!r}; choose from {list(allowed)}")
