"""Where a cell's device telemetry is read from: the server's process, its container's cgroup, its GPU.

Each source reads cumulative counters or current levels in one cheap call (a /proc or /sys file or
one NVML query) and never raises: a value it cannot read is None. Choosing a source says why when
there is none (`Unavailable`), so the record can carry the reason instead of an error.

- `ProcessSource`: the embedded server by pid (psutil), or a local server the tool did not start (a
  `--target`, a state-file server) by its processes: those listening on its gRPC port (every frontend of a
  pooled server shares it), what runs under each, and, where they all share one parent that is not one of
  this tool's own ancestors, that parent and everything under it (a pooled server's supervisor and device
  owner: `server_roots`). CPU seconds of the processes, every thread included (the kernel sums them),
  resident memory, their PSS (`/proc/PID/smaps_rollup`: a page shared by N processes counts 1/N in each,
  so the sum counts TensorFlow's libraries once, not once per frontend), and its cores from their CPU
  affinities: where the host probe looks for the server.
- `CgroupSource`: a TF Serving container by its id: the cgroup's CPU usage and memory (v2 or v1),
  its cores from `cpu.max` (a quota) or its cpuset, the fewer, else the machine's (its memory, charged once
  per page, stands for PSS too); a cpuset narrower
  than the machine is the cores it is pinned to (a replica shape's container), as a pinned process's are.
- `GpuSource`: NVML (`pynvml`, package nvidia-ml-py): utilisation %, memory used, power draw.

Not for: sampling over time or the window's arithmetic (`loadtest.measure.telemetry`).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import psutil

from serving.deploy.process import cpu_list
from serving.endpoint import Device, ServedEndpoint

LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
CGROUP_ROOT = Path("/sys/fs/cgroup")
FULL_ID = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class Unavailable:
    """No source for this part of the telemetry, and why."""

    reason: str


@dataclass(frozen=True)
class ServerReading:
    cpu_s: float | None  # cumulative CPU seconds, all threads
    memory_bytes: int | None  # resident memory (process) or charged memory (cgroup)
    pss_bytes: int | None = None  # shared pages counted once: PSS summed (processes) or charged memory (cgroup)


class ServerSource(Protocol):
    """What the sampler needs of a server: its cores, the cores it is pinned to, and one reading."""

    cores: float  # the cores it may use: CPU % is of these
    cpu_set: frozenset[int]  # the cores it is pinned to (empty: not known); the sampler keeps off them

    def read(self) -> ServerReading: ...


class ProcessSource:
    """The embedded server's processes: CPU times and RSS of its pid and every process under it (a pooled
    server's frontends and owner: `--workers`). A process that exited between two readings takes its CPU
    time with it: the window's figure is then low, never high."""

    # Finding the processes under it walks all of /proc (and, under a busy interpreter, waits for the GIL at
    # every step): done when the source is made, then again at most this often.
    CHILDREN_EVERY_S = 5.0
    # PSS walks each process's page tables under its memory-map lock: read at most this often (memory moves slowly;
    # the window's highest is what sizing uses), so the sampler does not hold up the server it measures.
    PSS_EVERY_S = 2.0

    def __init__(self, pid: int, *others: int) -> None:
        self.process = psutil.Process(pid)
        self.others = [psutil.Process(other) for other in others]  # more roots: servers sharing one port
        self._children, self._children_at = self._under(), time.monotonic()
        self._pss: int | None = None
        self._pss_at = -math.inf
        self.cpu_set = frozenset(core for p in self._processes() for core in _affinity(p))
        self.cores = float(len(self.cpu_set) or psutil.cpu_count() or 1)

    def _under(self) -> list[psutil.Process]:
        return [child for root in (self.process, *self.others) for child in root.children(recursive=True)]

    def _processes(self) -> list[psutil.Process]:
        now = time.monotonic()
        if now - self._children_at >= self.CHILDREN_EVERY_S:
            self._children, self._children_at = self._under(), now
        return [self.process, *self.others, *self._children]

    def read(self) -> ServerReading:
        try:
            processes = self._processes()
        except psutil.Error:  # the server exited meanwhile
            return ServerReading(None, None)
        cpu_s, rss = 0.0, 0
        now = time.monotonic()
        fresh = now - self._pss_at >= self.PSS_EVERY_S
        pss: int | None = 0 if fresh else None  # None once a live process's PSS cannot be read: a part is no sum
        for process in processes:
            try:
                with process.oneshot():
                    times, memory = process.cpu_times(), process.memory_info()
            except psutil.Error:
                if process is self.process:
                    return ServerReading(None, None)
                continue
            cpu_s += times.user + times.system
            rss += memory.rss
            if pss is not None:
                share = pss_bytes(process.pid)
                pss = None if share is None else pss + share
        if fresh:
            self._pss, self._pss_at = pss, now
        return ServerReading(cpu_s, rss, self._pss)


def pss_bytes(pid: int) -> int | None:
    """The process's proportional set size from `/proc/PID/smaps_rollup` (None: unreadable, e.g. exited or an
    older kernel)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    match = re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) * 1024 if match else None


def _affinity(process: psutil.Process) -> list[int]:
    try:
        return process.cpu_affinity() or []
    except psutil.Error:  # exited meanwhile
        return []


class CgroupSource:
    """A container's cgroup: CPU usage and memory from its files (cgroup v2, or v1's cpuacct/memory)."""

    def __init__(self, cpu_file: Path, cpu_scale: float, memory_file: Path, cores: float,
                 cpu_set: frozenset[int] = frozenset()) -> None:
        self.cpu_file, self.cpu_scale, self.memory_file, self.cores = cpu_file, cpu_scale, memory_file, cores
        self.cpu_set = cpu_set  # its cpuset where narrower than the machine; empty: every core

    def read(self) -> ServerReading:
        memory = _int_file(self.memory_file)
        return ServerReading(_cpu_seconds(self.cpu_file, self.cpu_scale), memory, memory)


def _int_file(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_seconds(path: Path, scale: float) -> float | None:
    """`cpu.stat`'s usage_usec (v2) or `cpuacct.usage` (v1, ns), in seconds."""
    try:
        text = path.read_text()
    except OSError:
        return None
    if path.name == "cpu.stat":
        match = re.search(r"^usage_usec (\d+)", text, re.MULTILINE)
        return int(match.group(1)) * scale if match else None
    try:
        return int(text.split()[0]) * scale
    except (ValueError, IndexError):
        return None


def cgroup_cores(cpu_max: str, cpuset: str, machine: int) -> float:
    """The cores a cgroup may use: its quota (`cpu.max` "200000 100000" = 2) or its cpuset's count, the
    fewer (a quota of 4 on a cpuset of 2 cores runs on 2), else all."""
    quota, _, period = cpu_max.strip().partition(" ")
    limits = [int(quota) / int(period)] if quota and quota != "max" and period else []
    try:
        limits.append(float(len(cpu_list(cpuset.strip()))))
    except ValueError:
        pass
    return min(limits, default=float(machine))


def cgroup_cpu_set(cpuset: str, machine: int) -> frozenset[int]:
    """A cgroup's cpuset (`cpuset.cpus.effective`, "0-1") where it leaves out some of the machine's cores;
    empty where it holds them all or cannot be read."""
    try:
        cores = frozenset(cpu_list(cpuset.strip()))
    except ValueError:
        return frozenset()
    return cores if len(cores) < machine else frozenset()


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def cgroup_source(container_id: str, root: Path = CGROUP_ROOT) -> CgroupSource | Unavailable:
    """The container's cgroup under `root` (systemd or cgroupfs driver, v2 then v1), or why not found."""
    machine = os.cpu_count() or 1
    for v2 in (root / "system.slice" / f"docker-{container_id}.scope", root / "docker" / container_id):
        if (v2 / "cpu.stat").is_file():
            cpuset = _read(v2 / "cpuset.cpus.effective")
            return CgroupSource(v2 / "cpu.stat", 1e-6, v2 / "memory.current",
                                cgroup_cores(_read(v2 / "cpu.max"), cpuset, machine), cgroup_cpu_set(cpuset, machine))
    for place in ("docker/{id}", "system.slice/docker-{id}.scope"):
        where = place.format(id=container_id)
        cpu, memory = root / "cpuacct" / where, root / "memory" / where
        if (cpu / "cpuacct.usage").is_file():
            quota = _read(root / "cpu" / where / "cpu.cfs_quota_us").strip()  # -1: no quota
            period = _read(root / "cpu" / where / "cpu.cfs_period_us").strip()
            cpu_max = f"{quota} {period}" if quota and not quota.startswith("-") else "max"
            cpuset = _read(root / "cpuset" / where / "cpuset.effective_cpus")
            return CgroupSource(cpu / "cpuacct.usage", 1e-9, memory / "memory.usage_in_bytes",
                                cgroup_cores(cpu_max, cpuset, machine), cgroup_cpu_set(cpuset, machine))
    return Unavailable(f"no cgroup found for container {container_id[:12]} under {root}")


def container_id(container: str) -> str | None:
    """The full id of a container given by id or name (`docker inspect`); None when Docker cannot say."""
    if FULL_ID.fullmatch(container):
        return container
    try:
        done = subprocess.run(["docker", "inspect", "--format", "{{.Id}}", container],
                              capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = done.stdout.strip()
    return found if done.returncode == 0 and FULL_ID.fullmatch(found) else None


def server_source(endpoint: ServedEndpoint) -> ProcessSource | CgroupSource | Unavailable:
    """The embedded server by pid, a container by its cgroup; Unavailable (why) for anything else."""
    if endpoint.pid:
        try:
            return ProcessSource(endpoint.pid)
        except psutil.Error as exc:
            return Unavailable(f"server process {endpoint.pid} not readable: {exc}")
    if endpoint.container:
        full = container_id(endpoint.container)
        return cgroup_source(full) if full else Unavailable(f"container {endpoint.container} not found")
    if endpoint.host not in LOCAL_HOSTS:
        return Unavailable(f"the server at {endpoint.host} is not on this host")
    roots = server_roots(endpoint.grpc_port)
    if isinstance(roots, str):
        return Unavailable(roots)
    try:
        return ProcessSource(*roots)
    except psutil.Error as exc:
        return Unavailable(f"server processes {roots} not readable: {exc}")


# ----------------------------------------------------------------------------- a server found by its port


def listening_on(port: int) -> list[int]:
    """The pids listening on TCP `port` (any address); raises psutil.Error where the host does not say."""
    return sorted({c.pid for c in psutil.net_connections(kind="tcp")
                   if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port and c.pid})


def server_roots(port: int) -> list[int] | str:
    """The processes at the top of the server's tree (their children are the sampler's to find), or why none."""
    try:
        listeners = listening_on(port)
    except psutil.Error as exc:
        return f"the processes listening on port {port} could not be listed ({exc})"
    if not listeners:
        return f"no process on this host listens on port {port} (or it is not visible to this tool)"
    roots = [pid for pid in listeners if not _ancestors(pid) & set(listeners)]
    parents = {_parent(pid) for pid in roots}
    if len(parents) == 1 and (parent := parents.pop()) not in (None, 1) and parent not in _ancestors(os.getpid()) \
            and parent != os.getpid():
        return [parent]
    return roots


def _parent(pid: int) -> int | None:
    try:
        return psutil.Process(pid).ppid()
    except psutil.Error:
        return None


def _ancestors(pid: int) -> set[int]:
    try:
        return {p.pid for p in psutil.Process(pid).parents()}
    except psutil.Error:
        return set()


# ----------------------------------------------------------------------------- GPU


@dataclass(frozen=True)
class GpuReading:
    utilization_percent: float | None
    memory_bytes: int | None
    power_w: float | None


class GpuSource:
    """One GPU through NVML; `open_gpu` initialises NVML, `close` shuts it down."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self.nvml, self.handle = nvml, handle

    def read(self) -> GpuReading:
        return GpuReading(self._query(lambda: float(self.nvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)),
                          self._query(lambda: int(self.nvml.nvmlDeviceGetMemoryInfo(self.handle).used)),
                          self._query(lambda: self.nvml.nvmlDeviceGetPowerUsage(self.handle) / 1000.0))

    def _query(self, ask):
        try:
            return ask()
        except Exception:  # noqa: BLE001 - an NVML query that fails (not supported, GPU lost) is just absent
            return None

    def close(self) -> None:
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def open_gpu(endpoint: ServedEndpoint, index: int = 0) -> GpuSource | Unavailable:
    """NVML's handle of GPU `index` when the endpoint serves on a GPU; Unavailable (why) otherwise."""
    if endpoint.device != Device.GPU:
        return Unavailable(f"not sampled: the server's device is {endpoint.device}")
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no library, no driver: the GPU fields are simply absent
        return Unavailable(f"no NVML: {exc}")
    try:
        return GpuSource(pynvml, pynvml.nvmlDeviceGetHandleByIndex(index))
    except Exception as exc:  # noqa: BLE001
        GpuSource(pynvml, None).close()
        return Unavailable(f"no GPU {index} in NVML: {exc}")
