"""Garbage-collection pauses: every collection timed into a histogram, and a real server that freezes its
start-up heap and exports its collections beside the request phases."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import urllib.request

import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from serving.deploy.process import start_server
from serving.protocol.names import GC_PAUSE
from serving.server.handling.gc_pauses import GcPauses
from tests.support.grpc import predict_request, stub_for
from tests.support.metrics import metrics_page

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing


def samples_of(text: str, name: str) -> dict[tuple, float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name.startswith(name):
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def exposition(pauses: GcPauses) -> str:
    registry = prometheus_client.CollectorRegistry()
    registry.register(pauses)
    return prometheus_client.generate_latest(registry).decode()


def test_pauses_land_in_their_bucket_per_generation():
    pauses = GcPauses(bounds_us=[10.0, 100.0, 1000.0])
    for generation, pause_us in ((0, 5.0), (0, 50.0), (2, 500.0), (2, 5000.0)):
        pauses.observe(generation, pause_us)
    got = samples_of(exposition(pauses), GC_PAUSE)
    bucket = GC_PAUSE + "_bucket"
    assert got[(bucket, (("generation", "0"), ("le", "10.0")))] == 1
    assert got[(bucket, (("generation", "0"), ("le", "100.0")))] == 2
    assert got[(bucket, (("generation", "2"), ("le", "100.0")))] == 0
    assert got[(bucket, (("generation", "2"), ("le", "1000.0")))] == 1
    assert got[(bucket, (("generation", "2"), ("le", "+Inf")))] == 2
    assert got[(GC_PAUSE + "_sum", (("generation", "2"),))] == 5500.0
    assert got[(GC_PAUSE + "_count", (("generation", "0"),))] == 2


def test_a_real_collection_is_timed_through_gcs_callbacks():
    pauses = GcPauses()
    pauses.install()
    try:
        gc.collect()  # a full collection: generation 2
    finally:
        pauses.uninstall()
    got = samples_of(exposition(pauses), GC_PAUSE)
    assert got[(GC_PAUSE + "_count", (("generation", "2"),))] >= 1
    assert got[(GC_PAUSE + "_sum", (("generation", "2"),))] > 0
    assert pauses._callback not in gc.callbacks


def test_freezing_moves_the_start_up_heap_out_of_later_collections():
    code = ("import gc; from serving.server.handling.gc_pauses import freeze_start_up_heap; "
            "frozen = freeze_start_up_heap(); print(frozen, len(gc.get_objects()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    frozen, tracked = map(int, done.stdout.split())
    assert frozen > 1000 and tracked < frozen / 10  # what collections still walk is a small remainder


@pytest.mark.integration
def test_a_server_freezes_its_heap_and_exports_its_collections(exported_model, samples):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--device_floor_s", "0.2", backend="null") as server:
        stub = stub_for(server)
        for _ in range(200):  # allocations enough for young-generation collections
            stub.Predict(predict_request(samples["images"][:2]), timeout=30)
        page = metrics_page(server)
        with urllib.request.urlopen(f"{server.rest_url}/v1/models/mnist/metadata", timeout=10) as reply:
            info = json.loads(reply.read())["server_info"]
    counts = {labels: v for (name, labels), v in samples_of(page, GC_PAUSE).items() if name == GC_PAUSE + "_count"}
    assert counts and sum(counts.values()) >= 1
    assert info["gc_freeze"] is True
    assert info["grpc_max_threads"] == 256  # the gRPC request threads: every result names them
