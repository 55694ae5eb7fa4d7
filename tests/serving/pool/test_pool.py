"""A pooled embedded server (`--workers 2`) end to end: real processes on a real port.

One batch across frontends, one summed metrics page, a frontend or the owner killed and replaced (its
requests in flight fail UNAVAILABLE, nothing hangs, no shared-memory segment left), a taken port refused,
and nothing left behind after SIGTERM. The two kill tests time how fast requests fail, so they are not marked
`untimed` and run one at a time.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import grpc
import psutil
import pytest
from tensorflow_serving.apis import prediction_service_pb2_grpc

from loadtest.measure.device_floor import server_info_floor
from model_export.provenance import REPO
from serving.deploy.process import start_server
from serving.pool.slab import segment_prefix, segments
from serving.protocol.names import POOL_FRONTENDS, POOL_RESTARTS, REQUEST_COUNT, REQUEST_LATENCY, REQUEST_PHASE_LATENCY
from tests.support import timing
from tests.support.batching import write_batching_file
from tests.support.grpc import predict_request
from tests.support.metrics import metric_value, metrics_page
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def _stubs(server, count: int) -> list[prediction_service_pb2_grpc.PredictionServiceStub]:
    """`count` stubs, each on a connection of its own (channels to one target share one otherwise)."""
    return [prediction_service_pb2_grpc.PredictionServiceStub(
        grpc.insecure_channel(server.grpc_target, options=[("grpc.use_local_subchannel_pool", 1)]))
        for _ in range(count)]


def _stubs_on_every_frontend(server, samples, step: int = 8, most: int = 64):
    """Stubs on connections of their own, one request each, until every frontend holds one. The kernel
    spreads connections over the frontends by a hash, so 8 land on one frontend once in 128 runs; adding 8
    at a time up to 64 makes that 1 in 2^63. Returns the stubs and the requests sent."""
    stubs: list = []
    while len(stubs) < most:
        for stub in _stubs(server, step):
            stub.Predict(predict_request(samples["images"][:1]), timeout=10)
            stubs.append(stub)
        if min(_connections_per_frontend(server)) > 0:
            break
    return stubs, len(stubs)


def _children(server, role: str) -> list[psutil.Process]:
    """The server's frontend (or owner) processes: multiprocessing names none, so they are told apart by
    their command line's spawn target module."""
    found = []
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            line = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "multiprocessing.spawn" in line and "resource_tracker" not in line:
            found.append(child)
    if role == "all":
        return found
    owner_pid = _owner_pid(server)
    return [c for c in found if (c.pid == owner_pid) == (role == "owner")]


def _owner_pid(server) -> int | None:
    """The owner is the only child that holds no connection on the gRPC port."""
    port = int(server.grpc_target.rsplit(":", 1)[1])
    for child in psutil.Process(server.proc.pid).children(recursive=True):
        try:
            if "multiprocessing.spawn" in " ".join(child.cmdline()) and not any(
                    c.laddr and c.laddr.port == port for c in child.net_connections("tcp")):
                if "resource_tracker" not in " ".join(child.cmdline()):
                    return child.pid
        except psutil.Error:
            continue
    return None


def _connections_per_frontend(server) -> list[int]:
    port = int(server.grpc_target.rsplit(":", 1)[1])
    return [sum(1 for c in p.net_connections("tcp") if c.laddr and c.laddr.port == port and c.status == "ESTABLISHED")
            for p in _children(server, "frontend")]


@pytest.fixture(scope="module")
def batching_file(tmp_path_factory):
    return write_batching_file(tmp_path_factory.mktemp("pool") / "batching.txt", max_batch_size=32,
                               batch_timeout_micros=5_000_000, num_batch_threads=1, max_enqueued_batches=100)


@pytest.mark.untimed
def test_one_batch_forms_from_requests_on_different_frontends(exported_model, samples, batching_file):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      "--enable_batching", "--batching_parameters_file", str(batching_file)) as server:
        assert server.fields["workers"] == "2"
        stubs = _stubs(server, 32)
        with cf.ThreadPoolExecutor(32) as pool:
            futures = [pool.submit(s.Predict, predict_request(samples["images"][i:i + 1]), timeout=30)
                       for i, s in enumerate(stubs)]
            wait_for(lambda: sum(_connections_per_frontend(server)) >= 32, 10, "32 connections held")
            held = _connections_per_frontend(server)
            answers = [f.result() for f in futures]
        assert len(held) == 2 and min(held) > 0, held  # both frontends held some of the 32 connections
        got = [int(a.outputs["classes"].int64_val[0]) for a in answers]
        assert got == [int(c) for c in samples["expected_classes"][:32]]
        page = metrics_page(server)
        # one batch of 32 rows, not one per frontend
        assert metric_value(page, ":tensorflow:serving:batching_session:processed_batch_size_count") == 1
        assert metric_value(page, ":tensorflow:serving:batching_session:processed_batch_size_sum") == 32


@pytest.mark.untimed
def test_the_one_metrics_page_counts_every_request_over_all_frontends(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      backend="null") as server:
        stubs, sent = _stubs_on_every_frontend(server, samples)
        for _ in range(4):
            for stub in stubs:
                stub.Predict(predict_request(samples["images"][:1]), timeout=10)
                sent += 1
        assert min(_connections_per_frontend(server)) > 0
        page = metrics_page(server)
        assert metric_value(page, REQUEST_COUNT, 'model_name="mnist",status="OK"') == sent
        grpc_labels = 'API="Predict",entrypoint="GRPC",model_name="mnist"'
        assert metric_value(page, REQUEST_LATENCY + "_count", grpc_labels) == sent
        for phase in ("decode", "validate", "compute_infer", "encode", "handoff"):
            labels = f'API="Predict",model_name="mnist",phase="{phase}"'
            assert metric_value(page, REQUEST_PHASE_LATENCY + "_count", labels) == sent
        assert metric_value(page, POOL_FRONTENDS) == 2
        assert page.count("# TYPE " + REQUEST_COUNT + " counter") == 1  # one family, summed


@pytest.mark.untimed
@pytest.mark.parametrize("owner", [False, True], ids=["frontend-0-measures", "owner-measures"])
def test_every_frontend_reports_the_one_device_floor_the_server_measured(exported_model, owner):
    """REST metadata is answered by the frontends in turn: each gives the floor measured once at start (the
    owner's, or frontend 0's before the others started), never a frontend's own 'not measured'."""
    flags = ["--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
             "--device_floor_s", "0.5"] + (["--device_owner", "always"] if owner else [])
    with start_server(*flags, backend="null") as server:
        floors = [server_info_floor(server.rest_url, "mnist") for _ in range(4)]  # both frontends, twice
    assert all(f is not None and f["batches"] and f["budget_s"] == 0.5 for f in floors), floors
    assert len({json.dumps(f, sort_keys=True) for f in floors}) == 1


def _keep_sending(server, image, stop_at: float, restarted: threading.Event,
                  after_restart: int = 40) -> list[grpc.StatusCode]:
    """Requests one after another, each on a new connection, each bounded by a deadline: until `stop_at`, or
    until `after_restart` more were sent once `restarted` is set."""
    codes: list[grpc.StatusCode] = []
    sent_by_restart: int | None = None
    while time.monotonic() < stop_at:
        if restarted.is_set():
            sent_by_restart = len(codes) if sent_by_restart is None else sent_by_restart
            if len(codes) - sent_by_restart >= after_restart:
                break
        channel = grpc.insecure_channel(server.grpc_target, options=[("grpc.use_local_subchannel_pool", 1)])
        try:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(predict_request(image), timeout=5)
            codes.append(grpc.StatusCode.OK)
        except grpc.RpcError as exc:
            codes.append(exc.code())
        finally:
            channel.close()
    return codes


def test_a_frontend_killed_under_load_is_replaced_and_the_server_keeps_answering(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      backend="null") as server:
        before = {p.pid for p in _children(server, "frontend")}
        restarted = threading.Event()
        with cf.ThreadPoolExecutor(1) as pool:
            load = pool.submit(_keep_sending, server, samples["images"][:1], time.monotonic() + 20, restarted)
            time.sleep(1)
            victim = sorted(before)[0]
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: metric_value(metrics_page(server), POOL_RESTARTS, 'role="frontend"') == 1, 60,
                     "the frontend restarted")
            after = {p.pid for p in _children(server, "frontend")}
            restarted.set()
            codes = load.result()
        assert len(after) == 2 and victim not in after and after & before
        assert grpc.StatusCode.DEADLINE_EXCEEDED not in codes  # nothing hung
        assert codes[-20:] == [grpc.StatusCode.OK] * 20  # answering after the restart
        assert set(codes) <= {grpc.StatusCode.OK, grpc.StatusCode.UNAVAILABLE}


def test_an_owner_killed_fails_its_requests_unavailable_and_comes_back(exported_model, samples, batching_file):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      "--enable_batching", "--batching_parameters_file", str(batching_file)) as server:
        prefix = segment_prefix(server.proc.pid)
        slabs = segments(prefix)
        assert len(slabs) == 2  # one slab per frontend
        owner = _owner_pid(server)
        stubs = _stubs(server, 4)
        with cf.ThreadPoolExecutor(4) as pool:  # they wait in the owner's queue (5 s batch timeout)
            futures = [pool.submit(_code_and_time, s, samples["images"][:1]) for s in stubs]
            time.sleep(0.5)
            killed_at = time.monotonic()
            os.kill(owner, signal.SIGKILL)
            outcomes = [f.result() for f in futures]
        assert [code for code, _ in outcomes] == [grpc.StatusCode.UNAVAILABLE] * 4
        slowest_s = max(done - killed_at for _, done in outcomes)
        # failed within a second: how fast this machine's processes see the owner's socket close
        timing.holds("all failed < 1 s after the kill", slowest_s < 1.0, f"the slowest after {slowest_s:.3f} s")
        wait_for(lambda: metric_value(metrics_page(server), POOL_RESTARTS, 'role="owner"') == 1, 120,
                 "the owner restarted")
        answer = stubs[0].Predict(predict_request(samples["images"][:1]), timeout=30)
        assert int(answer.outputs["classes"].int64_val[0]) == int(samples["expected_classes"][0])
        assert _owner_pid(server) not in (None, owner)
        assert segments(prefix) == slabs  # the frontends' slabs, nothing the dead owner made


def _code_and_time(stub, image) -> tuple[grpc.StatusCode, float]:
    try:
        stub.Predict(predict_request(image), timeout=30)
        code = grpc.StatusCode.OK
    except grpc.RpcError as exc:
        code = exc.code()
    return code, time.monotonic()


@contextmanager
def _reuseport_listener():
    """A listener as gRPC Python's default makes one: SO_REUSEPORT on."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    try:
        yield sock.getsockname()[1]
    finally:
        sock.close()


@pytest.mark.untimed
def test_a_port_another_server_holds_is_refused(exported_model):
    with _reuseport_listener() as port:
        done = subprocess.run([sys.executable, "-m", "serving.server", "--model_name", "mnist", "--model_base_path",
                               str(exported_model.base_path), "--backend", "null", "--workers", "2",
                               "--port", str(port), "--rest_api_port", "0"],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"gRPC port {port} on 127.0.0.1 is already taken" in done.stderr


@pytest.mark.untimed
def test_sigterm_leaves_no_process_or_segment_behind(exported_model, batching_file):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      "--enable_batching", "--batching_parameters_file", str(batching_file), backend="null") as server:
        children = _children(server, "all")
        assert len(children) == 3  # two frontends and the owner
        prefix = segment_prefix(server.proc.pid)
        assert segments(prefix)
        assert server.stop() == 0
    gone, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    assert segments(prefix) == []


@pytest.mark.untimed
def test_a_killed_supervisor_takes_its_processes_with_it(exported_model, batching_file):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--workers", "2",
                      "--enable_batching", "--batching_parameters_file", str(batching_file), backend="null") as server:
        children = _children(server, "all")
        prefix = segment_prefix(server.proc.pid)
        server.proc.kill()
        server.proc.wait(timeout=10)
        gone, alive = psutil.wait_procs(children, timeout=60)
    assert len(children) == 3 and alive == []  # told by the kernel (PR_SET_PDEATHSIG), they drained and left
    assert segments(prefix) == []  # the frontends removed their slabs on the way out
