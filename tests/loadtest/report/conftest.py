"""Fixtures for the analysis tests: copies of the hand-made fixture runs, and reports built from them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtest.report import page as report
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

RUNS = ("cpu-run", "gpu-run", "cpu-run-b", "capacity-run", "capacity-run-twins")


@pytest.fixture
def runs(tmp_path) -> dict[str, Path]:
    """Copies of the fixture runs, so reports written beside them land in tmp_path."""
    out = {}
    for name in RUNS:
        shutil.copytree(FIXTURES / name, tmp_path / name)
        out[name] = tmp_path / name / "results.jsonl"
    return out


@pytest.fixture
def built(runs) -> tuple[Path, Path]:
    return report.run([runs["cpu-run"], runs["gpu-run"]], compare=[runs["cpu-run-b"]])


@pytest.fixture
def searched(runs) -> tuple[Path, Path]:
    """The report of a run with capacity searches of four configurations, sized for 5000 req/s."""
    return report.run([runs["capacity-run"]], target_rps=5000, prices=FIXTURES / "prices.toml")


@pytest.fixture
def bought(runs) -> tuple[Path, Path]:
    """The report of the hand-made twin fixture (`capacity-run` at request batch 1, each search with a passing
    tool-ceiling twin: fixtures/make_twins.py), sized for 5000 req/s: its card is FOR BUYING."""
    return report.run([runs["capacity-run-twins"]], target_rps=5000, prices=FIXTURES / "prices.toml")
