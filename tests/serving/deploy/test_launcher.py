"""serving/deploy/launcher.py: what `make serve-cpu`, `make serve-gpu`, `make serve` and `make stop` do.

Real processes: the `serve` CLI in a subprocess (in-process where it refuses before any server
starts), the real embedded server on free ports, a real exported model. Docker is replaced by a
fake `docker` on PATH (a small Python script) whose behaviour each test picks: broken, failing
`compose up`, a container that exits, or a "container" that really serves by running the
embedded server with the compose file's own command line and port mappings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from model_export.provenance import cpu_model_name
from serving.cli import start_request
from serving.deploy import docker as docker_launch
from serving.deploy import gpus, launcher
from serving.deploy.embedded import is_our_embedded_server
from serving.deploy.gpus import RuntimeGpus
from serving.deploy.request import StartRequest
from serving.deploy.state import read_state, write_state
from serving.endpoint import ServedEndpoint
from tests.support.cli import command, invoke
from tests.support.metrics import metrics_page
from tests.support.paths import REPO
from tests.support.waiting import wait_for

pytestmark = pytest.mark.untimed  # end-to-end where marked, and times nothing

BROKEN = "fake docker: engine on fire"

FAKE_DOCKER = r'''
import json, os, re, signal, subprocess, sys, time
from pathlib import Path

MODE = os.environ["FAKE_DOCKER_MODE"]
HOME = Path(os.environ["FAKE_DOCKER_DIR"])
args = sys.argv[1:]
with open(HOME / "calls.jsonl", "a") as log:
    log.write(json.dumps({"args": args, "env": {k: v for k, v in os.environ.items() if k.startswith("TFS_")}}) + "\n")

def fail(message, code=1):
    sys.stderr.write(message + "\n")
    sys.exit(code)

def option(name):
    return args[args.index(name) + 1]

def interpolate(text, env):
    def one(m):
        value = env.get(m[1], "")
        return value or (m[3] if m[2] == ":-" else "")
    return re.sub(r"\$\{([A-Za-z_0-9]+)(?:(:[-?])([^}]*))?\}", one, text)

def pid_alive(service):
    pid_file = HOME / f"{service}.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except OSError:
        return None
    return pid

def compose_up(service):
    import yaml
    env = dict(os.environ)
    for env_file in [args[i + 1] for i, a in enumerate(args) if a == "--env-file"]:
        for line in Path(env_file).read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                key, value = line.split("=", 1)
                env.setdefault(key, value)
    spec = yaml.safe_load(interpolate(Path(option("-f")).read_text(), env))["services"][service]
    host_port = {c: h for h, c in (p.split(":")[1:] for p in spec["ports"])}
    command = [re.sub(r"--(port|rest_api_port)=(\d+)", lambda m: f"--{m[1]}={host_port[m[2]]}", a)
               for a in spec["command"]]
    log = open(HOME / f"{service}.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "serving.server", *command], stdout=log, stderr=subprocess.STDOUT,
                            cwd=os.environ["FAKE_DOCKER_REPO"], start_new_session=True)
    (HOME / f"{service}.pid").write_text(str(proc.pid))

if MODE == "broken":
    fail("fake docker: engine on fire")
if args[:1] == ["info"]:
    runtimes = {"runc": {}, "nvidia": {}} if os.environ.get("FAKE_DOCKER_NVIDIA") else {"runc": {}}
    print(json.dumps({"ServerVersion": "99.0-fake", "Runtimes": runtimes}))
    sys.exit(0)
if args[:2] == ["compose", "version"]:
    print("Docker Compose version v9.9.9-fake")
    sys.exit(0)
if args[:1] == ["compose"]:
    service = args[-1]
    if "up" in args:
        if MODE == "compose-fails":
            fail("Error response from daemon: pull access denied for tensorflow/serving")
        if MODE == "serve":
            compose_up(service)
        sys.exit(0)
    if "ps" in args:
        print("fake-" + service)
        sys.exit(0)
container = args[-1]
service = container.removeprefix("fake-")
if args[:1] == ["inspect"]:
    fmt = option("--format")
    if "Image" in fmt:
        print("sha256:fakeimage")
    else:
        print("running" if MODE == "serve" and pid_alive(service) else "exited")
    sys.exit(0)
if args[:1] == ["logs"]:
    log = HOME / f"{service}.log"
    sys.stderr.write(log.read_text() if log.exists() else "E0000 Failed to start server. Error: Not found: no model\n")
    sys.exit(0)
if args[:1] in (["stop"], ["rm"]):
    pid = pid_alive(service)
    if pid:
        os.kill(pid, signal.SIGTERM)
        for _ in range(300):
            if not pid_alive(service):
                break
            time.sleep(0.1)
    sys.exit(0)
fail(f"fake docker: unexpected call {args}")
'''


def serve_command(*args: str) -> list[str]:
    """The `serve` CLI as a separate process."""
    return command("serve", *args)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Bench:
    """A scratch world for the launcher: its state file, build dir, fake docker and ports."""

    created: list[Bench] = []

    def __init__(self, root: Path, models_dir: Path, mode: str = "broken", nvidia: bool = False):
        Bench.created.append(self)
        self.root, self.models_dir = root, models_dir
        self.bin = root / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        docker = self.bin / "docker"
        docker.write_text(f"#!{sys.executable}\n{FAKE_DOCKER}")
        docker.chmod(0o755)
        self.state_file = root / "state" / "servers.json"
        self.env = {**os.environ, "PATH": f"{self.bin}{os.pathsep}{os.environ['PATH']}",
                    "SERVING_STATE_FILE": str(self.state_file), "SERVING_BUILD_DIR": str(root / "build"),
                    "FAKE_DOCKER_MODE": mode, "FAKE_DOCKER_DIR": str(root), "FAKE_DOCKER_REPO": str(REPO),
                    "SERVING_START_TIMEOUT_S": "240", "TF_CPP_MIN_LOG_LEVEL": "2"}
        if nvidia:
            self.env["FAKE_DOCKER_NVIDIA"] = "1"
        self.grpc_port, self.rest_port = free_port(), free_port()

    def launcher(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(serve_command(*args), capture_output=True, text=True, cwd=REPO, env=self.env,
                              timeout=timeout)

    def invoke(self, *args: str) -> subprocess.CompletedProcess:
        """The `serve` CLI in this process, for commands that refuse before a server starts."""
        result = invoke("serve", *args, env=self.env)
        return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)

    def start_args(self, device: str, batching: str, *extra: str) -> list[str]:
        return ["start", "--device", device, "--batching", batching, "--models-dir", str(self.models_dir),
                "--grpc-port", str(self.grpc_port), "--rest-port", str(self.rest_port), *extra]

    def start(self, device: str = "cpu", batching: str = "off", *extra: str) -> subprocess.CompletedProcess:
        return self.launcher(*self.start_args(device, batching, *extra))

    def refused_start(self, device: str = "cpu", batching: str = "off", *extra: str) -> subprocess.CompletedProcess:
        return self.invoke(*self.start_args(device, batching, *extra))

    def state(self) -> dict:
        return read_state(self.state_file)

    def docker_calls(self) -> list[dict]:
        calls = self.root / "calls.jsonl"
        return [json.loads(line) for line in calls.read_text().splitlines()] if calls.exists() else []


@pytest.fixture(autouse=True)
def stop_whatever_a_test_started():
    """A failing test must not leave a server behind: stop every bench's servers afterwards."""
    Bench.created.clear()
    yield
    for bench in Bench.created:
        if bench.state_file.exists():
            bench.launcher("stop", timeout=120)


@pytest.fixture
def fake_models(tmp_path) -> Path:
    """A models dir with a version directory: enough for the checks that run before a server."""
    (tmp_path / "models" / "mnist" / "1").mkdir(parents=True)
    return tmp_path / "models"


def run_compose_health_check(rest_port: int, model: str) -> subprocess.CompletedProcess:
    """docker/compose.yaml's health-check command, aimed at `rest_port` instead of the container's."""
    service = yaml.safe_load((REPO / "docker" / "compose.yaml").read_text())["services"]["tfserving-cpu"]
    command = service["healthcheck"]["test"][3]
    command = re.sub(r"\$\{TFS_MODEL_NAME[^}]*\}", model, command).replace("127.0.0.1/8501", f"127.0.0.1/{rest_port}")
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=20)


def gpu_visible() -> bool:
    return Path("/dev/nvidia0").exists() or bool(shutil.which("nvidia-smi"))


# ---------------------------------------------------------------- without Docker: the embedded server

@pytest.mark.integration
def test_serve_cpu_without_docker_starts_the_embedded_server_once_and_stop_clears_it(exported_model, tmp_path):
    from loadtest.load.client import GrpcPredictClient, Samples

    bench = Bench(tmp_path, exported_model.output_dir, mode="broken")
    done = bench.start("cpu", "cpu")
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.strip().splitlines()  # one clear line, naming why there is no container
    assert BROKEN in line and "AVAILABLE" in line
    assert "started the embedded server (TensorFlow, SavedModel) on cpu" in line  # the runtime named
    endpoint = bench.state()["cpu"]
    assert (endpoint.kind, endpoint.device, endpoint.grpc_port) == ("embedded", "cpu", bench.grpc_port)
    assert endpoint.device_name and endpoint.batching_profile == "cpu"
    assert endpoint.batching["num_batch_threads"] >= 1 and endpoint.versions["tensorflow"]
    assert is_our_embedded_server(endpoint)

    # `make loadtest` reads the state file and reaches the server with its own client.
    samples = Samples.load(exported_model.samples_path)
    client = GrpcPredictClient(endpoint.grpc_target, endpoint.model_name, "serving_default", samples, batch_size=8)
    records = [client.call(i) for i in range(4)]
    client.close()
    assert all(r.ok for r in records), [r.error for r in records]

    # The generated monitoring config turned on TF Serving's Prometheus endpoint.
    assert ":tensorflow:serving:" in metrics_page(endpoint)  # metrics_page asserts HTTP 200
    # The compose file's container health check passes against this TF-Serving-compatible REST API.
    assert run_compose_health_check(endpoint.rest_port, endpoint.model_name).returncode == 0
    assert run_compose_health_check(endpoint.rest_port, "no-such-model").returncode != 0

    again = bench.start("cpu", "cpu")  # starting twice does not start two servers
    assert again.returncode == 0 and "already running" in again.stdout
    assert bench.state()["cpu"].pid == endpoint.pid
    other = bench.start("cpu", "off")  # a different profile on the same device: say so, change nothing
    assert other.returncode == 1 and "already running" in other.stderr and "make stop" in other.stderr
    assert bench.state()["cpu"].pid == endpoint.pid

    stopped = bench.launcher("stop")
    assert stopped.returncode == 0 and f"stopped cpu: embedded ({endpoint.pid})" in stopped.stdout
    assert bench.state() == {} and not bench.state_file.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(endpoint.pid, 0)
    assert bench.launcher("stop").stdout.strip() == "nothing to stop"


def test_a_port_taken_by_something_else_is_a_clear_error(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", bench.rest_port))
        squatter.listen()
        done = bench.refused_start("cpu", "off", "--kind", "embedded")
    assert done.returncode == 1
    assert f"port {bench.rest_port} on 127.0.0.1 is already in use by pid {os.getpid()}" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and bench.state() == {}


def test_missing_model_is_a_clear_error(tmp_path):
    bench = Bench(tmp_path, tmp_path / "nothing-here")
    done = bench.refused_start("cpu", "off")
    assert done.returncode == 1 and "no model versions under" in done.stderr and "make export" in done.stderr


@pytest.mark.skipif(gpu_visible(), reason="this machine has a GPU: serve-gpu may rightly succeed")
@pytest.mark.integration
def test_serve_gpu_with_neither_docker_nor_a_gpu_fails_naming_what_is_missing(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models, mode="broken")
    done = bench.start("gpu", "gpu")
    assert done.returncode == 1
    message = done.stderr.strip()
    assert "cannot serve on GPU" in message and BROKEN in message
    assert "TensorFlow" in message and "sees no GPU" in message and "Nothing was started" in message
    assert bench.state() == {} and done.stdout == ""


# ---------------------------------------------------------------- Docker present: fake engines

def test_a_failing_docker_is_reported_when_a_container_is_required(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models, mode="broken")
    done = bench.refused_start("cpu", "off", "--kind", "container")
    assert done.returncode == 1
    assert "cannot start the TF Serving container" in done.stderr and BROKEN in done.stderr
    assert bench.state() == {}


def test_compose_up_failure_is_reported_with_dockers_own_words(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models, mode="compose-fails")
    done = bench.refused_start("cpu", "cpu")
    assert done.returncode == 1
    assert "`docker compose up tfserving-cpu` failed" in done.stderr and "pull access denied" in done.stderr
    up = [c for c in bench.docker_calls() if "up" in c["args"]][0]
    assert up["args"][-3:] == ["up", "-d", "tfserving-cpu"]
    assert up["env"]["TFS_CPU_GRPC_PORT"] == str(bench.grpc_port)
    assert up["env"]["TFS_ENABLE_BATCHING"] == "true"
    assert Path(up["env"]["TFS_BATCHING_PARAMETERS_FILE"]).is_file()
    assert bench.state() == {}


@pytest.mark.integration
def test_a_container_that_exits_prints_its_last_log_lines_and_is_removed(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models, mode="exits")
    done = bench.start("cpu", "off", "--timeout-s", "60")
    assert done.returncode == 1
    assert "container fake-tfserving-cpu is exited" in done.stderr
    assert "Failed to start server" in done.stderr  # the container's own log lines
    assert ["rm", "--force", "fake-tfserving-cpu"] in [c["args"] for c in bench.docker_calls()]
    assert bench.state() == {}


def test_serve_gpu_with_docker_but_no_nvidia_runtime_and_no_gpu_names_both(fake_models, tmp_path):
    docker = launcher.DockerProbe(compose=("docker", "compose"), nvidia_runtime=False, server_version="28")
    no_gpu = RuntimeGpus("2.21.0", built_with_cuda=True, gpu_names=())
    with pytest.raises(launcher.LaunchError, match="no NVIDIA runtime.*nvidia-container-toolkit.*sees no GPU"):
        launcher.choose_launcher("gpu", "auto", docker, lambda: no_gpu)
    one_gpu = RuntimeGpus("2.21.0", built_with_cuda=True, gpu_names=("NVIDIA H100",))
    chosen, note = launcher.choose_launcher("gpu", "auto", docker, lambda: one_gpu)
    assert isinstance(chosen, launcher.EmbeddedLauncher) and "no NVIDIA runtime" in note
    with_nvidia = launcher.DockerProbe(compose=("docker", "compose"), nvidia_runtime=True, server_version="28")
    chosen, note = launcher.choose_launcher("gpu", "auto", with_nvidia, lambda: no_gpu)
    assert isinstance(chosen, launcher.ContainerLauncher) and note == ""


def test_embedded_server_flags_force_the_embedded_server_and_are_refused_by_the_container():
    docker = launcher.DockerProbe(compose=("docker", "compose"), server_version="28")
    chosen, note = launcher.choose_launcher("cpu", "auto", docker)
    assert isinstance(chosen, launcher.ContainerLauncher) and note == ""
    null = ("--backend", "null")
    chosen, note = launcher.choose_launcher("cpu", "auto", docker, server_flags=null)
    assert isinstance(chosen, launcher.EmbeddedLauncher)
    with pytest.raises(launcher.LaunchError, match="embedded-server settings --backend null cannot go to a TF Serving"):
        launcher.choose_launcher("cpu", "container", docker, server_flags=null)


def pinned_request(bench: Bench, cpus: str, **changes) -> StartRequest:
    """What `serve start --device cpu --batching off` asks for, pinned to `cpus` (as a plan's server_cpus)."""
    request = start_request("cpu", "auto", "off", 60.0, models_dir=str(bench.models_dir), model_name=None,
                            config_file=None, build_dir=str(bench.root / "build"), assignments=[],
                            grpc_port=bench.grpc_port, rest_port=bench.rest_port)
    return replace(request, cpus=cpus, **changes)


def test_pinned_cores_go_to_the_container_as_its_cpuset(fake_models, tmp_path, monkeypatch):
    """auto with a usable Docker starts the container on the request's cores: `docker compose up` runs with
    TFS_CPUSET, which docker/compose.yaml's `cpuset` takes (the embedded server is not chosen instead)."""
    bench = Bench(tmp_path, fake_models, mode="compose-fails")
    for key, value in bench.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TFS_CPUSET", "7")  # a stray value: the request decides, not the environment
    docker = launcher.probe_docker()
    assert docker.usable, docker.problem
    with pytest.raises(launcher.LaunchError, match="docker compose up tfserving-cpu` failed"):
        launcher.start(pinned_request(bench, "0-1"), docker=docker)
    up = [c for c in bench.docker_calls() if "up" in c["args"]][0]
    assert up["env"]["TFS_CPUSET"] == "0-1"
    unpinned = docker_launch.compose_environment(pinned_request(bench, ""), {"TFS_CPUSET": "7", "HOME": "/h"})
    assert unpinned["TFS_CPUSET"] == "" and unpinned["HOME"] == "/h"  # "": every core, as compose.yaml reads it
    assert "TFS_CPUSET" not in (tmp_path / "build" / "off" / "compose.env").read_text()  # the files fit any shape


def test_a_gpu_container_whose_log_shows_no_gpu_is_never_labelled_gpu(monkeypatch):
    cpu_only_log = subprocess.CompletedProcess([], 0, stdout="", stderr="I0000 Running on CPU\n")
    monkeypatch.setattr(docker_launch, "_docker", lambda *args, **kw: cpu_only_log)
    container = launcher.ContainerLauncher(launcher.DockerProbe(compose=("docker", "compose")))
    with pytest.raises(launcher.LaunchError, match="no GPU device"):
        container._device_name("gpu", "abc")
    for line in ("Created device /job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory:  -> "
                 "device: 0, name: NVIDIA H100 80GB HBM3, pci bus id: 0000:00:05.0, compute capability: 9.0",
                 "Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 79078 MB memory) "
                 "-> physical GPU (device: 0, name: NVIDIA H100 80GB HBM3, pci bus id: 0000:00:05.0)"):
        gpu_log = subprocess.CompletedProcess([], 0, stdout="", stderr=line)
        monkeypatch.setattr(docker_launch, "_docker", lambda *args, _log=gpu_log, **kw: _log)
        assert container._device_name("gpu", "abc") == "NVIDIA H100 80GB HBM3"


@pytest.mark.integration
def test_container_path_end_to_end_with_the_compose_files_own_command(exported_model, tmp_path):
    """The fake engine runs the compose service's command line on the mapped host ports."""
    bench = Bench(tmp_path, exported_model.output_dir, mode="serve")
    done = bench.start("cpu", "cpu")
    try:
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("serve-cpu: started TF Serving container on cpu")
        endpoint = bench.state()["cpu"]
        assert endpoint.kind == "tfserving-container" and endpoint.container == "fake-tfserving-cpu"
        pinned = docker_launch.compose_defaults()
        assert endpoint.versions["image"] == f"tensorflow/serving:{pinned['TFS_VERSION']}"
        assert endpoint.versions["image_id"] == "sha256:fakeimage"
        assert endpoint.device_name == cpu_model_name()
        assert endpoint.batching["max_batch_size"] == 1024
        served_log = (tmp_path / "tfserving-cpu.log").read_text()
        assert "batching=on" in served_log  # the compose flags turned batching on with the generated file
    finally:
        stopped = bench.launcher("stop")
    assert stopped.returncode == 0 and "stopped cpu: tfserving-container (fake-tfserving-cpu)" in stopped.stdout
    assert ["stop", "--time", "30", "fake-tfserving-cpu"] in [c["args"] for c in bench.docker_calls()]
    assert bench.state() == {}


# ---------------------------------------------------------------- make serve: the foreground server

@pytest.mark.integration
def test_serve_in_the_foreground_is_recorded_while_it_runs_and_cleared_on_ctrl_c(exported_model, tmp_path):
    bench = Bench(tmp_path, exported_model.output_dir)
    proc = subprocess.Popen(
        serve_command("run", "--batching", "off", "--models-dir", str(exported_model.output_dir),
                      "--grpc-port", str(bench.grpc_port), "--rest-port", str(bench.rest_port)),
        cwd=REPO, env=bench.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        wait_for(lambda: "cpu" in bench.state() or proc.poll() is not None, 240, "the server's record", poll_s=0.2)
        endpoint = bench.state().get("cpu")
        assert endpoint is not None and endpoint.kind == "embedded" and endpoint.batching_profile == "off"
        assert endpoint.batching == {}
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, output[-2000:]
    assert "serving ready kind=embedded" in output
    assert bench.state() == {}


def test_status_lists_recorded_servers(tmp_path, fake_models):
    bench = Bench(tmp_path, fake_models)
    assert "no servers recorded" in bench.invoke("status").stdout
    gone = ServedEndpoint(name="cpu", kind="embedded", device="cpu", device_name="X", host="127.0.0.1",
                                   grpc_port=1, rest_port=2, model_name="mnist", batching_profile="off",
                                   pid=2 ** 22 + 7)
    write_state({"cpu": gone}, bench.state_file)
    assert bench.invoke("status").stdout.startswith("cpu: GONE: embedded server on cpu (X)")


def test_a_stale_record_of_a_dead_server_is_cleared_not_trusted(tmp_path, fake_models):
    bench = Bench(tmp_path, fake_models, mode="broken")
    dead = ServedEndpoint(name="cpu", kind="embedded", device="cpu", device_name="X", host="127.0.0.1",
                                   grpc_port=bench.grpc_port, rest_port=bench.rest_port, model_name="mnist",
                                   batching_profile="off", pid=2 ** 22 + 7)
    write_state({"cpu": dead}, bench.state_file)
    done = bench.refused_start("cpu", "off", "--kind", "container")
    assert "already running" not in done.stderr and BROKEN in done.stderr
    assert bench.state() == {}


@pytest.mark.integration
def test_an_embedded_server_that_dies_at_start_is_reported_with_its_log(fake_models, tmp_path):
    bench = Bench(tmp_path, fake_models)  # mnist/1 exists but holds no SavedModel
    done = bench.start("cpu", "off", "--kind", "embedded", "--timeout-s", "120")
    assert done.returncode == 1
    assert "the embedded server exited with code" in done.stderr and "cpu-server.log" in done.stderr
    assert "error" in done.stderr.split("cpu-server.log", 1)[1].lower()  # the server's own last words
    assert bench.state() == {}


def test_recorded_versions_follow_the_runtime_the_server_named():
    from serving.deploy.embedded import server_versions

    jax = server_versions({"version": 2, "runtime": "jax", "runtime_versions": "jax=0.10.2,jaxlib=0.10.2"})
    assert jax["runtime"] == "jax" and jax["jax"] == jax["jaxlib"] == "0.10.2"
    assert "tensorflow" not in jax and jax["model_version"] == 2
    tf = server_versions({"version": 1, "runtime": "tensorflow", "runtime_versions": "tensorflow=2.21.0"})
    assert tf["runtime"] == "tensorflow" and tf["tensorflow"] == "2.21.0"
    null = server_versions({"version": 1, "runtime": "none (null backend)", "runtime_versions": ""})
    assert null["runtime"] == "none (null backend)" and "tensorflow" not in null
    older = server_versions({"version": 1})  # a server from before runtimes were named
    assert "runtime" not in older and "tensorflow" in older


def test_a_null_backend_on_a_gpu_asks_the_driver_not_a_runtime(tmp_path, monkeypatch):
    # A tool-ceiling twin of a GPU configuration (`loadtest.search.tool_ceiling_run`): the null backend runs nothing on
    # the device, so no runtime's GPU probe (TensorFlow's, absent from a device bundle) is asked; the driver is, so a
    # GPU configuration is still refused where no GPU is there.
    docker = launcher.DockerProbe(problem="no engine")

    def no_probe() -> RuntimeGpus:
        raise AssertionError("the null backend asked a runtime for a GPU probe")

    driver = tmp_path / "gpus"
    driver.mkdir()
    monkeypatch.setattr(launcher, "driver_gpus", lambda: gpus.driver_gpus(str(driver)))
    with pytest.raises(launcher.LaunchError, match="cannot serve on GPU: .*the NVIDIA driver drives no GPU here"):
        launcher.choose_launcher("gpu", "embedded", docker, no_probe, server_flags=("--backend", "null"))
    (driver / "0000:00:1e.0").mkdir()  # one GPU the driver drives
    chosen, _ = launcher.choose_launcher("gpu", "embedded", docker, no_probe, server_flags=("--backend", "null"))
    assert isinstance(chosen, launcher.EmbeddedLauncher)
