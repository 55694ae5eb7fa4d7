"""The offline device bundle: what goes in it, its size, and a real offline run from it on CPU."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from loadtest.bundle import device_run
from loadtest.bundle.build import (
    IMAGE_PACKAGES,
    LIMIT_BYTES,
    BundleError,
    Target,
    build,
    copy_model,
    normalized,
    requirements,
)
from loadtest.records import read_results


def test_wheel_names_are_compared_as_pip_normalises_them():
    assert normalized("Flask_Login") == "flask-login" and normalized("zope.event") == "zope-event"
    assert {"jax", "numpy", "grpcio", "matplotlib"} <= IMAGE_PACKAGES and "keras" not in IMAGE_PACKAGES


def test_the_bundle_installs_the_projects_dependencies_less_tensorflows():
    wanted = requirements()
    assert {"keras", "protobuf", "locust", "hdrhistogram", "grpcio"} <= set(wanted)
    assert not {"tensorflow", "tensorflow-serving-api", "mlxtend", "jax"} & set(wanted)


def test_a_model_without_its_keras_weights_is_refused(tmp_path):
    (tmp_path / "mnist" / "3").mkdir(parents=True)
    (tmp_path / "mnist-samples.npz").write_bytes(b"")
    with pytest.raises(BundleError, match="has no model.keras"):
        copy_model(tmp_path, tmp_path / "out")
    with pytest.raises(BundleError, match="no exported model"):
        copy_model(tmp_path / "none", tmp_path / "out")


def test_locust_gets_the_last_quarter_of_the_cores(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))
    assert device_run.core_split(0) == ("0,1,2,3,4,5,6,7,8,9,10,11", "12,13,14,15", 4)
    assert device_run.core_split(2) == ("0,1,2,3,4,5,6,7,8,9,10,11,12,13", "14,15", 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert device_run.core_split(0) == ("0", "1", 1) and device_run.core_split(5) == ("0", "1", 1)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3})
    assert device_run.core_split(0) == ("", "", 1)  # one core: nothing pinned


def test_an_unknown_device_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        device_run.parse(["--out", "x", "--devices", "gpu,tpu"])
    assert exit_info.value.code == 2 and "unknown ['tpu']" in capsys.readouterr().err


@pytest.mark.integration
def test_the_device_bundle_fits_a_call_and_holds_only_what_the_image_lacks(exported_model, tmp_path):
    manifest = build(tmp_path / "bundle", exported_model.output_dir)
    bundle = tmp_path / "bundle"
    assert manifest.size_bytes <= LIMIT_BYTES and manifest.python_version == "3.12"
    wheels = {normalized(name.split("-")[0]) for name in manifest.wheels}
    assert {"keras", "locust", "hdrhistogram", "gevent", "protobuf"} <= wheels
    assert not (wheels & (IMAGE_PACKAGES - {"protobuf"}))  # jax, numpy, grpcio... are the image's
    assert all("cp312" in name or "none-any" in name or "abi3" in name for name in manifest.wheels)
    assert (bundle / "project" / "models" / "mnist" / "1" / "model.keras").is_file()
    assert (bundle / "protos" / "tensorflow_serving" / "apis" / "predict_pb2.py").is_file()
    assert not (bundle / "protos" / "tensorflow" / "__init__.py").exists()  # TF's runtime can never load
    assert json.loads((bundle / "manifest.json").read_text())["size_bytes"] == manifest.size_bytes


def offline(command: list[str]) -> list[str]:
    """The command in a network namespace of its own with only loopback up, where this machine allows it."""
    probe = subprocess.run(["unshare", "-rn", "sh", "-c", "ip link set lo up"], capture_output=True)
    if shutil.which("unshare") is None or shutil.which("ip") is None or probe.returncode != 0:
        return command
    return ["unshare", "-rn", "sh", "-c", 'ip link set lo up && exec "$@"', "offline", *command]


@pytest.mark.integration
def test_the_bundle_runs_offline_from_a_clean_venv_on_cpu(exported_model, tmp_path):
    """A self-contained bundle for this Python (what the image has is packed too), a venv with nothing
    in it, no index, no network: the GPU is skipped with the reason, the CPU searches run on the jax
    backend, and the report is written."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    build(tmp_path / "bundle", exported_model.output_dir, Target(python_version=version, image_packages=frozenset(),
                                                                limit_bytes=None))
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    out = tmp_path / "out"
    command = [str(tmp_path / "venv" / "bin" / "python"), str(tmp_path / "bundle" / "run.py"), "--out", str(out),
               "--devices", "gpu,cpu", "--batches", "1", "--max-steps", "2", "--measure-s", "1", "--max-minutes", "2"]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run(offline(command), capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
    summary = json.loads((out / "device-run.json").read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert summary["exit_codes"] == {"cpu": 0, "report": 0} and "JAX sees no GPU" in summary["skipped"]["gpu"]
    [results] = list((out / "results").glob("*/results.jsonl"))
    cells = read_results(results)
    assert {c.server.name for c in cells} == {"cpu-off", "cpu-cpu"}
    assert all(c.server.versions.get("runtime") == "jax" and "tensorflow" not in c.server.versions for c in cells)
    assert any(c.requests > 0 and c.errors_by_code == {} for c in cells)
    report = (out / "report" / "report.md").read_text()
    assert "embedded server (JAX, the same weights (.keras))" in report and "TF Serving" not in report
