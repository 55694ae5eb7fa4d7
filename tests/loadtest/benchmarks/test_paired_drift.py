"""A paired comparison recovers a known ratio under a planted drift (issues #29, #41), end to end: two identical
null-backend servers pinned to core 0, `mnist-bench capacity` with Locust on core 1, while a SCHED_FIFO loop takes a
share of core 0 growing from 0 to 50% over the run. The two servers are the same configuration, so the true ratio of
their capacities is ×1.0: paired, both see the same minutes, the stated range holds ×1.0, and the reference cell shows
the machine's speed falling while they were measured.

Its control, the same two searched one after the other with the machine slowed at the second's start, read ×0.50
(×0.46–×0.54) on 2026-11-27 (docs/methodology.md#planted-drift). It no longer runs here: in CI its planting did not
always show (×1.01 twice at a2dc04b), and its ~100 s were CI's to spend (issue #69's 45 minutes). `make bench-drift`
checks the paired claim again on the real model, RUNS times.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from loadtest.evidence.records import read_results
from loadtest.report.answers.paired import PairedRatio, paired_ratios
from serving.deploy.process import start_server
from tests.support import timing
from tests.support.cli import command
from tests.support.paths import REPO
from tests.support.stalls import host_drift

pytestmark = pytest.mark.integration

SERVER_CORE, LOADGEN_CORE = 0, 1
DRIFT = {"max_share": 0.5, "ramp_s": 100.0, "max_s": 200.0}  # one run's length: the share grows all the way
# p99 <= 50 ms: at 25 ms this host's own stalls (15-25 ms, docs/performance.md) left a slowed server no rate to
# confirm on 2026-12-07, with the judge as it was before that day's changes and after alike
SEARCH = ("--p99-ms", "50", "--objectives", "50", "--precision", "0.1", "--max-steps", "10", "--confirm-factor", "2",
          "--max-rate-s", "8", "--warmup-s", "0.5", "--measure-s", "2", "--check", "shape", "--unmet-ok",
          "--no-report", "--no-tool-ceiling")
# Locust on core 1; a send late past 5 ms (this shared core's own stalls reach 2-5 ms; latency is timed from the
# intended send whatever the threshold)
LOADGEN = {"LOADTEST_LOADGEN_CPUS": str(LOADGEN_CORE), "LOADTEST_LATE_THRESHOLD_MS": "5",
           "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}


@pytest.fixture(scope="module")
def twin_servers(exported_model):
    if not {SERVER_CORE, LOADGEN_CORE} <= os.sched_getaffinity(0):
        pytest.skip("needs cores 0 and 1: one for the servers, one for the load")
    flags = ("--model_name", "mnist", "--model_base_path", str(exported_model.base_path), "--null_delay_ms", "2")
    with start_server(*flags, backend="null", cpu=SERVER_CORE) as a, \
            start_server(*flags, backend="null", cpu=SERVER_CORE) as b:
        yield a, b


def compared(servers, exported_model, tmp_path: Path) -> PairedRatio:
    """`capacity` on both servers, paired (second ÷ first), under a fresh drift growing over the run."""
    targets = [arg for s in servers for arg in ("--target", s.grpc_target)]
    rest = [arg for s in servers for arg in ("--rest-url", s.rest_url)]
    tmp_path.mkdir(parents=True)
    with host_drift(SERVER_CORE, **DRIFT), (tmp_path / "out.log").open("w") as out:
        proc = subprocess.Popen([*command("capacity"), *targets, *rest, "--samples", str(exported_model.samples_path),
                                 "--results-dir", str(tmp_path), *SEARCH], cwd=REPO, stdout=out,
                                stderr=subprocess.STDOUT, text=True, env={**os.environ, **LOADGEN})
        try:
            returncode = proc.wait(timeout=400)
        finally:
            proc.kill()
    assert returncode == 0, (tmp_path / "out.log").read_text()[-4000:]
    (ratio,) = paired_ratios(read_results(next(tmp_path.glob("*/results.jsonl"))))
    print(ratio.describe())
    return ratio


def test_paired_recovers_the_known_ratio_under_a_planted_drift(twin_servers, exported_model, tmp_path):
    paired = compared(twin_servers, exported_model, tmp_path / "paired")
    assert paired.paired
    # Each range and ratio stands on the rates its searches confirmed within their steps on a drifting, shared
    # machine: a slow host may confirm none at an end (an open range) or move a ratio, a timing miss.
    timing.holds("paired ratio's range closed", paired.low is not None and paired.high is not None,
                 paired.describe())
    # the known ratio, within the stated range: what a range claims, whatever the host's speed (no timing miss).
    # How close the ratio itself lands (x0.87-x1.15) is a precision target, `make bench-drift`'s over its runs: the
    # clean clone at c99ee42 read x0.73 (x0.52-x1.38) here, its range holding x1.0, then x1.0 on its rerun.
    assert paired.low <= 1.0 <= paired.high, paired.describe()
    assert "no measurable difference" in paired.describe()
    assert paired.drift is not None and paired.drift.moved is not None, paired.describe()
    # shown: the reference cell's speed moved with the planted drift
    timing.holds("reference speed moved > 0.2", paired.drift.moved > 0.2, paired.describe())
