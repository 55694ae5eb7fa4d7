"""The servers a sweep measures, as `ServedEndpoint`s, and the label each result records.

A plan's targets given by address win; otherwise the state file's servers (`make serve-*`),
narrowed by name. An address-only server is labelled from its metrics page when it says what it
is (the embedded server does; TF Serving does not, so it stays "unknown").

Not for: probing or loading a server (`loadtest.measure.probe`, `loadtest.measure.locust_run`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from loadtest.evidence.records import ServerLabel
from loadtest.evidence.vocab import Protocol
from loadtest.measure import plan as plans
from loadtest.measure import scrape
from serving.deploy.state import read_state
from serving.endpoint import ServedEndpoint


class SweepError(RuntimeError):
    """A sweep that cannot start (no servers, missing samples); the message says what to do."""


def resolve_targets(plan: plans.Plan, state_path: Path | None = None) -> list[ServedEndpoint]:
    """Explicit targets when the plan has them, else the state file's servers (narrowed by name)."""
    if plan.targets:
        targets = [labelled_from_metrics(t) for t in plan.targets]
        if plan.run.protocol == Protocol.REST and any(not t.rest_url for t in targets):
            raise SweepError("protocol rest needs the REST address of every target (--rest-url http://HOST:PORT)")
        return targets
    state = read_state(state_path)
    if not state:
        raise SweepError("no running servers recorded; start one with `make serve-cpu` or pass --target HOST:PORT")
    names = plan.server_names or tuple(sorted(state))
    missing = [n for n in names if n not in state]
    if missing:
        raise SweepError(f"server(s) {missing} not in the state file (recorded: {sorted(state)})")
    check_models(plan.run.model_name, [state[n] for n in names])
    return [state[n] for n in names]


def check_models(model_name: str, endpoints: list[ServedEndpoint]) -> None:
    """Running servers serve the run's model: its inputs (and `auto`'s choice of them) are made for it."""
    for endpoint in endpoints:
        if endpoint.model_name != model_name:
            raise SweepError(f"server {endpoint.name} serves model {endpoint.model_name!r}, not the run's "
                             f"{model_name!r}: give --model-name {endpoint.model_name} (one model per run)")


def labelled_from_metrics(endpoint: ServedEndpoint) -> ServedEndpoint:
    """An address-only server with the kind, device and batching profile its metrics page reports."""
    snapshot = scrape.scrape(endpoint.rest_url)
    info = snapshot.info if snapshot is not None else {}
    return replace(endpoint, kind=info.get("kind", endpoint.kind), device=info.get("device", endpoint.device),
                   device_name=info.get("device_name", endpoint.device_name),
                   batching_profile=info.get("batching_profile", endpoint.batching_profile))


def load_address(endpoint: ServedEndpoint, protocol: Protocol) -> str:
    """Where the load goes: host:port for gRPC, the REST base URL for REST."""
    return endpoint.grpc_target if protocol == Protocol.GRPC else endpoint.rest_url


def server_label(endpoint: ServedEndpoint, *, protocol: Protocol, model_version: int | None) -> ServerLabel:
    """What a result records about the server it measured."""
    return ServerLabel(name=endpoint.name, kind=endpoint.kind, device=endpoint.device,
                       device_name=endpoint.device_name, target=load_address(endpoint, protocol),
                       protocol=protocol, model_name=endpoint.model_name, model_version=model_version,
                       batching_profile=endpoint.batching_profile, batching=dict(endpoint.batching),
                       versions=dict(endpoint.versions))
