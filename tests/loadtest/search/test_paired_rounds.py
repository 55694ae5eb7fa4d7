"""A paired comparison's final confirmations run in the same rounds (issue #41), with hand-made cells: two
simulated servers of the same true capacity on one simulated machine whose speed falls to 55% part-way through.
The search that converges first waits for the other's final confirmation; both are measured in one round, and
one that passed while the other failed confirms again in the round where the other confirms its next answer,
so the two answers come from the same minutes and their ratio is the true one (×1.0), not the drift."""

from __future__ import annotations

import pytest

from loadtest.evidence.vocab import Role
from loadtest.search import interleave as rounds
from loadtest.search.capacity import CapacitySearch
from loadtest.search.interleave import Turn, _Agree, _agreements, interleave
from loadtest.search.search_settings import Agreement, CapacityAnswer, SearchSettings
from tests.loadtest.search.test_capacity import OBJECTIVE, Server

SLOW_AFTER = 12  # cells measured on the machine before its speed falls
SLOW = 0.55


class Machine:
    """Every cell of every server, in the order measured; its speed falls after `SLOW_AFTER` cells."""

    def __init__(self) -> None:
        self.log: list[tuple[str, float, Role, int]] = []  # (server, rate, role, attempt)

    @property
    def speed(self) -> float:
        return 1.0 if len(self.log) < SLOW_AFTER else SLOW


class OnMachine(Server):
    """A server whose capacity is its own times the machine's speed at each cell."""

    def __init__(self, name: str, capacity: float, machine: Machine) -> None:
        super().__init__(capacity)
        self.name, self.true_capacity, self.machine = name, capacity, machine

    def measure_on(self, rate: float, role: Role, window_s: float | None, attempt: int):
        self.capacity = self.true_capacity * self.machine.speed
        self.machine.log.append((self.name, rate, role, attempt))
        return self.measure(rate, role, window_s)


def paired_body(server: OnMachine, start: float, paired: bool):
    def body(turn: Turn) -> CapacityAnswer:
        def measure(rate: float, role: Role, window_s: float | None, attempt: int = 0, held: bool = False):
            return turn.call(lambda: server.measure_on(rate, role, window_s, attempt), held=held)

        settings = SearchSettings(objective=OBJECTIVE, start_rps=start, max_steps=40, max_s=10_000)
        return CapacitySearch(settings, measure, clock=server.clock, pairing=turn if paired else None).run()
    return body



def searched_paired(server: OnMachine, **settings):
    """A paired search of `server` with `settings` (`SearchSettings`' fields beside the objective and max_s)."""
    def run(turn: Turn) -> CapacityAnswer:
        def measure(rate, role, window_s, attempt=0, held=False):
            return turn.call(lambda: server.measure_on(rate, role, window_s, attempt), held=held)
        chosen = SearchSettings(objective=OBJECTIVE, max_s=10_000, **settings)
        return CapacitySearch(chosen, measure, clock=server.clock, pairing=turn).run()
    return run


def coarse_body(server: OnMachine):
    """A paired search from 900 req/s at precision 0.5: a few steps, so its confirmations are easy to follow."""
    return searched_paired(server, start_rps=900.0, precision=0.5)

def compare(paired: bool) -> tuple[Machine, list[CapacityAnswer]]:
    machine = Machine()
    servers = [OnMachine("A", 1000.0, machine), OnMachine("B", 1000.0, machine)]
    # A starts near its capacity and converges in the fast minutes; B climbs from far below
    answers = interleave([paired_body(servers[0], 900.0, paired), paired_body(servers[1], 60.0, paired)])
    return machine, answers


def answer_index(machine: Machine, name: str, answer: CapacityAnswer) -> int:
    """Where the cell that confirmed `answer` sits in the machine's log."""
    assert answer.capacity is not None
    confirms = [i for i, (who, rate, role, attempt) in enumerate(machine.log)
                if who == name and role == Role.CONFIRM and rate == answer.capacity.rate_rps
                and attempt == answer.capacity.attempt]
    return confirms[-1]


def test_alone_each_search_confirms_in_its_own_minutes_and_the_ratio_carries_the_drift():
    machine, (a, b) = compare(paired=False)
    assert a.capacity is not None and b.capacity is not None
    assert b.capacity.rate_rps / a.capacity.rate_rps < 0.7  # the drift, read as a ratio
    assert abs(answer_index(machine, "A", a) - answer_index(machine, "B", b)) > 2


def test_paired_final_confirmations_run_in_the_same_round_and_the_ratio_is_the_true_one():
    machine, (a, b) = compare(paired=True)
    assert a.capacity is not None and b.capacity is not None
    # the same rounds: each answer's confirmation and, the round after, its upper end measured again
    assert abs(answer_index(machine, "A", a) - answer_index(machine, "B", b)) <= 2
    assert b.capacity.rate_rps / a.capacity.rate_rps == pytest.approx(1.0, abs=0.12)
    assert a.capacity.rate_rps <= 1000.0 * SLOW  # both answered the machine of the last minutes


def test_a_search_that_passed_confirms_again_at_its_rate_with_its_own_verdict():
    machine, (a, _) = compare(paired=True)
    attempts = [(rate, attempt) for who, rate, role, attempt in machine.log if who == "A" and role == Role.CONFIRM]
    assert attempts[0][1] == 0 and any(attempt > 0 for _, attempt in attempts), attempts
    assert a.capacity is not None and a.capacity.verdict.passed


def test_a_search_that_passed_waits_without_measuring_while_another_searches_on_below(monkeypatch):
    """A's confirmation at 1,350 req/s fails (that rate is not A's), B's passes: B waits, measuring nothing, while A
    falls back to its anchor, confirmed minutes before: A's anchor confirms again, in the round after B's answer, and
    B's answer, the newest, is not measured again."""
    monkeypatch.setattr(f"{__name__}.SLOW_AFTER", 10_000)  # a machine that does not move
    # this coarse search's answers lie 3-4 rounds apart (each a confirmation and, the round after, its upper end again)
    monkeypatch.setattr(rounds, "SAME_MINUTES", 2)
    machine = Machine()
    a, b = OnMachine("A", 1400.0, machine), OnMachine("B", 1400.0, machine)
    a.fail_confirm_at = (1350.0,)

    found_a, found_b = interleave([coarse_body(a), coarse_body(b)])
    confirms = [(who, rate, attempt) for who, rate, role, attempt in machine.log if role == Role.CONFIRM]
    assert [c for c in confirms if c[0] == "B"] == [("B", 900.0, 0), ("B", 1350.0, 0)]
    assert [c for c in confirms if c[0] == "A"] == [("A", 900.0, 0), ("A", 1350.0, 0), ("A", 900.0, 1)]
    assert (found_a.capacity.rate_rps, found_b.capacity.rate_rps) == (900.0, 1350.0)
    assert abs(answer_index(machine, "A", found_a) - answer_index(machine, "B", found_b)) <= 2  # the same rounds



class FailsOnce(OnMachine):
    """A server whose confirmations fail at the (rate, attempt) pairs given, whatever its capacity."""

    def __init__(self, name: str, capacity: float, machine: Machine, fails: set[tuple[float, int]]) -> None:
        super().__init__(name, capacity, machine)
        self.fails = fails

    def measure_on(self, rate: float, role: Role, window_s: float | None, attempt: int):
        self.fail_confirm_at = (rate,) if (rate, attempt) in self.fails else ()
        return super().measure_on(rate, role, window_s, attempt)


def test_only_answers_confirmed_before_the_newest_confirm_again(monkeypatch):
    """A's confirmation at 1,350 req/s fails, then its anchor's confirmation again fails too, so A searches on below
    and confirms a third answer, the newest. Only B's 1,350, confirmed before it, is measured again (once), in the
    round after A's: every answer rests on the same minutes, and no rate is tested more than the minutes need (at a
    knee each confirmation more is one more chance to fail)."""
    monkeypatch.setattr(f"{__name__}.SLOW_AFTER", 10_000)
    # this coarse search's answers lie 3-4 rounds apart (each a confirmation and, the round after, its upper end again)
    monkeypatch.setattr(rounds, "SAME_MINUTES", 2)
    machine = Machine()
    a = FailsOnce("A", 1400.0, machine, {(1350.0, 0), (900.0, 1)})
    b = OnMachine("B", 1400.0, machine)

    found_a, found_b = interleave([coarse_body(a), coarse_body(b)])
    confirms = [(who, rate, attempt) for who, rate, role, attempt in machine.log if role == Role.CONFIRM]
    assert [c for c in confirms if c[0] == "B"] == [("B", 900.0, 0), ("B", 1350.0, 0), ("B", 1350.0, 1)]
    a_final = [c for c in confirms if c[0] == "A"][-1]
    assert a_final[1] < 900.0 and a_final[2] == 0, confirms  # A's newest answer: confirmed once
    assert found_b.capacity.rate_rps == 1350.0 and found_a.capacity.rate_rps == a_final[1]
    assert abs(answer_index(machine, "A", found_a) - answer_index(machine, "B", found_b)) <= 2  # the same rounds


def test_answers_within_same_minutes_rounds_stand_and_older_ones_confirm_again():
    """Answers confirmed up to `SAME_MINUTES` rounds apart stand (about half a minute: a round is one cell of each
    search); further apart, those before the newest's minutes confirm again while the newest waits; one that did
    not pass makes every search wait."""
    near = rounds.SAME_MINUTES
    assert _agreements([_Agree(True, 10), _Agree(True, 10 + near)]) == [Agreement.STAND] * 2
    assert _agreements([_Agree(True, 10), _Agree(True, 11 + near)]) == [Agreement.AGAIN, Agreement.WAIT]
    assert _agreements([_Agree(True, 10), _Agree(False, None)]) == [Agreement.WAIT] * 2
    assert _agreements([_Agree(True, None), _Agree(True, 10)]) == [Agreement.AGAIN, Agreement.WAIT]


class FailsFirstAt(OnMachine):
    """A server whose own windows fail at `rate` the first time it is offered there, whatever its capacity."""

    def __init__(self, name: str, capacity: float, machine: Machine, rate: float) -> None:
        super().__init__(name, capacity, machine)
        self.planted, self.seen = rate, 0

    def latencies(self, rate, role, requests):
        if rate == self.planted and role != Role.CONFIRM:
            self.seen += 1
            if self.seen == 1:
                slow = requests // 2 + 1
                return {5_000: requests - slow, 500_000: slow}
        return super().latencies(rate, role, requests)


def searched(server: OnMachine, precision: float):
    def run(turn: Turn) -> CapacityAnswer:
        def measure(rate, role, window_s, attempt=0, held=False):
            return turn.call(lambda: server.measure_on(rate, role, window_s, attempt), held=held)
        settings = SearchSettings(objective=OBJECTIVE, start_rps=900.0, precision=precision, max_s=10_000)
        return CapacitySearch(settings, measure, clock=server.clock, pairing=turn).run()
    return run


def test_each_answers_upper_end_is_measured_again_in_the_round_after_its_confirmation(monkeypatch):
    """Both ends of each range come from the same minutes: the upper end, a rate shown to fail, is measured again
    (a new attempt, role recheck, its own verdict) in the round after the answer's confirmation."""
    monkeypatch.setattr(f"{__name__}.SLOW_AFTER", 10_000)
    machine = Machine()
    a, b = OnMachine("A", 1400.0, machine), OnMachine("B", 1100.0, machine)
    found = interleave([searched(a, 0.1), searched(b, 0.1)])
    for server, answer in zip((a, b), found, strict=True):
        upper = answer.conclusion.upper_rps()
        own = [(rate, role, attempt) for who, rate, role, attempt in machine.log if who == server.name]
        confirm = max(i for i, (rate, role, _) in enumerate(own) if role == Role.CONFIRM
                      and rate == answer.capacity.rate_rps)
        assert own[confirm + 1][:2] == (upper, Role.RECHECK) and own[confirm + 1][2] >= 1, own
        last = [s for s in answer.steps if s.rate_rps == upper and not s.confirming][-1]
        assert last.role == Role.RECHECK and not last.verdict.passed
        assert upper / answer.capacity.rate_rps <= 1.1 and answer.capacity.rate_rps <= server.true_capacity < upper


def test_an_upper_end_that_does_not_fail_again_is_searched_above(monkeypatch):
    """1,350 req/s failed once (a spell of the machine's), then passed when measured again beside the answer's
    confirmation: it is no upper end, and the search goes on above the answer until a rate fails there again."""
    monkeypatch.setattr(f"{__name__}.SLOW_AFTER", 10_000)
    machine = Machine()
    a = FailsFirstAt("A", 1400.0, machine, 1350.0)
    b = OnMachine("B", 1400.0, machine)
    found_a, _ = interleave([searched(a, 0.2), searched(b, 0.2)])
    own = [(rate, role) for who, rate, role, _ in machine.log if who == "A"]
    assert (1350.0, Role.RECHECK) in own and a.seen >= 2
    after = own[own.index((1350.0, Role.RECHECK)) + 1:]
    assert any(role == Role.BISECT and rate > 1350.0 for rate, role in after), own
    assert found_a.capacity.rate_rps > 1125.0 and found_a.conclusion.upper_rps() > 1400.0  # above the first answer


def test_a_paired_search_out_of_cells_for_its_final_round_says_its_step_limit_not_its_time():
    """A paired search climbs only where three cells are left (a step, its upper end again, its confirmation): with
    two left and nearly all its time, it said "time limit (10000 s): 9,9xx s left, too little for a higher rate"
    (a live paired run of two 25 ms servers with --max-steps 3 read "time limit (900 s): 889.6 s left")."""
    machine = Machine()
    answers = interleave([searched_paired(OnMachine(name, 1000.0, machine), start_rps=300.0, max_steps=4)
                          for name in ("A", "B")])
    for found in answers:
        assert found.capacity is not None and found.capacity.rate_rps < 1000.0 * 0.9  # stopped well below
        assert found.ended_because.startswith("step limit (4 cells): "), found.ended_because
