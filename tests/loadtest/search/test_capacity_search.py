"""`mnist-bench capacity` against real servers whose truth is known.

- The null backend with a fixed delay serves its calls one at a time, so it cannot take more than 1000 / delay
  requests/s: its capacity is a confirmed rate under that, within the search's precision (5 ms a call: 200
  requests/s; 10 ms, 100 requests/s, for the tests whose objective no rate can meet).
- The null backend with a planted stall (every 0.5 s, every call waits out 60 ms; 1 ms a call
  otherwise) misses p99 <= 10 ms at every rate by the same share (~10% of requests land in a stall):
  the search names the stalls instead of bisecting towards zero.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from loadtest.evidence.records import read_results
from loadtest.judge.verdicts import Decision
from loadtest.report.answers.answers import search_answers
from loadtest.report.answers.bound import Held, held_by, served_share
from loadtest.report.answers.movement import search_movements
from loadtest.report.answers.verdict import answer_cell
from serving.deploy.process import start_server
from serving.protocol.names import REQUEST_PHASES
from tests.support import timing
from tests.support.cli import command
from tests.support.paths import REPO

pytestmark = pytest.mark.integration

DELAY_MS = 10.0
# The confirmed-rate test's server: 5 ms a call, 200 req/s at most, with its objective and windows scaled from the
# 10 ms server's (60 ms, 30 s a rate; 140 s a test on a clean clone) so its queueing is the same in half the time.
QUICK_DELAY_MS = 5.0
LOADGEN_LATENESS = {"LOADTEST_LATE_THRESHOLD_MS": "5", "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}
LIMIT_RPS = 1000 / QUICK_DELAY_MS
STALL_MS, STALL_EVERY_S = 60.0, 0.5
# Running servers: the tool did not start them, so no tool-ceiling twin (it would be one failed cell a search)
QUICK = ("--check", "shape", "--warmup-s", "0.5", "--measure-s", "2", "--no-tool-ceiling")


@pytest.fixture(scope="module")
def slow_server(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", str(DELAY_MS), backend="null") as server:
        yield server


@pytest.fixture(scope="module")
def quick_server(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", str(QUICK_DELAY_MS), backend="null") as server:
        yield server


@pytest.fixture(scope="module")
def stalling_server(exported_model):
    with start_server("--model_name", "mnist", "--model_base_path", str(exported_model.base_path),
                      "--null_delay_ms", "1", "--null_stall_ms", str(STALL_MS),
                      "--null_stall_every_s", str(STALL_EVERY_S), backend="null") as server:
        yield server


def capacity(server, exported_model, tmp_path, *args: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run([*command("capacity"), "--target", server.grpc_target, "--rest-url", server.rest_url,
                           "--samples", str(exported_model.samples_path), "--results-dir", str(tmp_path), *QUICK,
                           *args], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})


def test_capacity_is_a_confirmed_rate_under_the_servers_limit_within_precision(quick_server, exported_model,
                                                                              tmp_path):
    # 15 s at a rate: at ~half the limit about 0.3% of requests wait past 30 ms (M/D/1, six service times), so a
    # verdict there can need ~1,000 requests, and a quarter of the limit (50 req/s) must hold the 459 a pass needs
    # with room for Poisson's variation (750 expected; at the 10 ms server's 25 req/s, 20 s held 458 in one run).
    # Sends late past 5 ms, not 2, are the load generator's limit here: a shared 2-core machine's own wake-ups (one
    # run: 1.1% of sends over 2 ms late at 45 req/s, with other work beside it) are not this test's subject.
    done = capacity(quick_server, exported_model, tmp_path, "--p99-ms", "30", "--precision", "0.2",
                    "--max-rate-s", "15", env=LOADGEN_LATENESS)
    # exit 1 is also the answer `capacity: none at p99 <= 30 ms` (no rate passed: a slow host's miss), not only an
    # error: a crash or an error line fails here, an unmet objective below
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode in (0, 1) and "Traceback" not in done.stderr, tail
    assert "mnist-bench capacity: error:" not in done.stderr, tail
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("capacity: "), tail
    timing.holds("a passing rate at p99 <= 30 ms (exit 0)", done.returncode == 0, tail)
    assert "req/s" in last and "img/s" in last and "<= 30 ms" in last
    assert "confirmed: p99 <= " in last and "at 99% confidence (N=" in last
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    assert len({c.tag.id for c in cells}) == 1 and all(c.tag.objective.p99_ms == 30 for c in cells)
    roles = [c.tag.role for c in cells]
    assert roles[0] == "probe" and "bracket" in roles and "confirm" in roles and "retry" not in roles
    for c in cells[1:]:  # every search cell records its verdict: N, k and estimate at the run's confidence, or why
        evidence = c.tag.evidence.to_dict()
        assert c.tag.confidence == 0.99 and evidence["decision"]
        if "requests" in evidence:
            assert evidence["requests"] > 0 and {"over", "p99_estimate_ms", "requests_to_pass"} <= set(evidence)
        else:  # no binomial evidence: the load generator was the limit, or the cell was not valid evidence
            assert evidence["decision"] != "pass" and evidence["reason"], evidence
            assert not c.valid or evidence["decision"] == "loadgen", evidence
    [answer] = search_answers(cells)
    # A host that stalls the load generator's sends (a busy CI machine: one run read 1% of sends late at 60 req/s)
    # makes the rate above the answer the load generator's limit: the answer is then a lower bound, said so.
    at_least = answer.conclusion.at_least
    assert answer.met and last.startswith(f"capacity: {'at least ' if at_least else ''}{answer.capacity_rps:g} req/s")
    assert 0 < answer.capacity_rps <= LIMIT_RPS  # never above what the server can do
    confirmation = answer.conclusion.capacity
    assert confirmation.confirming and confirmation.verdict.decision == Decision.PASS
    assert confirmation.verdict.evidence.requests >= 459  # a p99 at 99% needs at least that many
    assert confirmation.verdict.evidence.estimate_ms <= 30
    # the lowest rate above it that did not pass, measured (or where the load generator was the limit)
    upper = answer.conclusion.loadgen_limited_rps if at_least else answer.upper_rps
    assert upper is not None and answer.capacity_rps < upper
    assert not at_least or f"the load generator was the limit at {upper:g} req/s" in last
    # within the precision, or said why not: its steps ran out, or rates inside the range stayed inconclusive (each
    # verdict on the effective N: near the knee this server's slow requests came 5-9 at a time)
    assert (upper - answer.capacity_rps) / answer.capacity_rps <= 0.2 or "step limit" in last \
        or "stayed inconclusive" in last, last


@pytest.mark.untimed
def test_an_objective_the_server_cannot_meet_is_answered_so(slow_server, exported_model, tmp_path):
    done = capacity(slow_server, exported_model, tmp_path, "--p99-ms", "5", "--start-rps", "4", "--min-rps", "1",
                    "--max-rate-s", "4")
    assert done.returncode == 1
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("capacity: none at p99 <= 5 ms")
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    # every request takes 10 ms > 5 ms: a fail with confidence at once; below, 4 s cannot hold 459 requests
    assert [(c.tag.offered_rps, c.tag.role) for c in cells] == [(4, "bracket")]
    assert cells[0].tag.evidence.decision == "fail"
    assert "cannot hold the 459 requests a pass needs at 99% confidence" in last


def test_stalls_independent_of_the_load_are_named_not_bisected(stalling_server, exported_model, tmp_path):
    # Rates low enough that the server is rarely busy (a 1 ms service time at 200, 100, 50 req/s): behind each 60 ms
    # stall a busy server's queue adds about u / (1 - u) of the stall, so at the probe's ~380 req/s the share over
    # 10 ms read 17.3% against 8.2% at 95 req/s in one CI run, under the rule's half; at u <= 0.2 the shares
    # stay within ~20% of each other, as a stall's should. Sends late past 5 ms, not 2, are the load generator's
    # limit: on a CI host running slow, 100 req/s read as the load generator's limit at 2 ms, ending the search
    # before its third rate (here, half of each core taken 3 ms at a time read 17.7% of sends 2 ms late).
    done = capacity(stalling_server, exported_model, tmp_path, "--p99-ms", "10", "--start-rps", "200",
                    "--max-rate-s", "20", env=LOADGEN_LATENESS)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 1 and "Traceback" not in done.stderr, tail  # 1: unmet, the answer expected
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("capacity: "), tail
    # the stalls are named where the shares over 10 ms measured at the rates agree; a slow host's late sends can end
    # the search first (see above)
    timing.holds("stalls named", last.startswith("capacity: unmet at p99 <= 10 ms: stalls of about "), tail)
    assert "independent of the load" in last
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    [answer] = search_answers(cells)
    stalls = answer.conclusion.stalls
    assert stalls is not None and not answer.met
    # the slowest request waits out a whole stall: never less; more where a slow host queues it behind more
    assert stalls.stall_ms >= STALL_MS * 0.8, stalls
    timing.at_most("stall (ms)", stalls.stall_ms, STALL_MS * 1.6, last)
    # 2 per second planted: measured as the share over 10 ms / (stall - 10 ms), both measured
    assert stalls.per_s is not None, stalls
    timing.at_least("stalls per s", stalls.per_s, 1.0, last)
    timing.at_most("stalls per s", stalls.per_s, 4.0, last)
    rated = [c.tag.offered_rps for c in cells if c.tag.role != "probe"]
    # three halvings at most (200 -> 100 -> 50 -> 25 < 200 / 8), never a bisection towards zero
    assert len(rated) <= 6 and min(rated) >= max(rated) / 8 * 0.99  # no bisection towards zero


@pytest.fixture(scope="module")
def slower_servers(exported_model):
    """Two servers of 25 ms a call, one at a time: 40 requests/s at most each, a rate any load generator keeps up
    with."""
    flags = ("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--null_delay_ms", "25")
    with start_server(*flags, backend="null") as a, start_server(*flags, backend="null") as b:
        yield a, b


def test_each_cell_records_where_the_servers_time_went_and_the_device_floor(slower_servers, exported_model,
                                                                          tmp_path):
    """The delay is the "model": the server's phases sum to its request latency, its floor says 40 images/s
    at batch 1, and a capacity near that floor is said to be bounded by the model's calls, not by the serving
    path, and not by the device's compute (the server's CPU is idle). The two servers are searched paired, so
    their reference cells measure how far the machine moved: a run that measured none claims no device (#68). A
    generous objective and a 50% confidence keep the searches short."""
    first, second = slower_servers
    done = capacity(first, exported_model, tmp_path, "--target", second.grpc_target, "--rest-url", second.rest_url,
                    "--p99-ms", "500", "--start-rps", "30", "--max-steps", "5", "--confidence", "0.5",
                    "--confirm-factor", "1", "--measure-s", "3", "--unmet-ok")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    for c in cells:
        request = c.server_phases.request_latency
        phases = c.server_phases.phases
        assert sorted(phases) == sorted(REQUEST_PHASES) and c.server_phases.not_exported == ()
        assert sum(p.mean_us for p in phases.values()) == pytest.approx(request.mean_us, rel=0.01)
        assert phases["compute_infer"].mean_us >= 25_000 * 0.95  # the delay is the model's time
        assert c.device_floor.source == "embedded server at start, after warm-up"  # its server_info's, in full
        [one] = [b for b in c.device_floor.batches if b.batch_size == 1]
        # a 25 ms sleep a call: never above 40 images/s; below it where a slow host wakes the sleeper late
        assert one.images_per_s <= 40 * 1.01 and one.runs >= 1, one
        timing.at_least("device floor at batch 1 (img/s)", one.images_per_s, 40 * 0.9, one)
    answers = search_answers(cells)
    assert len(answers) == 2, answers  # one search a server, interleaved
    movements = search_movements(cells)
    assert set(movements) == {a.search_id for a in answers}, movements  # the reference cells measured the run
    # the bound's sentence compares the measured capacity with the floor and the server's measured CPU
    timing.holds("no serving-path bound", "serving path" not in done.stdout, done.stdout[-2000:])
    for answer in answers:
        near_the_floor(answer, movements[answer.search_id], done.stdout)


def near_the_floor(answer, moved: float, out: str) -> None:
    if answer.conclusion is not None and answer.conclusion.at_least:  # a loaded machine: the client fell behind
        pytest.skip(f"the load generator was the limit on this machine ({answer.conclusion.loadgen_limited_rps} "
                    "req/s): the planted model bound could not be measured")
    # the planted case: near the floor, a pass within 3 steps
    timing.holds("a passing rate at p99 <= 500 ms", answer.met and answer.capacity_ips is not None, answer)
    timing.at_most("the machine's movement over the run", moved, 0.25, answer)  # sleeps: little to move
    timing.at_least("capacity (img/s)", answer.capacity_ips, 40 * 0.5, answer)
    # the delay is a sleep, so the CPU stays idle: by the device floor's rule the model's calls bounded it, not the
    # device's compute. The console's verdict comes first, and with no tool ceiling measured (a server the tool did
    # not start) it is the tool's, so the floor's sentence is read from the answer's cell, as the report reads it.
    cell = answer_cell(answer)
    assert cell is not None, out[-2000:]
    # measured: the served share of the floor clear of its line by more than the machine moved, and the server's
    # CPU far from busy
    timing.holds("bounded by the model's calls (idle device)",
                 held_by(cell, served_share(cell, moved)) == Held.IDLE_DEVICE, out[-2000:])
    assert held_by(cell, served_share(cell)) == Held.SERVING_PATH  # the movement unmeasured: no device claimed
    assert any(line.endswith("bounded by the tool (tool ceiling not measured: no twin was run).")
               for line in out.splitlines()), out[-2000:]


@pytest.mark.untimed
def test_two_targets_at_one_request_batch_get_a_search_each(slow_server, exported_model, tmp_path):
    """`--goal 40:20:1 --goal 40:60:1`: two searches at request batch 1, one tagged p99 <= 20 ms and one <= 60 ms,
    each its own comparison-free search with its own cells; the card has a row for each target."""
    done = capacity(slow_server, exported_model, tmp_path, "--goal", "40:20:1", "--goal", "40:60:1",
                    "--start-rps", "20", "--max-rate-s", "3", "--max-steps", "2", "--unmet-ok")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    objectives = {c.tag.id: c.tag.objective.p99_ms for c in cells}
    assert sorted(objectives.values()) == [20.0, 60.0]  # two searches, one per target
    assert {c.load.request_batch_size for c in cells} == {1}
    assert [a.p99_objective_ms for a in search_answers(cells)] == [20.0, 60.0]
    assert "40 req/s · p99 ≤ 20 ms · 1 image" in done.stdout and "40 req/s · p99 ≤ 60 ms · 1 image" in done.stdout
