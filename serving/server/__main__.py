"""`python -m serving.server`: the embedded server, with `tensorflow_model_server`'s flags.

Flags mirror tensorflow_model_server (`--port`, `--rest_api_port`, `--model_name`,
`--model_base_path`, `--model_config_file`, `--enable_batching`, `--batching_parameters_file`,
`--monitoring_config_file`, `--file_system_poll_wait_seconds`) so the same command lines and
config files drive either server; the rest are this project's own (device, backend, null-model
timing, response encoding, profile label). `run()` raises; `main()` turns errors into one line
and a non-zero exit.

The backend is known before anything imports TensorFlow: `run()` readies the process for it
(`serving.server.runtimes.prepare_process`) and only then imports the server, so a `--backend jax`
server never loads TensorFlow's runtime.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from serving.layering import parse_bool
from serving.protocol.names import METRICS_PATH
from serving.server.runtimes import Backend, prepare_process

if TYPE_CHECKING:  # imported in run(), after prepare_process: they import TensorFlow's protos
    from serving.server.batching import BatchingOptions
    from serving.server.model_source import ModelEntry


def _bool(text: str) -> bool:
    try:
        return parse_bool(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m serving.server", description=__doc__.splitlines()[0])
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
    own = p.add_argument_group("embedded server flags")
    own.add_argument("--host", default="127.0.0.1", help="address to bind (loopback unless told otherwise)")
    own.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    own.add_argument("--backend", choices=sorted(Backend), default=Backend.SAVEDMODEL,
                     help="savedmodel: TensorFlow; jax: model.keras on Keras/JAX (XLA); null: zeros, no model run")
    own.add_argument("--null_delay_ms", type=float, default=0.0, help="null backend: service time per model call")
    own.add_argument("--null_stall_ms", type=float, default=0.0, help="null backend: length of a periodic stall")
    own.add_argument("--null_stall_every_s", type=float, default=0.0, help="null backend: stall period")
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
    return p


def model_entries(args: argparse.Namespace) -> tuple[ModelEntry, ...]:
    """From --model_config_file, or --model_name/--model_base_path as tensorflow_model_server does."""
    from serving.server.model_source import ModelEntry, entries_from_config

    if args.model_config_file:
        if args.model_base_path:
            raise ValueError("give either --model_config_file or --model_base_path, not both")
        from serving.protocol.protos import load_model_server_config

        return tuple(entries_from_config(load_model_server_config(args.model_config_file)))
    if not args.model_base_path:
        raise ValueError("--model_base_path (or --model_config_file) is required")
    return (ModelEntry(name=args.model_name, base_path=Path(args.model_base_path).resolve()),)


def batching_options(args: argparse.Namespace) -> BatchingOptions | None:
    from serving.server.batching import BatchingOptions, check_options, options_from_proto

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


def run(argv: list[str] | None = None) -> int:
    """Parse, check, start; raises on bad flags, files or devices."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    prepare_process(args.backend)  # before the imports below pull in TensorFlow's protos (or its runtime)
    from serving.server.app import serve
    from serving.server.backends import BackendOptions
    from serving.server.core import ServerConfig, select_device

    models = model_entries(args)
    batching = batching_options(args)
    device_name = select_device(args.device, args.backend)
    config = ServerConfig(
        models=models, host=args.host, grpc_port=args.port, rest_port=args.rest_api_port,
        backend=args.backend,
        backend_options=BackendOptions(device=args.device, null_delay_ms=args.null_delay_ms,
                                       null_stall_ms=args.null_stall_ms, null_stall_every_s=args.null_stall_every_s),
        batching=batching, batching_profile=args.batching_profile or ("default" if batching else "off"),
        tensor_content=args.tensor_content, poll_wait_s=args.file_system_poll_wait_seconds,
        device_name=device_name, monitoring_path=monitoring_path(args), max_message_bytes=args.max_message_bytes,
        grpc_max_threads=args.grpc_max_threads, device_floor_s=args.device_floor_s,
        gc_freeze=args.gc_freeze)
    logging.getLogger("serving").info(
        "starting: device=%s (%s) backend=%s runtime=%s batching=%s models=%s", args.device, device_name,
        args.backend, config.runtime.name,
        batching.as_dict() if batching else "off", ", ".join(f"{m.name}@{m.base_path}" for m in models))
    return serve(config)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"serving: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
