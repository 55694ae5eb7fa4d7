"""Kubernetes manifests from the one serving config (serving/deploy/k8s.py, k8s_settings.py, `mnist-bench k8s`).

Every rendered document is validated offline against the pinned Kubernetes version's schemas in
strict mode (unknown fields refused), then parsed back and checked against serving/serving.toml,
the batching profiles, docker/compose.yaml's images and the sizing answers of the analysis fixtures.
"""

from __future__ import annotations

import json
import re

import kubernetes_validate
import pytest
import yaml
from google.protobuf import text_format

from serving.deploy import config as cfg
from serving.deploy import k8s_settings
from serving.deploy.docker import compose_defaults
from serving.protocol.protos import BatchingParameters, MonitoringConfig
from tests.docker.test_compose import DOCKER, compose_for
from tests.support.cli import invoke
from tests.support.paths import ANALYSIS_FIXTURES, REPO

K8S_VERSION = "1.33.0"  # the Kubernetes release the manifests are validated against
GPU_AND_BATCHING = ("--batching", "gpu", "--replicas-cpu", "3", "--replicas-gpu", "2", "--locust-workers", "5")


def render(out, *args: str) -> dict[str, list[dict]]:
    """`mnist-bench k8s --out OUT ARGS...`; the documents of each written file, by file name."""
    done = invoke("k8s", "--out", out, *args)
    assert done.exit_code == 0, done.stderr
    return {path.name: list(yaml.safe_load_all(path.read_text())) for path in sorted(out.glob("*.yaml"))}


def find(files: dict[str, list[dict]], kind: str, name: str) -> dict:
    (doc,) = [d for docs in files.values() for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def container(deployment: dict) -> dict:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return only


def flags(args: list[str]) -> dict[str, str]:
    return dict(re.fullmatch(r"--([a-z_]+)=(.*)", arg).groups() for arg in args)


@pytest.fixture(scope="module")
def defaults(tmp_path_factory):
    return render(tmp_path_factory.mktemp("k8s"))


@pytest.fixture(scope="module")
def gpu_batching(tmp_path_factory):
    return render(tmp_path_factory.mktemp("k8s"), *GPU_AND_BATCHING)


@pytest.fixture(scope="module")
def serving():
    return cfg.load_config(env={})


# ----------------------------------------------------------------------------- schema


@pytest.mark.parametrize("rendering", ["defaults", "gpu_batching"])
def test_every_document_passes_strict_schema_validation_offline(rendering, request):
    files = request.getfixturevalue(rendering)
    assert set(files) == {"tfserving-cpu.yaml", "tfserving-gpu.yaml", "locust.yaml"}
    kinds = []
    for docs in files.values():
        for doc in docs:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)  # raises on any error
            kinds.append(doc["kind"])
    assert sorted(kinds) == sorted(["ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler"] * 2
                                   + ["Deployment", "Deployment", "Service"])


def test_strict_validation_refuses_an_unknown_field(defaults):
    doc = find(defaults, "Deployment", "tfserving-cpu")
    broken = {**doc, "spec": {**doc["spec"], "replica": 2}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


# ----------------------------------------------------------------------------- TF Serving


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_ports_are_the_devices_from_serving_toml(gpu_batching, serving, device):
    ports = serving.ports(device)
    server = container(find(gpu_batching, "Deployment", f"tfserving-{device}"))
    assert [(p["name"], p["containerPort"]) for p in server["ports"]] == [("grpc", ports.grpc_port),
                                                                          ("rest", ports.rest_port)]
    args = flags(server["args"])
    assert (args["port"], args["rest_api_port"]) == (str(ports.grpc_port), str(ports.rest_port))
    service = find(gpu_batching, "Service", f"tfserving-{device}")
    assert [(p["name"], p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [
        ("grpc", ports.grpc_port, ports.grpc_port), ("rest", ports.rest_port, ports.rest_port)]
    assert service["spec"]["selector"] == find(gpu_batching, "Deployment", f"tfserving-{device}")["spec"][
        "selector"]["matchLabels"]


@pytest.mark.parametrize(("device", "cores"), [("cpu", 2), ("gpu", 4)])  # the default CPU limits
def test_configmap_holds_the_profiles_batching_parameters_with_cores_from_the_cpu_limit(gpu_batching, device, cores):
    data = find(gpu_batching, "ConfigMap", f"tfserving-{device}-config")["data"]
    parsed = text_format.Parse(data["batching_parameters.txt"], BatchingParameters())
    expected = cfg.load_config(env={}, cores=cores).profile("gpu")
    assert parsed == expected.to_proto()
    assert (parsed.max_batch_size.value, parsed.batch_timeout_micros.value, list(parsed.allowed_batch_sizes)) \
        == (256, 2000, [8, 16, 32, 64, 128, 256])
    assert parsed.num_batch_threads.value == parsed.max_enqueued_batches.value == cores
    args = flags(container(find(gpu_batching, "Deployment", f"tfserving-{device}"))["args"])
    assert args["enable_batching"] == "true"
    assert args["batching_parameters_file"] == "/etc/tfserving/batching_parameters.txt"


def test_batching_off_has_no_batching_file_and_the_mounted_files_are_the_args(defaults, serving):
    deployment = find(defaults, "Deployment", "tfserving-cpu")
    args = flags(container(deployment)["args"])
    data = find(defaults, "ConfigMap", "tfserving-cpu-config")["data"]
    assert args["enable_batching"] == "false" and "batching_parameters_file" not in args
    assert set(data) == {"models.config", "monitoring.config"}
    mount = next(m for m in container(deployment)["volumeMounts"] if m["name"] == "tfserving-config")
    assert {args["model_config_file"], args["monitoring_config_file"]} == {f"{mount['mountPath']}/{n}" for n in data}
    assert "base_path: \"/models/mnist\"" in data["models.config"]
    assert args["file_system_poll_wait_seconds"] == str(serving.file_system_poll_wait_seconds)


def test_monitoring_path_and_prometheus_annotations_agree(defaults, serving):
    monitoring = text_format.Parse(find(defaults, "ConfigMap", "tfserving-cpu-config")["data"]["monitoring.config"],
                                   MonitoringConfig())
    annotations = find(defaults, "Deployment", "tfserving-cpu")["spec"]["template"]["metadata"]["annotations"]
    assert monitoring.prometheus_config.enable
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/path"] == monitoring.prometheus_config.path == serving.prometheus_path
    assert annotations["prometheus.io/port"] == str(serving.ports("cpu").rest_port)


def test_images_are_composes_pinned_tags(defaults, tmp_path):
    compose, _ = compose_for("off", tmp_path)
    for device in ("cpu", "gpu"):
        image = container(find(defaults, "Deployment", f"tfserving-{device}"))["image"]
        assert image == compose["services"][f"tfserving-{device}"]["image"]
        assert container(find(defaults, "Deployment", f"tfserving-{device}"))["command"] == \
            compose["services"][f"tfserving-{device}"]["entrypoint"]
    pinned = compose_defaults(DOCKER / ".env")
    assert container(find(defaults, "Deployment", "locust-master"))["image"] == pinned["LOADGEN_IMAGE"]
    init = find(defaults, "Deployment", "tfserving-cpu")["spec"]["template"]["spec"]["initContainers"]
    assert [c["image"] for c in init] == [pinned["MODELS_IMAGE"]]


def test_only_the_gpu_deployment_requests_a_gpu(gpu_batching):
    gpu = find(gpu_batching, "Deployment", "tfserving-gpu")
    resources = container(gpu)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == "1"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in \
        gpu["spec"]["template"]["spec"]["tolerations"]
    cpu = find(gpu_batching, "Deployment", "tfserving-cpu")
    assert not any("nvidia.com/gpu" in table for table in container(cpu)["resources"].values())
    assert "tolerations" not in cpu["spec"]["template"]["spec"]
    assert container(cpu)["resources"]["limits"]["cpu"] and container(cpu)["resources"]["requests"]["memory"]


@pytest.mark.parametrize("device", ["cpu", "gpu"])
def test_probes_ask_the_model_status_endpoint_on_the_rest_port(gpu_batching, serving, device):
    server = container(find(gpu_batching, "Deployment", f"tfserving-{device}"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert server[probe]["httpGet"] == {"path": "/v1/models/mnist", "port": serving.ports(device).rest_port}


@pytest.mark.parametrize(("device", "replicas"), [("cpu", 3), ("gpu", 2)])
def test_replicas_and_autoscaler_minimum_are_the_count_asked_for(gpu_batching, device, replicas):
    assert find(gpu_batching, "Deployment", f"tfserving-{device}")["spec"]["replicas"] == replicas
    hpa = find(gpu_batching, "HorizontalPodAutoscaler", f"tfserving-{device}")["spec"]
    assert hpa["minReplicas"] == replicas and hpa["maxReplicas"] == 2 * replicas  # max_replicas_factor 2.0
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"tfserving-{device}"}
    assert hpa["metrics"][0]["resource"] == {"name": "cpu", "target": {"type": "Utilization",
                                                                       "averageUtilization": 70}}


# ----------------------------------------------------------------------------- Locust


def test_locust_workers_point_at_the_master_service_and_users_at_the_grpc_service(gpu_batching, serving):
    workers = find(gpu_batching, "Deployment", "locust-worker")
    assert workers["spec"]["replicas"] == 5
    env = {e["name"]: e["value"] for e in container(workers)["env"]}
    master_service = find(gpu_batching, "Service", "locust-master")
    assert env["LOCUST_MASTER_NODE_HOST"] == master_service["metadata"]["name"]
    assert {p["port"] for p in master_service["spec"]["ports"]} == {5557, 8089}
    assert int(env["LOCUST_MASTER_NODE_PORT"]) == 5557
    master = container(find(gpu_batching, "Deployment", "locust-master"))
    assert master["args"][:2] == ["--master", "--master-bind-port"]
    host = master["args"][master["args"].index("--host") + 1]
    assert host == f"grpc://tfserving-cpu:{serving.ports('cpu').grpc_port}"
    assert {e["name"]: e["value"] for e in master["env"]}["LOCUST_EXPECT_WORKERS"] == "5"
    for pod in (master, container(workers)):  # the samples come with the model
        samples = pod["args"][pod["args"].index("--samples") + 1]
        assert any(samples.startswith(m["mountPath"] + "/") for m in pod["volumeMounts"])


def test_locust_user_classes_are_the_locustfiles():
    text = (REPO / "loadtest" / "load" / "locustfile.py").read_text()
    assert sorted(k8s_settings.LOCUST_USER_CLASSES) == sorted(re.findall(r"^class ([A-Z]\w+User)\(", text, re.M))


def test_locust_input_words_are_the_load_tests():
    from loadtest.evidence.vocab import (
        InputKind,  # serving does not import the load test: the words are kept in step here
    )

    assert set(k8s_settings.INPUT_KINDS) == {kind.value for kind in InputKind} - {InputKind.NPZ.value}


# ----------------------------------------------------------------------------- options and errors


def test_zero_replicas_leaves_a_device_out_and_its_old_file_is_removed(tmp_path):
    render(tmp_path)
    files = render(tmp_path, "--replicas-gpu", "0")
    assert set(files) == {"tfserving-cpu.yaml", "locust.yaml"}


def test_a_pvc_replaces_the_model_image(tmp_path):
    files = render(tmp_path, "--models-pvc", "mnist-models")
    for name in ("tfserving-cpu", "locust-worker"):
        pod = find(files, "Deployment", name)["spec"]["template"]["spec"]
        assert "initContainers" not in pod
        assert pod["volumes"][0] == {"name": "models",
                                     "persistentVolumeClaim": {"claimName": "mnist-models", "readOnly": True}}
        kubernetes_validate.validate(find(files, "Deployment", name), K8S_VERSION, strict=True)


def test_your_own_model_is_served_and_sent_inputs_made_for_it(tmp_path):
    """--model-name: TF Serving serves /models/<name>, and Locust sends random inputs made from its signature
    (auto), or the rows of an .npz that comes with the model (--locust-input-data)."""
    for data, expected in ((None, "auto"), ("ranker-inputs.npz", "/app/models/ranker-inputs.npz"),
                           ("zeros", "zeros")):
        files = render(tmp_path, "--model-name", "ranker", *(("--locust-input-data", data) if data else ()))
        models = find(files, "ConfigMap", "tfserving-cpu-config")["data"]["models.config"]
        assert 'name: "ranker"' in models and 'base_path: "/models/ranker"' in models
        for name in ("locust-master", "locust-worker"):
            args = container(find(files, "Deployment", name))["args"]
            assert args[args.index("--model-name") + 1] == "ranker"
            mounted = container(find(files, "Deployment", name))["volumeMounts"][0]["mountPath"]
            assert args[args.index("--input-data") + 1] == expected.replace("/app/models", mounted)


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--batching", "fast"), 1, "unknown batching profile 'fast'"),
    (("--locust-input-data", "../x.npz"), 1, "kubernetes.locust.input_data '../x.npz': one of auto, samples"),
    (("--replicas-cpu", "-1"), 2, "--replicas-cpu"),
    (("--replicas-cpu", "0", "--replicas-gpu", "0"), 1, "no replicas for any device"),
    (("--locust-workers", "0"), 2, "--locust-workers"),
])
def test_bad_input_is_one_line_and_a_non_zero_exit(tmp_path, args, code, message):
    done = invoke("k8s", "--out", tmp_path, *args)
    assert done.exit_code == code
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert done.stderr.startswith("mnist-bench k8s: error: ")
    assert not list(tmp_path.glob("*.yaml"))


def test_from_sizing_reads_replicas_from_size_json(tmp_path):
    # The analysis fixtures at p99 <= 50 ms, 5000 req/s (tests/loadtest/report/sizing/test_size.py): cpu-off is the
    # cheapest CPU answer with 8 replicas, the GPU ones need 2.
    fixtures = [str(ANALYSIS_FIXTURES / run / "results.jsonl") for run in ("cpu-run", "gpu-run")]
    sized = invoke("size", "--p99-ms", "50", "--target-rps", "5000", "--prices",
                   ANALYSIS_FIXTURES / "prices.toml", "--json", *fixtures)
    assert sized.exit_code == 0, sized.stderr
    sizing = tmp_path / "sizing.json"
    sizing.write_text(sized.stdout)
    files = render(tmp_path / "k8s", "--from-sizing", str(sizing))
    assert find(files, "HorizontalPodAutoscaler", "tfserving-cpu")["spec"]["minReplicas"] == 8
    assert find(files, "HorizontalPodAutoscaler", "tfserving-gpu")["spec"]["minReplicas"] == 2
    flagged = render(tmp_path / "flagged", "--from-sizing", str(sizing), "--replicas-cpu", "4")
    assert find(flagged, "Deployment", "tfserving-cpu")["spec"]["replicas"] == 4  # a flag wins over the file


def test_sizing_prefers_the_rendered_profile_and_the_best_rank(tmp_path):
    def answer(device, profile, rank, replicas, meets=True):
        return {"config": {"device": device, "batching_profile": profile}, "meets": meets, "rank": rank,
                "replicas": replicas}

    path = tmp_path / "sizing.json"
    path.write_text(json.dumps([answer("cpu", "off", 1, 8), answer("cpu", "cpu", 3, 5), answer("cpu", "cpu", 2, 3),
                                answer("gpu", "off", None, None, meets=False)]))
    assert k8s_settings.replicas_from_sizing(path, "cpu") == {"cpu": 3}
    assert k8s_settings.replicas_from_sizing(path, "gpu") == {"cpu": 8}  # no answer for the profile: the best one
    path.write_text("not json")
    with pytest.raises(ValueError, match="is not JSON; write it with `mnist-bench size"):
        k8s_settings.replicas_from_sizing(path, "off")


@pytest.mark.parametrize(("quantity", "cores"), [("2", 2), ("1500m", 2), ("250m", 1), ("0.5", 1), ("4", 4)])
def test_cpu_limit_in_whole_cores(quantity, cores):
    assert k8s_settings.cpu_quantity_cores(quantity) == cores


def test_model_image_dockerfile_copies_the_models_where_the_init_container_reads_them(defaults):
    text = (DOCKER / "models.Dockerfile").read_text()
    pinned = compose_defaults(DOCKER / ".env")
    assert re.search(rf"^ARG BASE_IMAGE={re.escape(pinned['MODELS_BASE_IMAGE'])}$", text, re.M)
    assert re.search(r"^COPY models/ /models/$", text, re.M)
    (init,) = find(defaults, "Deployment", "tfserving-cpu")["spec"]["template"]["spec"]["initContainers"]
    assert init["command"] == ["sh", "-c", "cp -R /models/. /delivery/"]
    assert init["volumeMounts"] == [{"name": "models", "mountPath": "/delivery"}]


# ----------------------------------------------------------------------------- replica shapes: whole cores


def qos_class(pod: dict) -> str:
    """The pod's QoS class as the kubelet computes it (pkg/apis/core/v1/helper/qos): Guaranteed when every
    container, initContainers included, limits CPU and memory and the requests equal the limits."""
    everyone = pod.get("initContainers", []) + pod["containers"]
    tables = [c.get("resources", {}) for c in everyone]
    if not any(t.get("requests") or t.get("limits") for t in tables):
        return "BestEffort"
    guaranteed = all({"cpu", "memory"} <= set(t.get("limits", {})) and
                     all(t.get("requests", t["limits"]).get(r, t["limits"][r]) == t["limits"][r]
                         for r in ("cpu", "memory")) for t in tables)
    return "Guaranteed" if guaranteed else "Burstable"


def test_replica_cores_make_a_guaranteed_pod_of_k_whole_cores(tmp_path):
    """--replica-cores-cpu 2: TF Serving requests == limits == 2 CPUs and the memory limit, the model copy
    is Guaranteed too, and the batching profile's cpu_cores is 2; the GPU Deployment is untouched."""
    done = invoke("k8s", "--out", tmp_path, "--batching", "gpu", "--replica-cores-cpu", "2")
    assert done.exit_code == 0, done.stderr
    assert "tfserving-cpu: 1 replica(s) of 2 whole core(s) each (Guaranteed QoS" in done.stdout
    files = {path.name: list(yaml.safe_load_all(path.read_text())) for path in tmp_path.glob("*.yaml")}
    cpu = find(files, "Deployment", "tfserving-cpu")
    kubernetes_validate.validate(cpu, K8S_VERSION, strict=True)
    resources = container(cpu)["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "2", "memory": "1Gi"}
    assert qos_class(cpu["spec"]["template"]["spec"]) == "Guaranteed"
    data = find(files, "ConfigMap", "tfserving-cpu-config")["data"]
    assert text_format.Parse(data["batching_parameters.txt"], BatchingParameters()).num_batch_threads.value == 2
    gpu = find(files, "Deployment", "tfserving-gpu")
    assert container(gpu)["resources"]["requests"]["cpu"] == "2" and container(gpu)["resources"]["limits"]["cpu"] == "4"
    assert qos_class(gpu["spec"]["template"]["spec"]) == "Burstable"


def test_the_settings_key_pins_too_and_without_it_the_resources_are_as_before(tmp_path, defaults):
    toml = (REPO / "serving" / "serving.toml").read_text()
    assert "# replica_cores = 2\n" in toml  # documented where the CPU Deployment's resources are
    config = tmp_path / "serving.toml"
    config.write_text(toml.replace("# replica_cores = 2\n", "replica_cores = 3\n", 1))
    files = render(tmp_path / "k8s", "--config", str(config), "--models-pvc", "mnist-models")
    cpu = find(files, "Deployment", "tfserving-cpu")
    assert container(cpu)["resources"] == {"requests": {"cpu": "3", "memory": "1Gi"},
                                           "limits": {"cpu": "3", "memory": "1Gi"}}
    assert qos_class(cpu["spec"]["template"]["spec"]) == "Guaranteed"
    unset = find(defaults, "Deployment", "tfserving-cpu")
    assert container(unset)["resources"] == {"requests": {"cpu": "1", "memory": "512Mi"},
                                             "limits": {"cpu": "2", "memory": "1Gi"}}
    (copy,) = unset["spec"]["template"]["spec"]["initContainers"]
    assert copy["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}
    assert qos_class(unset["spec"]["template"]["spec"]) == "Burstable"


def test_a_gpu_replica_of_whole_cores_keeps_its_gpu_in_requests_and_limits(tmp_path):
    files = render(tmp_path, "--replica-cores-gpu", "4")
    gpu = find(files, "Deployment", "tfserving-gpu")
    resources = container(gpu)["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1"}
    assert qos_class(gpu["spec"]["template"]["spec"]) == "Guaranteed"


def test_replica_cores_refused_without_memory_or_below_zero():
    base = k8s_settings.load_settings(REPO / "serving" / "serving.toml")
    with pytest.raises(ValueError, match=r"kubernetes.cpu.replica_cores must be >= 0"):
        k8s_settings.load_settings(REPO / "serving" / "serving.toml", {"cpu": {"replica_cores": -1}})
    no_memory = k8s_settings.DeviceSettings(requests={"cpu": "1"}, limits={"cpu": "2"}, replica_cores=2)
    with pytest.raises(ValueError, match="replica_cores needs a memory limit"):
        k8s_settings.check_settings(k8s_settings.K8sSettings({**base.devices, "cpu": no_memory}, base.locust,
                                                             base.delivery))
