"""The supervisor's side channel to each process it starts: who is ready, where its metrics page is.

Sent once per process start over a `multiprocessing` pipe (control plane, not the request path).

Not for: the request path's messages (`serving.pool.messages`).
"""

from __future__ import annotations

import ctypes
import os
import signal
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    FRONTEND = "frontend"
    OWNER = "owner"


@dataclass(frozen=True)
class ChildReady:
    """A started process, ready: its role and index, pid, internal REST (metrics) port, device name,
    (frontends) the ready line it would print as a server of its own, and the device floor it holds
    (`DeviceFloor.as_dict()`: the one the server measured at start, handed to the frontends after it)."""

    role: Role
    index: int
    pid: int
    rest_port: int
    device_name: str
    ready_line: str
    device_floor: dict | None = None


_PR_SET_PDEATHSIG = 1


def follow_parent(parent_pid: int) -> None:
    """Have the kernel send this process SIGTERM when its supervisor dies (Linux's PR_SET_PDEATHSIG), so a
    killed supervisor leaves no frontend serving on its port; exits at once if it is already gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the supervisor's own stop is all there is
        return
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGTERM)


__all__ = ["Role", "ChildReady", "follow_parent"]
