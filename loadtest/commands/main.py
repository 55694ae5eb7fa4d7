"""`mnist-bench`: the one command line, a subcommand for every stage of the pipeline.

    mnist-bench export | serve start|run|stop|status|files | k8s | loadtest | capacity | tune | report | size | ui
    mnist-bench bench server|loadgen

It lives in the last stage because it is the only module that imports all three. Conventions, the
same for every subcommand: kebab-case flags; exit status 0 ok, 1 failed, 2 bad usage (130 for a
run interrupted with Ctrl-C); every error is one line on stderr, `mnist-bench CMD: error: ...`.
Subcommands raise `click.ClickException` (or a usage error) and may return an exit status.
Not for: any stage's own work (each stage's `cli.py` holds its commands).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click

from loadtest.commands.bench_commands import bench
from loadtest.commands.bundle_commands import device_bundle
from loadtest.commands.search_commands import SEARCH_COMMANDS
from loadtest.commands.sweep_commands import COMMANDS
from model_export.cli import export
from serving.cli import k8s, serve
from serving.protocol.generated import use_protos_without_runtime

PROG = "mnist-bench"
INTERRUPTED = 130
# Commands that measure: their process reads and writes TF Serving's messages but never runs TensorFlow (a
# container's device floor is measured in a child process), so it loads TensorFlow's generated protos only, not
# its runtime (~4 s of start-up and ~500 MB in every run).
PROTOS_ONLY = frozenset({"loadtest", "capacity", "tune"})


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(package_name="mnist-serving-bench", prog_name=PROG)
def cli() -> None:
    """Size inference hardware for a TF Serving model: export, serve, load-test, report, size."""


for command in (export, serve, k8s, *COMMANDS, *SEARCH_COMMANDS, bench, device_bundle):
    cli.add_command(command)


def command_path(args: Sequence[str]) -> str:
    """`mnist-bench serve start` for the leading subcommand names in `args`, for error lines."""
    names: list[str] = [PROG]
    node: click.Command = cli
    for arg in args:
        if not isinstance(node, click.Group) or arg not in node.commands:
            break
        node = node.commands[arg]
        names.append(arg)
    return " ".join(names)


def one_line(message: str) -> str:
    return "; ".join(line.strip() for line in message.strip().splitlines() if line.strip())


def console() -> int:
    """The console script (and `python -m loadtest`): `main` in a process of its own, TensorFlow's runtime kept
    out of the commands in `PROTOS_ONLY`. (`main` alone leaves the process as it is: tests call it in-process.)"""
    args = sys.argv[1:]
    if args and args[0] in PROTOS_ONLY:
        use_protos_without_runtime()
    return main(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; turn every error into one line and an exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort:
        print(f"{command_path(args)}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except click.ClickException as exc:
        print(f"{command_path(args)}: error: {one_line(exc.format_message())}", file=sys.stderr)
        return exc.exit_code
    return result if isinstance(result, int) else 0

