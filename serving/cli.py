"""`mnist-bench serve`: start, run, stop and list the model servers; generate TF Serving's files.

    mnist-bench serve start --device cpu --batching cpu [--kind auto|container|embedded]
    mnist-bench serve run --device cpu                  (the embedded server in this terminal)
    mnist-bench serve stop [NAME ...] | status
    mnist-bench serve files --batching cpu              (prints the generated directory)
    mnist-bench k8s [--batching gpu] [--replicas-cpu 2] [--replicas-gpu 1] [--from-sizing FILE]
                    [--replica-cores-cpu 2] [--locust-workers 4] [--out build/k8s]   (Kubernetes manifests)

The command line is the last layer of the serving config (defaults -> serving/serving.toml ->
`SERVING_*` -> these flags). Errors a user causes are one line and exit status 1; bad usage
exits 2. A model version written by a newer TensorFlow than the server that would load it is a
one-line `warning:` on stderr (`serving.deploy.versions`), from `serve start|run` and `k8s` alike.
Not for: the work itself (`serving.deploy.launcher`, `serving.deploy.tfs_files`, `serving.deploy.k8s`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Any

import click

from serving.deploy import k8s as k8s_manifests
from serving.deploy import k8s_settings, launcher
from serving.deploy.config import (
    BATCHING_FIELDS,
    DEFAULT_CONFIG_FILE,
    ServingConfig,
    batching_overrides,
    command_line_layer,
    load_config,
    split_base_path,
)
from serving.deploy.request import LaunchError, LaunchKind, StartRequest
from serving.deploy.tfs_files import ServingFiles, generate
from serving.endpoint import Device
from serving.server.runtimes import DEFAULT_BACKEND, RUNTIMES

DEFAULT_START_TIMEOUT_S = 300.0


def warn(line: str) -> None:
    """A one-line warning on stderr: the command goes on."""
    click.echo(f"warning: {line}", err=True)

BACKEND_CHOICES = [backend for backend, runtime in RUNTIMES.items() if runtime.runs_model]


def _check_assignments(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[str]:
    for item in values:
        name, sep, _ = item.partition("=")
        if not sep or name.strip() not in BATCHING_FIELDS:
            raise click.BadParameter(f"expected FIELD=VALUE with FIELD one of {', '.join(BATCHING_FIELDS)}; "
                                     f"got {item!r}", ctx, param)
    return list(values)


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The flags every config-reading subcommand shares (the command-line layer)."""
    options = [
        click.option("--config", "config_file", type=click.Path(dir_okay=False),
                     help="serving TOML (default: $SERVING_CONFIG or serving/serving.toml)"),
        click.option("--models-dir", help="directory holding <model>/<version>/ (make MODELS=...)"),
        click.option("--model-name", help="model name in the config and in requests"),
        click.option("--model-base-path", help="the model's directory, DIR/NAME holding <version>/: instead of "
                                               "--models-dir DIR --model-name NAME"),
        click.option("--build-dir", envvar="SERVING_BUILD_DIR", type=click.Path(file_okay=False),
                     help="where generated files go (default: $SERVING_BUILD_DIR or build/serving)"),
        click.option("--set", "assignments", multiple=True, metavar="FIELD=VALUE", callback=_check_assignments,
                     help="override one batching field of the chosen profile (repeatable)"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def server_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The flags of the subcommands that start a server."""
    options = [
        click.option("--device", type=click.Choice([d.value for d in Device]), default=Device.CPU.value,
                     show_default=True),
        click.option("--batching", default="off", show_default=True, help="batching profile from the serving config"),
        click.option("--backend", type=click.Choice(BACKEND_CHOICES), default="savedmodel", show_default=True,
                     help="embedded server: the SavedModel on TensorFlow, or the same weights on JAX or PyTorch "
                          "(make BACKEND=)"),
        click.option("--grpc-port", type=click.IntRange(1, 65535),
                     help="host gRPC port (default: the device's from the config)"),
        click.option("--rest-port", type=click.IntRange(1, 65535),
                     help="host REST port (default: the device's from the config)"),
        click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), envvar="SERVING_START_TIMEOUT_S",
                     default=DEFAULT_START_TIMEOUT_S, show_default=True,
                     help="bounded wait for the model to be AVAILABLE ($SERVING_START_TIMEOUT_S)"),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def user_errors(command: Callable[..., Any]) -> Callable[..., Any]:
    """Turn the errors a user causes (a bad config, a refused launch) into one-line click errors."""
    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except (LaunchError, ValueError) as exc:
            raise click.ClickException(str(exc)) from exc
    return wrapper


def serving_files(config_file: str | None, models_dir: str | None, model_name: str | None, build_dir: str | None,
                  assignments: list[str], profile: str, device: str | None = None, grpc_port: int | None = None,
                  rest_port: int | None = None,
                  model_base_path: str | None = None) -> tuple[ServingConfig, ServingFiles]:
    """The layered config and its generated files for one profile."""
    if model_base_path:
        if models_dir:
            raise ValueError("give --model-base-path or --models-dir, not both")
        models_dir, model_name = split_base_path(model_base_path, model_name)
    layer = command_line_layer(models_dir, model_name, device, grpc_port, rest_port)
    config = load_config(config_file, cli=layer)
    return config, generate(config, profile, build_dir, batching_overrides(os.environ, assignments))


def start_request(device: str, kind: str, batching: str, timeout_s: float, backend: str = DEFAULT_BACKEND,
                  **config_args: Any) -> StartRequest:
    """A launch request; a backend other than the SavedModel's goes to the embedded server as its flag."""
    config, files = serving_files(profile=batching, device=device, **config_args)
    flags = () if backend == DEFAULT_BACKEND else ("--backend", backend)
    return StartRequest(device=Device(device), kind=LaunchKind(kind), config=config, files=files,
                        timeout_s=timeout_s, server_flags=flags)


@click.group(name="serve")
def serve() -> None:
    """Start, stop and inspect the model servers; generate TF Serving's files."""


@serve.command()
@server_options
@click.option("--kind", type=click.Choice([k.value for k in LaunchKind]), envvar="SERVING_KIND",
              default=LaunchKind.AUTO.value, show_default=True,
              help="auto: the TF Serving container when Docker can, else the embedded server ($SERVING_KIND)")
@config_options
@user_errors
def start(device: str, batching: str, backend: str, grpc_port: int | None, rest_port: int | None, timeout_s: float,
          kind: str, **config_args: Any) -> None:
    """Start a server in the background and record it (make serve-cpu / serve-gpu)."""
    request = start_request(device, kind, batching, timeout_s, backend, grpc_port=grpc_port, rest_port=rest_port,
                            **config_args)
    endpoint, note = launcher.start(request, warn=warn)
    click.echo(launcher.start_message(request, endpoint, note))


@serve.command()
@server_options
@config_options
@click.pass_context
@user_errors
def run(ctx: click.Context, device: str, batching: str, backend: str, grpc_port: int | None, rest_port: int | None,
        timeout_s: float, **config_args: Any) -> None:
    """Run the embedded server in this terminal, recorded while it runs (make serve)."""
    request = start_request(device, LaunchKind.EMBEDDED, batching, timeout_s, backend, grpc_port=grpc_port,
                            rest_port=rest_port, **config_args)
    ctx.exit(launcher.run_foreground(request, warn=warn))


@serve.command()
@click.argument("names", nargs=-1)
@user_errors
def stop(names: tuple[str, ...]) -> None:
    """Stop the recorded servers (NAMES: cpu, gpu; default all) and clear their records."""
    click.echo("\n".join(launcher.stop(list(names)) or ["nothing to stop"]))


@serve.command()
@user_errors
def status() -> None:
    """List the recorded servers and whether each is still up."""
    click.echo("\n".join(launcher.status_lines()))


@serve.command()
@click.option("--batching", default="off", show_default=True, help="batching profile from the serving config")
@config_options
@user_errors
def files(batching: str, **config_args: Any) -> None:
    """Generate TF Serving's files for one batching profile and print their directory."""
    _, generated = serving_files(profile=batching, **config_args)
    click.echo(str(generated.directory))



def k8s_layers(batching: str, from_sizing: Path | None, replicas: dict[str, int | None],
               **flags: Any) -> tuple[dict, dict]:
    """The sizing file's layer and the flags' layer of the Kubernetes settings (flags win)."""
    sized = k8s_settings.replicas_from_sizing(from_sizing, batching) if from_sizing else {}
    return ({device: {"replicas": count} for device, count in sized.items()},
            k8s_settings.command_line_layer(replicas, **flags))


@click.command("k8s")
@click.option("--batching", default="off", show_default=True, help="batching profile from the serving config")
@click.option("--replicas-cpu", type=click.IntRange(min=0), help="CPU Deployment replicas and HPA minimum (0: none)")
@click.option("--replicas-gpu", type=click.IntRange(min=0), help="GPU Deployment replicas and HPA minimum (0: none)")
@click.option("--replica-cores-cpu", type=click.IntRange(min=1),
              help="whole cores per CPU replica: TF Serving requests == limits (Guaranteed QoS, its own cores)")
@click.option("--replica-cores-gpu", type=click.IntRange(min=1),
              help="whole cores per GPU replica: TF Serving requests == limits (Guaranteed QoS, its own cores)")
@click.option("--from-sizing", type=click.Path(dir_okay=False, path_type=Path),
              help="replicas per device from `mnist-bench size ... --json > FILE` (the flags above win)")
@click.option("--locust-workers", "workers", type=click.IntRange(min=1), help="Locust worker replicas")
@click.option("--locust-target", "target_device", type=click.Choice([d.value for d in Device]),
              help="whose TF Serving Service Locust sends to (default cpu)")
@click.option("--models-image", help="image holding /models/<model>/<version>/ (default: MODELS_IMAGE, docker/.env)")
@click.option("--models-pvc", help="PersistentVolumeClaim holding the models directory, instead of the image")
@click.option("--loadgen-image", help="Locust image (default: LOADGEN_IMAGE, docker/.env)")
@click.option("--locust-input-data", "input_data",
              help="Locust's inputs: auto (MNIST digits for mnist, random for any other model), samples, random, "
                   "zeros, or FILE.npz in the models image or volume")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=k8s_manifests.DEFAULT_OUT_DIR,
              help="where the manifests go (default: build/k8s)")
@click.option("--config", "config_file", type=click.Path(dir_okay=False),
              help="serving TOML (default: $SERVING_CONFIG or serving/serving.toml)")
@click.option("--model-name", help="model name in the config and in requests")
@click.option("--set", "assignments", multiple=True, metavar="FIELD=VALUE", callback=_check_assignments,
              help="override one batching field of the chosen profile (repeatable)")
@user_errors
def k8s(batching: str, replicas_cpu: int | None, replicas_gpu: int | None, replica_cores_cpu: int | None,
        replica_cores_gpu: int | None, from_sizing: Path | None, out: Path, config_file: str | None,
        model_name: str | None, assignments: list[str], **flags: Any) -> None:
    """Kubernetes manifests (TF Serving per device, Locust master + workers) from the serving config."""
    config_path = Path(config_file or os.environ.get("SERVING_CONFIG") or DEFAULT_CONFIG_FILE)
    replicas = {Device.CPU.value: replicas_cpu, Device.GPU.value: replicas_gpu}
    cores = {Device.CPU.value: replica_cores_cpu, Device.GPU.value: replica_cores_gpu}
    settings = k8s_settings.load_settings(config_path, *k8s_layers(batching, from_sizing, replicas,
                                                                    replica_cores=cores, **flags))
    configs = k8s_manifests.device_configs(config_path, settings, batching, batching_overrides(os.environ, assignments),
                                           command_line_layer(model_name=model_name))
    warning = k8s_manifests.version_warning(configs)
    if warning:
        warn(warning)
    for path in k8s_manifests.write(k8s_manifests.render(configs, settings), out):
        click.echo(str(path))
    click.echo(k8s_manifests.summary(configs, settings, out))
