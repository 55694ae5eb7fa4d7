"""The servers a run measures: running ones, or configurations the tool starts itself, one at a time.

A plan names server configurations (`[servers] configs`, or `--serve DEVICE/PROFILE[+FIELD=VALUE,...]`,
or the tuner asks for them): a device and a batching profile of the serving config with fields of
TF Serving's BatchingParameters replaced; a list in `set` is a grid, one server per value.
`server_slots` turns a plan into the servers to measure, in order: one `ToStart` per configuration,
or the running servers (`Running`: the state file's, or `--target` addresses).

`ToStart.serve()` starts its server through the project's launcher (`serving.deploy.launcher`: the
TF Serving container where a Docker engine answers, else the embedded server), on ports the OS says
are free, with TF Serving's files generated into the run's directory, waits until the model is
AVAILABLE, and stops the server when the block ends, however it ends. A start that fails raises
`StartFailed` with the reason and the record of what was asked, so the caller records that
configuration's cells as failed and goes on with the next.

Not for: measuring (`loadtest.measure.cell_sweep`) or how the launcher chooses and waits.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from loadtest.evidence.search_tag import ShapeTag
from loadtest.measure import plan as plans
from loadtest.measure.shape_cores import ReplicaShape
from loadtest.measure.targets import resolve_targets
from serving.deploy import launcher
from serving.deploy.config import (
    BatchingProfile,
    DevicePorts,
    ServingConfig,
    command_line_layer,
    load_config,
    split_base_path,
)
from serving.deploy.process import pinned_cores
from serving.deploy.readiness import free_ports
from serving.deploy.request import LaunchError, LaunchKind, StartRequest
from serving.deploy.tfs_files import files_for, tuned_profile, write_files
from serving.endpoint import Device, ServedEndpoint, ServerKind

Say = Callable[[str], None]


class StartFailed(Exception):
    """A configuration whose server did not start; `planned` labels its failed cells."""

    def __init__(self, planned: ServedEndpoint, reason: str):
        super().__init__(reason)
        self.planned, self.reason = planned, reason


@dataclass(frozen=True)
class Running:
    """A server that was already running (state file or address): measured as it is, never stopped."""

    endpoint: ServedEndpoint

    @property
    def name(self) -> str:
        return self.endpoint.name

    @contextmanager
    def serve(self, build_dir: Path, say: Say) -> Iterator[ServedEndpoint]:
        yield self.endpoint


@dataclass(frozen=True)
class ToStart:
    """One configuration the tool starts, measures and stops."""

    device: str
    profile: BatchingProfile
    config: ServingConfig  # the serving config; ports are chosen when the server starts
    launch: plans.LaunchSettings
    copy: int = 1  # the same configuration asked for again in one run: a second server, named `#2`
    shape: ReplicaShape | None = None  # a shape sweep's replica: k cores, one frontend each (None: the plan's cores)
    suffix: str = ""  # a name's end: a tool-ceiling twin's (`loadtest.search.tool_ceiling_run`), `-tool-ceiling`

    @property
    def family(self) -> str:
        """The configuration's name, whatever its shape: the device and the profile with every tuned field,
        `cpu-cpu+max_batch_size=64` (`cpu-off#2` for the second server of a configuration asked for twice)."""
        return f"{self.device}-{self.profile.name}" + (f"#{self.copy}" if self.copy > 1 else "")

    @property
    def name(self) -> str:
        """How results name it: its `family`, and its shape where it has one (`cpu-off-2c`)."""
        tag = self.shape_tag()
        return (tag.server_name if tag else self.family) + self.suffix

    def shape_tag(self) -> ShapeTag | None:
        """What its search's cells record about its shape (None outside a shape sweep)."""
        return self.shape.tag(self.family) if self.shape else None

    def shaped(self, shape: ReplicaShape) -> ToStart:
        """This configuration as a replica of `shape`'s cores."""
        return replace(self, shape=shape)

    def planned(self) -> ServedEndpoint:
        """What was asked for, before any server answered (labels the cells of a failed start)."""
        kind = {LaunchKind.EMBEDDED: ServerKind.EMBEDDED, LaunchKind.CONTAINER: ServerKind.CONTAINER}.get(
            LaunchKind(self.launch.kind), ServerKind.UNKNOWN)
        return ServedEndpoint(name=self.name, kind=kind, device=self.device, device_name="",
                              host=self.config.host, grpc_port=0, rest_port=0, model_name=self.config.model.name,
                              batching_profile=self.profile.name, batching=self.profile.parameters())

    @contextmanager
    def serve(self, build_dir: Path, say: Say) -> Iterator[ServedEndpoint]:
        """The server up and AVAILABLE for the block; stopped after it. Raises StartFailed."""
        key = f"{self.name}@{os.getpid()}"  # the state file's key: never an earlier run's record
        try:
            request = self._request(build_dir, key)
            say(f"starting {self.name} ({self.device}, batching {self.profile.name}) on {request.config.host}:"
                f"{request.grpc_port} ...")
            endpoint, note = launcher.start(request)
        except (LaunchError, ValueError, OSError) as exc:
            raise StartFailed(self.planned(), f"server {self.name} did not start: {exc}") from None
        say(f"{self.name}: {launcher.describe(endpoint)} AVAILABLE{f' ({note})' if note else ''}")
        try:
            yield replace(endpoint, name=self.name)
        finally:
            launcher.stop([key])

    def _request(self, build_dir: Path, key: str) -> StartRequest:
        grpc_port, rest_port = free_ports(self.config.host, 2)
        config = replace(self.config, devices={**self.config.devices, self.device: DevicePorts(grpc_port, rest_port)})
        files = files_for(self.profile, build_dir)
        write_files(config, files)
        return StartRequest(device=Device(self.device), kind=LaunchKind(self.launch.kind), config=config, files=files,
                            timeout_s=self.launch.start_timeout_s, server_name=key,
                            server_flags=self._server_flags(), log_path=build_dir / f"{key}.log",
                            cpus=self.shape.cpus if self.shape else self.launch.server_cpus)

    def _server_flags(self) -> tuple[str, ...]:
        """The plan's embedded-server flags; a shape's server without its `--workers` (one frontend per core
        pinned: the embedded server's default where it is pinned)."""
        flags = tuple(self.launch.server_flags)
        return without_workers(flags) if self.shape else flags


Slot = Running | ToStart


def without_workers(flags: tuple[str, ...]) -> tuple[str, ...]:
    """Server flags with any `--workers N` / `--workers=N` left out."""
    out: list[str] = []
    skip = False
    for flag in flags:
        if skip:
            skip = False
        elif flag == "--workers":
            skip = True
        elif not flag.startswith("--workers="):
            out.append(flag)
    return tuple(out)


def server_slots(plan: plans.Plan, state_path: Path | None = None) -> list[Slot]:
    """The servers a run measures, in order: the plan's configurations to start, else running servers."""
    if plan.configs:
        return list(configurations(plan))
    return [Running(endpoint) for endpoint in resolve_targets(plan, state_path)]


def serving_config(plan: plans.Plan) -> ServingConfig:
    """The serving config the tool starts servers from (its file, models directory and the plan's model)."""
    models_dir = plan.launch.models_dir or None
    if plan.run.model_base_path:  # <dir>/<model name>: the plan's check makes sure it ends in the name
        models_dir, _ = split_base_path(plan.run.model_base_path, plan.run.model_name, "[run] model_base_path")
    layer = command_line_layer(models_dir=models_dir, model_name=plan.run.model_name)
    try:
        return load_config(plan.launch.serving_config or None, cli=layer, cores=pinned_cores(plan.launch.server_cpus))
    except ValueError as exc:
        raise plans.PlanError(str(exc)) from None


def configurations(plan: plans.Plan) -> Iterator[ToStart]:
    """Every configuration the plan names, grids expanded; a bad profile or field fails here, named."""
    config = serving_config(plan)
    _check_launch_kind(plan.launch.kind)
    seen: dict[str, int] = {}
    for named in plan.configs:
        if named.device not in tuple(Device):
            raise plans.PlanError(f"[servers] configs: unknown device {named.device!r}; expected cpu or gpu")
        for overrides in grid_points(named.set):
            try:
                profile = tuned_profile(config, named.batching, overrides)
            except ValueError as exc:
                raise plans.PlanError(f"[servers] configs ({named.device}/{named.batching}): {exc}") from None
            slot = ToStart(named.device, profile, config, plan.launch)
            seen[slot.name] = seen.get(slot.name, 0) + 1
            yield replace(slot, copy=seen[slot.name])


def grid_points(setting: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`{a = [1, 2], b = 3}` -> `[{a: 1, b: 3}, {a: 2, b: 3}]`. A list of integers for
    allowed_batch_sizes is one value; a list of such lists is a grid."""
    axes = []
    for name, value in sorted(setting.items()):
        is_grid = isinstance(value, (list, tuple)) and (
            name != "allowed_batch_sizes" or any(isinstance(v, (list, tuple)) for v in value))
        axes.append([(name, v) for v in value] if is_grid else [(name, value)])
    return [dict(point) for point in itertools.product(*axes)]


def parse_serve(text: str) -> plans.PlannedServer:
    """`--serve cpu/off`, `--serve cpu/cpu+batch_timeout_micros=1000,max_batch_size=64` (the names results use)."""
    device, slash, rest = text.partition("/")
    profile, _, tuned = rest.partition("+")
    if not slash or not device or not profile:
        raise plans.PlanError(f"--serve {text!r}: expected DEVICE/PROFILE[+FIELD=VALUE,...], e.g. cpu/off")
    overrides = {}
    for item in filter(None, tuned.split(",")):
        field_name, eq, value = item.partition("=")
        if not eq:
            raise plans.PlanError(f"--serve {text!r}: {item!r} is not FIELD=VALUE")
        overrides[field_name] = value
    return plans.PlannedServer(device=device, batching=profile, set=overrides)


def _check_launch_kind(kind: str) -> None:
    if kind not in tuple(LaunchKind):
        raise plans.PlanError(f"[servers.launch] kind={kind!r}; expected one of {', '.join(LaunchKind)}")
