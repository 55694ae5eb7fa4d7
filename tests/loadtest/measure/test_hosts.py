"""Load from several hosts, tested as hosts: Locust's master and two workers, and the server, each in
a network namespace of its own with its own address (`tests.support.hosts`), joined by a bridge.

- The master merges its workers' exact histograms: the merged one equals the union of the samples
  each worker measured, and the requests add up.
- A worker host cut off (its link down) or killed mid-cell: the cell still finishes, by the
  master's own deadline, flagged with the reason, and the other worker's data is kept.
- A server host cut off mid-search: the capacity search ends with what it measured, within its
  deadlines.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from loadtest.evidence import stats
from loadtest.evidence.records import read_results
from loadtest.measure import plan as plans
from loadtest.measure import scrape
from loadtest.measure.cell_results import CellContext, cell_flags, load_spec
from loadtest.measure.locust_run import LOCUSTFILE, cell_deadline_s, finished_run, locust_command
from serving.deploy.process import start_server
from serving.endpoint import ServedEndpoint
from tests.support import hosts as netns
from tests.support.cli import command
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

MASTER_ONLY = {"--headless", "--only-summary", "--exit-code-on-error", "-u", "-r", "--host", "--summary-out"}
TAKES_VALUE = {"-u", "-r", "--host", "--exit-code-on-error", "--summary-out"}


@pytest.fixture(scope="module")
def lab():
    why = netns.available()
    if why:
        pytest.skip(f"network namespaces unavailable here: {why}")
    with netns.hosts("srv", "master", "w1", "w2") as made:
        yield made


@pytest.fixture(scope="module")
def remote_server(lab, exported_model):
    """A null-backend server (2 ms per call) bound to the server host's own address."""
    srv = lab["srv"]
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--host",
                      srv.address, "--null_delay_ms", "2", backend="null", prefix=srv.run_prefix) as server:
        yield server


def endpoint(server) -> ServedEndpoint:
    host, grpc_port = server.fields["grpc"].rsplit(":", 1)
    return ServedEndpoint(name="remote", kind="embedded", device="cpu", device_name=server.fields["device_name"],
                          host=host, grpc_port=int(grpc_port), rest_port=int(server.fields["rest"].rsplit(":", 1)[1]),
                          model_name="mnist", batching_profile="off")


def without(option: str, argv: list[str]) -> list[str]:
    """`argv` less `option` and its value."""
    if option not in argv:
        return argv
    at = argv.index(option)
    return argv[:at] + argv[at + 2:]


def worker_options(options: list[str]) -> list[str]:
    """The cell's own options (samples, batch, windows, ...), without those only the master takes."""
    kept, skip = [], False
    for option in options:
        if skip:
            skip = False
            continue
        if option in MASTER_ONLY:
            skip = option in TAKES_VALUE
            continue
        kept.append(option)
    return kept


@contextmanager
def distributed_cell(lab, server, run: plans.RunSettings, cell: plans.Cell, work: Path) -> Iterator[dict]:
    """A master on its host and a worker on each worker host; yields their processes, then stops them."""
    summary_path, raw = work / "summary.json", work / "raw"
    base = locust_command(run, cell, endpoint(server), summary_path)
    user_class, options = base[-1], without("--processes", base[:-1])  # workers are hosts, not local forks
    master, workers = lab["master"], [lab["w1"], lab["w2"]]
    # Locust hands the master's options to its workers, so the raw-latency folder goes to the master too.
    procs = {"master": subprocess.Popen([*master.run_prefix, *options, "--master", "--master-bind-host",
                                         master.address, "--expect-workers", "2", "--raw-latency-dir", str(raw),
                                         user_class],
                                        stdout=(work / "master.log").open("w"), stderr=subprocess.STDOUT)}
    for worker in workers:
        argv = [*worker.run_prefix, sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--worker",
                "--master-host", master.address, *worker_options(options[5:]), "--raw-latency-dir", str(raw),
                user_class]
        procs[worker.name] = subprocess.Popen(argv, stdout=(work / f"{worker.name}.log").open("w"),
                                              stderr=subprocess.STDOUT)
    try:
        yield {"procs": procs, "summary": summary_path, "raw": raw}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


def requests_seen(server) -> float:
    snapshot = scrape.scrape(server.rest_url)
    return sum(snapshot.counters.get(scrape.REQUEST_COUNT, {}).values()) if snapshot else 0.0


def finish(master: subprocess.Popen, summary_path: Path, run: plans.RunSettings, work: Path):
    returncode = master.wait(timeout=cell_deadline_s(run))
    return finished_run(returncode, summary_path, work / "master.log", 0.0)


RUN = plans.RunSettings(warmup_s=0.5, measure_s=3.0, window_s=1.0, processes=2, check="shape", request_timeout_s=5.0)
CLOSED = plans.Cell("closed", 1, 8, None)


def test_a_master_merges_two_worker_hosts_exactly(lab, remote_server, exported_model, tmp_path):
    run = replace(RUN, samples=str(exported_model.samples_path))
    with distributed_cell(lab, remote_server, run, CLOSED, tmp_path) as cell:
        done = finish(cell["procs"]["master"], cell["summary"], run, tmp_path)
        per_worker = [json.loads(p.read_text()) for p in sorted(cell["raw"].glob("latencies-*.json"))]
    assert done.failure == "", done.failure
    summary = done.summary
    assert summary.processes_reported == 2 and len(summary.cpu_s_by_pid) == 2
    assert len(per_worker) == 2 and all(per_worker)  # both hosts measured
    merged = stats.decode(summary.histogram_us)
    assert stats.same_counts(merged, stats.histogram_of([v for values in per_worker for v in values]))
    assert merged.get_total_count() == summary.ok_requests == sum(map(len, per_worker))  # requests add up
    assert summary.requests == summary.ok_requests and summary.errors_by_code == {}


@pytest.mark.parametrize("fault", ["cut", "kill"])
def test_a_worker_host_lost_mid_cell_leaves_a_flagged_cell_with_the_others_data(lab, remote_server, exported_model,
                                                                                 tmp_path, fault):
    run = replace(RUN, samples=str(exported_model.samples_path))
    started = time.monotonic()
    try:
        with distributed_cell(lab, remote_server, run, CLOSED, tmp_path) as cell:
            before = requests_seen(remote_server)
            wait_for(lambda: requests_seen(remote_server) > before + 50, 90, "load from the worker hosts")
            time.sleep(1.0)  # inside the measured window
            if fault == "cut":
                lab["w2"].cut()
            else:
                cell["procs"]["w2"].send_signal(signal.SIGKILL)
            done = finish(cell["procs"]["master"], cell["summary"], run, tmp_path)
    finally:
        netns.ip("link", "set", lab["w2"].host_link, "up")
    assert time.monotonic() - started < cell_deadline_s(run) + 30  # bounded by the master's deadline
    assert done.summary is not None and "only 1 of 2 load processes reported" in done.failure
    assert done.summary.processes_reported == 1 and done.summary.ok_requests > 0  # w1's data kept
    flags = cell_flags(CellContext("t", run, {}, 1), load_spec(run, CLOSED), done.summary, done.failure)
    assert flags, "the cell must be flagged"


def test_a_server_host_lost_mid_search_ends_the_search_with_what_was_measured(lab, exported_model, tmp_path):
    srv = lab["srv"]
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--host",
                      srv.address, "--null_delay_ms", "5", backend="null", prefix=srv.run_prefix) as server:
        target = endpoint(server)
        argv = command("capacity", "--p99-ms", "50", "--target", target.grpc_target, "--rest-url", target.rest_url,
                       "--samples", str(exported_model.samples_path), "--check", "shape", "--measure-s", "1.5",
                       "--warmup-s", "0.3", "--request-timeout-s", "3", "--max-steps", "8", "--no-report",
                       "--results-dir", str(tmp_path))
        started = time.monotonic()
        search = subprocess.Popen(argv, stdout=(tmp_path / "capacity.log").open("w"), stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: any(len(p.read_text().splitlines()) >= 2 for p in tmp_path.glob("*/results.jsonl")),
                     120, "two cells of the search")
            srv.cut()
            returncode = search.wait(timeout=180)
        finally:
            if search.poll() is None:
                search.kill()
            netns.ip("link", "set", srv.host_link, "up")
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    assert time.monotonic() - started < 200 and returncode in (0, 1)
    assert sum(c.requests > 0 and c.status == "ok" for c in cells) >= 2  # what was measured is kept
    assert cells[-1].status != "ok" or not cells[-1].valid  # the cell the host was lost in says so
    assert "capacity" in (tmp_path / "capacity.log").read_text()
