"""Locust's web UI on the same locustfile, against a running server (`mnist-bench ui`).

Finds the server in the state file (`make serve-*` writes it; `--server NAME` picks one, default
the first) or takes `--host grpc://HOST:PORT`, then replaces itself with Locust's web UI bound to
127.0.0.1 (`--web-port`, default 8089). Pick the user class in the UI (gRPC or REST, closed or
open loop); the run is interactive (no measurement window); exact µs percentiles so far are at
`/mnist/latency`. Extra arguments after `--` go to Locust unchanged.

Not for: recorded measurements (the sweep, `mnist-bench loadtest`) or parsing flags (`loadtest.cli`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from serving.deploy.state import read_state

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


class UiError(RuntimeError):
    """The web UI cannot start (no server to point it at, no sample digits); the message says why."""


def host_from_state(server: str | None, state_path: Path | None = None) -> str:
    state = read_state(state_path)
    if not state:
        raise UiError("no running server recorded; start one with `make serve-cpu` or pass --host")
    name = server or sorted(state)[0]
    if name not in state:
        raise UiError(f"server {name!r} not in the state file (recorded: {sorted(state)})")
    return f"grpc://{state[name].grpc_target}"


def locust_ui_command(host: str, samples: str, web_port: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", host, "--web-host", "127.0.0.1",
            "--web-port", str(web_port), "--class-picker", "--samples", samples, *extra]


def run(*, server: str | None, host: str, samples: str, web_port: int, extra: list[str]) -> None:
    """Replace this process with Locust's web UI; raises UiError (or ValueError, a corrupt state file)."""
    host = host or host_from_state(server)
    if not Path(samples).exists():
        raise UiError(f"sample digits {samples} not found; run `make export` first")
    command = locust_ui_command(host, samples, web_port, extra)
    print(f"Locust web UI on http://127.0.0.1:{web_port} against {host}", flush=True)
    os.execve(command[0], command, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
