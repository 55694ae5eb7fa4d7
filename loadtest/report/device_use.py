"""How busy the serving device was: the server's CPU % and GPU utilisation beside throughput, and a
note where a configuration's peak throughput left its device far from busy, so the bottleneck is
elsewhere (the load generator, the network, or the server's request path rather than the model).

Not for: measuring them (`loadtest.measure.telemetry`) or the tables' other columns
(`loadtest.report.sections.details`).
"""

from __future__ import annotations

from loadtest.evidence.records import CellResult
from loadtest.report.formatting import MISSING

CPU_BUSY_PERCENT = 60.0  # a CPU server below this share of its cores at peak is far from busy
GPU_BUSY_PERCENT = 50.0  # a GPU below this utilisation at peak is far from busy
ELSEWHERE = "the bottleneck is elsewhere (client, network, or the server's request path)"


def busy_text(cpu_percent: float | None, gpu_percent: float | None, cpu_cores: float | None = None) -> str:
    """`GPU 40%, CPU 12% of 12 cores`, `CPU 85%` (cores not recorded), or "—" when neither was measured."""
    cores = f" of {cpu_cores:g} core{'' if cpu_cores == 1 else 's'}" if cpu_cores else ""
    parts = [f"{name} {value:.0f}%{cores if name == 'CPU' else ''}"
             for name, value in (("GPU", gpu_percent), ("CPU", cpu_percent)) if value is not None]
    return ", ".join(parts) or MISSING


def device_busy(cell: CellResult) -> tuple[str, float, float] | None:
    """The serving device's busy % and its far-from-busy limit: GPU utilisation on a GPU server, else
    the server's CPU % of its cores; None when that was not measured."""
    if cell.server.device == "gpu":
        util = cell.gpu_utilization_percent
        return None if util is None else ("GPU", util, GPU_BUSY_PERCENT)
    cpu = cell.server_cpu_percent
    return None if cpu is None else ("CPU", cpu, CPU_BUSY_PERCENT)


def idle_note(cell: CellResult) -> str:
    """At a peak cell: the note when its device was far from busy, else ""."""
    busy = device_busy(cell)
    if busy is None or busy[1] >= busy[2]:
        return ""
    return f"the device was {busy[1]:.0f}% busy at peak: {ELSEWHERE}"


def unmeasured_reason(cell: CellResult) -> str:
    """Why a cell has no busy figure for its device (records made before telemetry say nothing)."""
    part = "gpu" if cell.server.device == "gpu" else "server"
    note = cell.telemetry_note.gpu if part == "gpu" else cell.telemetry_note.server
    return f"not measured: {'no device telemetry in this record' if note is None else note}"
