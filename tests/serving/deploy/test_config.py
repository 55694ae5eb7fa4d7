"""The one serving config and the TF Serving files generated from it (serving/deploy/config.py, tfs_files.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from serving.deploy import config as cfg
from serving.deploy import tfs_files as tfs
from serving.protocol.names import METRICS_PATH
from serving.protocol.protos import (
    load_batching_parameters,
    load_model_server_config,
    load_monitoring_config,
)
from tests.support.cli import invoke
from tests.support.paths import REPO

WRAPPED = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches", "num_batch_threads",
           "thread_pool_name", "enable_large_batch_splitting", "max_execution_batch_size"}


def raw_profiles() -> dict:
    return tomllib.loads(cfg.DEFAULT_CONFIG_FILE.read_text())["profiles"]


def enabled_profiles() -> list[str]:
    return sorted(name for name, table in raw_profiles().items() if table.get("enable_batching"))


@pytest.fixture
def config():
    return cfg.load_config(cfg.DEFAULT_CONFIG_FILE, env={})


def test_repo_config_names_the_three_profiles(config):
    assert {"off", "cpu", "gpu"} <= set(config.profiles)
    assert config.profile("off").enable_batching is False
    assert enabled_profiles() == ["cpu", "gpu"]


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_enabled_profiles_set_every_tf_serving_batching_field(name):
    assert set(raw_profiles()[name]) == set(cfg.BATCHING_FIELDS) | {"enable_batching"}


@pytest.mark.parametrize("name", ["cpu", "gpu"])
def test_generated_batching_file_parses_back_with_every_field(config, name, tmp_path):
    files = tfs.generate(config, name, tmp_path)
    parsed = load_batching_parameters(files.batching_parameters_file)
    profile = config.profile(name)
    for field in cfg.BATCHING_FIELDS:
        expected = getattr(profile, field)
        if field in WRAPPED:
            assert parsed.HasField(field), field  # present even when the value is 0 or false
            assert getattr(parsed, field).value == expected, field
        elif field == "allowed_batch_sizes":
            assert list(parsed.allowed_batch_sizes) == list(expected)
        else:
            assert getattr(parsed, field) == expected, field


def test_cpu_profile_follows_tf_serving_cpu_advice(config):
    cpu = config.profile("cpu")
    assert cpu.num_batch_threads == cfg.cpu_cores()
    assert cpu.batch_timeout_micros == 0
    assert cpu.max_enqueued_batches == cpu.num_batch_threads  # online serving: bound queueing delay
    assert cpu.max_batch_size >= 512 and cpu.allowed_batch_sizes == ()


def test_gpu_profile_follows_tf_serving_gpu_advice(config):
    gpu = config.profile("gpu")
    assert gpu.num_batch_threads == cfg.cpu_cores()
    assert 1000 <= gpu.batch_timeout_micros <= 10000  # "a few milliseconds"
    assert 100 <= gpu.max_batch_size <= 10000  # "values in the hundreds or thousands"
    assert gpu.allowed_batch_sizes[-1] == gpu.max_batch_size


def test_model_config_parses_with_tf_servings_proto_and_holds_absolute_path(config, tmp_path):
    files = tfs.generate(config, "off", tmp_path)
    parsed = load_model_server_config(files.model_config_file)
    (entry,) = parsed.model_config_list.config
    assert entry.name == "mnist"
    assert entry.model_platform == "tensorflow"
    assert Path(entry.base_path).is_absolute()  # tensorflow_model_server rejects relative base paths
    assert Path(entry.base_path) == REPO / "models" / "mnist"


def test_monitoring_config_turns_on_prometheus(config, tmp_path):
    files = tfs.generate(config, "off", tmp_path)
    parsed = load_monitoring_config(files.monitoring_config_file)
    assert parsed.prometheus_config.enable is True
    assert parsed.prometheus_config.path == METRICS_PATH


def test_off_profile_writes_no_batching_file_and_says_so_to_compose(config, tmp_path):
    stale = tmp_path / "off" / tfs.BATCHING_PARAMETERS_FILE
    stale.parent.mkdir(parents=True)
    stale.write_text("max_batch_size { value: 1 }\n")
    files = tfs.generate(config, "off", tmp_path)
    assert files.batching_parameters_file is None and not stale.exists()
    env = dict(line.split("=", 1) for line in files.compose_env_file.read_text().splitlines())
    assert env["TFS_ENABLE_BATCHING"] == "false" and env["TFS_BATCHING_PARAMETERS_FILE"] == ""


def test_compose_env_points_at_the_generated_files(config, tmp_path):
    files = tfs.generate(config, "gpu", tmp_path)
    env = dict(line.split("=", 1) for line in files.compose_env_file.read_text().splitlines())
    assert env["TFS_BATCHING_PARAMETERS_FILE"] == str(files.batching_parameters_file)
    assert env["TFS_MODEL_CONFIG_FILE"] == str(files.model_config_file)
    assert env["TFS_CONFIG_DIR"] == str(files.directory)
    assert env["TFS_MODELS_DIR"] == str(REPO / "models")
    assert (env["TFS_CPU_GRPC_PORT"], env["TFS_CPU_REST_PORT"]) == ("8500", "8501")
    assert (env["TFS_GPU_GRPC_PORT"], env["TFS_GPU_REST_PORT"]) == ("8510", "8511")


def test_layers_defaults_then_toml_then_env_then_cli(tmp_path):
    toml = tmp_path / "serving.toml"
    toml.write_text('[model]\nname = "digits"\n[devices.cpu]\ngrpc_port = 9000\nrest_port = 9001\n')
    from_toml = cfg.load_config(toml, env={})
    assert from_toml.model.name == "digits" and from_toml.ports("cpu") == cfg.DevicePorts(9000, 9001)
    assert from_toml.ports("gpu") == cfg.DevicePorts(8510, 8511)  # dataclass default kept
    env = {"SERVING_CPU_GRPC_PORT": "9100", "SERVING_MODELS_DIR": str(tmp_path)}
    from_env = cfg.load_config(toml, env=env)
    assert from_env.ports("cpu") == cfg.DevicePorts(9100, 9001)
    assert from_env.model.base_path == tmp_path.resolve() / "digits"
    from_cli = cfg.load_config(toml, env=env, cli={"devices": {"cpu": {"grpc_port": 9200}}})
    assert from_cli.ports("cpu").grpc_port == 9200
    assert cfg.load_config(env={"SERVING_CONFIG": str(toml)}).model.name == "digits"


def test_overrides_are_applied_and_named_in_the_profile_label(config, tmp_path):
    overrides = cfg.batching_overrides({"SERVING_BATCHING_BATCH_TIMEOUT_MICROS": "3000"},
                                       ["max_batch_size=64", "allowed_batch_sizes=16,32,64"])
    files = tfs.generate(config, "gpu", tmp_path, overrides)
    assert files.profile.name == "gpu+allowed_batch_sizes=16,32,64,batch_timeout_micros=3000,max_batch_size=64"
    parsed = load_batching_parameters(files.batching_parameters_file)
    assert parsed.batch_timeout_micros.value == 3000 and parsed.max_batch_size.value == 64
    assert list(parsed.allowed_batch_sizes) == [16, 32, 64]
    assert files.profile.parameters()["max_batch_size"] == 64


@pytest.mark.parametrize("table, message", [
    ({"enable_batching": True, "max_batch_size": 64, "allowed_batch_sizes": [8, 32]},
     "Last entry in allowed_batch_sizes must match max_batch_size"),
    ({"enable_batching": True, "max_batch_size": 64, "allowed_batch_sizes": [32, 16, 64]},
     "monotonically increasing"),
    ({"enable_batching": True, "num_batch_threads": 0}, "num_batch_threads must be >= 1"),
    ({"enable_batching": True, "batch_timeout_micro": 5}, "unknown field(s) batch_timeout_micro"),
    ({"enable_batching": False, "max_batch_size": 8}, "set while enable_batching = false"),
    ({"enable_batching": True, "max_batch_size": "lots"}, "expected an integer"),
])
def test_bad_profiles_fail_with_a_clear_message(table, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        cfg.build_profile("bad", table, cores=2)


def test_bad_ports_are_clear_errors():
    with pytest.raises(ValueError, match="devices.cpu.grpc_port: expected a TCP port"):
        cfg.build_config({"devices": {"cpu": {"grpc_port": 70000}}})
    with pytest.raises(ValueError, match="devices.gpu: grpc_port and rest_port must differ"):
        cfg.build_config({"devices": {"gpu": {"grpc_port": 8511}}})
    with pytest.raises(ValueError, match="devices.tpu: unknown device"):
        cfg.build_config({"devices": {"tpu": {}}})


def test_unknown_profile_and_bad_override_are_clear_errors(config):
    with pytest.raises(ValueError, match="unknown batching profile 'fast'.*cpu, gpu, off"):
        config.profile("fast")
    with pytest.raises(ValueError, match="--set expects FIELD=VALUE"):
        cfg.batching_overrides({}, ["max_batch=3"])


def test_regenerating_the_same_profile_leaves_files_untouched(config, tmp_path):
    first = tfs.generate(config, "cpu", tmp_path)
    stamp = first.batching_parameters_file.stat().st_mtime_ns
    tfs.generate(config, "cpu", tmp_path)
    assert first.batching_parameters_file.stat().st_mtime_ns == stamp


def test_cli_prints_the_directory_and_rejects_bad_input(tmp_path):
    def cli(*args):
        return invoke("serve", "files", "--build-dir", tmp_path, *args)

    done = cli("--batching", "cpu", "--models-dir", str(tmp_path / "m"))
    assert done.exit_code == 0, done.stderr
    directory = Path(done.stdout.strip())
    assert directory == tmp_path / "cpu"
    entry = load_model_server_config(directory / tfs.MODEL_CONFIG_FILE).model_config_list.config[0]
    assert entry.base_path == str(tmp_path / "m" / "mnist")
    bad = cli("--batching", "cpu", "--set", "allowed_batch_sizes=4,8")
    assert bad.exit_code == 1  # a value the config refuses: the user's error, one line
    assert bad.stderr.strip().splitlines() == [
        "mnist-bench serve files: error: profiles.cpu: Last entry in allowed_batch_sizes must match max_batch_size; "
        "last entry was 8; expected 1024"]
    usage = cli("--batching", "cpu", "--set", "no_such_field=1")
    assert usage.exit_code == 2 and "FIELD=VALUE" in usage.stderr  # bad usage
