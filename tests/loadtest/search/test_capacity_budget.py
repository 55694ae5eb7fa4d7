"""`mnist-bench capacity` on a short budget against a real embedded server, the way this 2-core machine
runs the demo (the server pinned to core 0, Locust to core 1): the search secures a confirmed pass
early and answers a passing rate, not "none", and its cells answer every objective of the run."""

from __future__ import annotations

import subprocess

import pytest

from loadtest.evidence.records import read_results
from loadtest.judge.conclusion import AnswerKind
from loadtest.judge.objectives import objective_answers
from loadtest.report.answers.answers import search_answers
from tests.support import timing
from tests.support.cli import command
from tests.support.paths import REPO

pytestmark = pytest.mark.integration


def test_a_short_search_answers_a_pass_and_every_objective(exported_model, tmp_path):
    # 50 ms, not the demo's 10: alone, this machine passes 10 ms at ~750 req/s, but with other tests' processes
    # on its 2 cores the share over 10 ms reached 1-3% at every rate (and Locust itself fell behind); on a CI host
    # running ~2x slower, the probe's half (352 req/s) was the load generator's limit when confirmed, and at 176
    # req/s 3 of 498 requests took 25-32 ms: at 25 ms that was inconclusive, and 21 s left no room for a lower rate.
    done = subprocess.run([*command("capacity"), "--plan", "loadtest/plans/demo.toml", "--serve", "cpu/off",
                           "--models-dir", str(exported_model.output_dir),
                           "--samples", str(exported_model.samples_path),
                           "--p99-ms", "50", "--max-minutes", "0.4", "--objectives", "5,10,25,50,100",
                           "--results-dir", str(tmp_path), "--no-report", "--unmet-ok"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    last = lines[-1]
    assert last.startswith("capacity: "), done.stdout[-3000:]
    # a rate passed within the 0.4-minute budget: on a slow host none may have
    timing.holds("a passing rate at p99 <= 50 ms within the budget", "none at" not in last and "unmet" not in last,
                 done.stdout[-3000:])
    assert ", confirmed: p99 <= " in last or ", passed, not confirmed: p99 <= " in last
    objective_lines = [line for line in lines if line.startswith("p99 <= ") and ", why none: " not in line]
    assert [line.split(":")[0] for line in objective_lines] == [f"p99 <= {o} ms" for o in (5, 10, 25, 50, 100)]
    cells = read_results(next(tmp_path.glob("*/results.jsonl")))
    [answer] = search_answers(cells)
    assert answer.kind != AnswerKind.NONE
    answered = [a for a in objective_answers(cells, (5, 10, 25, 50, 100)) if a.capacity_rps is not None]
    # every objective answered (a line each); 50 ms passed, so did the looser one
    assert {50, 100} <= {a.p99_objective_ms for a in answered}, objective_lines
    print("\n".join(lines[-12:]))
