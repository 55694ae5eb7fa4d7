"""`python -m serving.server`: the embedded server, with `tensorflow_model_server`'s flags (`serving.server.flags`).

The flags become the server's one `ServerConfig` here (`server_config`, called nowhere else). With
`--workers 1` it is one process: gRPC and REST over one `ServingCore`. With more, this entry point hands
that config to `serving.pool`, which supervises that many gRPC frontend processes on the one port (and a
device owner where one is needed); the library modules of `serving.server` never import the pool.
`run()` raises; `main()` turns errors into one line and a non-zero exit.

The backend is known before anything imports TensorFlow: `run()` readies the process for it
(`serving.server.runtimes.prepare_process`; a pool's supervisor for TensorFlow's protos only) and only
then imports the server, so a `--backend jax` server never loads TensorFlow's runtime.
"""

from __future__ import annotations

import sys

from serving.protocol.generated import use_protos_without_runtime
from serving.server.flags import build_parser, parse_args, server_config  # noqa: F401  (build_parser: re-exported)
from serving.server.lifecycle import configure_logging
from serving.server.runtimes import prepare_process


def run(argv: list[str] | None = None) -> int:
    """Parse, check, start; raises on bad flags, files or devices."""
    args = parse_args(argv)
    configure_logging(args.log_level)
    if args.frontends > 1:
        use_protos_without_runtime()  # the supervisor reads the flags' files, never runs the model
    else:
        prepare_process(args.backend)  # before the imports below pull in TensorFlow's protos (or its runtime)
    config = server_config(args)
    if config.frontends > 1:
        from serving.pool.supervisor import run_pool  # the entry point may start the pool; the library never does

        return run_pool(config)
    from serving.server.app import serve

    return serve(config)


def main(argv: list[str] | None = None) -> int:
    try:
        return run(argv)
    except (ValueError, RuntimeError, OSError) as exc:
        print(f"serving: error: {exc}", file=sys.stderr, flush=True)
        return 2


if __name__ == "__main__":
    sys.exit(main())
