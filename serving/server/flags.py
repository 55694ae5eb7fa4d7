"""The embedded server's flags (`tensorflow_model_server`'s own, then this project's) and what they resolve to.

Flags mirror tensorflow_model_server (`--port`, `--rest_api_port`, `--model_name`,
`--model_base_path`, `--model_config_file`, `--enable_batching`, `--batching_parameters_file`,
`--monitoring_config_file`, `--file_system_poll_wait_seconds`) so the same command lines and
config files drive either server; the rest are this project's own. `server_config` turns parsed
flags into the one `ServerConfig` of the whole server (every process of a pool gets it, or its role's
copy of it: `serving.pool.control`); it must be called after `serving.server.runtimes.prepare_process`
or `serving.protocol.generated.use_protos_without_runtime` (it imports TensorFlow's protos).

Not for: starting anything (`serving.server.__main__` starts one process, `serving.pool` several).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from serving.layering import parse_bool
from serving.protocol.names import METRICS_PATH
from serving.server.runtimes import DEFAULT_BACKEND, RUNTIMES

if TYPE_CHECKING:  # imported in the functions, after prepare_process: they import TensorFlow's protos
    from serving.server.handling.batching_options import BatchingOptions
    from serving.server.handling.core import ServerConfig
    from serving.server.handling.model_source import ModelEntry

FRONTENDS_ENV = "SERVING_WORKERS"  # the default of --workers when set (the test suite sets 1)


def affinity_cores() -> int:
    """The cores this process may run on (its CPU affinity, as `taskset` set it)."""
    return len(os.sched_getaffinity(0))


def default_frontends() -> int:
    """--workers' default: $SERVING_WORKERS, else one per core of this process's CPU affinity."""
    text = os.environ.get(FRONTENDS_ENV, "")
    if not text:
        return affinity_cores()
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{FRONTENDS_ENV}={text!r} is not a whole number of gRPC frontend processes") from None


def _bool(text: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _tfs_flags(p: argparse.ArgumentParser) -> None:
    tfs = p.add_argument_group("tensorflow_model_server flags")
    tfs.add_argument("--port", type=int, default=8500, help="gRPC port (0: pick a free one)")
    tfs.add_argument("--rest_api_port", type=int, default=8501, help="REST/metrics port (0: pick a free one)")
    tfs.add_argument("--model_name", default="default")
    tfs.add_argument("--model_base_path", default="")
    tfs.add_argument("--model_config_file", default="", help="ModelServerConfig text proto")
    tfs.add_argument("--enable_batching", type=_bool, nargs="?", const=True, default=False)
    tfs.add_argument("--batching_parameters_file", default="", help="BatchingParameters text proto")
    tfs.add_argument("--monitoring_config_file", default="", help="MonitoringConfig text proto")
    tfs.add_argument("--file_system_poll_wait_seconds", type=float, default=1.0)


def _own_flags(p: argparse.ArgumentParser) -> None:
    own = p.add_argument_group("embedded server flags")
    own.add_argument("--host", default="127.0.0.1", help="address to bind (loopback unless told otherwise)")
    own.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    own.add_argument("--backend", choices=sorted(RUNTIMES), default=DEFAULT_BACKEND,
                     help="savedmodel: TensorFlow; jax: model.keras on Keras/JAX (XLA); torch: model.keras on "
                          "Keras/PyTorch (CUDA graphs on a GPU); null: zeros, no model run")
    own.add_argument("--gpu_backend", choices=sorted(RUNTIMES), default=None,
                     help="the backend when --device gpu (default: --backend); e.g. --backend jax --gpu_backend torch "
                          "serves model.keras on JAX on a CPU and on PyTorch's CUDA graphs on a GPU")
    own.add_argument("--workers", dest="frontends", metavar="WORKERS", type=int, default=None,
                     help="gRPC frontend processes on the one port (default: $SERVING_WORKERS, else one per core of "
                          "the CPU affinity); above 1 a supervisor starts them, and one device owner process when "
                          "batching is on or the device is a GPU")
    own.add_argument("--device_owner", choices=("auto", "always"), default="auto",
                     help="with --workers above 1: auto: an owner process runs the model when batching is on or the "
                          "device is a GPU, else each frontend runs it; always: an owner in every case")
    own.add_argument("--null_delay_ms", type=float, default=0.0, help="null backend: service time per model call")
    own.add_argument("--null_stall_ms", type=float, default=0.0, help="null backend: length of a periodic stall")
    own.add_argument("--null_stall_every_s", type=float, default=0.0, help="null backend: stall period")
    own.add_argument("--null_cpu_ms", type=float, default=0.0,
                     help="null backend: CPU time each model call spends, busy on its thread (a core's worth per "
                          "process at most: it holds the GIL), so scaling over cores and frontends is real")
    own.add_argument("--tensor_content", type=_bool, nargs="?", const=True, default=False,
                     help="encode responses as tensor_content instead of typed fields")
    own.add_argument("--batching_profile", default="", help="label echoed in metadata and metrics")
    own.add_argument("--max_message_bytes", type=int, default=32 * 1024 * 1024,
                     help="largest request accepted (gRPC answers RESOURCE_EXHAUSTED above it)")
    own.add_argument("--grpc_max_threads", type=int, default=256,
                     help="gRPC request threads (each in-flight request holds one; batching merges only those)")
    own.add_argument("--device_floor_s", type=float, default=2.0,
                     help="seconds spent at start measuring the model alone on its device per padded batch size, "
                          "and a bare device round trip (0: not measured)")
    own.add_argument("--gc_freeze", type=_bool, nargs="?", const=True, default=True,
                     help="after start-up, freeze the heap (gc.freeze) so garbage collections walk only what "
                          "requests allocate; every collection's pause is exported either way")
    own.add_argument("--log_level", default=os.environ.get("SERVING_LOG_LEVEL", "INFO"))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m serving.server",
                                description="The embedded server, with tensorflow_model_server's flags.")
    _tfs_flags(p)
    _own_flags(p)
    return p


def chosen_backend(backend: str, gpu_backend: str | None, device: str) -> str:
    """The backend a server runs on `device`: `--gpu_backend` on a GPU when given, else `--backend`."""
    return gpu_backend if device == "gpu" and gpu_backend else backend


def backend_in(flags: Sequence[str], device: str) -> str:
    """The backend a server started with these flags would run on `device` (its other flags ignored, unchecked)."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--backend", default=DEFAULT_BACKEND)
    p.add_argument("--gpu_backend", default=None)
    known, _ = p.parse_known_args(list(flags))
    return chosen_backend(known.backend, known.gpu_backend, device)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parsed flags with --workers resolved (ValueError for fewer than one) and, on a GPU, --gpu_backend applied."""
    args = build_parser().parse_args(argv)
    args.backend = chosen_backend(args.backend, args.gpu_backend, args.device)
    if args.frontends is None:
        args.frontends = default_frontends()
    if args.frontends < 1:
        raise ValueError(f"--workers must be at least 1, not {args.frontends}")
    return args


def model_entries(args: argparse.Namespace) -> tuple[ModelEntry, ...]:
    """From --model_config_file, or --model_name/--model_base_path as tensorflow_model_server does."""
    from serving.server.handling.model_source import ModelEntry, entries_from_config

    if args.model_config_file:
        if args.model_base_path:
            raise ValueError("give either --model_config_file or --model_base_path, not both")
        from serving.protocol.protos import load_model_server_config

        return tuple(entries_from_config(load_model_server_config(args.model_config_file)))
    if not args.model_base_path:
        raise ValueError("--model_base_path (or --model_config_file) is required")
    return (ModelEntry(name=args.model_name, base_path=Path(args.model_base_path).resolve()),)


def batching_options(args: argparse.Namespace) -> BatchingOptions | None:
    from serving.server.handling.batching_options import BatchingOptions, check_options, options_from_proto

    if not args.enable_batching:
        if args.batching_parameters_file:
            raise ValueError("--batching_parameters_file needs --enable_batching")
        return None
    if not args.batching_parameters_file:
        options = BatchingOptions()
        check_options(options)
        return options
    from serving.protocol.protos import load_batching_parameters

    return options_from_proto(load_batching_parameters(args.batching_parameters_file))


def monitoring_path(args: argparse.Namespace) -> str | None:
    """Prometheus page path: TF Serving's default unless a monitoring config says otherwise."""
    if not args.monitoring_config_file:
        return METRICS_PATH
    from serving.protocol.protos import load_monitoring_config

    config = load_monitoring_config(args.monitoring_config_file).prometheus_config
    if not config.enable:
        return None
    return config.path or METRICS_PATH


def server_config(args: argparse.Namespace) -> ServerConfig:
    """The server's config from its flags, its device not yet named (the process that runs the model names it)."""
    from serving.server.handling.core import ServerConfig
    from serving.server.runtimes.model_spec import BackendOptions

    batching = batching_options(args)
    return ServerConfig(
        models=model_entries(args), host=args.host, grpc_port=args.port, rest_port=args.rest_api_port,
        backend=args.backend,
        backend_options=BackendOptions(device=args.device, null_delay_ms=args.null_delay_ms,
                                       null_stall_ms=args.null_stall_ms, null_stall_every_s=args.null_stall_every_s,
                                       null_cpu_ms=args.null_cpu_ms),
        batching=batching, batching_profile=args.batching_profile or ("default" if batching else "off"),
        tensor_content=args.tensor_content, poll_wait_s=args.file_system_poll_wait_seconds,
        monitoring_path=monitoring_path(args), max_message_bytes=args.max_message_bytes,
        grpc_max_threads=args.grpc_max_threads, device_floor_s=args.device_floor_s,
        gc_freeze=args.gc_freeze, frontends=args.frontends, device_owner=args.device_owner, log_level=args.log_level)


__all__ = ["FRONTENDS_ENV", "affinity_cores", "batching_options", "build_parser", "default_frontends",
           "model_entries", "monitoring_path", "parse_args", "server_config"]
