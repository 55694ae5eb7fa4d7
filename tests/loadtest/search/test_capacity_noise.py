"""A capacity search tells a host's stall from the server's (issue #28), end to end on this 2-core machine.

`mnist-bench capacity` at p99 <= 50 ms, answered at 5, 10, 25 and 50 ms, against a null-backend server
pinned to core 0 (2 ms a call, one call at a time: under 500 req/s, so the server, not Locust pinned to
core 1, is the limit; at 1 ms the doubled rate lands where Locust starts sending late):

- with a planted host stall (a SCHED_FIFO loop taking core 0 for 20 ms every 0.5 s, the whole search),
  the search still answers a capacity at 50 ms, while 10 ms gets none: the host alone held requests over
  it 10 ms in each 500 (2%, twice what a p99 allows), so the why-none line names the host, and no
  objective below ~17.5 ms (20 ms less the 0.5% of 500 ms a confirmation leaves) can be confirmed there;
- with the same stall planted in the server instead (`--null_stall_ms 20 --null_stall_every_s 0.5`),
  the host stays quiet and the server's own latency names the server.

Shares are compared with margins: the machine is shared with other tests. Where the load generator, not
the server, bounded the run (its lateness leaves no evidence on either), the test skips, saying so.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from loadtest.benchmarks.planted import refused_reason
from loadtest.evidence.cell_parts import ProbeSide
from loadtest.evidence.records import CellResult, read_results
from loadtest.judge import noise
from loadtest.judge.noise import NoiseSource
from loadtest.judge.objectives import objective_answers
from loadtest.report.host_floor import open_cells
from loadtest.report.sections.noise_table import slow_cells
from serving.deploy.process import start_server
from tests.support import timing
from tests.support.cli import command
from tests.support.paths import REPO
from tests.support.stalls import host_stall

pytestmark = pytest.mark.integration

SERVER_CORE, LOADGEN_CORE = 0, 1  # as loadtest/plans/demo.toml pins them
OBJECTIVES_MS = (5, 10, 25, 50)
P99_MS = 50
OUT_OF_REACH_MS = 10  # a 20 ms stall every 0.5 s: 10 ms of each 500 over it, 2% > the 1% a p99 allows
STALL_MS, STALL_EVERY_S = 20.0, 0.5
SERVICE = ("--backend", "null", "--null_delay_ms", "2")
# Locust's core is shared with other tests: the demo's 2 ms for a late send or the dispatch lag's p99 called a
# load generator at 8% of its core the limit at 110 req/s (1.5% of sends over 2 ms late). Latencies are timed from
# the intended send whatever the threshold; 5 ms keeps that noise, which is not this test's subject, from ending
# the search. Locust's CPU still flags a load generator that is itself the limit.
LOADGEN_LATENESS = {"LOADTEST_LATE_THRESHOLD_MS": "5", "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}


def capacity_run(exported_model, tmp_path, *server_flags: str) -> tuple[list[str], list[CellResult]]:
    """`mnist-bench capacity` on the demo's plan (server on core 0, Locust on core 1): console lines, cells."""
    if not {SERVER_CORE, LOADGEN_CORE} <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1: one for the server, one for the load")
    objectives = ",".join(map(str, OBJECTIVES_MS))
    done = subprocess.run([*command("capacity"), "--plan", "loadtest/plans/demo.toml", "--serve", "cpu/off",
                           "--server-flags", " ".join((*SERVICE, *server_flags)), "--check", "shape",
                           "--no-tool-ceiling", "--models-dir", str(exported_model.output_dir),
                           "--samples", str(exported_model.samples_path),
                           "--p99-ms", str(P99_MS), "--max-minutes", "0.3", "--objectives", objectives,
                           "--results-dir", str(tmp_path), "--no-report", "--unmet-ok"],
                          cwd=REPO, env={**os.environ, **LOADGEN_LATENESS}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    print("\n".join(lines[lines.index(next(x for x in lines if x.startswith("search "))):]))
    return lines, read_results(next(tmp_path.glob("*/results.jsonl")))


def measured_slow(cells: list[CellResult], answer: str) -> list[CellResult]:
    """The open-loop cells, neither overloaded nor limited by the load generator, whose client saw more than
    1% of requests over `OUT_OF_REACH_MS`; skips where the load generator left none to judge."""
    measured = [c for group in open_cells(cells).values() for c in group]
    if not measured or ("none at" in answer and "the load generator was the limit" in answer):
        pytest.skip(f"the load generator, not the server, bounded this run: {answer}")
    return slow_cells(measured, OUT_OF_REACH_MS)


def objective_lines(lines: list[str]) -> dict[float, str]:
    """The console's `p99 <= X ms: ...` line per objective."""
    return {float(x.split()[2]): x for x in lines if x.startswith("p99 <= ") and ", why none:" not in x}


def why_none(lines: list[str], objective_ms: float) -> str:
    return next((x for x in lines if x.startswith(f"p99 <= {objective_ms:g} ms, why none: ")), "")


def server_core_share(cells: list[CellResult], objective_ms: float) -> float:
    """The share of the cells' time the host alone held the probe on the server's cores over the objective."""
    sides = [noise.probe_sides(c)["server"] for c in cells if "server" in noise.probe_sides(c)]
    duration_us = sum(float(side.duration_s) * 1e6 for side in sides)
    return sum(noise.host_time_over_us(side, objective_ms) for side in sides) / duration_us


def shares(found: noise.Attribution, cells: list[CellResult]) -> str:
    return f"{found.describe()}; host floor {noise.lowest_confirmable_ms(cells)} ms over {len(cells)} slow cells"


def test_a_host_stall_is_named_the_hosts_and_a_capacity_is_still_answered(exported_model, tmp_path):
    if refused_reason():
        pytest.skip(refused_reason())
    with host_stall(core=SERVER_CORE, stall_ms=STALL_MS, every_s=STALL_EVERY_S, max_s=180.0):
        lines, cells = capacity_run(exported_model, tmp_path)
    answer = lines[-1]
    slow = measured_slow(cells, answer)
    assert answer.startswith("capacity: "), answer
    # a rate passed within the 0.3-minute budget under the stall: on a slow host none may have
    timing.holds("a capacity at p99 <= 50 ms within the budget", "none at" not in answer, answer)
    assert ", confirmed: p99 <= " in answer or ", passed, not confirmed: p99 <= " in answer
    assert sorted(objective_lines(lines)) == list(OBJECTIVES_MS)  # one search, four objectives answered
    [out_of_reach] = objective_answers(cells, (OUT_OF_REACH_MS,))
    assert out_of_reach.capacity_rps is None, out_of_reach.line()

    found = noise.attribute(slow, OUT_OF_REACH_MS)
    print(shares(found, slow))
    # the attribution compares measured shares with their thresholds: a slow, busy host can move them
    timing.holds("the host, on the server's cores, named", found.source == NoiseSource.HOST
                 and found.host_side == "server", found.describe())
    assert found.host_share is not None, found.describe()  # the probe ran
    timing.holds("host share over 10 ms within (0.012, 0.05)", 0.012 < found.host_share < 0.05,
                 shares(found, slow))  # 10 ms in each 500: 2%
    floor = noise.lowest_confirmable_ms(slow)
    assert floor is not None  # the probe ran
    # ~17.5 ms: 20 ms held, less 2.5 ms of each 500
    timing.at_least("host floor (ms)", floor, 15.0, shares(found, slow))
    line = why_none(lines, OUT_OF_REACH_MS)
    assert line.startswith(f"p99 <= {OUT_OF_REACH_MS} ms, why none: the host: ")
    assert line.endswith("ms cannot be confirmed on this host"), line


def test_a_server_stall_is_named_the_servers(exported_model, tmp_path):
    lines, cells = capacity_run(exported_model, tmp_path, "--null_stall_ms", f"{STALL_MS:g}",
                                "--null_stall_every_s", f"{STALL_EVERY_S:g}")
    answer = lines[-1]
    slow = measured_slow(cells, answer)
    assert sorted(objective_lines(lines)) == list(OBJECTIVES_MS)
    assert slow, "a 20 ms stall every 0.5 s in the server: 2% of requests over 10 ms at every rate"

    found = noise.attribute(slow, OUT_OF_REACH_MS)
    print(shares(found, slow))
    # measured shares against their thresholds: a slow, busy host can move them
    timing.holds("the server named", found.source == NoiseSource.SERVER, found.describe())
    assert found.server_share is not None and found.host_share is not None, found.describe()  # both exported
    timing.holds("server share over 10 ms > 0.012", found.server_share > 0.012, shares(found, slow))
    # Other tests on this machine may stall either core a little; the planted host stall held core 0 2% of the time.
    timing.holds(f"host share over 10 ms < {noise.ALLOWED_SHARE:g}", found.host_share < noise.ALLOWED_SHARE,
                 shares(found, slow))
    core_share = server_core_share(slow, OUT_OF_REACH_MS)
    timing.holds(f"host share on the server's cores < {noise.ALLOWED_SHARE / 2:g}",
                 core_share < noise.ALLOWED_SHARE / 2, f"{core_share:.4f}; {shares(found, slow)}")
    assert why_none(lines, OUT_OF_REACH_MS).startswith(f"p99 <= {OUT_OF_REACH_MS} ms, why none: the server: ")


def test_a_host_stall_on_a_target_servers_core_is_named_the_hosts(exported_model, tmp_path):
    """A server the tool did not start (`--target`, pinned to core 0 by hand) searched from core 1: the host probe
    finds its processes by the port they listen on and runs on their core, where the planted stall is (issue #41:
    it ran on the load generator's core before, and called the host quiet there 'the server's cores')."""
    if refused_reason():
        pytest.skip(refused_reason())
    if not {SERVER_CORE, LOADGEN_CORE} <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1: one for the server, one for the load")
    flags = ("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), *SERVICE[2:])
    with start_server(*flags, backend="null", cpu=SERVER_CORE) as server, \
            host_stall(core=SERVER_CORE, stall_ms=STALL_MS, every_s=STALL_EVERY_S, max_s=180.0):
        done = subprocess.run([*command("capacity"), "--target", server.grpc_target, "--rest-url", server.rest_url,
                               "--check", "shape", "--samples", str(exported_model.samples_path),
                               "--p99-ms", str(OUT_OF_REACH_MS), "--objectives", str(OUT_OF_REACH_MS),
                               "--max-minutes", "0.3", "--results-dir", str(tmp_path), "--no-report", "--unmet-ok",
                               "--no-tool-ceiling"],
                              cwd=REPO, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **LOADGEN_LATENESS, "LOADTEST_LOADGEN_CPUS": str(LOADGEN_CORE)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    probed = [noise.probe_sides(c).get("server", ProbeSide()) for c in cells if c.host_probe]
    assert probed and all(side.cpus == str(SERVER_CORE) for side in probed), probed[:2]
    slow = measured_slow(cells, lines[-1])
    found = noise.attribute(slow, OUT_OF_REACH_MS)
    print(shares(found, slow))
    # the attribution compares measured shares with their thresholds: a slow, busy host can move them
    timing.holds("the host, on the server's cores, named", found.source == NoiseSource.HOST
                 and found.host_side == "server", found.describe())
    assert why_none(lines, OUT_OF_REACH_MS).startswith(f"p99 <= {OUT_OF_REACH_MS} ms, why none: the host: ")
