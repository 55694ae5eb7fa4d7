"""Provenance every stage stamps on what it writes: machine, code revision, versions, time.

It lives in the earliest stage so that the export, the server, the launcher and the sweep all
label their output with one implementation (a later stage may import an earlier one, never the
reverse).

Not for: anything about the model or a server's state.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Beside the packages in a copy of the code made from a checkout (`loadtest.bundle.build`), never in one.
SOURCE_RECORD = "SOURCE.json"


@dataclass(frozen=True)
class GitRevision:
    commit: str  # "unknown" outside a git checkout or without git
    dirty: bool | None  # None when unknown

    def label(self) -> str:
        """`<commit>`, `<commit>-dirty`, or "unknown"."""
        return self.commit + ("-dirty" if self.dirty else "")


def cpu_model_name() -> str:
    """The CPU's model string from /proc/cpuinfo (the platform's guess where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=REPO)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def recorded_source() -> dict | None:
    """The source record a copy of this code carries (`SOURCE_RECORD`, written by the device bundle's
    build: commit, dirty, changed files, build time); None in a checkout, or when it cannot be read."""
    try:
        record = json.loads((REPO / SOURCE_RECORD).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("commit"), str) else None


def git_revision() -> GitRevision:
    """The commit this code came from and whether it differed from it: the source record where a copy of
    the code carries one (a bundle's copy is no checkout, or lies inside an unrelated one, whose commit
    would be the wrong one), else the checked-out commit and whether the work tree differs from it."""
    record = recorded_source()
    if record is not None:
        dirty = record.get("dirty")
        return GitRevision(record["commit"], dirty if isinstance(dirty, bool) else None)
    commit = _git("rev-parse", "HEAD")
    if not commit:
        return GitRevision("unknown", None)
    status = _git("status", "--porcelain")
    return GitRevision(commit, None if status is None else bool(status))


def package_versions(names) -> dict[str, str]:
    """Installed versions of `names`; "not installed" for a missing one."""
    versions = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def cpu_cores() -> int:
    """Cores this process may run on (honours taskset/cgroup affinity, unlike os.cpu_count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
