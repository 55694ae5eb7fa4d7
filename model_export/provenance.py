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


@dataclass(frozen=True)
class MachineCpu:
    """The CPU as the machine reports it: what a buyer needs to find the same machine to rent."""

    model: str
    logical: int | None  # CPUs the OS sees: vCPUs on a VM, hardware threads on bare metal
    cores: int | None  # physical cores (distinct socket and core ids); None where /proc/cpuinfo gives none
    virtualization: str  # "none" on bare metal, the hypervisor (kvm, vmware, ...) on a VM, or "unknown"

    def provenance(self) -> dict:
        """The provenance fields (beside "cpu_model" and "cpu_count", which records have always had)."""
        return {"cpu_physical_cores": self.cores, "cpu_virtualization": self.virtualization}


def physical_cores(cpuinfo: str) -> int | None:
    """Distinct (physical id, core id) pairs in /proc/cpuinfo's text; None where it names no core ids."""
    pairs = set()
    for block in cpuinfo.split("\n\n"):
        fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in block.splitlines()))
        if "core id" in fields:
            pairs.add((fields.get("physical id", ""), fields["core id"]))
    return len(pairs) or None


def virtualization(cpuinfo: str, detected: str | None) -> str:
    """`systemd-detect-virt --vm`'s answer where it gave one, else the CPU's `hypervisor` flag (set by every
    common hypervisor): "none" without it, "a hypervisor" with it; "unknown" where /proc/cpuinfo has no flags."""
    if detected:
        return detected
    flags = [line.split(":", 1)[1].split() for line in cpuinfo.splitlines() if line.startswith("flags")]
    if not flags:
        return "unknown"
    return "a hypervisor" if "hypervisor" in flags[0] else "none"


def _detect_virt() -> str | None:
    try:
        done = subprocess.run(["systemd-detect-virt", "--vm"], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None  # "none" (exit 1) on bare metal


def machine_cpu() -> MachineCpu:
    """This machine's CPU: model, logical CPUs, physical cores and whether it is a VM."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    return MachineCpu(cpu_model_name(), os.cpu_count(), physical_cores(cpuinfo),
                      virtualization(cpuinfo, _detect_virt()))


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
