"""Start a real `python -m serving.server` process on free ports, and always stop it; parse its ready line.

Shared by the benchmarks, the launcher and the tests, so the ready line has one parser.

    with start_server("--model_name", "mnist", "--model_base_path", str(base)) as server:
        stub = PredictionServiceStub(grpc.insecure_channel(server.grpc_target))

The server is started with `--port 0 --rest_api_port 0`, the ready line is awaited (bounded),
and on exit the process gets SIGTERM (then SIGKILL if it does not finish draining in time).
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[2]
READY_PREFIX = "serving ready "
READY_RE = re.compile(
    r"serving ready kind=(?P<kind>\S+) grpc=(?P<grpc>\S+) rest=(?P<rest>\S+) model=(?P<model>\S+) "
    r'version=(?P<version>\S+) device=(?P<device>\S+) device_name="(?P<device_name>[^"]*)" '
    r"batching=(?P<batching>\S+)")


def parse_ready_line(line: str) -> dict[str, str]:
    """The fields of the server's ready line; ValueError for any other line."""
    match = READY_RE.match(line.strip())
    if not match:
        raise ValueError(f"not a ready line: {line!r}")
    return match.groupdict()


@dataclass
class ServerHandle:
    """A running server: where to reach it, and its process."""

    proc: subprocess.Popen
    ready_line: str
    fields: dict[str, str]
    stderr_path: Path

    @property
    def grpc_target(self) -> str:
        return self.fields["grpc"]

    @property
    def rest_url(self) -> str:
        return f"http://{self.fields['rest']}"

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait for the graceful drain, SIGKILL if it hangs; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        return self.proc.returncode


def _wait_ready(proc: subprocess.Popen, stderr_path: Path, timeout_s: float) -> str:
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    buffered = ""
    while time.monotonic() < deadline:
        if selector.select(timeout=0.2):
            chunk = os.read(proc.stdout.fileno(), 65536).decode(errors="replace")
            if not chunk:  # stdout closed: the server exited
                break
            buffered += chunk
            for line in buffered.splitlines():
                if line.startswith(READY_PREFIX):
                    return line.strip()
        elif proc.poll() is not None:
            break
    tail = stderr_path.read_text(errors="replace")[-3000:]
    raise RuntimeError(f"server did not become ready within {timeout_s:.0f} s (exit code {proc.poll()}):\n{tail}")


# Thread kinds `thread_cpu_s` reports; TensorFlow names its pools' threads tf_* (tf_Compute, ...).
THREAD_KINDS = ("tensorflow", "python", "native")


def _thread_kind(comm: str, process_comm: str) -> str:
    if comm.startswith("tf_"):
        return "tensorflow"
    return "python" if comm == process_comm else "native"  # Python's threads keep the process's name


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` has used so far, all its threads included."""
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) the live threads of `pid` have used, by kind: `tensorflow` (its
    thread pools), `python` (threads Python started) and `native` (other libraries' own threads, such
    as gRPC's event engine). Thread names come from Linux's /proc: empty elsewhere or once the
    process is gone."""
    try:
        threads = psutil.Process(pid).threads()
        process_comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (psutil.Error, OSError):
        return {}
    used = dict.fromkeys(THREAD_KINDS, 0.0)
    for thread in threads:
        try:
            comm = Path(f"/proc/{pid}/task/{thread.id}/comm").read_text().strip()
        except OSError:  # the thread ended meanwhile
            continue
        used[_thread_kind(comm, process_comm)] += thread.user_time + thread.system_time
    return used


@contextmanager
def start_server(*args: str, backend: str = "savedmodel", env: dict | None = None, cpu: int | str | None = None,
                 timeout_s: float = 120.0) -> Iterator[ServerHandle]:
    """Run `python -m serving.server --port 0 --rest_api_port 0 --backend B *args`; yield a ServerHandle.

    `cpu` pins the server to those cores with `taskset -c` (e.g. 0 or "0,1"); `env` adds variables.
    """
    argv = [sys.executable, "-m", "serving.server", "--port", "0", "--rest_api_port", "0", "--backend", backend, *args]
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu), *argv]
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **(env or {})}
    stderr_file = tempfile.NamedTemporaryFile(prefix="serving-", suffix=".log", delete=False)
    stderr_path = Path(stderr_file.name)
    proc = subprocess.Popen(argv, cwd=REPO, env=full_env, stdout=subprocess.PIPE, stderr=stderr_file,
                            stdin=subprocess.DEVNULL)
    stderr_file.close()
    handle = None
    try:
        line = _wait_ready(proc, stderr_path, timeout_s)
        handle = ServerHandle(proc, line, parse_ready_line(line), stderr_path)
        yield handle
    finally:
        if handle is not None:
            handle.stop()
        elif proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
        stderr_path.unlink(missing_ok=True)
