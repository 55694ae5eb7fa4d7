"""Servers under the tool's control, on real processes: `--serve` configurations started, measured and
stopped one at a time; one that fails to start fails its cells with the reason and the run goes on;
`mnist-bench tune` picks the configuration known to serve more.

Every server is the embedded one with the null backend and a fixed delay per model call (its
calls are serialised), so what batching gains is known: a batch of N costs one delay."""

from __future__ import annotations

import json
import os
import subprocess

import psutil
import pytest
from google.protobuf import text_format

from loadtest.evidence.records import read_results
from serving.deploy.gpus import probe_gpus
from serving.protocol.protos import BatchingParameters
from tests.support import timing
from tests.support.cli import command
from tests.support.paths import REPO

pytestmark = pytest.mark.integration

NULL_SERVER = "--backend null --null_delay_ms 5"
QUICK = ("--check", "shape", "--warmup-s", "0.5", "--measure-s", "1.5")
# Locust shares this machine's two cores with the servers: its sends ran 2 ms late for 1.1-1.7% of requests at
# 24-48 req/s on 2026-11-25, which a 2 ms threshold calls the load generator's limit. Latencies are timed from the
# intended send whatever the threshold; 5 ms keeps that noise, not this test's subject, from ending a search.
LOADGEN_LATENESS = {"LOADTEST_LATE_THRESHOLD_MS": "5", "LOADTEST_DISPATCH_LAG_LIMIT_MS": "5"}
# Each of the tuner's searches bounded (the defaults, 15 min a search and 30 s a rate, took the test to ~9 min on a
# busy 2-core machine). 15 s a rate holds the 459 requests a pass needs from ~34 req/s. The tuner's server takes 7 ms
# a call and its objective is 60 ms: batching off and max_batch_size 1 serve at most 143 req/s (their searches
# converge at 100-140), batching 4 up to 571, which its search confirms at 400-ish (2026-12-07, a quiet machine: 409.8,
# between 409.8 and 546.4) and, where one Locust process stops sending on time, as "at least" a rate still far above
# the start's upper end. Precision 0.5: every search converged within its minute. At 5 ms and 40 ms batching 4's search
# ran into Locust's limit at 381 req/s and out of its minute before confirming 190.6 (a quiet machine), or in CI, under
# this host's own 15-25 ms stalls, left 94 req/s inconclusive twice (2026-12-07); at 10 ms and 80 ms each cell at
# ~50 req/s took ~10 s to hold a pass's requests and the searches ran out of time. At batching 16 and 10 ms
# (1,600 req/s) a search that overran Locust at 1,558 req/s failed its next confirmation (2026-11-28).
TUNE_SERVER = "--backend null --null_delay_ms 7"
TUNE_BOUNDS = ("--max-minutes", "1", "--max-rate-s", "15", "--confirm-factor", "2")


def run_cli(tmp_path, exported_model, *args: str, server_flags: str = NULL_SERVER) -> subprocess.CompletedProcess:
    env = {**os.environ, "SERVING_STATE_FILE": str(tmp_path / "state" / "servers.json"), **LOADGEN_LATENESS}
    return subprocess.run([*command(*args), "--models-dir", str(exported_model.output_dir), "--server-flags",
                           server_flags, "--samples", str(exported_model.samples_path), "--results-dir",
                           str(tmp_path / "results"), *QUICK], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=900)


def our_servers(tmp_path) -> list[psutil.Process]:
    """Embedded servers still running with files from this test's results directory."""
    alive = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if "serving.server" in cmdline and str(tmp_path) in cmdline:
            alive.append(proc)
    return alive


def test_each_configuration_is_started_measured_and_stopped_and_a_failed_start_fails_only_its_cells(
        tmp_path, exported_model):
    if probe_gpus("savedmodel").gpu_names:
        pytest.skip("TensorFlow sees a GPU here: the gpu configuration would start")
    plan = tmp_path / "plan.toml"
    plan.write_text("[grid]\nbatch_sizes = [1, 4]\nconcurrency = [2]\n")
    done = run_cli(tmp_path, exported_model, "loadtest", "--plan", plan, "--serve", "cpu/off", "--serve", "gpu/off",
                   "--serve", "cpu/cpu+max_batch_size=4", "--no-report")
    assert done.returncode == 1, done.stderr[-2000:]
    assert "2 of 6 cells failed" in done.stderr
    cells = read_results(next((tmp_path / "results").glob("*/results.jsonl")))
    by_server = {name: [c for c in cells if c.server.name == name]
                 for name in ("cpu-off", "gpu-off", "cpu-cpu+max_batch_size=4")}
    assert [len(v) for v in by_server.values()] == [2, 2, 2]
    served = by_server["cpu-off"] + by_server["cpu-cpu+max_batch_size=4"]
    assert all(c.status == "ok" for c in served)
    # an unstable or saturated flag is this shared machine's timing noise; any other flag is the code's
    assert all({f.flag for f in c.flags} <= {"unstable", "saturated"} for c in served), [c.flags for c in served]
    timing.holds("every served cell valid", all(c.valid for c in served), [c.flags for c in served])
    assert all(c.status == "failed" and "did not start: cannot serve on GPU" in c.failure_reason
               for c in by_server["gpu-off"])
    tuned = by_server["cpu-cpu+max_batch_size=4"][0].server
    assert tuned.batching_profile == "cpu+max_batch_size=4" and tuned.batching["max_batch_size"] == 4
    assert by_server["cpu-off"][0].server.batching == {}
    assert len({c.server.target for c in cells if c.status == "ok"}) == 2  # each on its own ports
    assert our_servers(tmp_path) == []  # every server the run started is stopped
    assert not (tmp_path / "state" / "servers.json").exists()


def test_the_tuner_picks_the_configuration_known_to_serve_more(tmp_path, exported_model):
    config = tmp_path / "serving.toml"  # a start that cannot batch: max_batch_size 1
    config.write_text("[profiles.single]\nenable_batching = true\nmax_batch_size = 1\nbatch_timeout_micros = 0\n"
                      "max_enqueued_batches = 64\nnum_batch_threads = 1\n")
    done = run_cli(tmp_path, exported_model, "tune", "--p99-ms", "60", "--precision", "0.5", "--serving-config",
                   config, "--start-profile", "single", "--ladder", "max_batch_size=1,4", "--ladder",
                   "batch_timeout_micros=", "--ladder", "num_batch_threads=", "--ladder", "max_enqueued_batches=",
                   *TUNE_BOUNDS, "--no-report", server_flags=TUNE_SERVER)
    # exit 1 with no error line and no traceback: no configuration met the objective within its search's minute (a
    # slow host); any other exit is a crash
    unmet = done.returncode == 1 and "Traceback" not in done.stderr and "mnist-bench tune: error:" not in done.stderr
    assert done.returncode == 0 or unmet, done.stdout[-3000:] + done.stderr[-2000:]
    timing.holds("a tuned winner", done.returncode == 0, done.stdout[-3000:])
    lines = done.stdout.strip().splitlines()
    winner = next(line for line in lines if line.startswith("tuned: winner"))
    # on a slow host the minute a search has may not confirm batching 4's capacity (the trail says why)
    timing.holds("winner single+max_batch_size=4", winner.startswith("tuned: winner single+max_batch_size=4 "),
                 done.stdout[-6000:])
    gains = next(line for line in lines if line.startswith("batching gain"))
    gain = float(gains.split("×")[1].split()[0])
    # 4 calls per delay against 1: far beyond the noise (a lower bound where "at least", which Locust's limit can hold
    # under 2x on a slow host)
    timing.holds("batching gain > 1.5", gain > 1.5, gains)
    assert ("at least" in winner) == ("at least" in gains)  # the load generator's limit, said where it was hit
    parameters_file = lines[-1].split()[1]
    parsed = text_format.Parse(open(parameters_file).read(), BatchingParameters())
    assert parsed.max_batch_size.value == 4 and parsed.num_batch_threads.value == 1
    run_dir = next((tmp_path / "results").glob("*/"))
    trail = json.loads((run_dir / "tune.json").read_text())
    assert [v["profile"] for v in trail["trail"]] == ["off", "single", "single+max_batch_size=4"]
    searched = {c.server.name for c in read_results(run_dir / "results.jsonl")}
    assert searched == {"cpu-off", "cpu-single", "cpu-single+max_batch_size=4"}
    assert our_servers(tmp_path) == []
