"""docker/: the TF Serving compose file and the load-generator image, checked without Docker.

The compose file is parsed as YAML and interpolated the way compose does, with the pinned
docker/.env and the compose.env generated from the one serving config; the resulting services are
checked against what `tensorflow_model_server` accepts and what the issue asks for.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from serving.deploy import config as cfg
from serving.deploy import tfs_files as tfs
from serving.deploy.docker import compose_defaults
from tests.support.paths import REPO

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing

DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
LOADGEN_COMPOSE = DOCKER / "loadgen.compose.yaml"
DOCKERFILE = DOCKER / "loadgen.Dockerfile"

# Every flag tensorflow_model_server defines (tensorflow_serving/model_servers/main.cc; the same set in 2.19.1,
# 2.20.0 and master of 2026-07-30).
TF_MODEL_SERVER_FLAGS = frozenset("""
port grpc_socket_path rest_api_port rest_api_num_threads rest_api_timeout_in_ms
rest_api_enable_cors_support enable_batching allow_version_labels_for_unavailable_models
batching_parameters_file enable_per_model_batching_parameters model_config_file
model_config_file_poll_wait_seconds model_name model_base_path num_load_threads
num_unload_threads max_num_load_retries load_retry_interval_micros file_system_poll_wait_seconds
flush_filesystem_caches tensorflow_session_parallelism tensorflow_intra_op_parallelism
tensorflow_inter_op_parallelism use_alts_credentials ssl_config_file platform_config_file
per_process_gpu_memory_fraction saved_model_tags grpc_channel_arguments grpc_max_threads
enable_model_warmup num_request_iterations_for_warmup version monitoring_config_file
remove_unused_fields_from_bundle_metagraph prefer_tflite_model num_tflite_pools
num_tflite_interpreters_per_pool enable_signature_method_name_check xla_cpu_compilation_enabled
xla_gpu_compilation_enabled enable_profiler thread_pool_factory_config_file mixed_precision
skip_initialize_tpu enable_grpc_healthcheck_service enable_serialization_as_tensor_content
tensorflow_session_config_file
""".split())
_VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}")


def interpolate(value, env: dict[str, str]):
    """Compose's `${VAR}`, `${VAR:-default}`, `${VAR:?error}` and `$$`, over a parsed document."""
    if isinstance(value, dict):
        return {interpolate(k, env): interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        found = env.get(match["name"], "")
        if match["op"] == ":?" and not found:
            raise KeyError(f"{match['name']}: {match['arg']}")
        return found or (match["arg"] if match["op"] == ":-" else "")

    return _VAR.sub(one, value)


def flags(command: list[str]) -> dict[str, str]:
    parsed = {}
    for arg in command:
        match = re.fullmatch(r"--([a-z_0-9]+)=(.*)", arg)
        assert match, f"not a --flag=value argument: {arg!r}"
        parsed[match[1]] = match[2]
    return parsed


def compose_for(profile: str, tmp_path: Path, extra: dict | None = None) -> tuple[dict, tfs.ServingFiles]:
    config = cfg.load_config(env={})
    files = tfs.generate(config, profile, tmp_path)
    env = {**compose_defaults(DOCKER / ".env"), **compose_defaults(files.compose_env_file), **(extra or {})}
    return interpolate(yaml.safe_load(COMPOSE.read_text()), env), files


@pytest.fixture
def cpu_compose(tmp_path):
    return compose_for("cpu", tmp_path)


def test_images_are_the_official_ones_pinned_once_in_docker_env(tmp_path):
    pinned = compose_defaults(DOCKER / ".env")
    assert pinned["TFS_IMAGE"] == "tensorflow/serving"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned["TFS_VERSION"]), "pin an exact release, never latest"
    raw = yaml.safe_load(COMPOSE.read_text())["services"]
    for service in raw.values():  # no second pin: the version only ever comes from the variable
        assert re.fullmatch(r"\$\{TFS_IMAGE:\?[^}]*\}:\$\{TFS_VERSION:\?[^}]*\}(-gpu)?", service["image"])
    assert pinned["TFS_VERSION"] not in COMPOSE.read_text()
    doc, _ = compose_for("off", tmp_path)
    assert doc["services"]["tfserving-cpu"]["image"] == f"tensorflow/serving:{pinned['TFS_VERSION']}"
    assert doc["services"]["tfserving-gpu"]["image"] == f"tensorflow/serving:{pinned['TFS_VERSION']}-gpu"
    overridden, _ = compose_for("off", tmp_path, {"TFS_VERSION": "2.18.0"})
    assert overridden["services"]["tfserving-gpu"]["image"] == "tensorflow/serving:2.18.0-gpu"


def test_host_ports_cpu_8500_8501_gpu_8510_8511_on_loopback(cpu_compose):
    doc, _ = cpu_compose
    assert doc["services"]["tfserving-cpu"]["ports"] == ["127.0.0.1:8500:8500", "127.0.0.1:8501:8501"]
    assert doc["services"]["tfserving-gpu"]["ports"] == ["127.0.0.1:8510:8500", "127.0.0.1:8511:8501"]
    for service in doc["services"].values():  # the container ports are the ones the server listens on
        command = flags(service["command"])
        assert (command["port"], command["rest_api_port"]) == ("8500", "8501")


def test_models_and_generated_config_are_mounted_read_only_at_the_same_path(cpu_compose):
    doc, files = cpu_compose
    for service in doc["services"].values():
        mounts = service["volumes"]
        assert all(m["type"] == "bind" and m["read_only"] is True for m in mounts)
        assert all(m["source"] == m["target"] and Path(m["source"]).is_absolute() for m in mounts)
        mounted = [Path(m["target"]) for m in mounts]
        base_path = cfg.load_config(env={}).model.base_path
        wanted = [base_path, files.model_config_file, files.batching_parameters_file,
                  files.monitoring_config_file]
        for path in wanted:  # every path the server reads lies inside a mount
            assert any(path.is_relative_to(m) for m in mounted), path


def test_gpu_service_reserves_an_nvidia_gpu_and_cpu_service_does_not(cpu_compose):
    doc, _ = cpu_compose
    (device,) = doc["services"]["tfserving-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and "gpu" in device["capabilities"]
    assert device["device_ids"] == [compose_defaults(DOCKER / ".env")["TFS_GPU_DEVICE"]]
    assert "deploy" not in doc["services"]["tfserving-cpu"]


def test_the_cpuset_is_every_core_unless_the_launcher_pins_the_server(tmp_path):
    """`cpuset` is a string in the Compose Specification; "" (TFS_CPUSET unset) is the engine's default,
    every core. A replica shape's cores (TFS_CPUSET, set by the container launcher) go to both services."""
    raw = yaml.safe_load(COMPOSE.read_text())["services"]
    assert all(service["cpuset"] == "${TFS_CPUSET:-}" for service in raw.values())  # never required: `:-`
    doc, files = compose_for("cpu", tmp_path)
    assert [service["cpuset"] for service in doc["services"].values()] == ["", ""]
    assert "TFS_CPUSET" not in tfs.compose_variables(cfg.load_config(env={}), files)  # the files fit any shape
    pinned, _ = compose_for("cpu", tmp_path, {"TFS_CPUSET": "0-1"})
    assert [service["cpuset"] for service in pinned["services"].values()] == ["0-1", "0-1"]
    assert all(isinstance(service["cpuset"], str) for service in pinned["services"].values())


@pytest.mark.parametrize("profile", ["off", "cpu", "gpu"])
def test_flags_are_ones_tensorflow_model_server_accepts_and_name_the_generated_files(profile, tmp_path):
    doc, files = compose_for(profile, tmp_path)
    for service in doc["services"].values():
        assert service["entrypoint"] == ["tensorflow_model_server"]
        command = flags(service["command"])
        assert set(command) <= TF_MODEL_SERVER_FLAGS
        assert command["model_config_file"] == str(files.model_config_file)
        assert command["monitoring_config_file"] == str(files.monitoring_config_file)
        if profile == "off":  # TF Serving refuses a batching file without --enable_batching
            assert command["enable_batching"] == "false" and command["batching_parameters_file"] == ""
        else:
            assert command["enable_batching"] == "true"
            assert command["batching_parameters_file"] == str(files.batching_parameters_file)


def test_health_checks_ask_the_model_status_endpoint(cpu_compose):
    doc, _ = cpu_compose
    for service in doc["services"].values():
        check = service["healthcheck"]
        assert check["test"][:3] == ["CMD", "bash", "-c"]
        assert "/dev/tcp/127.0.0.1/8501" in check["test"][3] and "/v1/models/mnist " in check["test"][3]
        assert '"AVAILABLE"' in check["test"][3]
        assert check["start_period"] and check["retries"] >= 1


def test_missing_generated_variables_fail_loudly_rather_than_mount_nothing():
    env = compose_defaults(DOCKER / ".env")
    with pytest.raises(KeyError, match="TFS_"):
        interpolate(yaml.safe_load(COMPOSE.read_text()), env)


def test_loadgen_image_installs_the_pinned_project_and_runs_locust_workers():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11[-\w.]*$", text, re.M)
    assert "pip install -r requirements.lock" in text
    for source in re.findall(r"^COPY (\S+)", text, re.M):
        assert (REPO / source).exists(), f"COPY source {source} missing"
    locustfile = re.search(r"LOCUST_LOCUSTFILE=(\S+)", text)[1]
    assert (REPO / locustfile).is_file()
    assert 'ENTRYPOINT ["locust"]' in text and "LOCUST_MODE_WORKER=true" in text


def test_loadgen_compose_builds_that_image_with_the_pinned_python(tmp_path):
    env = {**compose_defaults(DOCKER / ".env"), "LOCUST_MASTER_NODE_HOST": "10.0.0.5"}
    worker = interpolate(yaml.safe_load(LOADGEN_COMPOSE.read_text()), env)["services"]["locust-worker"]
    assert (LOADGEN_COMPOSE.parent / worker["build"]["context"] / worker["build"]["dockerfile"]).resolve() \
        == DOCKERFILE.resolve()
    assert worker["build"]["args"]["PYTHON_IMAGE"] == env["LOADGEN_PYTHON_IMAGE"]
    assert worker["environment"]["LOCUST_MASTER_NODE_HOST"] == "10.0.0.5"
    assert worker["network_mode"] == "host"
    assert all(m["read_only"] for m in worker["volumes"])


def _compose_cli() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"],
                                                 capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


@pytest.mark.integration
@pytest.mark.skipif(_compose_cli() is None, reason="no Docker Compose v2 on this machine")
@pytest.mark.parametrize("cpuset", ["", "0"])  # unpinned, and a one-core replica shape
def test_docker_compose_itself_accepts_the_file(tmp_path, cpuset):
    files = tfs.generate(cfg.load_config(env={}), "cpu", tmp_path)
    done = subprocess.run([*_compose_cli(), "-f", str(COMPOSE), "--env-file", str(DOCKER / ".env"),
                           "--env-file", str(files.compose_env_file), "--profile", "cpu", "--profile", "gpu",
                           "config", "--quiet"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "TFS_CPUSET": cpuset})
    assert done.returncode == 0, done.stderr
