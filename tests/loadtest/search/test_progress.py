"""The console's line per search (`loadtest.search.progress`): what a search's steps say so far, and, without a
terminal, each line printed when it changes at most every few seconds, with its last state at the end."""

from __future__ import annotations

import io

from loadtest.evidence.vocab import Role
from loadtest.search.capacity import CapacitySearch
from loadtest.search.capacity_output import PLAIN_EVERY_S, Progress, range_text
from loadtest.search.search_settings import SearchSettings
from tests.loadtest.search.test_capacity import OBJECTIVE, Server


def steps_until(server: Server, count: int):
    """The first `count` steps of a search of `server` from 100 req/s."""
    search = CapacitySearch(SearchSettings(objective=OBJECTIVE, start_rps=100, max_steps=count), server.measure,
                            clock=server.clock)
    search.run()
    return search.steps


def test_the_line_reads_the_range_its_width_or_what_there_is_so_far():
    first = steps_until(Server(capacity=730), 20)[:2]  # 100 req/s: inconclusive in 2 s (200 requests), then passed
    assert range_text(first[:1], OBJECTIVE) == "no rate passed yet"
    assert range_text(first, OBJECTIVE) == "≥ 100 req/s, not confirmed (no rate above shown to fail yet)"
    steps = steps_until(Server(capacity=730), 20)
    text = range_text(steps, OBJECTIVE)
    assert text.startswith("range ") and text.endswith(")") and "×1.0" in text, text
    failing = Server(capacity=50)
    assert range_text(steps_until(failing, 2)[:1], OBJECTIVE) == "no rate passed yet"


def test_without_a_terminal_a_line_is_printed_when_it_changes_at_most_every_few_seconds():
    now = [0.0]
    out = io.StringIO()
    progress = Progress(out, clock=lambda: now[0], live=False)
    with progress.shown():
        progress.update("a", "a: 1")
        now[0] += 1.0
        progress.update("a", "a: 2")  # too soon: not printed
        progress.print("a line said meanwhile")
        now[0] += PLAIN_EVERY_S
        progress.update("a", "a: 3")
        progress.update("b", "b: 1")  # another search's first line: at once
        now[0] += 1.0
        progress.update("a", "a: 4")  # too soon again: its last state comes at the end
    assert out.getvalue().splitlines() == ["a: 1", "a line said meanwhile", "a: 3", "b: 1", "a: 4"]


def test_a_search_updates_its_line_after_each_of_its_cells():
    server = Server(capacity=730)
    seen: list[tuple[int, float]] = []
    search = CapacitySearch(SearchSettings(objective=OBJECTIVE, start_rps=100), server.measure, clock=server.clock,
                            on_step=lambda s: seen.append((len(s.steps), s.time_left_s())))
    answer = search.run()
    assert [n for n, _ in seen] == list(range(1, len(answer.steps) + 1))
    lefts = [left for _, left in seen]
    assert lefts == sorted(lefts, reverse=True) and lefts[0] < search.settings.max_s
    assert answer.steps[0].role == Role.BRACKET
