"""What the Kubernetes manifests are rendered from, besides the serving config itself.

Replicas, autoscaling bounds, resources (or a whole-core replica shape, `replica_cores`) and scheduling
per device, the Locust pair, and how the model reaches the pods. Layered like every setting here
(`serving.layering`): the defaults below -> `[kubernetes]` tables of `serving/serving.toml` ->
`mnist-bench k8s` flags, with replicas also readable from `mnist-bench size --json` output
(`replicas_from_sizing`). Images that are pinned (TF Serving, the load generator, the model image)
come from docker/.env, the one place they are pinned.

Not for: the manifests themselves (`serving.deploy.k8s`) or TF Serving's files (`serving.deploy.tfs_files`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from serving.deploy.docker import COMPOSE_ENV_FILE, compose_defaults
from serving.endpoint import Device
from serving.layering import SettingsError, layered, read_toml, typed

SECTION = "kubernetes"
GPU_RESOURCE = "nvidia.com/gpu"
# The user classes of loadtest/load/locustfile.py a Locust pod can run (names only: serving does not
# import the load test; tests/serving/deploy/test_k8s.py checks they match).
LOCUST_USER_CLASSES = ("GrpcClosedUser", "GrpcOpenUser", "RestClosedUser", "RestOpenUser")
INPUT_KINDS = ("auto", "samples", "random", "zeros")  # the locustfile's --input-data words (else an .npz)
_QUANTITY = re.compile(r"(?P<number>\d+(?:\.\d+)?)(?P<milli>m?)")
_TOLERATION_KEYS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})


@dataclass(frozen=True)
class DeviceSettings:
    """One device's TF Serving Deployment: `[kubernetes.cpu]` / `[kubernetes.gpu]`."""

    replicas: int = 1  # 0: the device is not rendered
    max_replicas_factor: float = 2.0  # the HPA's maxReplicas = ceil(replicas x this)
    cpu_utilization_percent: int = 70  # the HPA's target
    requests: Mapping[str, str] | None = None  # Kubernetes quantities: {"cpu": "1", "memory": "512Mi"}
    limits: Mapping[str, str] | None = None
    node_selector: Mapping[str, str] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # A replica shape of k cores (issue #52): TF Serving requests and limits exactly k whole CPUs and its
    # memory limit, and so does the model-copying initContainer: a Guaranteed pod, to which a kubelet
    # running the static CPU manager policy gives k cores of its own (a cpuset, as the compose file's
    # `cpuset`). 0: `requests` and `limits` as given (a Burstable pod sharing the node's cores).
    replica_cores: int = 0

    @property
    def max_replicas(self) -> int:
        return max(self.replicas, math.ceil(round(self.replicas * self.max_replicas_factor, 9)))

    @property
    def cores(self) -> int:
        """The cores TF Serving may use: `replica_cores`, else its CPU limit rounded up (resolves
        "cpu_cores" in a profile)."""
        if self.replica_cores:
            return self.replica_cores
        return cpu_quantity_cores((self.limits or {}).get("cpu") or (self.requests or {}).get("cpu") or "1")

    def server_resources(self) -> tuple[dict[str, str], dict[str, str]]:
        """TF Serving's requests and limits: with `replica_cores` k, both hold cpu "k" and the memory limit
        (requests == limits for CPU and memory is what makes a pod Guaranteed); else as given."""
        requests, limits = dict(self.requests or {}), dict(self.limits or {})
        if not self.replica_cores:
            return requests, limits
        memory = limits.get("memory") or requests.get("memory")
        whole = {"cpu": str(self.replica_cores), **({"memory": memory} if memory else {})}
        return {**requests, **whole}, {**limits, **whole}


@dataclass(frozen=True)
class LocustSettings:
    """The Locust master and its workers: `[kubernetes.locust]`."""

    workers: int = 2
    target_device: Device = Device.CPU  # whose Service the users send to (gRPC)
    user_class: str = "GrpcClosedUser"
    # auto: the MNIST sample digits for the model mnist, random inputs from the signature for any other;
    # samples, random, zeros, or FILE.npz in the models image / volume (one array per input name)
    input_data: str = "auto"
    requests: Mapping[str, str] | None = None
    limits: Mapping[str, str] | None = None


@dataclass(frozen=True)
class Delivery:
    """Images and how the model reaches the pods: the scalars of `[kubernetes]`."""

    models_image: str = ""  # holds /models/<name>/<version>/ and /models/mnist-samples.npz, with sh and cp
    models_pvc: str = ""  # a PersistentVolumeClaim holding the same tree; mounted instead of the image
    loadgen_image: str = ""  # docker/loadgen.Dockerfile, built and pushed where the cluster pulls from


@dataclass(frozen=True)
class K8sSettings:
    devices: Mapping[str, DeviceSettings]
    locust: LocustSettings
    delivery: Delivery

    def rendered_devices(self) -> list[str]:
        """The devices with at least one replica, in the config's order."""
        return [device for device, settings in self.devices.items() if settings.replicas > 0]


def default_layer(pinned: Mapping[str, str]) -> dict:
    """The code's defaults in the TOML's shape; sensible for a 28x28 CNN, images from docker/.env."""
    return {
        "models_image": pinned.get("MODELS_IMAGE", ""),
        "loadgen_image": pinned.get("LOADGEN_IMAGE", ""),
        "cpu": {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "1Gi"},
                "node_selector": {}, "tolerations": []},
        # The usual taint on GPU nodes (the NVIDIA device plugin's and the managed clouds' docs).
        "gpu": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "4", "memory": "4Gi"},
                "node_selector": {},
                "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}]},
        "locust": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
    }


def command_line_layer(replicas: Mapping[str, int | None], workers: int | None = None,
                       target_device: str | None = None, models_image: str | None = None,
                       models_pvc: str | None = None, loadgen_image: str | None = None,
                       input_data: str | None = None, replica_cores: Mapping[str, int | None] | None = None) -> dict:
    """The flags in the TOML's shape; options not given are left out."""
    layer: dict = {device: {"replicas": count} for device, count in replicas.items() if count is not None}
    for device, cores in (replica_cores or {}).items():
        if cores is not None:
            layer.setdefault(device, {})["replica_cores"] = cores
    locust = {key: value for key, value in (("workers", workers), ("target_device", target_device),
                                            ("input_data", input_data)) if value is not None}
    if locust:
        layer["locust"] = locust
    layer.update({key: value for key, value in (("models_image", models_image), ("models_pvc", models_pvc),
                                                ("loadgen_image", loadgen_image)) if value})
    return layer


def load_settings(config_file: str | Path, *layers: Mapping, pinned_file: Path = COMPOSE_ENV_FILE) -> K8sSettings:
    """Defaults -> the serving TOML's `[kubernetes]` -> `layers` (sizing, then flags); checked."""
    toml = read_toml(config_file, "serving config").get(SECTION, {})
    raw = layered(default_layer(compose_defaults(pinned_file)), toml, *layers)
    devices = {device.value: typed(DeviceSettings, raw.get(device.value, {}), f"{SECTION}.{device.value}")
               for device in Device}
    delivery_raw = {key: value for key, value in raw.items() if not isinstance(value, Mapping)}
    known = {device.value for device in Device} | {"locust"}
    unknown = {key for key, value in raw.items() if isinstance(value, Mapping)} - known
    if unknown:
        raise SettingsError(f"unknown [{SECTION}] table(s) {sorted(unknown)}; expected {sorted(known)}")
    settings = K8sSettings(devices, typed(LocustSettings, raw.get("locust", {}), f"{SECTION}.locust"),
                           typed(Delivery, delivery_raw, SECTION))
    check_settings(settings)
    return settings


# ----------------------------------------------------------------------------- checks


def check_settings(settings: K8sSettings) -> None:
    """ValueError naming the field that Kubernetes or the load test could not use."""
    for device, one in settings.devices.items():
        _check_device(f"{SECTION}.{device}", one)
    if not settings.rendered_devices():
        raise ValueError("no replicas for any device: nothing to render (--replicas-cpu / --replicas-gpu)")
    locust = settings.locust
    if locust.workers < 1:
        raise ValueError(f"{SECTION}.locust.workers must be >= 1, got {locust.workers}")
    if locust.user_class not in LOCUST_USER_CLASSES:
        raise ValueError(f"{SECTION}.locust.user_class {locust.user_class!r}; "
                         f"expected one of {', '.join(LOCUST_USER_CLASSES)}")
    if locust.target_device not in settings.rendered_devices():
        raise ValueError(f"Locust targets the {locust.target_device} Service, which has no replicas; "
                         "pick another with --locust-target")
    _check_input_data(locust.input_data)
    _check_resources(f"{SECTION}.locust", locust.requests, locust.limits)
    if not settings.delivery.models_pvc and not settings.delivery.models_image:
        raise ValueError("no model image (MODELS_IMAGE in docker/.env, or --models-image) and no --models-pvc")


def _check_input_data(value: str) -> None:
    if value in INPUT_KINDS:
        return
    if "/" in value or not value.endswith(".npz"):
        raise ValueError(f"{SECTION}.locust.input_data {value!r}: one of {', '.join(INPUT_KINDS)}, or the name "
                         "of an .npz in the models image or volume (e.g. my-inputs.npz)")


def _check_device(where: str, device: DeviceSettings) -> None:
    if device.replicas < 0:
        raise ValueError(f"{where}.replicas must be >= 0, got {device.replicas}")
    if not device.max_replicas_factor >= 1:
        raise ValueError(f"{where}.max_replicas_factor must be >= 1, got {device.max_replicas_factor}")
    if not 1 <= device.cpu_utilization_percent <= 100:
        raise ValueError(f"{where}.cpu_utilization_percent must be 1-100, got {device.cpu_utilization_percent}")
    _check_resources(where, device.requests, device.limits)
    _check_replica_cores(where, device)
    for toleration in device.tolerations:
        if not isinstance(toleration, Mapping) or set(toleration) - _TOLERATION_KEYS:
            raise ValueError(f"{where}.tolerations: {toleration!r}; keys are {', '.join(sorted(_TOLERATION_KEYS))}")
    if not all(isinstance(v, str) for v in (device.node_selector or {}).values()):
        raise ValueError(f"{where}.node_selector values must be strings, got {device.node_selector!r}")


def _check_replica_cores(where: str, device: DeviceSettings) -> None:
    if device.replica_cores < 0:
        raise ValueError(f"{where}.replica_cores must be >= 0 (0: requests and limits as given), "
                         f"got {device.replica_cores}")
    if device.replica_cores and not ((device.limits or {}).get("memory") or (device.requests or {}).get("memory")):
        raise ValueError(f"{where}.replica_cores needs a memory limit: a pod is Guaranteed (and its cores its own) "
                         "only with memory requests == limits")


def _check_resources(where: str, requests: Mapping[str, str] | None, limits: Mapping[str, str] | None) -> None:
    for name, table in (("requests", requests), ("limits", limits)):
        if not isinstance(table, Mapping) or not all(isinstance(v, str) and v for v in table.values()):
            raise ValueError(f"{where}.{name} must be a table of Kubernetes quantities (strings), got {table!r}")
    cpu = (limits or {}).get("cpu")
    if cpu is not None:
        cpu_quantity_cores(cpu)


def cpu_quantity_cores(quantity: str) -> int:
    """Whole cores in a CPU quantity, rounded up: "2" -> 2, "1500m" -> 2, "250m" -> 1."""
    match = _QUANTITY.fullmatch(quantity.strip())
    if not match:
        raise ValueError(f"CPU quantity {quantity!r}: expected cores (\"2\", \"1.5\") or millicores (\"1500m\")")
    cores = float(match["number"]) / (1000 if match["milli"] else 1)
    return max(1, math.ceil(round(cores, 9)))


# ----------------------------------------------------------------------------- sizing


def replicas_from_sizing(path: Path, profile: str) -> dict[str, int]:
    """Each device's replicas from `mnist-bench size --json` output.

    Per device, the best-ranked answer that meets the objective (ranked cheapest first, real capacities
    before lower bounds), preferring answers measured with the batching profile being rendered.
    Devices without such an answer are left out.
    """
    answers = _read_sizing(path)
    replicas: dict[str, int] = {}
    for device in Device:
        meeting = [a for a in answers if a.get("meets") and isinstance(a.get("replicas"), int)
                   and isinstance(a.get("config"), dict) and a["config"].get("device") == device]
        pool = [a for a in meeting if a["config"].get("batching_profile") == profile] or meeting
        if pool:
            replicas[device.value] = min(pool, key=lambda a: a.get("rank") or math.inf)["replicas"]
    return replicas


def _read_sizing(path: Path) -> list[dict]:
    hint = f"write it with `mnist-bench size ... --json > {path}`"
    try:
        answers = json.loads(path.read_text())
    except OSError as exc:
        raise ValueError(f"sizing file {path}: {exc.strerror or exc}; {hint}") from None
    except ValueError:
        raise ValueError(f"sizing file {path} is not JSON; {hint}") from None
    if not isinstance(answers, list) or not all(isinstance(a, dict) for a in answers):
        raise ValueError(f"sizing file {path} is not a list of sizing answers; {hint}")
    return answers
