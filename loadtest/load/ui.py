"""Locust's web UI on the same locustfile, against a running server (`mnist-bench ui`).

Finds the server in the state file (`make serve-*` writes it; `--server NAME` picks one, default
the first) and the model it serves, or takes `--host grpc://HOST:PORT` and `--model-name`; the
inputs are the MNIST sample digits for the demo model and random inputs made from the served
signature for any other (`--input-data` says otherwise). Then it replaces itself with Locust's web UI bound to
127.0.0.1 (`--web-port`, default 8089). Pick the user class in the UI (gRPC or REST, closed or
open loop); the run is interactive (no measurement window); exact µs percentiles so far are at
`/mnist/latency`. Extra arguments after `--` go to Locust unchanged.

Not for: recorded measurements (the sweep, `mnist-bench loadtest`) or parsing flags
(`loadtest.commands.sweep_commands`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from loadtest.evidence.vocab import InputKind
from loadtest.load.inputs import DEMO_MODEL, InputError, check_input_files, resolve_input_kind
from serving.deploy.state import read_state
from serving.endpoint import ServedEndpoint

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


class UiError(RuntimeError):
    """The web UI cannot start (no server to point it at, no inputs); the message says why."""


@dataclass(frozen=True)
class UiTarget:
    """Where the web UI's users send and what they send: the model and its inputs."""

    host: str  # grpc://HOST:PORT
    model_name: str
    input_data: str = InputKind.AUTO  # auto: the MNIST digits for the model mnist, random inputs for any other
    samples: str = "models/mnist-samples.npz"


def endpoint_from_state(server: str | None, state_path: Path | None = None) -> ServedEndpoint:
    state = read_state(state_path)
    if not state:
        raise UiError("no running server recorded; start one with `make serve-cpu` or pass --host")
    name = server or sorted(state)[0]
    if name not in state:
        raise UiError(f"server {name!r} not in the state file (recorded: {sorted(state)})")
    return state[name]


def ui_target(server: str | None, host: str, model_name: str, input_data: str, samples: str,
              state_path: Path | None = None) -> UiTarget:
    """The host and model from the flags, else from the state file's server; the inputs checked."""
    if not host:
        endpoint = endpoint_from_state(server, state_path)
        host, model_name = f"grpc://{endpoint.grpc_target}", model_name or endpoint.model_name
    model_name = model_name or DEMO_MODEL
    try:
        check_input_files(resolve_input_kind(input_data, model_name), input_data, samples)
    except InputError as exc:
        raise UiError(str(exc)) from None
    return UiTarget(host, model_name, input_data, samples)


def locust_ui_command(target: UiTarget, web_port: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", target.host, "--web-host", "127.0.0.1",
            "--web-port", str(web_port), "--class-picker", "--model-name", target.model_name,
            "--input-data", target.input_data, "--samples", target.samples, *extra]


def run(target: UiTarget, web_port: int, extra: list[str]) -> None:
    """Replace this process with Locust's web UI."""
    command = locust_ui_command(target, web_port, extra)
    print(f"Locust web UI on http://127.0.0.1:{web_port} against {target.host}, model {target.model_name}", flush=True)
    os.execve(command[0], command, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
