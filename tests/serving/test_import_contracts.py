"""pyproject.toml's import-linter contracts catch the imports they were written against.

Each planted import once passed `make lint` (issue #57): a `handling/` module importing the server's start-up
(`serving.server.flags`), and a `protocol/` module importing `serving.endpoint`. Here each is planted in a copy
of the source tree and `lint-imports` must fail on it, naming the contract it breaks; the copy as it is passes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model_export", "serving", "loadtest")
SERVER_ROOMS = "the server's rooms"
SERVING_ROOMS = "serving's rooms"


def lint_imports() -> str:
    """The virtualenv's `lint-imports` (beside the interpreter running the tests), else the one on PATH."""
    beside = Path(sys.executable).parent / "lint-imports"
    found = str(beside) if beside.exists() else shutil.which("lint-imports")
    if found is None:
        pytest.skip("lint-imports is not installed")
    return found


def tree_copy(into: Path) -> Path:
    """The packages and pyproject.toml (the contracts) copied under `into`."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, into / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", into / "pyproject.toml")
    return into


def run_contracts(tree: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([lint_imports(), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_tree_as_it_is_keeps_every_contract(tmp_path):
    done = run_contracts(tree_copy(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


@pytest.mark.parametrize(("module", "planted", "contract"), [
    ("serving/server/handling/metrics.py", "import serving.server.flags", SERVER_ROOMS),
    ("serving/protocol/names.py", "import serving.endpoint", SERVING_ROOMS),
])
def test_a_planted_import_breaks_its_contract(tmp_path, module, planted, contract):
    tree = tree_copy(tmp_path)
    with (tree / module).open("a") as source:
        source.write(f"\n{planted}  # planted\n")
    done = run_contracts(tree)
    output = " ".join((done.stdout + done.stderr).split())  # lint-imports wraps long contract names
    assert done.returncode != 0, output[-3000:]
    broken = output.split(" BROKEN")[:-1]  # each ends with the name of a contract broken
    assert any(contract in before.rsplit(" KEPT", 1)[-1] for before in broken), output[-3000:]
    assert planted.split()[-1] in output
