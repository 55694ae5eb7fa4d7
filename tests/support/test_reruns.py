"""The reruns plugin (`tests.support.reruns`) on a real pytest run in a subprocess: a timed test reruns once for a
`TimingMiss` only, every rerun is printed with its message, and more than three fail the run."""

from __future__ import annotations

import os

import pytest

from tests.support.paths import REPO

pytestmark = [pytest.mark.integration, pytest.mark.untimed]

HEADER = """
import pathlib
import subprocess
import sys

import pytest

from tests.support.timing import at_least

pytestmark = pytest.mark.integration


def tries(name):
    count = pathlib.Path(__file__).with_name(f"tries-{name}")
    n = int(count.read_text()) + 1 if count.exists() else 1
    count.write_text(str(n))
    return n
"""


def outcomes(done: pytest.RunResult) -> dict[str, int]:
    return done.parseoutcomes()


def run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytester.makepyfile(test_timed=HEADER + body)
    pytester.makeini("[pytest]\nmarkers =\n    integration: a timed test\n    untimed: times nothing\n")
    env = {"PYTHONPATH": str(REPO), "TIMED_RERUN_DELAY_S": "0"}
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        return pytester.runpytest_subprocess("-p", "tests.support.reruns", "-p", "no:randomly", "-p",
                                             "no:cacheprovider", f"--rootdir={pytester.path}")


def test_a_timing_miss_reruns_once_and_the_rerun_is_printed_with_its_message(pytester):
    done = run(pytester, """
def test_capacity():
    at_least("capacity req/s", 100.0 * tries("capacity"), 150.0, "a slow host")
""")
    assert outcomes(done) == {"passed": 1, "rerun": 1}
    assert done.ret == 0
    done.stdout.fnmatch_lines(["*reruns: 1 (at most 3 allowed)*",
                               "RERUN test_timed.py::test_capacity: *TimingMiss: capacity req/s: measured 100, "
                               "needs >= 150 (a slow host)"])


def test_a_rerun_measures_again_where_its_measurement_is_a_module_fixture(pytester):
    """A sweep measured once for several tests (a module-scoped fixture) is measured again for a rerun: without it
    the rerun read the same figures that missed (the shape sweep's {1: 89.0, 2: 178.0}, twice)."""
    done = run(pytester, """
@pytest.fixture(scope="module")
def measured():
    return 100.0 * tries("sweep")

def test_capacity(measured):
    at_least("capacity req/s", measured, 150.0, "a slow host")
""")
    assert outcomes(done) == {"passed": 1, "rerun": 1}
    assert (pytester.path / "tries-sweep").read_text() == "2"


def test_a_plain_assert_a_crashed_command_and_another_error_fail_at_once(pytester):
    done = run(pytester, """
def test_assert():
    assert tries("assert") > 1

def test_crashed_command():
    done = subprocess.run([sys.executable, "-c", "raise SystemExit(3)"])
    tries("crash")
    assert done.returncode == 0

def test_error():
    tries("error")
    raise RuntimeError("the server died")

def test_an_assert_over_a_caught_miss_is_no_miss():
    tries("chained")
    try:
        at_least("rate", 1.0, 2.0)
    except Exception:
        assert False, "the code is wrong"
""")
    assert outcomes(done) == {"failed": 4}
    assert "RERUN" not in done.stdout.str()
    assert {p.name: p.read_text() for p in pytester.path.glob("tries-*")} == {
        "tries-assert": "1", "tries-crash": "1", "tries-error": "1", "tries-chained": "1"}


def test_a_timing_miss_twice_fails_and_an_untimed_test_never_reruns(pytester):
    done = run(pytester, """
def test_always_slow():
    at_least("rate", 1.0, 2.0)

@pytest.mark.untimed
def test_untimed():
    at_least("rate", float(tries("untimed")), 2.0)
""")
    assert outcomes(done) == {"failed": 2, "rerun": 1}
    assert (pytester.path / "tries-untimed").read_text() == "1"


def test_more_than_three_reruns_fail_a_run_whose_tests_all_passed_the_second_time(pytester):
    body = "".join(f"""
def test_slow_{i}():
    at_least("rate", float(tries("{i}")), 2.0)
""" for i in range(4))
    done = run(pytester, body)
    assert outcomes(done) == {"passed": 4, "rerun": 4}
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    done.stdout.fnmatch_lines(["*reruns: 4 (more than 3: the run fails)*"])


def test_the_makefile_leaves_reruns_to_the_plugin():
    makefile = (REPO / "Makefile").read_text()
    assert "--only-rerun" not in makefile and "--reruns" not in makefile
    assert os.path.exists(REPO / "tests" / "support" / "reruns.py")
