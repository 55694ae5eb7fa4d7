"""Device telemetry in real sweep cells: a real embedded server, pinned to one core, loaded by real Locust.

A closed loop of a few users keeps the server busy; an open loop at 20 req/s on the null backend
leaves it nearly idle. The CPU % is of the server's one core.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

from loadtest.evidence.records import read_results
from loadtest.measure import plan as plans
from loadtest.measure.cell_sweep import Sweep
from serving.deploy.process import start_server
from tests.loadtest.measure.test_sweep import short_plan, target_of
from tests.support import timing

pytestmark = pytest.mark.integration

SERVER_CORE = 0


def cores() -> set[int]:
    found = os.sched_getaffinity(0)
    if len(found) < 2:
        pytest.skip("needs two cores: one for the server, one for the load")
    return found


def measured(server, plan: plans.Plan, tmp_path, backend: str):
    """The records of a sweep of `plan` against `server` (its pid known, as the launcher records it)."""
    target = replace(target_of(server), pid=server.proc.pid, name=backend)
    sweep = Sweep(plan, [target], tmp_path, out=open(os.devnull, "w"))
    results = sweep.run()
    assert read_results(sweep.jsonl_path) == results
    return results


def test_a_loaded_server_is_busy_and_an_idle_one_is_not(exported_model, tmp_path):
    loadgen = ",".join(str(c) for c in sorted(cores() - {SERVER_CORE}))
    busy_plan = short_plan(exported_model.samples_path, measure_s=3.0, loadgen_cpus=loadgen,
                           grid=plans.Grid(batch_sizes=(16,), concurrency=(4,), rates_rps=()))
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      cpu=SERVER_CORE) as server:
        [busy] = measured(server, busy_plan, tmp_path / "busy", "savedmodel")
    idle_plan = short_plan(exported_model.samples_path, measure_s=3.0, loadgen_cpus=loadgen, check="shape",
                           grid=plans.Grid(batch_sizes=(1,), concurrency=(), rates_rps=(20,)))
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      backend="null", cpu=SERVER_CORE) as server:
        [idle] = measured(server, idle_plan, tmp_path / "idle", "null")
    for cell in (busy, idle):
        assert cell.status == "ok", cell.failure_reason
        assert cell.server_cpu_cores == 1.0  # pinned to one core
        assert cell.server_resources.cpus == 1.0 and cell.server_resources.source == f"pinned cores {SERVER_CORE}"
        assert cell.server_resources.gpus == 0 and cell.server_resources.cpu_model
        assert cell.server_rss_mib is not None and cell.server_rss_mib > 10
        assert cell.server_cpu_percent_max is not None and cell.server_cpu_percent_max >= cell.server_cpu_percent
        assert cell.gpu_utilization_percent is None and cell.gpu_memory_mib is None and cell.gpu_power_w is None
        assert cell.telemetry_note.to_dict() == {"gpu": "not sampled: the server's device is cpu"}
    said = (f"busy: {busy.throughput_rps} req/s, server CPU {busy.server_cpu_percent}% "
            f"(max {busy.server_cpu_percent_max}%), RSS {busy.server_rss_mib} MiB; "
            f"idle: {idle.throughput_rps} req/s, server CPU {idle.server_cpu_percent}% "
            f"(max {idle.server_cpu_percent_max}%), RSS {idle.server_rss_mib} MiB")
    print(f"\n{said}")
    # the server's share of its core is this machine's speed: a starved load generator idles it, a slow core busies it
    timing.holds("busy server CPU % > 20", busy.server_cpu_percent > 20, said)
    timing.holds("idle server CPU % < 30", idle.server_cpu_percent < 30, said)


@pytest.mark.untimed
def test_a_local_server_given_by_address_alone_is_found_by_its_port_and_sampled(exported_model, tmp_path):
    """Issue #41: a server the tool did not start, on this host, is found by the port it listens on (before, it
    recorded "no server pid or container known" and no telemetry); a remote one says it is not on this host
    (`test_telemetry.test_server_source_by_pid_container_port_or_neither`)."""
    plan = short_plan(exported_model.samples_path, check="shape", measure_s=1.0,
                      grid=plans.Grid(batch_sizes=(1,), concurrency=(1,), rates_rps=()))
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      backend="null") as server:
        sweep = Sweep(plan, [target_of(server)], tmp_path, out=open(os.devnull, "w"))
        [cell] = sweep.run()
    assert cell.status == "ok" and cell.server_cpu_percent is not None and cell.server_rss_mib is not None
    assert "server" not in cell.telemetry_note.to_dict()
