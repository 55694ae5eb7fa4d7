"""The batching tuner's decisions and output, against fake evaluators whose capacity is a known function."""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from google.protobuf import text_format

from loadtest.evidence.objective import Objective
from loadtest.evidence.tables import plain_table
from loadtest.search.ladders import OFF, TUNED_FIELDS, check_start, default_ladders, neighbour, with_field
from loadtest.search.tuning import (
    Evaluated,
    Stage,
    TuneAnswer,
    Tuner,
    TuneSettings,
    Visit,
    ladders_for,
)
from loadtest.search.tuning_output import (
    PARAMETERS_FILE,
    TRAIL_FILE,
    answer_lines,
    answer_text,
    profile_block,
    trail_table,
    write_winner,
)
from serving.deploy.config import DEFAULT_CONFIG_FILE, BatchingProfile, build_config, build_profile, validate_profile
from serving.deploy.tfs_files import batching_parameters_text
from serving.endpoint import Device
from serving.layering import read_toml
from serving.protocol.protos import BatchingParameters

CPU = build_profile("cpu", {
    "enable_batching": True, "max_batch_size": 1024, "batch_timeout_micros": 0, "max_enqueued_batches": 2,
    "num_batch_threads": 2, "thread_pool_name": "mnist_batch_threads_cpu", "allowed_batch_sizes": [],
    "pad_variable_length_inputs": False, "enable_large_batch_splitting": False, "max_execution_batch_size": 1024,
}, cores=2)
GPU = build_profile("gpu", {
    "enable_batching": True, "max_batch_size": 256, "batch_timeout_micros": 2000, "max_enqueued_batches": 4,
    "num_batch_threads": 4, "thread_pool_name": "mnist_batch_threads_gpu",
    "allowed_batch_sizes": [8, 16, 32, 64, 128, 256], "pad_variable_length_inputs": False,
    "enable_large_batch_splitting": False, "max_execution_batch_size": 256,
}, cores=4)
BEST = {"batch_timeout_micros": 1000, "max_batch_size": 64, "num_batch_threads": 2, "max_enqueued_batches": 4}
ONLY_TIMEOUT = {"max_batch_size": (), "num_batch_threads": (), "max_enqueued_batches": ()}


def surface(best: dict[str, int] = BEST, peak: float = 1000.0, off: float = 400.0) -> Callable:
    """Capacity falling off with the log distance from `best`, field by field: each ladder step costs > 5%."""
    def capacity(profile: BatchingProfile) -> float | None:
        if not profile.enable_batching:
            return off
        value = peak
        for name, target in best.items():
            shift = 100 if name == "batch_timeout_micros" else 0
            value /= 1 + 0.25 * abs(math.log2((getattr(profile, name) + shift) / (target + shift)))
        return value
    return capacity


class Fake:
    """Evaluates with `capacity(profile)` (None: unmet); checks every profile it is asked about.

    Like the real capacity search, a server whose true capacity is below the rate to beat does not pass
    there and comes back unmet (unless `honour_beat` is off: a search from scratch whatever the rate);
    `upper` (e.g. 1.05) gives each capacity an upper end, the lowest rate above it that did not pass.
    """

    def __init__(self, capacity: Callable, clock: Clock | None = None, seconds: float = 0.0,
                 upper: float | None = None, honour_beat: bool = True, deadline_s: float | None = None):
        self.capacity, self.clock, self.seconds, self.deadline_s = capacity, clock, seconds, deadline_s
        self.upper, self.honour_beat = upper, honour_beat
        self.asked: list[BatchingProfile] = []
        self.beats: list[float | None] = []  # the rate to beat each evaluation was given

    def __call__(self, profile: BatchingProfile, beat_rps: float | None) -> Evaluated:
        validate_profile(profile)
        if profile.allowed_batch_sizes:
            assert profile.allowed_batch_sizes[-1] == profile.max_batch_size
        if profile.max_execution_batch_size is not None:
            assert profile.max_execution_batch_size <= profile.max_batch_size
        self.asked.append(profile)
        self.beats.append(beat_rps)
        if self.clock:  # cut to the time left where the caller has a deadline, as `TuneRun` cuts its searches
            left = self.seconds if self.deadline_s is None else max(0.0, self.deadline_s - self.clock.now)
            self.clock.now += min(self.seconds, left)
        rps = self.capacity(profile)
        if not rps:
            return Evaluated(None, note="p99 31 ms > 10 ms at 1 req/s")
        if self.honour_beat and beat_rps is not None and rps < beat_rps:
            return Evaluated(None, note=beat_note(beat_rps))
        return Evaluated(rps, rps * 2, 8.0, upper_rps=rps * self.upper if self.upper else None)


def beat_note(beat_rps: float) -> str:
    return f"did not pass at {beat_rps:g} req/s, the rate to beat"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def tune(fake: Fake, start: BatchingProfile = CPU, clock: Callable[[], float] | None = None, **settings):
    settings.setdefault("cores", 4 if start is GPU else 2)
    settings.setdefault("device", Device.GPU if start is GPU else Device.CPU)
    tuner = Tuner(TuneSettings(objective=Objective(10), **settings), start, fake)
    if clock:
        tuner.clock = clock
    return tuner.run()


def tuned(profile: BatchingProfile) -> dict[str, int]:
    return {name: getattr(profile, name) for name in TUNED_FIELDS}


def parameters_asked(fake: Fake) -> list[dict]:
    return [p.parameters() for p in fake.asked]


# ---------------------------------------------------------------- the search

@pytest.mark.parametrize("upper", [None, 1.05], ids=["min_gain", "upper_end"])
@pytest.mark.parametrize("start", [CPU, GPU], ids=["cpu", "gpu"])
def test_the_tuner_finds_the_known_best_configuration_in_a_small_part_of_the_grid(start, upper):
    fake = Fake(surface(), upper=upper)
    answer = tune(fake, start)
    assert answer.winner is not None and tuned(answer.winner.profile) == BEST
    assert answer.ended_because == "converged"
    assert [v.stage for v in answer.trail[:2]] == [Stage.OFF, Stage.ADVICE]
    assert fake.asked[:2] == [OFF, start]
    assert len(fake.asked) == len(answer.trail) == answer.configurations_visited + 1
    assert answer.configurations_visited * 10 < answer.grid_size


class Drifting:
    """A machine that slows by `factor` at every evaluation: alone (`single`), a configuration measured later reads
    lower; paired (`pair`), the incumbent and the challenger are measured in the same minutes, at the same speed."""

    def __init__(self, capacity: Callable, factor: float, upper: float = 1.05):
        self.capacity, self.factor, self.upper, self.speed = capacity, factor, upper, 1.0
        self.pairs: list[tuple[BatchingProfile, BatchingProfile]] = []

    def _now(self, profile: BatchingProfile) -> Evaluated:
        rps = self.capacity(profile) * self.speed
        return Evaluated(rps, rps, 8.0, upper_rps=rps * self.upper)

    def single(self, profile: BatchingProfile, beat_rps: float | None) -> Evaluated:
        measured = self._now(profile)
        self.speed *= self.factor
        return measured

    def pair(self, incumbent: BatchingProfile, challenger: BatchingProfile) -> tuple[Evaluated, Evaluated]:
        self.pairs.append((incumbent, challenger))
        measured = self._now(incumbent), self._now(challenger)
        self.speed *= self.factor
        return measured


def test_paired_evaluations_find_the_best_on_a_drifting_machine_where_evaluations_in_turn_do_not():
    settings = TuneSettings(objective=Objective(10), cores=2, device=Device.CPU)
    in_turn = Drifting(surface(), factor=0.75)
    alone = Tuner(settings, CPU, in_turn.single).run()
    assert alone.winner is not None and tuned(alone.winner.profile) != BEST  # each step up read 25% slower
    paired = Drifting(surface(), factor=0.75)
    answer = Tuner(settings, CPU, paired.single, evaluate_pair=paired.pair).run()
    assert answer.winner is not None and tuned(answer.winner.profile) == BEST
    assert all(incumbent != challenger for incumbent, challenger in paired.pairs)
    kept = [v for v in answer.trail if v.decision.startswith("kept")]
    assert kept and all(v.against is not None and "measured beside it" in v.decision for v in kept)


def test_the_full_grid_is_the_product_of_the_ladders():
    assert tune(Fake(surface())).grid_size == 6 * 8 * 2 * 5  # timeouts, 8..1024, threads 1-2, queue 1..16


def test_no_parameters_are_evaluated_twice():
    fake = Fake(surface(best={**BEST, "batch_timeout_micros": 5000}))
    tune(fake, max_passes=3)
    asked = parameters_asked(fake)
    assert len(asked) == len({json.dumps(p, sort_keys=True) for p in asked})


def test_a_field_steps_up_first_and_only_then_down():
    fake = Fake(surface(best={"batch_timeout_micros": 500}))
    answer = tune(fake, GPU, ladders=ONLY_TIMEOUT)  # the gpu advice starts at 2000 us
    assert [p.batch_timeout_micros for p in fake.asked[2:]] == [5000, 1000, 500, 0]
    assert [v.decision for v in answer.trail[2:]] == [
        "unmet: did not pass at 688.782 req/s, the rate to beat", "kept: +19%", "kept: +22%",
        "unmet: did not pass at 1000 req/s, the rate to beat"]
    assert answer.winner.profile.batch_timeout_micros == 500


def test_the_same_walk_with_an_evaluator_that_searches_from_scratch_says_how_much_worse():
    fake = Fake(surface(best={"batch_timeout_micros": 500}), honour_beat=False, upper=1.05)
    answer = tune(fake, GPU, ladders=ONLY_TIMEOUT)
    assert [p.batch_timeout_micros for p in fake.asked[2:]] == [5000, 1000, 500, 0]
    assert [v.decision for v in answer.trail[2:]] == [
        "worse: -18%", "kept: +19%, above the incumbent's upper end 723.221 req/s",
        "kept: +22%, above the incumbent's upper end 861.632 req/s", "worse: -39%"]
    assert answer.winner.profile.batch_timeout_micros == 500


TWO_TIMEOUTS = {**ONLY_TIMEOUT, "batch_timeout_micros": (0, 500)}


def challenged(ratio: float, incumbent: float = 1000.0) -> Callable:
    """Off 400 req/s, the advice (timeout 0) `incumbent`, the one challenger (timeout 500) `ratio` times that."""
    return lambda p: 400.0 if p is OFF else incumbent * (ratio if p.batch_timeout_micros == 500 else 1.0)


@pytest.mark.parametrize(("ratio", "honour_beat", "decision", "moves"), [
    (1.04, True, "within the uncertainty: +4%", False),
    (0.96, True, "unmet: did not pass at 1000 req/s, the rate to beat", False),
    (0.96, False, "within the uncertainty: -4%", False),
    (1.06, True, "kept: +6%", True),
    (0.90, True, "unmet: did not pass at 1000 req/s, the rate to beat", False),
    (0.90, False, "unresolved: no rate above 900 req/s shown to fail; confirmed -10%", False)])
def test_a_difference_within_noise_never_replaces_the_incumbent(ratio, honour_beat, decision, moves):
    fake = Fake(challenged(ratio), honour_beat=honour_beat)
    answer = tune(fake, ladders=TWO_TIMEOUTS)
    assert answer.trail[-1].decision == decision
    assert answer.winner.profile.batch_timeout_micros == (500 if moves else 0)
    assert answer.gain_vs_advice.ratio == pytest.approx(ratio if moves else 1.0)


def test_min_gain_sets_the_noise_level():
    fake = Fake(challenged(1.04))
    answer = tune(fake, ladders=TWO_TIMEOUTS, min_gain=0.02)
    assert answer.winner.profile.batch_timeout_micros == 500


@pytest.mark.parametrize(("ratio", "min_gain", "decision", "moves"), [
    (1.04, 0.05, "within the uncertainty: +4%", False), (1.06, 0.05, "kept: +6%", True),
    (1.04, 0.02, "kept: +4%", True), (1.06, 0.10, "within the uncertainty: +6%", False)])
def test_without_an_upper_end_min_gain_decides(ratio, min_gain, decision, moves):
    fake = Fake(challenged(ratio), upper=None)
    answer = tune(fake, ladders=TWO_TIMEOUTS, min_gain=min_gain)
    assert answer.advice.result.upper_rps is None
    assert answer.trail[-1].decision == decision
    assert answer.winner.profile.batch_timeout_micros == (500 if moves else 0)


@pytest.mark.parametrize("min_gain", [0.02, 0.10])
@pytest.mark.parametrize(("ratio", "decision", "moves"), [
    (1.04, "within the uncertainty: +4% (not above 1050 req/s)", False),
    (1.06, "kept: +6%, above the incumbent's upper end 1050 req/s", True)])
def test_a_challenger_must_beat_the_incumbents_upper_end_whatever_min_gain(ratio, decision, moves, min_gain):
    """The advice's capacity is 1000 req/s and its upper end 1050: +4% is within it even when min_gain is 2%,
    +6% is above it even when min_gain is 10%."""
    fake = Fake(challenged(ratio), upper=1.05)
    answer = tune(fake, ladders=TWO_TIMEOUTS, min_gain=min_gain)
    assert answer.advice.result.upper_rps == pytest.approx(1050)
    assert answer.trail[-1].decision == decision
    assert answer.winner.profile.batch_timeout_micros == (500 if moves else 0)
    assert answer.gain_vs_advice.ratio == pytest.approx(ratio if moves else 1.0)


def test_a_kept_challengers_own_upper_end_is_the_next_bar():
    """Advice 1000 (upper 1050); 500 us at 1060 is kept (upper 1113); 1000 us at 1100 is not above 1113."""
    capacities = {0: 1000.0, 500: 1060.0, 1000: 1100.0}
    fake = Fake(lambda p: 400.0 if p is OFF else capacities[p.batch_timeout_micros], upper=1.05)
    answer = tune(fake, ladders={**ONLY_TIMEOUT, "batch_timeout_micros": (0, 500, 1000)})
    assert [v.decision for v in answer.trail[2:]] == [
        "kept: +6%, above the incumbent's upper end 1050 req/s",
        "within the uncertainty: +4% (not above 1113 req/s)"]
    assert answer.winner.profile.batch_timeout_micros == 500
    assert fake.beats[2:] == [1000.0, 1060.0]


@pytest.mark.parametrize("upper", [None, 1.05])
def test_the_rate_to_beat_is_the_incumbents_capacity_for_ascent_and_none_for_off_and_the_advice(upper):
    fake = Fake(surface(), upper=upper)
    answer = tune(fake)
    assert fake.beats[:2] == [None, None]
    assert len(fake.beats) == len(answer.trail) > 4
    incumbent = answer.advice
    kept = 0
    for visit, beat in zip(answer.trail[2:], fake.beats[2:], strict=True):
        assert visit.stage == Stage.ASCENT
        assert beat == incumbent.result.capacity_rps
        if visit.decision.startswith("kept"):
            incumbent, kept = visit, kept + 1
        else:
            assert visit.decision.startswith(("unmet: did not pass at", "within the uncertainty"))
    assert kept >= 2 and incumbent is answer.winner


def test_a_challenger_below_the_rate_to_beat_comes_back_unmet_and_never_wins():
    fake = Fake(challenged(0.5))
    answer = tune(fake, ladders=TWO_TIMEOUTS)
    assert fake.beats == [None, None, 1000.0]
    assert answer.trail[-1].result.capacity_rps is None
    assert answer.trail[-1].decision == "unmet: did not pass at 1000 req/s, the rate to beat"
    assert answer.winner is answer.advice


def test_the_evaluation_budget_ends_it_with_the_best_so_far():
    fake = Fake(surface())
    answer = tune(fake, max_evaluations=5)
    assert len(fake.asked) == 5 and answer.ended_because == "budget: 5 configurations"
    assert [p.batch_timeout_micros for p in fake.asked[1:]] == [0, 500, 1000, 2000]
    assert answer.winner.profile.batch_timeout_micros == 1000
    assert answer.winner.result.score == max(v.result.score for v in answer.trail if v.stage != Stage.OFF)


@pytest.mark.parametrize("max_s, evaluations, durations", [(450, 5, [100, 100, 100, 100, 50]),
                                                           (440, 4, [100, 100, 100, 100])])
def test_the_time_limit_ends_it_by_its_deadline_using_it(max_s, evaluations, durations):
    # An evaluation begins while half an average one's time is left, cut to what is left (the caller's cut, faked):
    # 50 s left at 400 s is half of 100, so a fifth runs to 450 s; 40 s left is not.
    clock = Clock()
    fake = Fake(surface(), clock=clock, seconds=100, deadline_s=max_s)
    answer = tune(fake, clock=clock, max_s=max_s)
    assert answer.ended_because == f"time limit ({max_s} s)"
    assert len(fake.asked) == evaluations and clock.now <= max_s
    assert [v.duration_s for v in answer.trail] == durations


def test_a_pass_limit_says_the_search_did_not_converge():
    fake = Fake(surface(best={"batch_timeout_micros": 10000}))
    answer = tune(fake, ladders=ONLY_TIMEOUT, max_passes=1)
    assert answer.ended_because == "pass limit (1 passes)"


def test_off_unmet_leaves_the_gain_over_off_unknown_with_the_reason():
    fake = Fake(lambda p: None if p is OFF else surface()(p))
    answer = tune(fake)
    assert answer.winner is not None and answer.off.decision == "unmet: p99 31 ms > 10 ms at 1 req/s"
    assert answer.gain_vs_off.ratio is None
    assert answer.gain_vs_off.reason == "batching off did not meet the objective: p99 31 ms > 10 ms at 1 req/s"
    assert answer.gain_vs_advice.ratio > 1
    assert "unknown over off (batching off did not meet" in answer_lines(answer, None)[2]


def test_failed_evaluations_are_recorded_and_the_search_goes_on():
    def capacity(profile):
        if profile.max_batch_size == 32:
            raise RuntimeError("server did not start")
        if profile.max_enqueued_batches == 8:
            return None
        return surface()(profile)
    answer = tune(Fake(capacity))
    assert tuned(answer.winner.profile) == BEST
    decisions = [v.decision for v in answer.trail]
    assert "unmet: failed: RuntimeError: server did not start" in decisions
    assert all(v.result.capacity_rps is None for v in answer.trail if v.decision.startswith("unmet"))


def test_an_unmet_advice_is_replaced_by_any_configuration_that_meets_the_objective():
    fake = Fake(lambda p: 400.0 if p is OFF else (None if p.batch_timeout_micros == 0 else 100.0))
    answer = tune(fake, ladders=TWO_TIMEOUTS)
    assert answer.advice.decision.startswith("unmet")
    assert fake.beats == [None, None, None]  # no rate to beat when the incumbent is unmet
    assert answer.winner.profile.batch_timeout_micros == 500
    assert answer.winner.decision == "kept: the incumbent was unmet"
    assert answer.gain_vs_advice.reason == ("TF Serving's advice did not meet the objective: "
                                            "p99 31 ms > 10 ms at 1 req/s")


def test_nothing_met_means_no_winner(tmp_path):
    answer = tune(Fake(lambda p: None), ladders=TWO_TIMEOUTS)
    assert answer.winner is None and answer.ended_because == "converged"
    assert answer.gain_vs_off.reason == "no batching configuration met the objective"
    files = write_winner(tmp_path, answer)
    assert files.parameters_file is None and files.trail_file.exists()
    assert answer_lines(answer, None)[-1] == ("tuned: no batching configuration met p99 <= 10 ms, "
                                              "request batch 1 (3 evaluated)")


def test_visits_are_named_by_the_fields_that_differ_from_the_start():
    answer = tune(Fake(surface()))
    names = [v.profile.name for v in answer.trail]
    assert names[:3] == ["off", "cpu", "cpu+batch_timeout_micros=500"]
    assert answer.winner.profile.name == ("cpu+batch_timeout_micros=1000,max_batch_size=64,"
                                          "max_enqueued_batches=4")
    assert len(set(names)) == len(names)


# ---------------------------------------------------------------- ladders, profiles, settings

def test_default_ladders_follow_the_device_and_cores():
    cpu = default_ladders(Device.CPU, 2)
    assert cpu == {"batch_timeout_micros": (0, 500, 1000, 2000, 5000, 10000),
                   "max_batch_size": (8, 16, 32, 64, 128, 256, 512, 1024),
                   "num_batch_threads": (1, 2), "max_enqueued_batches": (1, 2, 4, 8, 16)}
    gpu = default_ladders(Device.GPU, 6, batch_size=32)
    assert gpu["num_batch_threads"] == (1, 2, 4, 6, 12)
    assert gpu["max_enqueued_batches"] == (1, 2, 4, 6, 8, 16)
    assert gpu["max_batch_size"] == (32, 64, 128, 256, 512, 1024)


def test_given_ladders_replace_the_defaults_sorted_and_unique():
    ladders = ladders_for(TuneSettings(objective=Objective(10), cores=2, ladders={"max_batch_size": (64, 16, 64)}))
    assert ladders["max_batch_size"] == (16, 64) and ladders["num_batch_threads"] == (1, 2)


def test_neighbours_of_a_value_off_the_ladder():
    assert neighbour((8, 16, 32), 20, upward=True) == 32 and neighbour((8, 16, 32), 20, upward=False) == 16
    assert neighbour((8, 16, 32), 32, upward=True) is None and neighbour((8, 16, 32), 8, upward=False) is None


@pytest.mark.parametrize(("maximum", "sizes"), [
    (512, (8, 16, 32, 64, 128, 256, 512)), (64, (8, 16, 32, 64)), (100, (8, 16, 32, 64, 100)), (4, (4,))])
def test_allowed_batch_sizes_and_execution_size_follow_max_batch_size(maximum, sizes):
    changed = with_field(GPU, "max_batch_size", maximum)
    assert changed.allowed_batch_sizes == sizes and changed.max_execution_batch_size == maximum


def test_a_smaller_execution_batch_size_is_kept_but_never_above_the_maximum():
    split = replace(GPU, enable_large_batch_splitting=True, max_execution_batch_size=128)
    assert with_field(split, "max_batch_size", 512).max_execution_batch_size == 128
    assert with_field(split, "max_batch_size", 64).max_execution_batch_size == 64
    assert with_field(CPU, "max_batch_size", 64).allowed_batch_sizes == ()


def test_the_profiles_of_serving_toml_are_valid_starts():
    config = build_config(read_toml(DEFAULT_CONFIG_FILE, "serving config"), cores=2)
    for name in ("cpu", "gpu"):
        check_start(config.profile(name), ladders_for(TuneSettings(objective=Objective(10), cores=2)))


@pytest.mark.parametrize(("start", "message"), [
    (OFF, "turns batching off"),
    (replace(CPU, max_enqueued_batches=None), "leaves max_enqueued_batches unset"),
    (replace(GPU, max_batch_size=512), "Last entry in allowed_batch_sizes must match")])
def test_a_bad_start_is_refused(start, message):
    with pytest.raises(ValueError, match=message):
        tune(Fake(surface()), start)


@pytest.mark.parametrize(("settings", "message"), [
    ({"ladders": {"thread_pool_name": (1,)}}, "no ladder for thread_pool_name"),
    ({"max_evaluations": 1}, "at least 2 evaluations"), ({"min_gain": 1.0}, "min_gain"),
    ({"batch_size": 0}, "batch size"), ({"ladders": {"num_batch_threads": (0, 2)}}, "values >= 1")])
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ValueError, match=message):
        tune(Fake(surface()), **settings)


# ---------------------------------------------------------------- output

@pytest.mark.parametrize("profile", [CPU, with_field(GPU, "max_batch_size", 512)], ids=["cpu", "gpu"])
def test_the_parameters_file_parses_back_to_the_same_values(profile):
    parsed = text_format.Parse(batching_parameters_text(profile), BatchingParameters())
    assert parsed == profile.to_proto()
    assert parsed.max_batch_size.value == profile.max_batch_size
    assert parsed.HasField("batch_timeout_micros")  # present even when 0: TF Serving's wrapper types
    assert parsed.batch_timeout_micros.value == profile.batch_timeout_micros
    assert list(parsed.allowed_batch_sizes) == list(profile.allowed_batch_sizes)
    with pytest.raises(ValueError, match="turns batching off"):
        batching_parameters_text(OFF)


@pytest.mark.parametrize("profile", [CPU, with_field(GPU, "max_batch_size", 512)], ids=["cpu", "gpu"])
def test_the_profile_block_round_trips_through_build_profile(profile):
    block = profile_block(profile, "tuned", comment="tuned for p99 <= 10 ms")
    table = tomllib.loads(block)["profiles"]["tuned"]
    assert set(table) == {"enable_batching"} | {n for n, v in profile.parameters().items() if v is not None}
    assert build_profile("tuned", table, cores=99).parameters() == profile.parameters()
    assert block.startswith("# tuned for p99 <= 10 ms\n[profiles.tuned]\n")


def test_a_profile_block_needs_a_bare_toml_name():
    with pytest.raises(ValueError, match="TOML bare key"):
        profile_block(CPU, "cpu+batch_timeout_micros=500")


def test_write_winner_never_overwrites(tmp_path):
    answer = tune(Fake(surface()))
    first, second = write_winner(tmp_path, answer), write_winner(tmp_path, answer)
    assert first.parameters_file == tmp_path / PARAMETERS_FILE and first.trail_file == tmp_path / TRAIL_FILE
    assert second.parameters_file == tmp_path / "tuned_batching_parameters-2.txt"
    assert second.trail_file == tmp_path / "tune-2.json"
    assert first.parameters_file.read_text() == batching_parameters_text(answer.winner.profile)
    record = json.loads(first.trail_file.read_text())
    assert record["winner"] == answer.winner.number and len(record["trail"]) == len(answer.trail)
    assert record["trail"][0] == {**record["trail"][0], "stage": "off", "parameters": {}, "decision": "baseline"}
    assert record["gain_vs_off"]["ratio"] == pytest.approx(answer.gain_vs_off.ratio)


def hand_made_answer(off_rps: float = 351.2) -> TuneAnswer:
    winner_profile = replace(CPU, name="cpu+batch_timeout_micros=1000", batch_timeout_micros=1000)
    off = Visit(1, Stage.OFF, OFF, Evaluated(off_rps, off_rps, 4.0), "baseline")
    advice = Visit(2, Stage.ADVICE, CPU, Evaluated(725.0, 725.0, 9.1), "start")
    winner = Visit(3, Stage.ASCENT, winner_profile, Evaluated(812.4, 812.4, 8.2), "kept: +12%", "batch_timeout_micros")
    return TuneAnswer(Objective(10), 1, winner, off, advice, (off, advice, winner), "converged", 480)


def test_the_last_lines_name_the_winner_its_gains_and_the_file():
    lines = answer_lines(hand_made_answer(), Path("results/run/tuned_batching_parameters.txt"))
    assert lines == [
        "search: visited 2 of 480 configurations (plus batching off), converged",
        "tuned: winner cpu+batch_timeout_micros=1000 812.4 req/s (812.4 img/s) at p99 8.2 ms <= 10 ms, "
        "request batch 1",
        "batching gain ×2.31 over off (351.2 req/s); ×1.12 over TF Serving's advice, profile cpu (725.0 req/s)",
        "file: results/run/tuned_batching_parameters.txt (use with --batching_parameters_file, or paste the "
        "profile block above into serving/serving.toml)",
    ]


def test_lower_bounds_say_so_and_give_no_gain():
    """Where the load generator was the limit, a capacity is "at least": no ratio between lower bounds."""
    answer = hand_made_answer()
    bounded = {v.number: replace(v, result=replace(v.result, at_least=True)) for v in answer.trail}
    answer = replace(answer, off=bounded[1], advice=bounded[2], winner=bounded[3], trail=tuple(bounded.values()))
    lines = answer_lines(answer, None)
    assert lines[1].startswith("tuned: winner cpu+batch_timeout_micros=1000 at least 812.4 req/s")
    assert lines[2] == ("batching gain unknown over off (batching off is only a lower bound: the load generator was "
                        "the limit); unknown over TF Serving's advice, profile cpu (TF Serving's advice is only a "
                        "lower bound: the load generator was the limit)")
    assert lines[3].startswith("the load generator was the limit (≥: a lower bound)")
    assert plain_table(trail_table(answer), 200).splitlines()[3].split()[6] == "≥812.4"


def test_a_winner_that_is_a_lower_bound_gives_a_gain_that_is_one():
    answer = hand_made_answer()
    winner = replace(answer.winner, result=replace(answer.winner.result, at_least=True))
    answer = replace(answer, winner=winner, trail=(*answer.trail[:2], winner))
    lines = answer_lines(answer, None)
    assert lines[2] == ("batching gain at least ×2.31 over off (351.2 req/s); at least ×1.12 over TF Serving's advice, "
                        "profile cpu (725.0 req/s)")


def test_the_lines_say_when_batching_off_serves_more():
    lines = answer_lines(hand_made_answer(off_rps=1000.0), None)
    assert lines[-1] == "batching off serves more than any batching configuration confirmed: keep BATCHING=off"


def test_a_challenger_whose_search_stopped_before_confirming_its_higher_pass_is_unresolved_not_worse():
    """The end-to-end tuner test's failure on a quiet machine (2026-11-28): batching off 70.5 req/s, the start
    (max_batch_size 1) 48.7 alone; paired, the start confirmed 73.1 beside batching 16, whose search confirmed only its
    first rate (48.7) before its minute ran out, its pass at 389.6 req/s unconfirmed. It read "worse: -33%" and
    "batching off serves more than any batching configuration tried: keep BATCHING=off"."""
    def evaluate(profile: BatchingProfile, beat_rps: float | None) -> Evaluated:
        return Evaluated(70.5, 70.5, 9.0) if not profile.enable_batching else Evaluated(48.7, 48.7, 9.0)

    def evaluate_pair(incumbent: BatchingProfile, challenger: BatchingProfile) -> tuple[Evaluated, Evaluated]:
        return (Evaluated(73.1, 73.1, 9.0, upper_rps=85.2),
                Evaluated(48.7, 48.7, 9.0, upper_rps=779.2, passed_rps=389.6))
    start = replace(CPU, max_batch_size=1, allowed_batch_sizes=(), max_execution_batch_size=1)
    ladders = {"max_batch_size": (1, 16), **{name: () for name in TUNED_FIELDS if name != "max_batch_size"}}
    answer = Tuner(TuneSettings(objective=Objective(80), cores=2, ladders=ladders), start, evaluate,
                   evaluate_pair=evaluate_pair).run()
    challenger = answer.trail[-1]
    assert challenger.profile.max_batch_size == 16
    assert challenger.decision == ("unresolved: 389.6 req/s passed, not confirmed; "
                                   "confirmed -33% against the incumbent's 73.1 req/s measured beside it")
    assert answer.winner is not None and answer.winner.profile.max_batch_size == 1  # never kept on an open pass
    lines = answer_lines(answer, None)
    assert any(line.startswith(f"not settled: {challenger.profile.name} passed 389.6 req/s, not confirmed")
               for line in lines), lines
    assert lines[-1] == ("batching off serves more than any batching configuration confirmed: keep BATCHING=off, "
                         "unless the configurations not settled confirm higher"), lines


@pytest.mark.parametrize(("upper_rps", "decision"), [
    (None, "unresolved: no rate above 47 req/s shown to fail; confirmed -67% against the incumbent's 141 req/s "
           "measured beside it"),
    (188.0, "within the uncertainty: -67% against the incumbent's 141 req/s measured beside it (its upper end "
            "188 req/s is above 141)"),
    (94.0, "worse: -67% against the incumbent's 141 req/s measured beside it")])
def test_a_challenger_confirmed_below_the_bar_is_worse_only_where_it_failed_at_or_under_it(upper_rps, decision):
    """The end-to-end tuner test's failure in CI (2026-12-07): paired, the start (max_batch_size 1) confirmed 141 req/s
    (up to 164.5); batching 4's search was inconclusive twice at 94 req/s, confirmed 47 and ran out of its minute with
    no rate shown to fail. It read "worse: -67%". Worse needs a failure at or under the bar (94 here)."""
    def evaluate(profile: BatchingProfile, beat_rps: float | None) -> Evaluated:
        return Evaluated(44.5, 44.5, 9.0) if not profile.enable_batching else Evaluated(96.7, 96.7, 9.0)

    def evaluate_pair(incumbent: BatchingProfile, challenger: BatchingProfile) -> tuple[Evaluated, Evaluated]:
        return Evaluated(141.0, 132.2, 27.9, upper_rps=164.5), Evaluated(47.0, 47.9, 14.6, upper_rps=upper_rps)
    start = replace(CPU, max_batch_size=1, allowed_batch_sizes=(), max_execution_batch_size=1)
    ladders = {"max_batch_size": (1, 4), **{name: () for name in TUNED_FIELDS if name != "max_batch_size"}}
    answer = Tuner(TuneSettings(objective=Objective(40), cores=2, ladders=ladders), start, evaluate,
                   evaluate_pair=evaluate_pair).run()
    assert answer.trail[-1].decision == decision
    assert answer.winner is not None and answer.winner.profile.max_batch_size == 1
    settled = [line for line in answer_lines(answer, None) if line.startswith("not settled")]
    assert settled == ([f"not settled: {answer.trail[-1].profile.name} confirmed 47 req/s and no rate above it was "
                        "shown to fail: search it longer (--max-minutes) to settle it"] if upper_rps is None else [])


def test_the_trail_table_has_a_row_per_configuration_and_marks_the_winner():
    text = plain_table(trail_table(hand_made_answer()), 200).splitlines()
    assert text[0].split() == ["#", "stage", "timeout", "us", "max", "batch", "threads", "max", "enqueued",
                               "req/s", "img/s", "p99", "ms", "decision"]
    assert text[1].split() == ["1", "off", "—", "—", "—", "—", "351.2", "351.2", "4.000", "baseline"]
    assert text[3].split() == ["*3", "ascent", "1000", "1024", "2", "2", "812.4", "812.4", "8.200", "kept:", "+12%"]
    assert len(text) == 4


def test_answer_text_ends_with_the_answer_lines_after_the_profile_block(tmp_path):
    answer = tune(Fake(surface()))
    files = write_winner(tmp_path, answer)
    text = answer_text(answer, files)
    block = profile_block(answer.winner.profile, "tuned", comment=f"{answer.winner.profile.name}, tuned for p99 "
                          "<= 10 ms")
    assert block.rstrip("\n") + "\n\nsearch: visited" in text
    assert text.endswith("\n".join(answer_lines(answer, files.parameters_file)))
