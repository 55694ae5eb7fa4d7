"""TF Serving's own files, generated from the serving configuration for one batching profile.

Written into one directory per profile (`build/serving/<profile>/`):

- `models.config`            ModelServerConfig text proto (`--model_config_file`)
- `batching_parameters.txt`  BatchingParameters text proto (`--batching_parameters_file`),
                             only for profiles with batching enabled
- `monitoring.config`        MonitoringConfig text proto (`--monitoring_config_file`)
- `compose.env`              the variables docker/compose.yaml reads, for running compose by hand

The embedded server (`python -m serving.server`) and the TF Serving containers read these very files.
Paths inside them are absolute host paths; the containers mount the models and this directory
at the same absolute paths, so one file is valid in both places (tensorflow_model_server
rejects relative model base paths). `mnist-bench serve files --batching cpu` prints the directory.

Not for: the configuration itself (`serving.deploy.config`) or reading the files back
(`serving.protocol.protos`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from google.protobuf import text_format

from serving.deploy.config import (
    BATCHING_FIELDS,
    DEFAULT_BUILD_DIR,
    BatchingProfile,
    ServingConfig,
    build_profile,
    cpu_cores,
    effective_profile_name,
)
from serving.protocol.protos import MonitoringConfig

MODEL_CONFIG_FILE = "models.config"
BATCHING_PARAMETERS_FILE = "batching_parameters.txt"
MONITORING_CONFIG_FILE = "monitoring.config"
COMPOSE_ENV_FILE = "compose.env"


@dataclass(frozen=True)
class ServingFiles:
    """The TF Serving files generated for one profile."""

    directory: Path
    profile: BatchingProfile
    model_config_file: Path
    batching_parameters_file: Path | None  # None when the profile turns batching off
    monitoring_config_file: Path
    compose_env_file: Path


def model_server_config_text(config: ServingConfig) -> str:
    from tensorflow_serving.config import model_server_config_pb2

    message = model_server_config_pb2.ModelServerConfig()
    entry = message.model_config_list.config.add()
    entry.name = config.model.name
    entry.base_path = str(config.model.base_path)
    entry.model_platform = config.model.platform
    return text_format.MessageToString(message)


def monitoring_config_text(config: ServingConfig) -> str:
    message = MonitoringConfig()
    message.prometheus_config.enable = True
    message.prometheus_config.path = config.prometheus_path
    return text_format.MessageToString(message)


def compose_env_text(config: ServingConfig, files: ServingFiles) -> str:
    """The variables docker/compose.yaml needs, as a compose `--env-file`."""
    return "".join(f"{key}={value}\n" for key, value in compose_variables(config, files).items())


def compose_variables(config: ServingConfig, files: ServingFiles) -> dict[str, str]:
    batching = files.batching_parameters_file
    variables = {
        "TFS_MODEL_NAME": config.model.name,
        "TFS_MODELS_DIR": str(config.model.base_path.parent),
        "TFS_CONFIG_DIR": str(files.directory),
        "TFS_MODEL_CONFIG_FILE": str(files.model_config_file),
        "TFS_MONITORING_CONFIG_FILE": str(files.monitoring_config_file),
        "TFS_ENABLE_BATCHING": "true" if batching else "false",
        # Empty when batching is off: tensorflow_model_server rejects the file without batching.
        "TFS_BATCHING_PARAMETERS_FILE": str(batching) if batching else "",
        "TFS_FILE_SYSTEM_POLL_WAIT_SECONDS": str(config.file_system_poll_wait_seconds),
        "TFS_BATCHING_PROFILE": files.profile.name,
    }
    for device, ports in config.devices.items():
        variables[f"TFS_{device.upper()}_GRPC_PORT"] = str(ports.grpc_port)
        variables[f"TFS_{device.upper()}_REST_PORT"] = str(ports.rest_port)
    return variables


def _write_if_changed(path: Path, text: str) -> None:
    """Atomic, and untouched when equal, so a running server polling the file sees no churn."""
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _directory_name(profile_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+=,-]", "_", profile_name)


def tuned_profile(config: ServingConfig, profile_name: str,
                  overrides: Mapping[str, Any] | None = None) -> BatchingProfile:
    """The named profile with `overrides` applied and checked, labelled with every tuned field."""
    base = config.profile(profile_name)
    if overrides:
        raw = {name: getattr(base, name) for name in BATCHING_FIELDS if getattr(base, name) is not None}
        raw.update(overrides)
        raw["enable_batching"] = base.enable_batching
        base = build_profile(profile_name, raw, cpu_cores())
    return replace(base, name=effective_profile_name(profile_name, overrides or {}))


def files_for(profile: BatchingProfile, build_dir: str | Path | None = None) -> ServingFiles:
    """Where the profile's files go (`<build_dir>/<profile label>/`); nothing is written."""
    directory = (Path(build_dir) if build_dir else DEFAULT_BUILD_DIR).resolve() / _directory_name(profile.name)
    return ServingFiles(
        directory=directory, profile=profile,
        model_config_file=directory / MODEL_CONFIG_FILE,
        batching_parameters_file=directory / BATCHING_PARAMETERS_FILE if profile.enable_batching else None,
        monitoring_config_file=directory / MONITORING_CONFIG_FILE,
        compose_env_file=directory / COMPOSE_ENV_FILE)


def batching_parameters_text(profile: BatchingProfile) -> str:
    """The profile as TF Serving's `--batching_parameters_file` (BatchingParameters text proto)."""
    if not profile.enable_batching:
        raise ValueError(f"profile {profile.name!r} turns batching off: TF Serving takes no batching file for it")
    return text_format.MessageToString(profile.to_proto())


def write_files(config: ServingConfig, files: ServingFiles) -> None:
    """Write every file, leaving unchanged ones untouched; a stale batching file is removed."""
    files.directory.mkdir(parents=True, exist_ok=True)
    _write_if_changed(files.model_config_file, model_server_config_text(config))
    _write_if_changed(files.monitoring_config_file, monitoring_config_text(config))
    if files.batching_parameters_file:
        _write_if_changed(files.batching_parameters_file, batching_parameters_text(files.profile))
    else:
        (files.directory / BATCHING_PARAMETERS_FILE).unlink(missing_ok=True)
    _write_if_changed(files.compose_env_file, compose_env_text(config, files))


def generate(config: ServingConfig, profile_name: str, build_dir: str | Path | None = None,
             overrides: Mapping[str, Any] | None = None) -> ServingFiles:
    """Write TF Serving's files for one profile (plus overrides) and return where they are."""
    files = files_for(tuned_profile(config, profile_name, overrides), build_dir)
    write_files(config, files)
    return files
