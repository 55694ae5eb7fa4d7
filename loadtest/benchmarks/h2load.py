"""h2load (Debian's `nghttp2-client`), the C reference the load generator is held against.

h2load knows HTTP/2, not gRPC, but a unary gRPC call is one HTTP/2 POST whose body is the message
behind a 5-byte prefix (a compression flag, then the length, big-endian) with `content-type:
application/grpc` and `te: trailers`. `grpc_frame` builds that body from the same serialized
PredictRequest our client sends; `run_h2load` sends it, pinned to a core, and reads h2load's own
summary back (its per-request times: min, max, mean, sd; requests/s), plus the CPU time it used.

h2load checks the HTTP status (200 for every gRPC call), not the `grpc-status` trailer: run it only
against requests the server answers OK (the bench checks one with our client first).

Not for: our own load generator (`loadtest.load`) or deciding what to compare (`loadtest.benchmarks.loadgen`).
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from serving.deploy.process import pinned
from serving.protocol.names import PREDICT_METHOD

INSTALL_HINT = "h2load not found: install Debian's nghttp2-client (`make bench-loadgen` installs it when missing)"
_TIME_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}
_REQUEST_TIMES = re.compile(r"time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)")
_FINISHED = re.compile(r"finished in \S+, ([\d.]+) req/s")
_REQUESTS = re.compile(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored")


class H2loadError(RuntimeError):
    """h2load missing, failed, or printed no summary; the message says which."""


@dataclass(frozen=True)
class H2loadResult:
    requests: int
    succeeded: int
    failed: int  # failed or errored
    rps: float
    min_ms: float
    max_ms: float
    mean_ms: float
    sd_ms: float
    cpu_s: float  # user + system CPU seconds of the h2load process

    @property
    def cpu_us_per_request(self) -> float:
        return 1e6 * self.cpu_s / self.requests if self.requests else float("nan")


def grpc_frame(message: bytes) -> bytes:
    """A gRPC length-prefixed message: uncompressed flag, 4-byte big-endian length, the bytes."""
    return b"\x00" + len(message).to_bytes(4, "big") + message


def h2load_command(target: str, body: Path, *, duration_s: float, warmup_s: float, clients: int = 1,
                   streams: int = 1, rps: float | None = None, cpu: str = "") -> list[str]:
    """h2load posting `body` to `target`'s Predict method for `duration_s` after `warmup_s`.

    `rps`: open loop, requests/s per client (h2load's --rps); else each client keeps `streams`
    requests outstanding, back to back (a closed loop)."""
    binary = shutil.which("h2load")
    if binary is None:
        raise H2loadError(INSTALL_HINT)
    command = [binary, "--data", str(body), "--header", "content-type: application/grpc", "--header", "te: trailers",
               "--clients", str(clients), "--max-concurrent-streams", str(streams), "--threads", "1",
               "--duration", _duration(duration_s), "--warm-up-time", _duration(warmup_s)]
    if rps is not None:
        command += ["--rps", f"{rps:g}"]
    command.append(f"http://{target}{PREDICT_METHOD}")
    return pinned(command, cpu)


def _duration(seconds: float) -> str:
    """h2load's <DURATION>: an integer with a unit."""
    return f"{round(seconds * 1000)}ms"


def run_h2load(command: list[str], timeout_s: float) -> H2loadResult:
    """Run one h2load measurement; its summary and CPU time (raises H2loadError when it has none)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise H2loadError(f"h2load did not finish in {timeout_s:.0f} s") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise H2loadError(f"h2load exited with code {done.returncode}: {(done.stderr or done.stdout)[-300:]}")
    return parse_output(done.stdout, cpu_s)


def parse_output(text: str, cpu_s: float = 0.0) -> H2loadResult:
    """h2load's summary: requests, req/s and per-request times (its units: us, ms, s)."""
    times, finished, requests = _REQUEST_TIMES.search(text), _FINISHED.search(text), _REQUESTS.search(text)
    if not (times and finished and requests):
        raise H2loadError(f"h2load printed no summary: {text[-300:]!r}")
    low, high, mean, sd = (_ms(value) for value in times.groups())
    total, ok, failed, errored = (int(n) for n in requests.groups())
    return H2loadResult(total, ok, failed + errored, float(finished.group(1)), low, high, mean, sd, cpu_s)


def _ms(value: str) -> float:
    number = re.fullmatch(r"([\d.]+)(us|ms|s)", value)
    if number is None:
        raise H2loadError(f"h2load time {value!r} not understood")
    return float(number.group(1)) * _TIME_UNITS[number.group(2)]
