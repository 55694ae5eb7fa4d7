"""The serving configuration: its records, and how its layers become one `ServingConfig`.

One source (`serving/serving.toml`) describes the model, the ports per device and the named
batching profiles. It is layered with `serving.layering` (dataclass defaults -> TOML ->
`SERVING_*` environment -> command line) into a frozen `ServingConfig`; each batching profile is
checked as TF Serving would check it, so a bad profile fails here rather than inside a container.

Not for: writing TF Serving's files from it (`serving.deploy.tfs_files`), starting servers
(`serving.deploy.launcher`) or reading the files back at serving time (`serving.protocol.protos`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from model_export.provenance import REPO, cpu_cores
from serving.endpoint import Device
from serving.layering import env_layer, layered, parse_bool, read_toml
from serving.protocol.names import METRICS_PATH
from serving.protocol.protos import BatchingParameters

DEFAULT_CONFIG_FILE = REPO / "serving" / "serving.toml"
DEFAULT_BUILD_DIR = REPO / "build" / "serving"
DEVICES = tuple(Device)
CPU_CORES = "cpu_cores"  # symbolic value in the TOML, resolved when the files are generated

# BatchingParameters fields, in TF Serving's declaration order (session_bundle_config.proto).
BATCHING_FIELDS = tuple(f.name for f in BatchingParameters.DESCRIPTOR.fields)
_INT_FIELDS = ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
               "num_batch_threads", "max_execution_batch_size")
_BOOL_FIELDS = ("pad_variable_length_inputs", "enable_large_batch_splitting")


@dataclass(frozen=True)
class ModelSettings:
    name: str = "mnist"
    models_dir: str = "models"  # holds <name>/<version>/; relative to the repository root
    platform: str = "tensorflow"

    @property
    def base_path(self) -> Path:
        """Absolute path of the model's version directories, as TF Serving requires."""
        root = Path(self.models_dir).expanduser()
        return (root if root.is_absolute() else REPO / root).resolve() / self.name


@dataclass(frozen=True)
class DevicePorts:
    grpc_port: int
    rest_port: int


@dataclass(frozen=True)
class BatchingProfile:
    """One named set of TF Serving batching parameters; `None` means "not set in the file"."""

    name: str
    enable_batching: bool = False
    max_batch_size: int | None = None
    batch_timeout_micros: int | None = None
    max_enqueued_batches: int | None = None
    num_batch_threads: int | None = None
    thread_pool_name: str | None = None
    allowed_batch_sizes: tuple[int, ...] = ()
    pad_variable_length_inputs: bool = False
    enable_large_batch_splitting: bool | None = None
    max_execution_batch_size: int | None = None

    def parameters(self) -> dict[str, Any]:
        """The batching fields in force, TF Serving names; empty when batching is off."""
        if not self.enable_batching:
            return {}
        values = {name: getattr(self, name) for name in BATCHING_FIELDS}
        values["allowed_batch_sizes"] = list(self.allowed_batch_sizes)
        return {name: value for name, value in values.items() if value is not None}

    def to_proto(self):
        """The BatchingParameters message TF Serving would parse from the generated file."""
        message = BatchingParameters()
        for name, value in self.parameters().items():
            if name == "allowed_batch_sizes":
                message.allowed_batch_sizes.extend(value)
            elif name == "pad_variable_length_inputs":
                message.pad_variable_length_inputs = value
            else:
                getattr(message, name).value = value  # wrapper types keep presence, even for 0
        return message


@dataclass(frozen=True)
class ServingConfig:
    model: ModelSettings = ModelSettings()
    host: str = "127.0.0.1"
    file_system_poll_wait_seconds: int = 1
    devices: Mapping[str, DevicePorts] = field(default_factory=lambda: {
        "cpu": DevicePorts(grpc_port=8500, rest_port=8501),
        "gpu": DevicePorts(grpc_port=8510, rest_port=8511),
    })
    prometheus_path: str = METRICS_PATH
    profiles: Mapping[str, BatchingProfile] = field(
        default_factory=lambda: {"off": BatchingProfile(name="off")})
    source: str = ""  # the TOML file the config came from

    def profile(self, name: str) -> BatchingProfile:
        if name not in self.profiles:
            raise ValueError(f"unknown batching profile {name!r}; "
                             f"{self.source or 'the config'} defines: {', '.join(sorted(self.profiles))}")
        return self.profiles[name]

    def ports(self, device: str) -> DevicePorts:
        if device not in self.devices:
            raise ValueError(f"unknown device {device!r}; expected one of {', '.join(DEVICES)}")
        return self.devices[device]


# ---------------------------------------------------------------- layering

def environment_variables() -> dict[str, tuple[str, ...]]:
    """`SERVING_*` variables and where each goes in the TOML's shape: model, host and ports."""
    variables: dict[str, tuple[str, ...]] = {
        "SERVING_MODEL_NAME": ("model", "name"), "SERVING_MODELS_DIR": ("model", "models_dir"),
        "SERVING_HOST": ("server", "host")}
    for device in DEVICES:
        for key in ("grpc_port", "rest_port"):
            variables[f"SERVING_{device.upper()}_{key.upper()}"] = ("devices", device, key)
    return variables


def split_base_path(model_base_path: str, model_name: str | None,
                    what: str = "--model-base-path") -> tuple[str, str]:
    """A model base path DIR/NAME as the models directory DIR and the model name NAME (the config serves
    <models_dir>/<name>/<version>/); a different model name is refused, as is a path that is no directory.
    `what` names the setting in errors."""
    path = Path(model_base_path).expanduser().resolve()
    if model_name and path.name != model_name:
        raise ValueError(f"{what} {model_base_path} must end in the model name {model_name!r} "
                         "(servers serve <models dir>/<model name>/<version>/)")
    if not path.is_dir():
        raise ValueError(f"{what} {model_base_path} is not a directory (it holds <version>/ folders)")
    return str(path.parent), path.name


def command_line_layer(models_dir: str | None = None, model_name: str | None = None, device: str | None = None,
                       grpc_port: int | None = None, rest_port: int | None = None) -> dict:
    """The command-line layer in the TOML's shape; options not given are left out."""
    layer: dict = {}
    model = {key: value for key, value in (("models_dir", models_dir), ("name", model_name)) if value}
    if model:
        layer["model"] = model
    ports = {key: value for key, value in (("grpc_port", grpc_port), ("rest_port", rest_port)) if value}
    if ports and device:
        layer["devices"] = {device: ports}
    return layer


def batching_overrides(env: Mapping[str, str], assignments: list[str] | None = None) -> dict[str, str]:
    """Tuned batching fields for the chosen profile: `SERVING_BATCHING_<FIELD>`, then `--set F=V`.

    Kept apart from the profile table so the profile's label can name every tuned field.
    """
    overrides = {name: env[f"SERVING_BATCHING_{name.upper()}"]
                 for name in BATCHING_FIELDS if env.get(f"SERVING_BATCHING_{name.upper()}")}
    for item in assignments or []:
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in BATCHING_FIELDS:
            raise ValueError(f"--set expects FIELD=VALUE with FIELD one of {', '.join(BATCHING_FIELDS)}; "
                             f"got {item!r}")
        overrides[name.strip()] = value.strip()
    return overrides


# ---------------------------------------------------------------- building records

def _as_int(where: str, value: Any, cores: int) -> int:
    if value == CPU_CORES:
        return cores
    if isinstance(value, bool):
        raise ValueError(f"{where}: expected an integer or {CPU_CORES!r}, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}: expected an integer or {CPU_CORES!r}, got {value!r}") from exc


def _as_bool(where: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    try:
        return parse_bool(str(value))
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _as_sizes(where: str, value: Any) -> tuple[int, ...]:
    if isinstance(value, str):  # from env / CLI: "8,16,32" or "[8, 16, 32]"
        value = [part for part in re.split(r"[\s,\[\]]+", value) if part]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: expected a list of integers, got {value!r}")
    return tuple(_as_int(where, size, 0) for size in value)


def build_profile(name: str, raw: Mapping[str, Any], cores: int) -> BatchingProfile:
    """A validated profile from its TOML table; raises ValueError naming the bad field."""
    where = f"profiles.{name}"
    unknown = set(raw) - set(BATCHING_FIELDS) - {"enable_batching"}
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                         f"TF Serving batching fields are {', '.join(BATCHING_FIELDS)}")
    values: dict[str, Any] = {"enable_batching": _as_bool(f"{where}.enable_batching",
                                                         raw.get("enable_batching", False))}
    for key, value in raw.items():
        label = f"{where}.{key}"
        if key in _INT_FIELDS:
            values[key] = _as_int(label, value, cores)
        elif key in _BOOL_FIELDS:
            values[key] = _as_bool(label, value)
        elif key == "allowed_batch_sizes":
            values[key] = _as_sizes(label, value)
        elif key == "thread_pool_name":
            values[key] = str(value)
    profile = BatchingProfile(name=name, **values)
    validate_profile(profile)
    return profile


def validate_profile(profile: BatchingProfile) -> None:
    """TF Serving's own checks, so a bad profile fails here rather than inside a container."""
    where = f"profiles.{profile.name}"
    if not profile.enable_batching:
        set_fields = [name for name in BATCHING_FIELDS
                      if getattr(profile, name) not in (None, (), False)]
        if set_fields:
            raise ValueError(f"{where}: batching fields {', '.join(set_fields)} set while "
                             "enable_batching = false (tensorflow_model_server refuses a batching "
                             "parameters file without --enable_batching)")
        return
    for name in ("max_batch_size", "num_batch_threads", "max_enqueued_batches"):
        value = getattr(profile, name)
        if value is not None and value < 1:
            raise ValueError(f"{where}.{name} must be >= 1, got {value}")
    if profile.batch_timeout_micros is not None and profile.batch_timeout_micros < 0:
        raise ValueError(f"{where}.batch_timeout_micros must be >= 0, got {profile.batch_timeout_micros}")
    _validate_sizes(profile)


def _validate_sizes(profile: BatchingProfile) -> None:
    where = f"profiles.{profile.name}"
    sizes = profile.allowed_batch_sizes
    if any(size < 1 for size in sizes):
        raise ValueError(f"{where}.allowed_batch_sizes entries must be >= 1, got {list(sizes)}")
    if any(later <= earlier for earlier, later in zip(sizes, sizes[1:])):
        raise ValueError(f"{where}: allowed_batch_sizes entries must be monotonically increasing")
    if sizes and profile.max_batch_size is not None and sizes[-1] != profile.max_batch_size:
        raise ValueError(f"{where}: Last entry in allowed_batch_sizes must match max_batch_size; "
                         f"last entry was {sizes[-1]}; expected {profile.max_batch_size}")
    if (profile.enable_large_batch_splitting and profile.max_execution_batch_size is not None
            and profile.max_batch_size is not None
            and profile.max_execution_batch_size > profile.max_batch_size):
        raise ValueError(f"{where}: max_execution_batch_size ({profile.max_execution_batch_size}) "
                         f"must not exceed max_batch_size ({profile.max_batch_size})")


def _build_devices(raw: Mapping[str, Any], defaults: Mapping[str, DevicePorts]) -> dict[str, DevicePorts]:
    devices = dict(defaults)
    for device, ports in raw.items():
        if device not in DEVICES:
            raise ValueError(f"devices.{device}: unknown device; expected one of {', '.join(DEVICES)}")
        base = devices[device]
        devices[device] = DevicePorts(
            grpc_port=_as_port(f"devices.{device}.grpc_port", ports.get("grpc_port", base.grpc_port)),
            rest_port=_as_port(f"devices.{device}.rest_port", ports.get("rest_port", base.rest_port)))
        if devices[device].grpc_port == devices[device].rest_port:
            raise ValueError(f"devices.{device}: grpc_port and rest_port must differ "
                             f"(both {devices[device].grpc_port})")
    return devices


def _as_port(where: str, value: Any) -> int:
    port = _as_int(where, value, 0)
    if not 1 <= port <= 65535:
        raise ValueError(f"{where}: expected a TCP port 1-65535, got {value!r}")
    return port


def build_config(raw: Mapping[str, Any], source: str = "", cores: int | None = None) -> ServingConfig:
    """A ServingConfig from merged layers; missing keys keep the dataclass defaults."""
    defaults = ServingConfig()
    cores = cores or cpu_cores()
    model_raw = dict(raw.get("model", {}))
    unknown = set(model_raw) - {f.name for f in fields(ModelSettings)}
    if unknown:
        raise ValueError(f"model: unknown key(s) {', '.join(sorted(unknown))}")
    server = raw.get("server", {})
    profiles = dict(defaults.profiles)
    profiles.update({name: build_profile(name, table, cores)
                     for name, table in raw.get("profiles", {}).items()})
    return ServingConfig(
        model=ModelSettings(**{k: str(v) for k, v in model_raw.items()}),
        host=str(server.get("host", defaults.host)),
        file_system_poll_wait_seconds=_as_int(
            "server.file_system_poll_wait_seconds",
            server.get("file_system_poll_wait_seconds", defaults.file_system_poll_wait_seconds), 0),
        devices=_build_devices(raw.get("devices", {}), defaults.devices),
        prometheus_path=str(raw.get("monitoring", {}).get("prometheus_path", defaults.prometheus_path)),
        profiles=profiles,
        source=source,
    )


def load_config(config_file: str | Path | None = None, env: Mapping[str, str] | None = None,
                cli: Mapping[str, Any] | None = None, cores: int | None = None) -> ServingConfig:
    """Defaults -> TOML -> `SERVING_*` env -> CLI layer (a nested dict shaped like the TOML).
    `cores` resolves "cpu_cores" (default: the cores this process may run on).

    Batching-field overrides are not layered in here: see `batching_overrides` and `generate`.
    """
    env = os.environ if env is None else env
    path = Path(config_file or env.get("SERVING_CONFIG") or DEFAULT_CONFIG_FILE)
    raw = layered(read_toml(path, "serving config"), env_layer(env, environment_variables()), cli or {})
    return build_config(raw, source=str(path), cores=cores)


def effective_profile_name(base: str, overrides: Mapping[str, Any]) -> str:
    """A label that never hides a tuned field: `cpu` or `cpu+batch_timeout_micros=2000`."""
    if not overrides:
        return base
    return base + "+" + ",".join(f"{key}={str(value).replace(' ', '')}"
                                 for key, value in sorted(overrides.items()))
