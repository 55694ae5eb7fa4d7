"""Running `mnist-bench` as a user runs it: in this process (fast, for output and exit codes), or as a
separate process through the installed console script (for runs that start servers or get signals)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass

from click.testing import CliRunner

from loadtest.commands.main import main
from tests.support.paths import MNIST_BENCH


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str


def invoke(*args: object, env: Mapping[str, str] | None = None) -> Outcome:
    """`mnist-bench ARGS...` in this process, through the same error handling as the console script."""
    runner = CliRunner(env=dict(env) if env else None)
    with runner.isolation() as (out, err, _):
        code = main([str(a) for a in args])
        sys.stdout.flush()
        sys.stderr.flush()
    return Outcome(code, out.getvalue().decode(), err.getvalue().decode())


def command(*args: object) -> list[str]:
    """The command line of `mnist-bench ARGS...` as a separate process."""
    return [*MNIST_BENCH, *(str(a) for a in args)]
