"""The reproduce benchmark's summary: overlap, largest ÷ smallest, and how the runs' ratios went with the machine's
speed (their reference cells). Hand-made ratios; their figures are those of paired demo runs at p99 <= 100 ms on an
AMD EPYC build machine (2026-11-25)."""

from __future__ import annotations

import signal
import subprocess

import psutil
import pytest

from loadtest.benchmarks.reproduce import Run, read, speed_line, summary
from loadtest.evidence.records import append_result
from loadtest.report.answers.movement import Drift
from loadtest.report.answers.paired import PairedRatio, RepeatRatio
from tests.loadtest.report.answers.test_bound import NULL, capacity, floor, paired
from tests.support.cli import command
from tests.support.paths import REPO
from tests.support.waiting import wait_for

GAIN = "batching gain on cpu"


def ratio(value: float, low: float, high: float, speeds: tuple[float, ...]) -> PairedRatio:
    repeat = RepeatRatio(1, value, low, high, None, None)
    return PairedRatio(GAIN, 16, 100.0, True, (repeat,), Drift("cpu-off", speeds))


# (gain, its range, the reference cells' req/s): the slower the machine, the larger the gain
MOVING = [ratio(1.53, 1.37, 1.69, (930.0, 940.0, 950.0)), ratio(1.37, 1.25, 1.47, (970.0, 976.0, 990.0)),
          ratio(1.14, 1.06, 1.22, (985.0, 990.0, 1000.0)), ratio(1.10, 1.02, 1.18, (990.0, 1012.0, 1020.0)),
          ratio(1.03, 0.96, 1.11, (1010.0, 1018.0, 1030.0))]


def test_a_ratio_that_moves_with_the_machines_speed_is_named():
    line = speed_line(MOVING)
    assert line is not None and line.startswith("  against each run's reference speed: r = -0.9")
    assert "(×1.53 at 940 req/s, ×1.03 at 1,018 req/s)" in line
    assert line.endswith("the ratio moves with the machine's speed: its servers answer a slower machine "
                         "differently, which pairing does not cancel")
    text = summary([Run(i + 1, 100.0, (r,)) for i, r in enumerate(MOVING)])
    assert "over 5 runs: ×1.53, ×1.37, ×1.14, ×1.10, ×1.03; every range overlaps every other: no; " \
           "largest ÷ smallest: 1.49" in text
    assert line in text.splitlines()


def test_a_ratio_that_holds_whatever_the_speed_is_not_said_to_move():
    steady = [ratio(value, value - 0.1, value + 0.1, (speed,)) for value, speed in
              ((1.30, 940.0), (1.27, 1018.0), (1.31, 976.0), (1.28, 990.0), (1.29, 1012.0))]
    line = speed_line(steady)
    assert line is not None and "moves with the machine's speed" not in line
    assert speed_line(steady[:3]) is None  # too few runs to say
    assert speed_line([ratio(1.2, 1.1, 1.3, ())] * 5) is None  # no reference cells: nothing to say


def test_a_run_whose_ratio_is_only_a_bound_shows_the_bound_and_is_left_out_of_the_spread():
    """A capacity that is a lower bound gives a ratio with an open end: the run shows `at least`, never the point of
    its repeats, and largest ÷ smallest is over the runs with an estimate (here 1.33 ÷ 1.21, not 1.58 ÷ 1.21)."""
    bound = PairedRatio(GAIN, 16, 100.0, True, (RepeatRatio(1, 1.58, 1.08, None, None, None),),
                        Drift("cpu-off", (990.0,)))
    runs = [ratio(1.33, 1.11, 1.77, (960.0,)), bound, ratio(1.21, 0.96, 1.49, (1000.0,))]
    text = summary([Run(i + 1, 100.0, (r,)) for i, r in enumerate(runs)])
    assert "over 3 runs: ×1.33, at least ×1.08, ×1.21; every range overlaps every other: yes; " \
           "largest ÷ smallest (of the 2 runs with an estimate): 1.10" in text


def default_sigint() -> None:
    """In the child: SIGINT as a terminal delivers it (a background job starts with SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def servers_below(pid: int) -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "serving.server" in " ".join(p.cmdline())]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.untimed
@pytest.mark.integration
def test_an_interrupted_bench_stops_its_run_and_the_servers_it_started(exported_model, tmp_path):
    """SIGINT to the bench alone (not its process group): its capacity run is interrupted in turn and stops the
    servers it started, instead of being killed at once with them left running."""
    results = tmp_path / "runs"
    proc = subprocess.Popen([*command("bench", "reproduce", "--runs", "2", "--results-dir", results, "--"),
                             "--plan", "loadtest/plans/demo.toml", "--p99-ms", "50", "--serve", "cpu/off",
                             "--serve", "cpu/cpu",
                             "--server-flags", "--backend null --null_delay_ms 1", "--check", "shape",
                             "--models-dir", str(exported_model.output_dir), "--samples",
                             str(exported_model.samples_path), "--max-minutes", "1", "--no-report", "--unmet-ok"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=default_sigint)
    try:
        servers = wait_for(lambda: len(servers_below(proc.pid)) == 2 and servers_below(proc.pid), 120,
                           "both servers of the first run")
        wait_for(lambda: list(results.glob("run-1/*/results.jsonl")), 120, "the first cell")
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0 and "interrupted" in output
    gone, alive = psutil.wait_procs(servers, timeout=5)
    assert not alive, [p.cmdline()[:3] for p in alive]
    assert "capacity run" in (results / "run-1" / "capacity.log").read_text()


def test_the_summary_says_whether_every_run_gave_each_row_the_same_verdict():
    """The demo's done-when: the same verdict per row every run (2026-11-28: two of five read "the device")."""
    row = "cpu at p99 ≤ 50 ms (request batch 16)"
    same = [Run(i + 1, 100.0, (MOVING[i],), verdicts=((row, "the stand-in's serving path"),)) for i in range(3)]
    text = summary(same)
    assert f"  bounded by, {row}: the stand-in's serving path" in text
    assert text.count("; the same every run: yes") == 1 and "the same every run: no" not in text
    flipped = [*same, Run(4, 100.0, (MOVING[3],), verdicts=((row, "the device"),)), Run(5, 100.0, (MOVING[4],))]
    assert (f"bounded by, {row}, over 5 runs: the stand-in's serving path, the stand-in's serving path, the stand-in's "
            "serving path, the device, no answer; the same every run: no") in summary(flipped)


def test_runs_read_again_give_each_rows_verdict_from_the_records(tmp_path):
    busy = capacity(NULL, 96.0, device_floor=floor((1, 100.0)), server_cpu_percent=85.0)  # 95% of the device alone
    for number, speeds in ((1, (400.0, 600.0)), (2, (300.0, 600.0))):  # drift 50%, then 100%
        for c in paired(busy, speeds):
            append_result(tmp_path / f"run-{number}" / "20261128T000000Z" / "results.jsonl", c)
    assert ("bounded by, cpu at p99 ≤ 10 ms (request batch 1), over 2 runs: the device, the stand-in's serving path; "
            "the same every run: no") in read(tmp_path)
