"""A TF Serving container's device floor is measured in a child process, and the commands that measure never load
TensorFlow's runtime in their own process (`mnist-bench capacity` reads and writes TF Serving's messages through
TensorFlow's generated protos only).

The first test fails if the child does not run the real SavedModel (no floor, or one from elsewhere); the second if
a failed or overrunning child were waited on or taken for a floor; the third if the console script left TensorFlow's
runtime in a measuring command (it took ~4 s of every run's start-up and ~500 MB)."""

from __future__ import annotations

import socket
import subprocess
import sys
from dataclasses import replace

import pytest

from loadtest.measure import device_floor as floors
from serving.endpoint import ServedEndpoint
from tests.support.paths import REPO

CONTAINER = ServedEndpoint(name="cpu", kind="tfserving-container", device="cpu", device_name="Test CPU",
                           host="127.0.0.1", grpc_port=8500, rest_port=8501, model_name="mnist",
                           batching_profile="off", container="tfs-cpu")


@pytest.mark.integration
@pytest.mark.untimed
def test_a_local_containers_savedmodel_is_measured_alone_in_a_child_process(exported_model, monkeypatch):
    monkeypatch.setattr(floors, "FLOOR_BUDGET_S", 2.0)
    record = floors.measure_here(CONTAINER, exported_model.base_path, (1, 8))
    floor = record.to_dict()
    assert floor["source"] == floors.MEASURED_HERE and floor["runtime"] == "tensorflow", floor
    assert [b["batch_size"] for b in floor["batches"]] == [1, 8]
    assert all(b["images_per_s"] > 0 and b["latency_us"] > 0 for b in floor["batches"]), floor


def test_a_child_that_fails_overruns_or_prints_no_floor_is_an_unknown_floor_with_why(tmp_path):
    failed = floors.run_floor_child([sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"],
                                    30.0)
    assert failed == {"unknown": "measuring the container's model here failed (exit 3: boom)"}
    garbage = floors.run_floor_child([sys.executable, "-c", "print('not json')"], 30.0)
    assert garbage["unknown"].startswith("measuring the container's model here failed (exit 0")
    overran = floors.run_floor_child([sys.executable, "-c", "import time; time.sleep(30)"], 0.5)
    assert overran == {"unknown": "measuring the container's model here did not finish within 0 s (killed)"}
    elsewhere = floors.measure_here(replace(CONTAINER, host="10.0.0.7"), tmp_path, (1,))
    assert elsewhere.to_dict() == {"source": "unknown", "note": "the container runs on 10.0.0.7, not on this host"}
    assert floors.measure_here(CONTAINER, tmp_path, (1,)).note == f"no SavedModel version under {tmp_path}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.integration
@pytest.mark.untimed
def test_a_capacity_run_never_loads_tensorflows_runtime_in_its_own_process(exported_model, tmp_path):
    """`python -m loadtest capacity` against a closed port: the probe builds and sends a Predict (the TF Serving
    API's messages imported) and the run ends with its one-line answer, TensorFlow's runtime never imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "loadtest", "capacity", "--target",
                           f"127.0.0.1:{closed_port()}", "--samples", str(exported_model.samples_path),
                           "--results-dir", str(tmp_path), "--p99-ms", "25", "--max-minutes", "0.1", "--no-report",
                           "--no-tool-ceiling"], cwd=REPO, capture_output=True, text=True, timeout=120)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
    assert done.returncode == 1 and "is not answering" in done.stdout, done.stdout[-1000:] + done.stderr[-1000:]
    assert {"loadtest.load.client", "tensorflow_serving.apis.predict_pb2"} <= imported
    assert "tensorflow.python" not in imported and "keras" not in imported
