"""The device run's child processes: echoed line by line, found by what they run, stopped with theirs.

The capacity and load commands start servers in sessions of their own (they outlive a Ctrl-C in a
terminal), so a process group does not hold them: `stop` interrupts the command (it stops its servers
and Locust as on Ctrl-C), and kills it and everything below it (read from /proc) if it has not ended
after a grace period. `below` finds the server a command started, for py-spy.

Standard library only. Not for: what the commands are (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

STOP_GRACE_S = 30.0  # a capacity run stops its server and Locust on SIGINT; then everything is killed


class Echoed:
    """A child whose output (stdout and stderr) goes to `say` line by line, and is kept."""

    def __init__(self, command: list[str], say: Callable[[str], None], **popen):
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     errors="replace", **popen)
        self.lines: list[str] = []
        self.seen_at: list[float] = []  # each line's arrival, monotonic seconds
        self._say = say
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen_at.append(time.monotonic())
            self.lines.append(line.rstrip("\n"))
            self._say(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> int | None:
        """Its exit code; None (and it is stopped) when it ran past `timeout_s`."""
        try:
            code = self.proc.wait(timeout=max(timeout_s, 0.1))
        except subprocess.TimeoutExpired:
            stop(self.proc)
            code = None
        self._reader.join(timeout=5)
        return code


def stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S, interrupt: bool = True) -> None:
    """SIGINT to `proc` (not when a terminal's Ctrl-C already reached it: a second one could cut its
    cleanup short), then SIGKILL to it and all below it if it is still there after `grace_s`."""
    if proc.poll() is not None:
        return
    tree = below(proc.pid)
    if interrupt:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
        return
    except subprocess.TimeoutExpired:
        pass
    for pid in [proc.pid, *tree, *below(proc.pid)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
    proc.wait()


def below(pid: int) -> list[int]:
    """Every process below `pid` (its descendants), from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


def command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def find_below(pid: int, marker: str) -> int | None:
    """The first process below `pid` whose command line holds `marker`."""
    return next((child for child in below(pid) if marker in command_line(child)), None)


def wait_for(find: Callable[[], int | None], timeout_s: float, alive: Callable[[], bool]) -> int | None:
    """Poll `find` until it finds something, `timeout_s` passes or `alive()` turns false."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and alive():
        found = find()
        if found is not None:
            return found
        time.sleep(0.2)
    return None
