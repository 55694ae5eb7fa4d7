"""Device telemetry: the window's arithmetic from hand-made samples, the sources from fake files and a
fake NVML, and old records that have no telemetry still reading back."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadtest.evidence.records import CSV_COLUMNS, CellResult, csv_row, read_results
from loadtest.measure import device_sources as sources
from loadtest.measure import telemetry
from loadtest.measure.cell_results import telemetry_fields
from loadtest.measure.device_sources import GpuReading, ServerReading
from loadtest.measure.telemetry import Sample, Sampler, Telemetry
from serving.endpoint import ServedEndpoint
from tests.support.paths import ANALYSIS_FIXTURES

MIB = 1024 * 1024


def endpoint(**changes) -> ServedEndpoint:
    base = ServedEndpoint(name="cpu", kind="embedded", device="cpu", device_name="Test CPU", host="127.0.0.1",
                          grpc_port=8500, rest_port=8501, model_name="mnist", batching_profile="off")
    return replace(base, **changes)


def sample(t: float, cpu_s: float | None, rss_mib: float | None = None, gpu: GpuReading | None = None) -> Sample:
    return Sample(t, ServerReading(cpu_s, None if rss_mib is None else int(rss_mib * MIB)), gpu)


# ----------------------------------------------------------------------------- arithmetic


def test_cpu_percent_is_cpu_seconds_over_wall_time_and_cores():
    # 0.3 CPU s in 0.6 s on 2 cores = 25%; the intervals: 0.1/0.2/2 = 25%, 0.2/0.2/2 = 50%, 0%.
    samples = [sample(0.0, 0.0), sample(0.2, 0.1), sample(0.4, 0.3), sample(0.6, 0.3)]
    assert telemetry.cpu_percents(samples, 2.0) == (25.0, 50.0)
    assert telemetry.cpu_percents(samples, 1.0) == (50.0, 100.0)
    assert telemetry.cpu_percents(samples[:1], 2.0) == (None, None)  # one reading: no interval
    assert telemetry.cpu_percents([sample(0.0, None), sample(1.0, 0.5)], 1.0) == (None, None)


def test_the_mean_never_exceeds_the_busiest_interval_even_where_ticks_read_over_100():
    # 10 ms ticks: 0.16 CPU s in a 0.15 s interval (107%), then 0.15 in 0.15 (100%): the mean reads 103%.
    samples = [sample(0.0, 0.0), sample(0.15, 0.16), sample(0.30, 0.31)]
    mean, peak = telemetry.cpu_percents(samples, 1.0)
    assert (mean, peak) == (100.0, 100.0) and mean <= peak


def test_window_keeps_only_the_samples_inside_it():
    gpu = [GpuReading(30.0, 1000 * MIB, 100.0), GpuReading(50.0, 3000 * MIB, 200.0), GpuReading(None, None, None)]
    samples = [sample(9.0, 0.0, 500.0),  # before the window: its RSS and CPU do not count
               sample(10.0, 1.0, 100.0, gpu[0]), sample(11.0, 1.5, 120.0, gpu[1]), sample(12.0, 2.5, 110.0, gpu[2]),
               sample(13.0, 9.0, 900.0)]  # after it
    figures = telemetry.window_telemetry(samples, 10.0, 12.0, 1.0, {})
    assert figures == Telemetry(server_cpu_percent=75.0, server_cpu_percent_max=100.0, server_cpu_cores=1.0,
                                server_rss_mib=120.0, gpu_utilization_percent=40.0,
                                gpu_utilization_percent_max=50.0, gpu_memory_mib=3000.0, gpu_power_w=150.0,
                                notes={})


def test_absent_parts_are_none_with_their_reason():
    samples = [sample(0.0, None), sample(1.0, None)]
    figures = telemetry.window_telemetry(samples, 0.0, 1.0, None, {"server": "no pid", "gpu": "no NVML: x"})
    assert figures == Telemetry(notes={"server": "no pid", "gpu": "no NVML: x"})
    short = telemetry.window_telemetry([sample(0.5, 1.0, 50.0)], 0.0, 1.0, 2.0, {"gpu": "not sampled"})
    assert short.server_cpu_percent is None and short.server_rss_mib == 50.0
    assert short.notes["server"] == "fewer than 2 CPU readings in the 1.0 s window"
    silent_gpu = telemetry.window_telemetry([sample(0.0, 0.0), sample(1.0, 0.5, gpu=GpuReading(None, None, None))],
                                            0.0, 1.0, 1.0, {})
    assert silent_gpu.gpu_utilization_percent is None and "no utilisation reading" in silent_gpu.notes["gpu"]


class FakeServer:
    """A server that used 0.4 CPU s per 0.2 s tick (2 cores busy) and grows 1 MiB a tick."""

    cores = 4.0
    cpu_set: frozenset[int] = frozenset()

    def __init__(self) -> None:
        self.ticks = 0

    def read(self) -> ServerReading:
        self.ticks += 1
        return ServerReading(0.4 * self.ticks, (100 + self.ticks) * MIB, (60 + self.ticks) * MIB)


def test_sampler_samples_with_its_clock_and_reports_the_window():
    clock = iter([100.0, 100.2, 100.4, 100.6, 100.8])
    sampler = Sampler(FakeServer(), None, {"gpu": "not sampled: the server's device is cpu"},
                      clock=lambda: next(clock))
    for _ in range(5):
        sampler.take()
    figures = sampler.window(100.2, 100.6)  # 3 samples: 0.8 CPU s over 0.4 s on 4 cores = 50%
    assert (figures.server_cpu_percent, figures.server_cpu_percent_max) == (50.0, 50.0)
    assert figures.server_cpu_cores == 4.0 and figures.server_rss_mib == 104.0 and figures.server_pss_mib == 64.0
    assert figures.gpu_utilization_percent is None
    assert figures.notes == {"gpu": "not sampled: the server's device is cpu"}


# A child that burns 0.3 s of its own CPU time when told to, says so, then waits to be killed.
BURNER = ("import sys, time\n"
          "sys.stdin.readline()\n"
          "end = time.process_time() + 0.3\n"
          "while time.process_time() < end:\n"
          "    pass\n"
          "print('burnt', flush=True)\n"
          "sys.stdin.readline()\n")


class CountedSource:
    """A server source that counts its readings, so that a test waits for samples by count, not for a time."""

    def __init__(self, source: sources.ProcessSource) -> None:
        self.source, self.cores, self.cpu_set = source, source.cores, source.cpu_set
        self.reads, self.read_made = 0, threading.Condition()

    def read(self) -> ServerReading:
        reading = self.source.read()
        with self.read_made:
            self.reads += 1
            self.read_made.notify_all()
        return reading

    def wait_for_reads(self, reads: int) -> bool:
        """True once read `reads` times in all; False after 60 s, a deadline that only a broken sampler reaches."""
        with self.read_made:
            return self.read_made.wait_for(lambda: self.reads >= reads, timeout=60)


def test_sampler_thread_runs_until_stopped_and_measures_a_busy_process():
    # Counted, not timed: samples by count and the child's work in its own CPU seconds, with no wall-time window (a
    # 20 ms sampler run for a fixed 0.3 s beside a thread spinning on the GIL once held 3 of the 5 samples it asked for)
    child = subprocess.Popen([sys.executable, "-c", BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdin is not None and child.stdout is not None
    try:
        source = CountedSource(sources.ProcessSource(child.pid))
        sampler = Sampler(source, None, {}, interval_s=0.02).start()
        assert source.wait_for_reads(1)  # a sample before the burn
        child.stdin.write("burn\n")
        child.stdin.flush()
        assert child.stdout.readline() == "burnt\n"
        assert source.wait_for_reads(source.reads + 3)  # the thread samples on after it
        sampler.stop()  # then one last sample
        sampler._thread.join(timeout=60)
    finally:
        child.kill()
        child.wait()
    assert not sampler._thread.is_alive() and len(sampler.samples) >= 5
    first, last = sampler.samples[0].server, sampler.samples[-1].server
    assert first.cpu_s is not None and last.cpu_s is not None
    assert last.cpu_s - first.cpu_s >= 0.25  # the 0.3 CPU s burnt between them, read in 10 ms ticks
    figures = sampler.window(sampler.samples[0].t_s, sampler.samples[-1].t_s)
    assert figures.server_cpu_percent is not None
    assert figures.server_rss_mib is not None and figures.server_rss_mib > 1


def test_measured_window_is_the_one_locust_measured():
    summary = SimpleNamespace(window_start_unix_s=1500.0)
    assert telemetry.measured_window(summary, Path("/nonexistent"), 5.0, 3000.0) == (1500.0, 1505.0)


def test_without_a_start_the_window_ends_when_locust_wrote_its_summary(tmp_path):
    summary = tmp_path / "cell-000.json"
    assert telemetry.measured_window(None, summary, 5.0, 1000.0) == (995.0, 1000.0)  # no summary: when Locust ended
    summary.write_text("{}")
    os.utime(summary, (2000.0, 2000.0))
    assert telemetry.measured_window(None, summary, 5.0, 3000.0) == (1995.0, 2000.0)
    no_start = SimpleNamespace(window_start_unix_s=None)
    assert telemetry.measured_window(no_start, summary, 5.0, 3000.0) == (1995.0, 2000.0)


def test_sampler_thread_keeps_off_the_servers_cores():
    cores = os.sched_getaffinity(0)
    if len(cores) < 2:
        pytest.skip("needs two cores")
    server = {min(cores)}
    seen: list[set[int]] = []

    def in_thread() -> None:
        telemetry.keep_off(frozenset(server))
        seen.append(os.sched_getaffinity(0))

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [cores - server] and os.sched_getaffinity(0) == cores  # this thread is untouched
    telemetry.keep_off(frozenset(cores))  # a server on every core: nowhere else to go, nothing changes
    assert os.sched_getaffinity(0) == cores


# ----------------------------------------------------------------------------- sources


def test_process_source_reads_cpu_time_memory_and_its_cores():
    source = sources.ProcessSource(os.getpid())
    reading = source.read()
    assert reading.cpu_s is not None and reading.cpu_s > 0
    assert reading.memory_bytes is not None and reading.memory_bytes > 10 * MIB
    assert reading.pss_bytes is not None and 0 < reading.pss_bytes <= reading.memory_bytes
    assert source.cores == len(os.sched_getaffinity(0))


def test_pss_counts_pages_shared_by_a_servers_processes_once():
    """A forked child shares the parent's 64 MiB block: RSS summed over the two counts it twice, PSS (each process
    charged half of every page it shares) once."""
    block = bytearray(os.urandom(64 * MIB))  # touched: resident
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    try:
        time.sleep(0.2)
        reading = sources.ProcessSource(os.getpid()).read()
        assert reading.memory_bytes is not None and reading.pss_bytes is not None
        # the block alone: 2 x 64 MiB resident; PSS counts it 64 MiB in all, so the sum is at least ~64 MiB lower
        assert reading.memory_bytes - reading.pss_bytes > 60 * MIB
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
    assert len(block) == 64 * MIB


def test_pss_of_a_process_that_is_gone_is_none():
    assert sources.pss_bytes(2**22 + 12345) is None


def test_cgroup_cores_from_quota_cpuset_or_machine():
    assert sources.cgroup_cores("150000 100000\n", "0-3", 8) == 1.5
    assert sources.cgroup_cores("max 100000\n", "0-3\n", 8) == 4.0
    assert sources.cgroup_cores("400000 100000\n", "0-1\n", 8) == 2.0  # a quota over its cpuset: the cpuset
    assert sources.cgroup_cores("", "", 8) == 8.0
    assert sources.cgroup_cpu_set("2-3\n", 8) == {2, 3}  # pinned: a replica shape's container
    assert sources.cgroup_cpu_set("0-7\n", 8) == sources.cgroup_cpu_set("", 8) == frozenset()  # every core


def test_a_pinned_containers_cgroup_names_its_cores(tmp_path, monkeypatch):
    """`docker run --cpuset-cpus 2-3` (compose's `cpuset`): the cgroup's effective cpuset is the server's cores,
    so the record says them and the sampler keeps off them, as for a pinned embedded server."""
    monkeypatch.setattr(sources.os, "cpu_count", lambda: 8)
    v2 = tmp_path / "system.slice" / "docker-abc.scope"
    v2.mkdir(parents=True)
    for name, text in (("cpu.stat", "usage_usec 1\n"), ("memory.current", "1\n"), ("cpu.max", "max 100000\n"),
                       ("cpuset.cpus.effective", "2-3\n")):
        (v2 / name).write_text(text)
    source = sources.cgroup_source("abc", tmp_path)
    assert isinstance(source, sources.CgroupSource)
    assert (source.cores, source.cpu_set) == (2.0, frozenset({2, 3}))


def test_cgroup_v2_and_v1_files(tmp_path):
    v2 = tmp_path / "v2" / "system.slice" / "docker-abc.scope"
    v2.mkdir(parents=True)
    (v2 / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (v2 / "memory.current").write_text(f"{64 * MIB}\n")
    (v2 / "cpu.max").write_text("200000 100000\n")
    source = sources.cgroup_source("abc", tmp_path / "v2")
    assert isinstance(source, sources.CgroupSource) and source.cores == 2.0
    assert source.read() == ServerReading(2.5, 64 * MIB, 64 * MIB)  # charged once per page: it stands for PSS
    for part, name, text in (("cpuacct", "cpuacct.usage", "3000000000"), ("memory", "memory.usage_in_bytes", "4096"),
                             ("cpu", "cpu.cfs_quota_us", "-1"), ("cpuset", "cpuset.effective_cpus", "0-2")):
        folder = tmp_path / "v1" / part / "docker" / "def"
        folder.mkdir(parents=True)
        (folder / name).write_text(text + "\n")
    v1 = sources.cgroup_source("def", tmp_path / "v1")
    assert isinstance(v1, sources.CgroupSource) and v1.cores == 3.0 and v1.read() == ServerReading(3.0, 4096, 4096)
    missing = sources.cgroup_source("0123", tmp_path)
    assert isinstance(missing, sources.Unavailable) and "no cgroup found for container 0123" in missing.reason


def test_server_source_by_pid_container_port_or_neither():
    assert isinstance(sources.server_source(endpoint(pid=os.getpid())), sources.ProcessSource)
    with socket.socket() as listening:  # a local server the tool did not start: found by the port it listens on
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        found = sources.server_source(endpoint(grpc_port=listening.getsockname()[1]))
        assert isinstance(found, sources.ProcessSource) and found.process.pid == os.getpid()
        assert found.cpu_set == frozenset(os.sched_getaffinity(0))
    with socket.socket() as bound:
        bound.bind(("127.0.0.1", 0))  # bound, not listening: nothing serves there
        neither = sources.server_source(endpoint(grpc_port=bound.getsockname()[1]))
    assert isinstance(neither, sources.Unavailable) and "no process on this host listens on port" in neither.reason
    remote = sources.server_source(endpoint(host="10.1.2.3"))
    assert isinstance(remote, sources.Unavailable) and "not on this host" in remote.reason
    gone = sources.server_source(endpoint(kind="tfserving-container", container="no-such-container-here"))
    assert isinstance(gone, sources.Unavailable) and "no-such-container-here" in gone.reason


class FakeNvml:
    def __init__(self) -> None:
        self.shut = False

    def nvmlDeviceGetUtilizationRates(self, handle):
        return SimpleNamespace(gpu=42, memory=10)

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(used=2048 * MIB, total=80_000 * MIB)

    def nvmlDeviceGetPowerUsage(self, handle):
        raise RuntimeError("not supported")  # a query that fails is absent, not an error

    def nvmlShutdown(self):
        self.shut = True


def test_gpu_source_reads_nvml_and_tolerates_a_failing_query():
    nvml = FakeNvml()
    gpu = sources.GpuSource(nvml, handle=object())
    assert gpu.read() == GpuReading(42.0, 2048 * MIB, None)
    gpu.close()
    assert nvml.shut


def test_no_gpu_sampled_for_a_cpu_server_and_no_nvml_is_a_note(monkeypatch):
    cpu = sources.open_gpu(endpoint())
    assert cpu == sources.Unavailable("not sampled: the server's device is cpu")
    import pynvml

    def no_library() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    gpu = sources.open_gpu(endpoint(device="gpu"))
    assert isinstance(gpu, sources.Unavailable) and gpu.reason.startswith("no NVML: ")
    sampler = telemetry.sampler_for(endpoint(device="gpu", pid=os.getpid()))
    assert sampler.gpu is None and sampler.notes["gpu"].startswith("no NVML: ")


# ----------------------------------------------------------------------------- records


def test_records_without_telemetry_read_back_with_none():
    old = read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl")
    assert old and all(c.server_cpu_percent is None and c.gpu_utilization_percent is None
                       and c.telemetry_note.to_dict() == {} for c in old)
    assert "server_cpu_percent" not in (ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl").read_text()
    assert csv_row(old[0])[CSV_COLUMNS.index("server_cpu_percent")] == ""


def test_telemetry_goes_into_the_record_and_back():
    old = read_results(ANALYSIS_FIXTURES / "cpu-run" / "results.jsonl")[0]
    figures = Telemetry(server_cpu_percent=61.5, server_cpu_percent_max=90.0, server_cpu_cores=1.0,
                        server_rss_mib=300.2, server_pss_mib=180.4,
                        notes={"gpu": "not sampled: the server's device is cpu"})
    cell = replace(old, **telemetry_fields(figures))
    assert cell.telemetry_note.to_dict() == {"gpu": "not sampled: the server's device is cpu"}
    import json

    assert CellResult.from_dict(json.loads(cell.to_json())) == cell
    row = dict(zip(CSV_COLUMNS, csv_row(cell)))
    assert row["server_cpu_percent"] == 61.5 and row["server_rss_mib"] == 300.2 and row["gpu_power_w"] == ""
    assert cell.server_pss_mib == 180.4 and old.server_pss_mib is None  # records before it: memory unknown


def test_a_local_server_whose_processes_were_not_found_is_said_not_probed_never_quiet():
    from loadtest.measure.cell_sweep import probe_cores
    from loadtest.measure.plan import RunSettings

    cores, unprobed = probe_cores(RunSettings(loadgen_cpus="1"), endpoint(), None,
                                  "no process on this host listens on port 8500")
    assert cores == {"loadgen": frozenset({1})} and "server" not in cores  # no probe called the server's
    assert unprobed["server"].note == ("the server's cores were not probed: its processes were not found (no "
                                          "process on this host listens on port 8500); the host probe ran on the "
                                          "load generator's cores (1)")
    found = sources.ProcessSource(os.getpid())
    cores, unprobed = probe_cores(RunSettings(loadgen_cpus="1"), endpoint(), found)
    assert cores["server"] == found.cpu_set and unprobed == {}
