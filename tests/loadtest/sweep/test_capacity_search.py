"""`mnist-bench capacity` against a real server whose limit is known: the null backend with a fixed
10 ms delay serves its calls one at a time, so it cannot take more than 100 requests/s."""

from __future__ import annotations

import subprocess

import pytest

from loadtest.records import read_results
from serving.deploy.process import start_server
from tests.support.cli import command
from tests.support.paths import REPO

pytestmark = pytest.mark.integration

DELAY_MS = 10.0
LIMIT_RPS = 1000 / DELAY_MS
QUICK = ("--check", "shape", "--warmup-s", "0.5", "--measure-s", "2")


@pytest.fixture(scope="module")
def slow_server(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", str(DELAY_MS), backend="null") as server:
        yield server


def capacity(server, exported_model, tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*command("capacity"), "--target", server.grpc_target, "--rest-url", server.rest_url,
                           "--samples", str(exported_model.samples_path), "--results-dir", str(tmp_path), *QUICK,
                           *args], cwd=REPO, capture_output=True, text=True, timeout=600)


def test_capacity_is_a_measured_passing_rate_under_the_servers_limit(slow_server, exported_model, tmp_path):
    done = capacity(slow_server, exported_model, tmp_path, "--p99-ms", "60", "--precision", "0.1")
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("capacity: ") and "req/s" in last and "img/s" in last and "<= 60 ms" in last
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    assert len({c.search["id"] for c in cells}) == 1 and all(c.search["p99_objective_ms"] == 60 for c in cells)
    roles = [c.search["role"] for c in cells]
    assert roles[0] == "probe" and "bracket" in roles and roles[-1] == "confirm"
    confirmed = cells[-1]  # the answer: a measured cell, valid, within the objective
    assert confirmed.valid and confirmed.latency_p99_ms <= 60
    assert confirmed.load.duration_s == 3 * 2  # confirmed over a longer window
    answer_rps = confirmed.search["offered_rps"]
    assert last.startswith(f"capacity: {answer_rps:g} req/s")
    assert 0 < answer_rps <= LIMIT_RPS
    last_word = {c.search["offered_rps"]: c.valid and c.latency_p99_ms <= 60 for c in cells
                 if c.search["role"] in ("bracket", "bisect", "retry")}  # a retry's verdict replaces the first
    failing = [rate for rate, passed in last_word.items() if not passed]
    assert failing and min(failing) > answer_rps  # the bracket's upper end was measured, and failed


def test_an_objective_the_server_cannot_meet_is_answered_so(slow_server, exported_model, tmp_path):
    done = capacity(slow_server, exported_model, tmp_path, "--p99-ms", "5", "--start-rps", "4", "--min-rps", "1")
    assert done.returncode == 1
    assert done.stdout.strip().splitlines()[-1].startswith("capacity: none at p99 <= 5 ms")
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    # halved down to the floor, each recorded; every request takes 10 ms > 5 ms, the median too: no retries
    assert [(c.search["offered_rps"], c.search["role"]) for c in cells] == [(4, "bracket"), (2, "bracket"),
                                                                             (1, "bracket")]
