"""Model against server TensorFlow: the pure check by hand, then the one-line warning from `serve start`,
the embedded server's launch and `mnist-bench k8s`, and the TensorFlow the launcher records."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from serving.cli import start_request
from serving.deploy import launcher
from serving.deploy import versions as v
from serving.deploy.docker import compose_defaults
from serving.endpoint import ServedEndpoint
from tests.serving.deploy.test_launcher import Bench
from tests.support.cli import invoke

PIN = compose_defaults()["TFS_VERSION"]
OLDER = "tensorflow/serving:2.20.0 is older: a SavedModel can use ops it does not know"


@pytest.mark.parametrize(("model", "server", "gap"), [
    ("2.21.0", "2.20.0", "2.21 > 2.20"),  # newer model: the server may lack its ops
    ("3.0.0", "2.99.1", "3.0 > 2.99"),  # a newer major
    ("2.21.0", "2.21.0", None),  # same
    ("2.21.1", "2.21.0", None),  # patch-only differences add no ops
    ("2.21.0", "2.21.3", None),
    ("2.19.0", "2.21.0", None),  # older model, newer server
    ("2.10.0", "2.9.3", "2.10 > 2.9"),  # numbers, not strings: 10 > 9
    ("2.21.0rc1", "2.20.0", "2.21 > 2.20"),  # a pre-release is its minor
    (None, "2.20.0", None),  # unknown is no gap
    ("2.21.0", None, None),
    ("unknown", "2.20.0", None),
    ("2.21.0", "not installed", None),
])
def test_model_server_gap_compares_major_minor(model, server, gap):
    assert v.model_server_gap(model, server) == gap


def test_the_warning_is_one_line_naming_model_version_and_server():
    assert v.gap_warning("mnist", 3, "2.21.0", "tensorflow/serving:2.20.0", "2.20.0") == (
        f"model mnist version 3 was written by TensorFlow 2.21.0; {OLDER}")
    assert v.gap_warning("mnist", 3, "2.21.0", "tensorflow/serving:2.21.0", "2.21.0") is None
    assert v.gap_warning("mnist", 3, None, "tensorflow/serving:2.20.0", "2.20.0") is None


@pytest.mark.parametrize(("image", "release"), [
    ("tensorflow/serving:2.20.0", "2.20.0"), ("tensorflow/serving:2.20.0-gpu", "2.20.0"),
    ("registry:5000/tensorflow/serving:2.21.0", "2.21.0"), ("tensorflow/serving:latest", None),
    ("tensorflow/serving:nightly-gpu", None), ("tensorflow/serving", None),
])
def test_an_images_tag_names_its_tensorflow(image, release):
    assert v.image_tensorflow_version(image) == release


def test_servers_tensorflow_from_recorded_versions():
    assert v.server_tensorflow({"image": "tensorflow/serving:2.20.0-gpu", "docker": "28"}) == (
        "tensorflow/serving:2.20.0-gpu", "2.20.0")
    assert v.server_tensorflow({"tensorflow": "2.21.0", "runtime": "tensorflow"}) == (
        "the embedded server's TensorFlow 2.21.0", "2.21.0")
    assert v.server_tensorflow({"tensorflow": "2.21.0"}) == ("the embedded server's TensorFlow 2.21.0", "2.21.0")
    assert v.server_tensorflow({"jax": "0.11.2", "runtime": "jax"}) is None  # no SavedModel is loaded
    assert v.server_tensorflow({"runtime": "none"}) is None


# ----------------------------------------------------------------------------- where it is said


def models_written_by(root: Path, *versions: str | None) -> Path:
    """<root>/models/mnist/<n>/ for each TensorFlow version (None: no metadata file, as a hand-copied model)."""
    for number, written_by in enumerate(versions, start=1):
        version_dir = root / "models" / "mnist" / str(number)
        version_dir.mkdir(parents=True)
        if written_by is not None:
            (version_dir / "metadata.json").write_text(json.dumps({"tensorflow_version": written_by}))
    return root / "models"


def warnings_in(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("warning:")]


def test_serve_start_warns_before_starting_a_container_older_than_the_model(tmp_path):
    models = models_written_by(tmp_path, "2.19.0", "2.21.0")  # version 2 is the one served
    bench = Bench(tmp_path, models, mode="compose-fails")
    bench.env["TFS_VERSION"] = "2.20.0"
    done = bench.refused_start("cpu", "off", "--kind", "container")
    assert done.returncode == 1 and "pull access denied" in done.stderr  # the start itself failed afterwards
    assert warnings_in(done.stderr) == [f"warning: model mnist version 2 was written by TensorFlow 2.21.0; {OLDER}"]


@pytest.mark.parametrize("written_by", ["2.21.0", None])
def test_serve_start_is_silent_when_the_pinned_server_matches_or_the_model_does_not_say(tmp_path, written_by):
    bench = Bench(tmp_path, models_written_by(tmp_path, written_by), mode="compose-fails")
    bench.env.pop("TFS_VERSION", None)
    done = bench.refused_start("cpu", "off", "--kind", "container")
    assert done.returncode == 1 and warnings_in(done.stderr) == []


def test_a_pin_newer_than_the_exporter_is_not_warned_about():
    assert v.image_tensorflow_version(f"tensorflow/serving:{PIN}") == PIN
    assert v.model_server_gap("2.21.0", PIN) is None  # pyproject.toml's TensorFlow, against docker/.env's pin


def test_the_embedded_server_is_checked_against_the_installed_tensorflow_and_jax_is_not(tmp_path, monkeypatch):
    models = models_written_by(tmp_path, "2.22.0")
    monkeypatch.setattr(launcher, "package_versions", lambda names: {"tensorflow": "2.21.0"})
    request = start_request("cpu", "embedded", "off", 30.0, models_dir=str(models), config_file=None,
                            model_name=None, build_dir=str(tmp_path / "build"), assignments=[])
    assert launcher.version_warning(request, "embedded") == (
        "model mnist version 1 was written by TensorFlow 2.22.0; the embedded server's TensorFlow 2.21.0 is "
        "older: a SavedModel can use ops it does not know")
    jax = start_request("cpu", "embedded", "off", 30.0, "jax", models_dir=str(models), config_file=None,
                        model_name=None, build_dir=str(tmp_path / "build"), assignments=[])
    assert launcher.version_warning(jax, "embedded") is None


def test_the_launchers_record_carries_the_tensorflow_that_wrote_the_version_it_serves(tmp_path):
    models = models_written_by(tmp_path, "2.19.0", "2.21.0")
    request = start_request("cpu", "embedded", "off", 30.0, models_dir=str(models), config_file=None,
                            model_name=None, build_dir=str(tmp_path / "build"), assignments=[])
    endpoint = ServedEndpoint(name="cpu", kind="embedded", device="cpu", device_name="x", host="127.0.0.1",
                              grpc_port=1, rest_port=2, model_name="mnist", batching_profile="off",
                              versions={"tensorflow": "2.21.0", "model_version": "1"})
    assert launcher.with_model_tensorflow(endpoint, request).versions[v.MODEL_TENSORFLOW] == "2.19.0"
    unknown = replace(endpoint, versions={"model_version": "7"})
    assert v.MODEL_TENSORFLOW not in launcher.with_model_tensorflow(unknown, request).versions


def test_k8s_warns_once_for_the_pinned_images_when_the_model_is_newer(tmp_path):
    env = {"SERVING_MODELS_DIR": str(models_written_by(tmp_path, "2.21.0")), "TFS_VERSION": "2.20.0"}
    done = invoke("k8s", "--out", tmp_path / "k8s", env=env)
    assert done.exit_code == 0, done.stderr
    assert warnings_in(done.stderr) == [
        "warning: model mnist version 1 was written by TensorFlow 2.21.0; tensorflow/serving:2.20.0 (and its -gpu "
        "image) is older: a SavedModel can use ops it does not know"]
    assert (tmp_path / "k8s" / "tfserving-cpu.yaml").is_file()  # a warning, not a refusal
    matched = invoke("k8s", "--out", tmp_path / "k8s", env={**env, "TFS_VERSION": "2.21.0"})
    assert matched.exit_code == 0 and warnings_in(matched.stderr) == []
