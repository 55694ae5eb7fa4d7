"""`python -m loadtest.load.ui`: Locust's web UI on the same locustfile, against a running server.

Finds the server in the state file (`make serve-*` writes it; `--server NAME` picks one, default
the first) or takes `--host grpc://HOST:PORT`, then replaces itself with Locust's web UI bound to
127.0.0.1 (`--web-port`, default 8089). Pick the user class in the UI (gRPC or REST, closed or
open loop); the run is interactive (no measurement window); exact µs percentiles so far are at
`/mnist/latency`. Extra arguments after `--` go to Locust unchanged.

Not for: recorded measurements (see `python -m loadtest`, the sweep).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from serving.deploy.state import read_state

LOCUSTFILE = Path(__file__).with_name("locustfile.py")


def host_from_state(server: str | None, state_path: Path | None = None) -> str:
    state = read_state(state_path)
    if not state:
        raise RuntimeError("no running server recorded; start one with `make serve-cpu` or pass --host")
    name = server or sorted(state)[0]
    if name not in state:
        raise RuntimeError(f"server {name!r} not in the state file (recorded: {sorted(state)})")
    return f"grpc://{state[name].grpc_target}"


def locust_ui_command(host: str, samples: str, web_port: int, extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", host, "--web-host", "127.0.0.1",
            "--web-port", str(web_port), "--class-picker", "--samples", samples, *extra]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadtest.load.ui", description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="state-file server name (default: the first)")
    parser.add_argument("--host", default="", help="grpc://HOST:PORT instead of the state file")
    parser.add_argument("--samples", default="models/mnist-samples.npz")
    parser.add_argument("--web-port", type=int, default=8089)
    parser.add_argument("extra", nargs="*", help="after --: passed to Locust")
    args = parser.parse_args(argv)
    try:
        host = args.host or host_from_state(args.server)
        if not Path(args.samples).exists():
            raise RuntimeError(f"sample digits {args.samples} not found; run `make export` first")
    except (RuntimeError, ValueError) as exc:
        print(f"locust-ui: {exc}", file=sys.stderr)
        return 1
    command = locust_ui_command(host, args.samples, args.web_port, args.extra)
    print(f"Locust web UI on http://127.0.0.1:{args.web_port} against {host}", flush=True)
    os.execve(command[0], command, {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
