"""Reruns of timed tests, for a timing miss only, each one printed, and a run that fails past `MAX_RERUNS` (issue #69).

A pytest plugin (tests/conftest.py loads it). Each timed test (marked `integration`, not `untimed`) gets
pytest-rerunfailures' `flaky` marker with one rerun, 5 s later, on the condition that the exception that failed
it is a `tests.support.timing.TimingMiss` itself (by type, the outermost exception only, never a word in a chain
of messages): a plain assert, a crashed command or any other error fails at once. Every rerun is printed at the
end of the run with its test and its first failure's message, and more than `MAX_RERUNS` in one run fail it: a
machine so slow that many timed tests miss is said so, not passed on second tries. Before a rerun, the module- and
class-scoped fixtures the test uses are torn down (`measure_again`), so it measures again.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from tests.support.timing import TimingMiss

RERUNS = 1
RERUN_DELAY_S = float(os.environ.get("TIMED_RERUN_DELAY_S", "5"))  # the plugin's own test sets 0
MAX_RERUNS = 3


def is_timing_miss(error: BaseException | None) -> bool:
    return isinstance(error, TimingMiss)


def is_timed(item: pytest.Item) -> bool:
    return item.get_closest_marker("integration") is not None and item.get_closest_marker("untimed") is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.pluginmanager.hasplugin("rerunfailures"):
        return
    for item in items:
        if is_timed(item) and item.get_closest_marker("flaky") is None:
            item.add_marker(pytest.mark.flaky(reruns=RERUNS, reruns_delay=RERUN_DELAY_S, condition=is_timing_miss))


def _first_line(report: pytest.TestReport) -> str:
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    return text.strip().splitlines()[0] if text.strip() else "(no message)"


def measure_again(item: pytest.Item) -> None:
    """Tear down the module- and class-scoped fixtures `item` uses, so its rerun measures again: a fixture that
    measured once for several tests (a sweep) would otherwise hand the rerun the very figures that missed."""
    infos = getattr(item, "_fixtureinfo", None)
    if infos is None:
        return
    request = SimpleNamespace(node=item, config=item.config)  # what `finish` and its hooks read (the item's own is
    for definitions in infos.name2fixturedefs.values():        # gone once it is torn down)
        for definition in definitions:
            if definition.scope in ("module", "class") and definition.cached_result is not None:
                definition.finish(request)


class RerunLog:
    def __init__(self) -> None:
        self.reruns: list[tuple[str, str]] = []
        self.items: dict[str, pytest.Item] = {}

    @pytest.hookimpl
    def pytest_runtest_protocol(self, item: pytest.Item) -> None:
        self.items[item.nodeid] = item

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.outcome == "rerun":
            self.reruns.append((report.nodeid, _first_line(report)))
            item = self.items.get(report.nodeid)
            if item is not None:
                measure_again(item)

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if not self.reruns:
            return
        verdict = f"more than {MAX_RERUNS}: the run fails" if len(self.reruns) > MAX_RERUNS else \
            f"at most {MAX_RERUNS} allowed"
        terminalreporter.section(f"reruns: {len(self.reruns)} ({verdict})")
        for nodeid, message in self.reruns:
            terminalreporter.write_line(f"RERUN {nodeid}: {message}")

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if len(self.reruns) > MAX_RERUNS and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(RerunLog(), "timing-rerun-log")


__all__ = ["MAX_RERUNS", "RERUNS", "is_timed", "is_timing_miss"]
