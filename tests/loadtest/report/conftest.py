"""Fixtures for the analysis tests: copies of the hand-made fixture runs, and reports built from them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtest.report import page as report
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

RUNS = ("cpu-run", "gpu-run", "cpu-run-b", "capacity-run", "capacity-run-twins")


def copied(root: Path) -> dict[str, Path]:
    """Copies of the fixture runs under `root`, so reports written beside them land there."""
    out = {}
    for name in RUNS:
        shutil.copytree(FIXTURES / name, root / name)
        out[name] = root / name / "results.jsonl"
    return out


@pytest.fixture
def runs(tmp_path) -> dict[str, Path]:
    """Copies of the fixture runs for one test, which may write beside them."""
    return copied(tmp_path)


# The two reports below are built once a module (each build draws every chart: ~10 s here, and 11 tests read them)
# from copies of their own; the tests only read what was written.
@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    own = copied(tmp_path_factory.mktemp("built"))
    return report.run([own["cpu-run"], own["gpu-run"]], compare=[own["cpu-run-b"]])


@pytest.fixture(scope="module")
def searched(tmp_path_factory) -> tuple[Path, Path]:
    """The report of a run with capacity searches of four configurations, sized for 5000 req/s."""
    own = copied(tmp_path_factory.mktemp("searched"))
    return report.run([own["capacity-run"]], target_rps=5000, prices=FIXTURES / "prices.toml")


@pytest.fixture(scope="module")
def bought(tmp_path_factory) -> tuple[Path, Path]:
    """The report of the hand-made twin fixture (`capacity-run` at request batch 1, each search with a passing
    tool-ceiling twin: fixtures/make_twins.py), sized for 5000 req/s: its card is FOR BUYING."""
    own = copied(tmp_path_factory.mktemp("bought"))
    return report.run([own["capacity-run-twins"]], target_rps=5000, prices=FIXTURES / "prices.toml")
