"""Server processes: start one on free ports and wait for its ready line, stop one, read its CPU time.

Shared by the benchmarks, the launcher, the load test and the tests, so there is one ready-line
waiter (`wait_ready_line`), one process stopper (`stop_process`) and one CPU-time reader.

    with start_server("--model_name", "mnist", "--model_base_path", str(base)) as server:
        stub = PredictionServiceStub(grpc.insecure_channel(server.grpc_target))

The server is started with `--port 0 --rest_api_port 0`, the ready line is awaited (bounded),
and on exit the process gets SIGTERM (then SIGKILL if it does not finish draining in time).

Not for: the ready line's format (`serving.protocol.names`) or choosing how to serve (`serving.deploy.launcher`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

from model_export.provenance import REPO
from serving.protocol.names import READY_RE, parse_ready_line

__all__ = ["ServerHandle", "ServerNotReady", "process_cpu_s", "start_server", "stop_process", "thread_cpu_s",
           "wait_ready_line"]

KILL_WAIT_S = 10.0  # how long a SIGKILLed process may take to disappear


class ServerNotReady(RuntimeError):
    """The server exited, or printed no ready line in time; the message ends with its log's last lines."""


@dataclass
class ServerHandle:
    """A running server: where to reach it, and its process."""

    proc: subprocess.Popen
    ready_line: str
    fields: dict[str, str]
    stderr_path: Path  # the server's stdout and stderr together

    @property
    def grpc_target(self) -> str:
        return self.fields["grpc"]

    @property
    def rest_url(self) -> str:
        return f"http://{self.fields['rest']}"

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, wait for the graceful drain, SIGKILL if it hangs; returns the exit code."""
        stop_process(self.proc, timeout_s)
        return self.proc.returncode


def stop_process(proc: subprocess.Popen | int, timeout_s: float = 30.0, *,
                 first_signal: signal.Signals = signal.SIGTERM, group: bool = False) -> None:
    """Stop a process and wait for it: `first_signal` (SIGTERM: a server drains in-flight calls), then
    SIGKILL if it is still there after `timeout_s`. `group` signals its whole process group (a
    process started with `start_new_session=True`, and its children). A process already gone is fine."""
    pid = proc if isinstance(proc, int) else proc.pid
    if not group and isinstance(proc, subprocess.Popen) and proc.poll() is not None:
        return  # (a group may outlive its leader: its other members still get the signals)
    for signum, wait_s in ((first_signal, timeout_s), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.killpg(pid, signum) if group else os.kill(pid, signum)
        except ProcessLookupError:
            _reap(proc)
            return
        if _exited_within(proc, wait_s):
            return


def _exited_within(proc: subprocess.Popen | int, wait_s: float) -> bool:
    try:
        if isinstance(proc, int):
            psutil.Process(proc).wait(timeout=wait_s)
        else:
            proc.wait(timeout=wait_s)
    except (subprocess.TimeoutExpired, psutil.TimeoutExpired):
        return False
    except psutil.NoSuchProcess:
        pass
    return True


def _reap(proc: subprocess.Popen | int) -> None:
    if isinstance(proc, subprocess.Popen):
        proc.poll()


def read_from(path: Path, offset: int = 0) -> str:
    """The text of `path` from byte `offset` on."""
    with open(path, "rb") as handle:
        handle.seek(offset)
        return handle.read().decode(errors="replace")


def log_tail(text: str, lines: int = 40) -> str:
    """The last `lines` lines of a log's text."""
    return "\n".join(text.rstrip().splitlines()[-lines:])


def wait_ready_line(proc: subprocess.Popen, log: Path, offset: int, timeout_s: float) -> str:
    """The server's ready line, read from its log (from byte `offset`, where this run's output begins).

    Raises ServerNotReady with the log's last lines when the server exits first or `timeout_s` passes.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = read_from(log, offset)
        match = READY_RE.search(text)
        if match:
            return match.group(0)
        if proc.poll() is not None:
            raise ServerNotReady(f"the embedded server exited with code {proc.returncode} before it was ready; "
                                 f"last lines of {log}:\n{log_tail(text)}")
        time.sleep(0.1)
    raise ServerNotReady(f"the embedded server printed no ready line within {timeout_s:.0f} s; "
                         f"last lines of {log}:\n{log_tail(read_from(log, offset))}")


# Thread kinds `thread_cpu_s` reports; TensorFlow names its pools' threads tf_* (tf_Compute, ...).
THREAD_KINDS = ("tensorflow", "python", "native")


def _thread_kind(comm: str, process_comm: str) -> str:
    if comm.startswith("tf_"):
        return "tensorflow"
    return "python" if comm == process_comm else "native"  # Python's threads keep the process's name


def _tree(pid: int) -> list[psutil.Process]:
    """Process `pid` and every live process under it (a pooled server's frontends and owner)."""
    root = psutil.Process(pid)
    try:
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return [root]


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process `pid` and the live processes under it have used so far, all their
    threads included."""
    total = 0.0
    for process in _tree(pid):
        try:
            times = process.cpu_times()
        except psutil.Error:
            if process.pid == pid:
                raise
            continue
        total += times.user + times.system
    return total


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) the live threads of `pid` have used, by kind: `tensorflow` (its
    thread pools), `python` (threads Python started) and `native` (other libraries' own threads, such
    as gRPC's event engine), over `pid` and the processes under it. Thread names come from Linux's /proc:
    empty elsewhere or once the process is gone."""
    try:
        processes = _tree(pid)
    except psutil.Error:
        return {}
    used = dict.fromkeys(THREAD_KINDS, 0.0)
    found = False
    for process in processes:
        try:
            threads = process.threads()
            process_comm = Path(f"/proc/{process.pid}/comm").read_text().strip()
        except (psutil.Error, OSError):
            continue
        found = True
        for thread in threads:
            try:
                comm = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text().strip()
            except OSError:  # the thread ended meanwhile
                continue
            used[_thread_kind(comm, process_comm)] += thread.user_time + thread.system_time
    return used if found else {}


def pinned(argv: list[str], cpus: str) -> list[str]:
    """`argv` under `taskset -c CPUS` (pinned from its start, every thread), or as it is when `cpus` is ""."""
    return ["taskset", "-c", cpus, *argv] if cpus else argv


def cpu_list(cpus: str) -> set[int]:
    """The cores of a `taskset -c` list such as "0", "0,2" or "0-3"; ValueError naming it when malformed."""
    cores: set[int] = set()
    for part in filter(None, cpus.replace(" ", "").split(",")):
        if not re.fullmatch(r"\d+(-\d+)?", part):
            raise ValueError(f"CPU list {cpus!r} is not like 0, 0,2 or 0-3")
        low, _, high = part.partition("-")
        cores.update(range(int(low), int(high or low) + 1))
    if not cores:
        raise ValueError(f"CPU list {cpus!r} names no core")
    return cores


def pinned_cores(cpus: str) -> int | None:
    """How many cores a `taskset -c` list pins to; None when nothing is pinned ("")."""
    return len(cpu_list(cpus)) if cpus else None


@contextmanager
def start_server(*args: str, backend: str = "savedmodel", env: dict | None = None, cpu: int | str | None = None,
                 timeout_s: float = 120.0, prefix: Sequence[str] = ()) -> Iterator[ServerHandle]:
    """Run `python -m serving.server --port 0 --rest_api_port 0 --backend B *args`; yield a ServerHandle.

    `cpu` pins the server to those cores with `taskset -c` (e.g. 0 or "0,1"); `env` adds variables;
    `prefix` runs it through a command that execs it (e.g. `ip netns exec NS`, another host).
    """
    argv = [sys.executable, "-m", "serving.server", "--port", "0", "--rest_api_port", "0", "--backend", backend, *args]
    argv = [*prefix, *pinned(argv, "" if cpu is None else str(cpu))]
    full_env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONUNBUFFERED": "1", **(env or {})}
    with tempfile.NamedTemporaryFile(prefix="serving-", suffix=".log", delete=False) as log_file:
        log_path = Path(log_file.name)
        proc = subprocess.Popen(argv, cwd=REPO, env=full_env, stdout=log_file, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
    try:
        line = wait_ready_line(proc, log_path, 0, timeout_s)
        yield ServerHandle(proc, line, parse_ready_line(line), log_path)
    finally:
        stop_process(proc)
        log_path.unlink(missing_ok=True)
