"""Kubernetes manifests from the one serving config: TF Serving per device, and a Locust master + workers.

`mnist-bench k8s` (`make k8s`) writes into `build/k8s/`, one file per component, ready for
`kubectl apply -f build/k8s/`:

- `tfserving-<device>.yaml`: a ConfigMap holding TF Serving's files for the batching profile (the
  very text `serving.deploy.tfs_files` generates for the containers and the embedded server), a
  Deployment of the pinned `tensorflow/serving` image running them, a Service (gRPC and REST) and a
  HorizontalPodAutoscaler (CPU utilisation; min = the replicas asked for);
- `locust.yaml`: Locust's master (web UI, or headless through `LOCUST_*` variables) and N workers
  running the project's locustfile from the load-generator image, sending to a TF Serving Service.

Ports are the device's from `serving/serving.toml`, inside the pod and on the Service alike. The
model reaches each pod from an image (an initContainer copies it into an emptyDir) or from a
PersistentVolumeClaim mounted read-only. Every document is a plain dict written with `yaml.safe_dump`.

Not for: the settings these come from (`serving.deploy.k8s_settings`) or applying them to a cluster.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from model_export.metadata import latest_version_dir, tensorflow_version
from model_export.provenance import REPO
from serving.deploy.config import ServingConfig, load_config
from serving.deploy.docker import image_reference
from serving.deploy.k8s_settings import GPU_RESOURCE, INPUT_KINDS, DeviceSettings, K8sSettings
from serving.deploy.tfs_files import (
    BATCHING_PARAMETERS_FILE,
    MODEL_CONFIG_FILE,
    MONITORING_CONFIG_FILE,
    batching_parameters_text,
    model_server_config_text,
    monitoring_config_text,
    tuned_profile,
)
from serving.deploy.versions import gap_warning, image_tensorflow_version
from serving.endpoint import Device

DEFAULT_OUT_DIR = REPO / "build" / "k8s"
PART_OF = "mnist-serving-bench"
MODELS_DIR = "/models"  # where TF Serving finds <name>/<version>/ in its pod (the model config's base path)
CONFIG_DIR = "/etc/tfserving"  # where the ConfigMap's files are mounted
DELIVERY_DIR = "/delivery"  # the emptyDir, as the model-copying initContainer sees it
LOCUST_APP_DIR = "/app"  # the load-generator image's WORKDIR (docker/loadgen.Dockerfile)
LOCUST_MASTER = "locust-master"
LOCUST_MASTER_PORT = 5557
LOCUST_WEB_PORT = 8089
FILES = {"tfserving": "tfserving-{device}.yaml", "locust": "locust.yaml"}
Doc = dict[str, Any]


@dataclass(frozen=True)
class Manifest:
    """One file of `build/k8s/`: its name and its documents, in the order kubectl should apply them."""

    filename: str
    documents: tuple[Doc, ...]

    def text(self) -> str:
        return yaml.dump_all(self.documents, Dumper=_Dumper, sort_keys=False)


class _Dumper(yaml.SafeDumper):
    """Safe YAML, with multi-line strings (TF Serving's files in the ConfigMap) as readable `|` blocks."""


def _string(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _string)


# ----------------------------------------------------------------------------- shared pieces


def labels(name: str, component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": component,
            "app.kubernetes.io/part-of": PART_OF}


def metadata(name: str, component: str) -> Doc:
    return {"name": name, "labels": labels(name, component)}


def resources(requests: Mapping[str, str] | None, limits: Mapping[str, str] | None,
              extra: Mapping[str, str] | None = None) -> Doc:
    """Requests and limits; `extra` (an extended resource such as a GPU) goes in both, as Kubernetes requires."""
    return {"requests": {**(requests or {}), **(extra or {})}, "limits": {**(limits or {}), **(extra or {})}}


def model_volume(settings: K8sSettings) -> Doc:
    """The models: the user's PVC read-only, else an emptyDir the initContainer fills."""
    if settings.delivery.models_pvc:
        return {"name": "models",
                "persistentVolumeClaim": {"claimName": settings.delivery.models_pvc, "readOnly": True}}
    return {"name": "models", "emptyDir": {}}


COPY_REQUESTS = {"cpu": "100m", "memory": "64Mi"}
COPY_LIMITS = {"cpu": "500m", "memory": "256Mi"}


def model_init_containers(settings: K8sSettings, guaranteed: bool = False) -> list[Doc]:
    """Copies /models from the model image into the emptyDir; none when a PVC holds the models.

    `guaranteed`: its requests are its limits. A pod's QoS class counts its initContainers too, so a
    whole-core replica (`replica_cores`) needs this one Guaranteed as well; its fractional CPU runs on
    the node's shared cores and takes none of the server's."""
    if settings.delivery.models_pvc:
        return []
    return [{"name": "copy-models", "image": settings.delivery.models_image, "imagePullPolicy": "IfNotPresent",
             "command": ["sh", "-c", f"cp -R {MODELS_DIR}/. {DELIVERY_DIR}/"],
             "volumeMounts": [{"name": "models", "mountPath": DELIVERY_DIR}],
             "resources": resources(COPY_LIMITS if guaranteed else COPY_REQUESTS, COPY_LIMITS)}]


def deployment(name: str, component: str, replicas: int, pod: Doc, annotations: Mapping[str, str] | None = None) -> Doc:
    template_metadata: Doc = {"labels": labels(name, component)}
    if annotations:
        template_metadata["annotations"] = dict(annotations)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata(name, component),
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels(name, component)},
                     "template": {"metadata": template_metadata, "spec": pod}}}


def service(name: str, component: str, ports: list[Doc]) -> Doc:
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(name, component),
            "spec": {"type": "ClusterIP", "selector": labels(name, component), "ports": ports}}


def tcp_port(name: str, port: int, app_protocol: str | None = None) -> Doc:
    """A Service port forwarding to the same container port."""
    doc: Doc = {"name": name, "port": port, "targetPort": port, "protocol": "TCP"}
    if app_protocol:
        doc["appProtocol"] = app_protocol
    return doc


# ----------------------------------------------------------------------------- TF Serving


def tfserving_name(device: str) -> str:
    return f"tfserving-{device}"


def pod_config(config: ServingConfig) -> ServingConfig:
    """The config as the pod sees it: the models under MODELS_DIR (TF Serving needs absolute base paths)."""
    return replace(config, model=replace(config.model, models_dir=MODELS_DIR))


def config_files(config: ServingConfig) -> dict[str, str]:
    """TF Serving's files for the config's chosen profile, by file name: the ConfigMap's data."""
    profile = config.profile(_only_profile(config))
    files = {MODEL_CONFIG_FILE: model_server_config_text(pod_config(config)),
             MONITORING_CONFIG_FILE: monitoring_config_text(config)}
    if profile.enable_batching:
        files[BATCHING_PARAMETERS_FILE] = batching_parameters_text(profile)
    return files


def _only_profile(config: ServingConfig) -> str:
    (name,) = config.profiles  # `device_configs` keeps only the profile being rendered
    return name


def server_args(config: ServingConfig, device: str) -> list[str]:
    """tensorflow_model_server's flags, as docker/compose.yaml passes them, on the device's ports."""
    ports = config.ports(device)
    batching = config.profile(_only_profile(config)).enable_batching
    args = [f"--port={ports.grpc_port}", f"--rest_api_port={ports.rest_port}",
            f"--model_config_file={CONFIG_DIR}/{MODEL_CONFIG_FILE}", f"--enable_batching={str(batching).lower()}"]
    if batching:  # tensorflow_model_server refuses a batching parameters file without batching
        args.append(f"--batching_parameters_file={CONFIG_DIR}/{BATCHING_PARAMETERS_FILE}")
    return args + [f"--monitoring_config_file={CONFIG_DIR}/{MONITORING_CONFIG_FILE}",
                   f"--file_system_poll_wait_seconds={config.file_system_poll_wait_seconds}"]


def probes(config: ServingConfig, device: str) -> Doc:
    """Startup, readiness and liveness on the REST model-status endpoint (200 once the model is known)."""
    def check(**timing: int) -> Doc:  # a new dict each, so the YAML holds no anchors
        return {"httpGet": {"path": f"/v1/models/{config.model.name}", "port": config.ports(device).rest_port},
                **timing}

    return {"startupProbe": check(periodSeconds=2, failureThreshold=60),
            "readinessProbe": check(periodSeconds=5, failureThreshold=2),
            "livenessProbe": check(periodSeconds=10, timeoutSeconds=3, failureThreshold=3)}


def tfserving_pod(config: ServingConfig, device: str, settings: K8sSettings, env: Mapping[str, str]) -> Doc:
    ports = config.ports(device)
    one = settings.devices[device]
    container = {
        "name": "tfserving", "image": image_reference(device, dict(env)), "imagePullPolicy": "IfNotPresent",
        # The server binary itself, as in compose: the image's entrypoint would add --model_name flags.
        "command": ["tensorflow_model_server"], "args": server_args(config, device),
        "ports": [{"name": "grpc", "containerPort": ports.grpc_port, "protocol": "TCP"},
                  {"name": "rest", "containerPort": ports.rest_port, "protocol": "TCP"}],
        **probes(config, device),
        "resources": resources(*one.server_resources(), {GPU_RESOURCE: "1"} if device == Device.GPU else None),
        "volumeMounts": [{"name": "models", "mountPath": MODELS_DIR, "readOnly": True},
                         {"name": "tfserving-config", "mountPath": CONFIG_DIR, "readOnly": True}]}
    pod: Doc = {**scheduling(one), "initContainers": model_init_containers(settings, guaranteed=one.replica_cores > 0),
                "containers": [container],
                "volumes": [model_volume(settings),
                            {"name": "tfserving-config", "configMap": {"name": f"{tfserving_name(device)}-config"}}]}
    return {key: value for key, value in pod.items() if value}


def scheduling(one: DeviceSettings) -> Doc:
    return {"nodeSelector": dict(one.node_selector or {}), "tolerations": [dict(t) for t in one.tolerations]}


def pod_annotations(config: ServingConfig, device: str, files: Mapping[str, str]) -> dict[str, str]:
    """Prometheus scrape annotations (TF Serving serves metrics on its REST port), the profile, and a
    digest of the ConfigMap so that a changed profile rolls the pods."""
    digest = hashlib.sha256("".join(f"{k}\n{v}" for k, v in sorted(files.items())).encode()).hexdigest()
    return {"prometheus.io/scrape": "true", "prometheus.io/path": config.prometheus_path,
            "prometheus.io/port": str(config.ports(device).rest_port),
            "mnist-serving/batching-profile": _only_profile(config), "mnist-serving/config-sha256": digest}


def autoscaler(name: str, one: DeviceSettings) -> Doc:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": metadata(name, "tfserving"),
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": one.replicas, "maxReplicas": one.max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": one.cpu_utilization_percent}}}]}}


def tfserving_manifest(config: ServingConfig, device: str, settings: K8sSettings,
                       env: Mapping[str, str]) -> Manifest:
    """ConfigMap, Deployment, Service and autoscaler of one device's TF Serving."""
    name, ports, files = tfserving_name(device), config.ports(device), config_files(config)
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(f"{name}-config", "tfserving"),
                  "data": files}
    server = deployment(name, "tfserving", settings.devices[device].replicas,
                        tfserving_pod(config, device, settings, env), pod_annotations(config, device, files))
    ports_doc = [tcp_port("grpc", ports.grpc_port, "grpc"), tcp_port("rest", ports.rest_port, "http")]
    return Manifest(FILES["tfserving"].format(device=device),
                    (config_map, server, service(name, "tfserving", ports_doc),
                     autoscaler(name, settings.devices[device])))


# ----------------------------------------------------------------------------- Locust


def locust_target(config: ServingConfig, settings: K8sSettings) -> str:
    """The address the users send to: the target device's Service by its cluster DNS name, on its gRPC
    port (gRPC users, the default) or its REST port (REST users)."""
    device = settings.locust.target_device
    ports = config.ports(device)
    if settings.locust.user_class.startswith("Rest"):
        return f"http://{tfserving_name(device)}:{ports.rest_port}"
    return f"grpc://{tfserving_name(device)}:{ports.grpc_port}"


def locust_container(config: ServingConfig, settings: K8sSettings, role: str, args: list[str],
                     env: Mapping[str, str], ports: list[Doc] | None = None) -> Doc:
    models = f"{LOCUST_APP_DIR}/models"
    data = settings.locust.input_data
    inputs = ["--input-data", data if data in INPUT_KINDS else f"{models}/{data}",
              "--samples", f"{models}/{config.model.name}-samples.npz"]
    container: Doc = {
        "name": f"locust-{role}", "image": settings.delivery.loadgen_image, "imagePullPolicy": "IfNotPresent",
        "args": [*args, *inputs, "--model-name", config.model.name, settings.locust.user_class],
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "resources": resources(settings.locust.requests, settings.locust.limits),
        "volumeMounts": [{"name": "models", "mountPath": models, "readOnly": True}]}
    if ports:
        container["ports"] = ports
    return container


def locust_pod(container: Doc, settings: K8sSettings) -> Doc:
    pod: Doc = {"initContainers": model_init_containers(settings), "containers": [container],
                "volumes": [model_volume(settings)]}
    return {key: value for key, value in pod.items() if value}


def locust_manifest(config: ServingConfig, settings: K8sSettings) -> Manifest:
    """Locust's master (web UI on 8089; headless with LOCUST_HEADLESS=true etc.) and its workers."""
    locust = settings.locust
    # The image defaults to worker mode (LOCUST_MODE_WORKER=true); the master turns it off.
    master_env = {"LOCUST_MODE_WORKER": "false", "LOCUST_EXPECT_WORKERS": str(locust.workers)}
    master = locust_container(
        config, settings, "master",
        ["--master", "--master-bind-port", str(LOCUST_MASTER_PORT), "--web-port", str(LOCUST_WEB_PORT),
         "--host", locust_target(config, settings)], master_env,
        [{"name": "master", "containerPort": LOCUST_MASTER_PORT, "protocol": "TCP"},
         {"name": "web", "containerPort": LOCUST_WEB_PORT, "protocol": "TCP"}])
    worker_env = {"LOCUST_MODE_WORKER": "true", "LOCUST_MASTER_NODE_HOST": LOCUST_MASTER,
                  "LOCUST_MASTER_NODE_PORT": str(LOCUST_MASTER_PORT)}
    worker = locust_container(config, settings, "worker", ["--worker"], worker_env)
    ports = [tcp_port("master", LOCUST_MASTER_PORT), tcp_port("web", LOCUST_WEB_PORT, "http")]
    return Manifest(FILES["locust"], (
        deployment(LOCUST_MASTER, "locust", 1, locust_pod(master, settings)),
        deployment("locust-worker", "locust", locust.workers, locust_pod(worker, settings)),
        service(LOCUST_MASTER, "locust", ports)))


# ----------------------------------------------------------------------------- rendering


def device_configs(config_file: str | Path | None, settings: K8sSettings, profile: str,
                   overrides: Mapping[str, Any] | None = None, cli: Mapping[str, Any] | None = None,
                   env: Mapping[str, str] | None = None) -> dict[str, ServingConfig]:
    """Per rendered device, the serving config holding only the profile to render (with `overrides`,
    as `mnist-bench serve --set`), its "cpu_cores" resolved to that device's CPU limit, not this host's."""
    configs = {}
    for device in settings.rendered_devices():
        config = load_config(config_file, env=env, cli=cli, cores=settings.devices[device].cores)
        tuned = tuned_profile(config, profile, overrides)
        configs[device] = replace(config, profiles={tuned.name: tuned})
    return configs


def render(configs: Mapping[str, ServingConfig], settings: K8sSettings,
           env: Mapping[str, str] | None = None) -> list[Manifest]:
    """Every manifest: TF Serving for each device with replicas, then Locust.

    `configs`: per device, the serving config holding only the profile to render (`device_configs`).
    """
    env = os.environ if env is None else env
    devices = settings.rendered_devices()
    manifests = [tfserving_manifest(configs[device], device, settings, env) for device in devices]
    return manifests + [locust_manifest(configs[settings.locust.target_device], settings)]


def write(manifests: list[Manifest], out: Path) -> list[Path]:
    """Write the files, removing ones this renderer wrote before that are not rendered now."""
    out.mkdir(parents=True, exist_ok=True)
    owned = {FILES["locust"], *(FILES["tfserving"].format(device=device.value) for device in Device)}
    rendered = {manifest.filename for manifest in manifests}
    for stale in owned - rendered:
        (out / stale).unlink(missing_ok=True)
    paths = []
    for manifest in manifests:
        path = out / manifest.filename
        path.write_text(manifest.text())
        paths.append(path)
    return paths


def version_warning(configs: Mapping[str, ServingConfig], env: Mapping[str, str] | None = None) -> str | None:
    """One line when the model the pods would serve (the latest version under the config's models dir: the tree
    the model image is built from) was written by a newer TensorFlow than the pinned TF Serving image."""
    images = [image_reference(device, dict(os.environ if env is None else env)) for device in configs]
    config = next(iter(configs.values()), None)
    version_dir = latest_version_dir(config.model.base_path) if config else None
    if not images or config is None or version_dir is None:
        return None
    server = images[0] + (" (and its -gpu image)" if len(images) > 1 else "")
    return gap_warning(config.model.name, version_dir.name, tensorflow_version(version_dir), server,
                       image_tensorflow_version(images[0]))


def summary(configs: Mapping[str, ServingConfig], settings: K8sSettings, out: Path) -> str:
    """What was rendered, in a few lines, and how to apply it."""
    lines = []
    for device, config in configs.items():
        one = settings.devices[device]
        shape = (f" of {one.replica_cores} whole core(s) each (Guaranteed QoS: its own cores under the static CPU "
                 "manager policy)" if one.replica_cores else "")
        lines.append(f"{tfserving_name(device)}: {one.replicas} replica(s){shape}, autoscaled up to "
                     f"{one.max_replicas} at {one.cpu_utilization_percent}% CPU; batching {_only_profile(config)}")
    target = locust_target(configs[settings.locust.target_device], settings)
    lines.append(f"locust: master + {settings.locust.workers} worker(s) -> {target}")
    return "\n".join(lines + [f"apply: kubectl apply -f {out}/"])
