"""What bounded an answer, the model on its device or the serving path, and where each request's time
went: from hand-made records (figures computed by hand; each search with a passing tool-ceiling twin at 2× its
answer, so the device floor's rule decides) and from the first real H100 run."""

from __future__ import annotations

import shutil
from dataclasses import replace

import pytest

from loadtest.evidence.cell_parts import GcPauses, PhaseWindow, ServerPhases
from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.evidence.records import append_result, read_results
from loadtest.evidence.search_tag import ComparisonTag
from loadtest.report import page as report
from loadtest.report.answers import bound
from loadtest.report.answers.answers import answer
from loadtest.report.answers.movement import search_movements
from loadtest.report.configs import config_labels, config_of
from loadtest.report.device_use import CPU_BUSY_PERCENT
from loadtest.report.figures import figures_of
from loadtest.report.headline import bound_lines
from loadtest.report.sections.request_time import request_time_table
from serving.protocol.names import REQUEST_PHASES
from tests.loadtest.report.handmade import cell, search, server, with_twin
from tests.loadtest.report.test_report import headline_of, table
from tests.support.paths import ANALYSIS_FIXTURES as FIXTURES

NULL = replace(server("cpu-off", "off"), versions={"runtime": "none (null backend)"})
GPU = server("gpu-off", "off", device="gpu")

def findings(cells) -> tuple[str, ...]:
    """The headline's findings after the reasons none met: what bounded the answer comes first there."""
    return tuple(line for line in headline_of(cells) if not line.startswith("Why none confirmed"))


def printed_bounds(cells) -> tuple[str, ...]:
    """Only what bounded each device's answer, as `capacity` prints it (`headline.bound_lines`)."""
    answers = answer(cells)
    labels = config_labels(config_of(c) for c in cells)
    return bound_lines(cells, answers, labels, figures_of(cells, answers, labels))


def lead_finding(md: str) -> str:
    """The report's first finding after the reasons none met (the first paragraph under "## Findings")."""
    below = md.split("\n## Findings\n\n", 1)[1]
    return next(line for line in below.splitlines() if line and not line.startswith("Why none confirmed"))



def floor(*entries: tuple[int, float], **keys) -> DeviceFloorRecord:
    """A floor record as the server writes it, with `keys` added or replaced."""
    return DeviceFloorRecord.from_dict({
        "source": "embedded server at start, after warm-up", "device": "Test CPU", "runtime": "none",
        "batches": [{"batch_size": b, "latency_us": b / ips * 1e6, "images_per_s": ips} for b, ips in entries],
        **keys})


def capacity(label, rate: float, **fields):
    """A short search confirming `rate` req/s (1.1 × rate fails); every cell with `fields`; its twin passes at 2×."""
    cells = search(label, "s", [("bracket", rate, 8.0), ("bracket", rate * 1.1, 12.0), ("confirm", rate, 9.0)])
    return with_twin([replace(c, **fields) for c in cells])


SERVING_PATH = "cpu (Test CPU): bounded by the stand-in's serving path: served 2% of the device alone (tool ceiling "


def test_the_floor_entry_covers_the_batch_the_server_ran():
    f = floor((1, 2000.0), (8, 12000.0), (32, 30000.0))
    assert bound.floor_at(f, 1).batch_size == 1
    assert bound.floor_at(f, 7).batch_size == 8  # padded up to the next measured size
    assert bound.floor_at(f, 64).batch_size == 32  # beyond the largest: the largest
    assert bound.floor_at(DeviceFloorRecord.from_dict({"source": "unknown", "note": "why"}), 1) is None
    one = cell(NULL, rate=100.0, batch=1)
    assert bound.padded_batch(one) == 1
    assert bound.padded_batch(replace(one, server_batch_size_mean=6.2)) == 7
    served = bound.served_share(replace(one, server_batch_size_mean=6.2, device_floor=f))
    assert (served.floor.batch_size, served.share, served.times) == (8, pytest.approx(99 / 12000),
                                                                     pytest.approx(12000 / 99))


def test_a_device_is_idle_only_when_every_cell_left_it_far_from_busy():
    cells = [replace(cell(GPU, rate=r), gpu_utilization_percent=u) for r, u in ((10, 1.0), (20, 3.5))]
    assert bound.idle_ceiling(cells) == 4.0  # the busiest mean, rounded up
    assert bound.idle_ceiling([*cells, replace(cells[0], gpu_utilization_percent=50.0)]) is None
    assert bound.idle_ceiling([*cells, replace(cells[0], gpu_utilization_percent=None)]) is None  # not measured
    cpu = [replace(cell(NULL, rate=10), server_cpu_percent=59.0)]
    assert bound.idle_ceiling(cpu) == 59.0
    assert bound.idle_ceiling([replace(cpu[0], server_cpu_percent=60.0)]) is None


def test_null_backend_far_below_its_floor_leads_with_the_serving_path():
    # The null backend without delay: 25,000 images/s alone; the search confirmed 400 req/s (396 images/s).
    cells = capacity(NULL, 400.0, device_floor=floor((1, 25000.0)), server_cpu_percent=95.0)
    lines = findings(cells)
    assert lines[0] == (f"{SERVING_PATH}≥ 800.0 req/s (2× the answer)). the serving path bounded this answer, not "
                        "the device: cpu (Test CPU) alone runs the model at 25,000.0 images/s at batch 1, ×63 what "
                        "cpu-off served (396.0 images/s at capacity).")
    assert lines[1].startswith("capacity on cpu (Test CPU)")
    assert printed_bounds(cells) == lines[:1]


def test_a_serialised_delay_near_its_floor_names_the_model_calls_not_the_idle_cpu():
    # A 10 ms delay, one request at a time: 100 images/s alone; 96 req/s confirmed (95.04 images/s); CPU 3% busy:
    # the model's calls bounded it, but the device was not busy, so it is not the device's bound.
    cells = paired(capacity(NULL, 96.0, device_floor=floor((1, 100.0)), server_cpu_percent=3.0), CALM)
    lines = findings(cells)
    assert lines[0] == ("cpu (Test CPU): bounded by an idle device: served 95% of the device alone (tool ceiling "
                        "≥ 192.0 req/s (2× the answer)). the model's calls bounded "
                        "this answer, not the cpu (Test CPU)'s compute (CPU 3% busy): cpu-off served 95.0 images/s at "
                        "capacity = 95% of the model alone (100.0 images/s at batch 1).")
    assert not any("serving path" in line or "on the device bounded" in line for line in lines)


def test_a_busy_device_near_its_floor_bounded_the_answer():
    cells = paired(capacity(NULL, 96.0, device_floor=floor((1, 100.0)), server_cpu_percent=85.0), CALM)
    assert findings(cells)[0] == ("cpu (Test CPU): bounded by the device: served 95% of the device alone (tool "
                                  "ceiling ≥ 192.0 req/s (2× the answer)). the model "
                                  "on the device bounded this answer: cpu-off served 95.0 images/s at capacity = 95% "
                                  "of cpu (Test CPU) alone (100.0 images/s at batch 1).")


def test_a_floor_within_twice_the_runtime_round_trip_names_the_runtime():
    # The floor: 1,600 images/s at batch 1 = 625 µs a call; JAX's trivial round trip 620 µs (within 2×), PyTorch's
    # 44 µs; 1,000 req/s confirmed (990 images/s = 62% of the floor), the GPU 4% busy.
    jax_floor = floor((1, 1600.0), runtime="jax", round_trip_us=620.0, device_round_trip_us=44.0)
    cells = paired(capacity(GPU, 1000.0, device_floor=jax_floor, gpu_utilization_percent=4.0), CALM, GPU)
    assert findings(cells)[0] == ("gpu (Test GPU): bounded by the runtime's dispatch: served 62% of the device "
                                  "alone (tool ceiling ≥ 2,000.0 req/s (2× the answer)). the runtime (JAX, 0.62 ms "
                                  "per call) bounded this answer, not the gpu "
                                  "(Test GPU) (GPU 4% busy, its own round trip 0.044 ms): 990.0 images/s served = 62% "
                                  "of the floor, which timed the runtime's own round trip.")
    slow_model = replace(jax_floor, round_trip_us=300.0)  # 625 µs > 2 × 300 µs: the floor timed the model
    busy = [replace(c, device_floor=slow_model, gpu_utilization_percent=80.0) if c.server == GPU else c
            for c in cells]
    assert findings(busy)[0].startswith("gpu (Test GPU): bounded by the device: served 62%")
    assert "the model on the device bounded this answer" in findings(busy)[0]


def test_when_the_load_generator_was_the_limit_it_is_named_instead():
    steps = [("bracket", 400, 8.0), ("bracket", 440, 12.0, "saturated", "2% of sends left late"),
             ("confirm", 400, 9.0)]
    cells = with_twin([replace(c, device_floor=floor((1, 25000.0))) for c in search(NULL, "s", steps)])
    # unconfirmed comes first: the one-figure rule's state (a lower bound: the load generator's limit), read
    assert findings(cells)[0] == ("cpu (Test CPU): bounded by unconfirmed: a lower bound: the load generator's "
                                  "limit (its dispatch: sends late, its CPU not recorded, no host probe on its cores), "
                                  "though it carried 800.0 req/s against its twin: the host it shares with the server, "
                                  "not its own ceiling (tool ceiling ≥ 800.0 req/s (2× the answer)).")


def test_without_a_floor_a_busy_device_reads_device_alone_not_measured():
    cells = capacity(NULL, 400.0, server_cpu_percent=90.0)
    assert printed_bounds(cells) == ("cpu (Test CPU): bounded by device alone not measured (tool ceiling ≥ 800.0 "
                                     "req/s (2× the answer)).",)


def test_the_h100_run_opens_by_saying_the_gpu_did_not_bound_it(tmp_path):
    shutil.copytree(FIXTURES / "h100-run", tmp_path / "h100-run")
    md = report.run([tmp_path / "h100-run" / "results.jsonl"])[1].read_text()
    assert lead_finding(md) == ("the gpu (NVIDIA H100 80GB HBM3) did not bound this run (it was ≤ 4% busy), so "
                                "what it measured is the serving path on that machine.")
    rows = {(r[0], r[1]): r for r in table(md, "Where each request's time went, and the device alone")}
    assert rows[("gpu-off", "1")][2:6] == ["peak 367.5 req/s", "5.868", "3.144", "2.724"]
    assert rows[("gpu-off", "1")][-1] == "no device floor in this record (made before floors were recorded)"


def phases_record(means_us: dict, request_us: float, not_exported=(), gc: GcPauses | None = None) -> ServerPhases:
    return ServerPhases("test", PhaseWindow(request_us, None, 1000.0),
                        {p: PhaseWindow(m, None, 1000.0) for p, m in means_us.items()}, tuple(not_exported), "", gc)


def test_where_the_time_went_at_the_capacity():
    means = dict(zip(REQUEST_PHASES, (100.0, 20.0, 300.0, 30.0, 50.0, 1000.0, 50.0, 150.0, 100.0, 0.0)))  # 1.8 ms
    gc = GcPauses(mean_us=310.0, p99_us=None, count=12.0, max_us=1200.0)  # 12 collections in the cell
    embedded = capacity(NULL, 400.0, device_floor=floor((1, 25000.0)), latency_mean_ms=2.5,
                        server_phases=phases_record(means, 1800.0, gc=gc))
    tfs_label = replace(server("tfs", "off"), kind="tfserving-container", name="tfs")
    unknown = DeviceFloorRecord.from_dict({"source": "unknown", "note": "no TF here"})
    tfs = capacity(tfs_label, 300.0, latency_mean_ms=3.0, device_floor=unknown,
                   server_phases=phases_record({"queue": 400.0}, 2000.0,
                                               [p for p in REQUEST_PHASES if p != "queue"]))
    cells = embedded + tfs
    t = request_time_table(figures_of(cells, answer(cells), config_labels(config_of(c) for c in cells)))
    rows = {r[0]: r for r in t.rows}
    assert rows["cpu-off"][2:6] == ("capacity 400.0 req/s", "2.500", "0.700", "1.800")
    assert rows["cpu-off"][6:17] == ("0.100", "0.020", "0.300", "0.030", "0.050", "1.000", "0.050", "0.150",
                                     "0.100", "0.000", "1.800")
    assert rows["cpu-off"][17:21] == ("12 (mean 0.31 ms, slowest ≤ 1.20 ms)", "396.0", "25,000.0 (batch 1)", "1.6%")
    assert rows["tfs"][6:9] == ("not exported", "not exported", "0.400")
    assert rows["tfs"][16] == rows["tfs"][17] == "—" and rows["tfs"][-1] == "device floor unknown: no TF here"


def test_records_from_before_phases_and_floors_read_with_empty_ones(tmp_path):
    old = read_results(FIXTURES / "h100-run" / "results.jsonl")
    assert len(old) == 44 and all(c.server_phases is None and c.device_floor is None for c in old)
    path = tmp_path / "results.jsonl"
    append_result(path, replace(old[0], device_floor=floor((1, 100.0))))
    assert read_results(path)[0].device_floor == floor((1, 100.0))


def test_the_second_h100_run_never_says_the_gpu_bounded_it(tmp_path):
    """Verbatim records of the second H100 run. Its closed-loop gpu-off cell at batch 1 served 940.5 images/s,
    82% of the floor at batch 1 (1,149.7 images/s, 870 µs a call), with the GPU 4% busy; the floor per call is
    within 2× of JAX's own trivial round trip (679 µs). Cleared of its `unstable` flag (so that it is the peak
    the bound line stands on), it must name JAX's dispatch, never the device."""
    cells = read_results(FIXTURES / "h100-run-b" / "results.jsonl")
    closed = next(c for c in cells if c.server.name == "gpu-off" and c.load.mode == "closed"
                  and c.load.request_batch_size == 1)
    assert closed.device_floor.round_trip_us == pytest.approx(678.9, abs=0.1)
    cleared = [replace(c, valid=True, flags=[]) if c is closed else c for c in cells]
    for c in cleared:
        append_result(tmp_path / "results.jsonl", c)
    md = report.run([tmp_path / "results.jsonl"])[1].read_text()
    lead = lead_finding(md)
    assert "on the device bounded" not in md
    # unpaired: how far the machine moved over the run was not measured, so no share clears its line (#68)
    assert lead == ("the device is not shown to have bounded this answer, so the serving path is taken to: gpu-off "
                    "served 940.5 images/s at its peak = 82% of gpu (NVIDIA H100 80GB HBM3) alone (1,149.7 images/s "
                    "at batch 1), and how far the machine's speed drifted over the run was not measured (no reference "
                    "cells: a search outside a paired comparison)."), lead
    verbatim = printed_bounds(cells)
    assert verbatim and not any("on the device bounded" in line for line in verbatim)


CALM = (400.0, 420.0)  # reference cells 5% apart: the machine moved 5% over the run


def paired(cells, speeds: tuple[float, ...], label=NULL):
    """`cells` (one search and its twin) in a paired comparison whose reference cells read `speeds` req/s, in order."""
    comparison = {"id": "cmp", "repeat": 1, "paired": True, "servers": [label.name]}
    tagged = [replace(c, search=replace(c.search, comparison=ComparisonTag.from_dict(comparison)))
              if c.search and c.search.role != "tool_ceiling" else c for c in cells]
    references = [cell(label, mode="closed", concurrency=1, rps=speed, index=50 + i,
                       search={"id": "cmp/reference", "role": "reference", "p99_objective_ms": 10.0,
                               "offered_rps": None, "comparison": comparison})
                  for i, speed in enumerate(speeds)]
    return [*references, *tagged]


def test_the_machines_movement_over_a_paired_search_comes_from_its_comparisons_reference_cells():
    cells = paired(capacity(NULL, 96.0), (400.0, 600.0, 500.0))
    assert search_movements(cells) == {"s": pytest.approx(0.5)}  # 600 ÷ 400 − 1; the twin is no search
    assert search_movements(capacity(NULL, 96.0)) == {}  # not paired: no reference cells, not measured


def test_a_share_over_its_line_but_within_the_runs_drift_is_not_the_devices():
    """The demo's flip (2026-11-28, bench-demo RUNS=5): cpu-cpu served 27–51% of the device alone, measured at the
    server's start while the machine's speed moved 18–81% over each run; runs at 50% and 51% read "the device",
    FOR BUYING. A share is the device's only where it clears 50% by more than the machine moved."""
    busy = capacity(NULL, 96.0, device_floor=floor((1, 100.0)), server_cpu_percent=85.0)  # 95% of the device alone
    calm = paired(busy, (400.0, 600.0))  # moved 50%: 95% clears 50% × 1.5
    assert findings(calm)[0].startswith("cpu (Test CPU): bounded by the device: served 95% of the device alone")
    drifting = paired(busy, (300.0, 600.0))  # moved 100%: 95% does not clear 50% × 2
    lines = findings(drifting)
    assert lines[0] == ("cpu (Test CPU): bounded by the stand-in's serving path: served 95% of the device alone, "
                        "within the run's 100% drift of 50% (tool ceiling ≥ 192.0 req/s (2× the answer)). the device "
                        "is not shown to have bounded this answer, so the serving path is taken to: cpu-off served "
                        "95.0 images/s at capacity = 95% of cpu (Test CPU) alone (100.0 images/s at batch 1), within "
                        "the 100% the machine's speed drifted over the run (its reference cells) of 50%."), lines[0]
    assert printed_bounds(drifting) == lines[:1]
    assert not any("on the device bounded" in line for line in lines)


def test_a_share_over_its_line_in_a_run_that_measured_no_drift_is_not_the_devices():
    """#68: a search outside a paired comparison has no reference cells, and its drift was read as none, so 51% of
    the device alone was "the device", FOR BUYING. How far the machine moved is not known there: no share clears."""
    cells = capacity(NULL, 96.0, device_floor=floor((1, 180.0)), server_cpu_percent=85.0)  # 53% of the device alone
    lines = findings(cells)
    assert lines[0].startswith("cpu (Test CPU): bounded by the stand-in's serving path: served 53% of the device "
                               "alone, the run's drift not measured"), lines[0]
    assert lines[0].endswith("and how far the machine's speed drifted over the run was not measured (no reference "
                             "cells: a search outside a paired comparison)."), lines[0]
    assert findings(paired(cells, CALM))[0].startswith("cpu (Test CPU): bounded by the device: served 53%")  # 5% moved


# The runtime's sentence and its parts at their edges, each for a survivor of `make mutation` on bound.py (2026-12-07).

def test_a_floor_without_a_runtime_names_the_runtime_generically():
    assert bound.runtime_name(None) == "the runtime"
    assert bound.runtime_name(floor((1, 1000.0), runtime="")) == "the runtime"
    assert bound.runtime_name(floor((1, 1000.0), runtime="jax")) != "the runtime"


def test_without_a_floor_or_a_round_trip_the_dispatch_did_not_bound_it():
    plain = cell(server("cpu-off", "off"), rate=100.0, rps=100.0)
    served = bound.ServedShare(500.0, bound.FloorEntry(1, 500.0, 2_000.0))
    assert plain.device_floor is None and not bound.dispatch_bound(plain, served)
    timed = replace(plain, device_floor=floor((1, 500.0), round_trip_us=1_500.0))
    assert bound.dispatch_bound(timed, served)  # 2 ms a call within 2× a 1.5 ms round trip
    assert not bound.dispatch_bound(replace(plain, device_floor=floor((1, 500.0), round_trip_us=0.0)), served)


def test_the_runtime_sentence_gives_the_devices_own_round_trip_only_where_measured():
    served = bound.ServedShare(450.0, bound.FloorEntry(1, 500.0, 2_000.0))
    base = cell(server("cpu-off", "off"), rate=100.0, rps=100.0)
    with_own = replace(base, device_floor=floor((1, 500.0), runtime="jax", round_trip_us=1_500.0,
                                                device_round_trip_us=250.0))
    said = bound.runtime_sentence("CPU", with_own, served)
    assert ", its own round trip 0.250 ms" in said and "1.50 ms per call" in said and "= 90% of the floor" in said
    without = replace(base, device_floor=floor((1, 500.0), runtime="jax", round_trip_us=1_500.0))
    assert "its own round trip" not in bound.runtime_sentence("CPU", without, served)
    assert "(the runtime, 0.00 ms per call)" in bound.runtime_sentence("CPU", base, served)  # no floor at all


def test_the_dispatch_rule_at_its_edges():
    """Within `DISPATCH_RATIO` of the round trip counts, at it too; a floor that timed no round trip (none, zero) never
    reads as the dispatch, however fast its calls."""
    plain = cell(server("cpu-off", "off"), rate=100.0, rps=100.0)

    def at(latency_us: float, trip_us: float | None) -> bool:
        served = bound.ServedShare(500.0, bound.FloorEntry(1, 500.0, latency_us))
        record = None if trip_us is None else floor((1, 500.0), round_trip_us=trip_us)
        return bound.dispatch_bound(replace(plain, device_floor=record), served)

    assert at(2_000.0, 1_000.0) and not at(2_000.1, 1_000.0)  # 2× the round trip exactly: within
    assert at(2.0, 1.0)  # a 1 µs round trip is one
    assert not at(1.0, None) and not at(1.0, 0.0) and not at(0.0, 0.0)


def test_a_share_at_exactly_half_without_a_measured_drift_says_so():
    half = bound.ServedShare(250.0, bound.FloorEntry(1, 500.0))
    assert half.share == bound.SERVED_SHARE and half.words() == ("served 50% of the device alone, the run's drift not "
                                                                 "measured")
    assert bound.ServedShare(249.0, bound.FloorEntry(1, 500.0)).words() == "served 50% of the device alone"


def test_a_share_at_exactly_half_inside_the_runs_drift_says_so():
    half = bound.ServedShare(250.0, bound.FloorEntry(1, 500.0), 0.1)
    assert not half.clear and half.words() == "served 50% of the device alone, within the run's 10% drift of 50%"


def test_the_runtime_sentence_in_full():
    """Every figure of it as printed: the runtime's round trip (ms, two places), the device's own (three), the share."""
    served = bound.ServedShare(450.0, bound.FloorEntry(1, 500.0, 2_000.0))
    base = cell(server("cpu-off", "off"), rate=100.0, rps=100.0)
    timed = floor((1, 500.0), runtime="jax", round_trip_us=9_990.0, device_round_trip_us=1_234.0)
    assert bound.runtime_sentence("CPU", replace(base, device_floor=timed), served) == (
        "the runtime (JAX, 9.99 ms per call) bounded this answer, not the CPU (its use not recorded, its own round "
        "trip 1.234 ms): 450.0 images/s served = 90% of the floor, which timed the runtime's own round trip.")
    untimed = floor((1, 500.0), runtime="jax", round_trip_us=9_990.0)
    assert bound.runtime_sentence("CPU", replace(base, device_floor=untimed), served) == (
        "the runtime (JAX, 9.99 ms per call) bounded this answer, not the CPU (its use not recorded): 450.0 images/s "
        "served = 90% of the floor, which timed the runtime's own round trip.")


def test_the_load_generators_sentence_in_full():
    served = bound.ServedShare(1_234.5, bound.FloorEntry(1, 5_000.0))
    assert bound.loadgen_sentence("cpu (Test CPU)", "cpu-off", served) == (
        "the load generator bounded this answer, not the device: cpu-off served at least 1,234.5 images/s, 25% of "
        "cpu (Test CPU) alone (5,000.0 images/s at batch 1).")


def test_the_floor_arithmetic_at_its_edges():
    """The floor's entries skip a batch with no images/s; the batch the server ran rounds its mean up, at least 1;
    a cell that served nothing has no share; the device is busy from its limit on; ×k keeps a decimal under 10."""
    record = DeviceFloorRecord.from_dict({"source": "test", "device": "Test CPU", "runtime": "none", "batches": [
        {"batch_size": 1, "latency_us": 1000.0, "images_per_s": 0.5},
        {"batch_size": 2, "latency_us": 1000.0, "images_per_s": 0.0},
        {"batch_size": 4, "latency_us": 1000.0, "images_per_s": -3.0},
        {"batch_size": 0, "latency_us": 1000.0, "images_per_s": 9.0}]})
    assert [(e.batch_size, e.images_per_s) for e in bound.floor_entries(record)] == [(1, 0.5)]
    plain = cell(server("cpu-off", "off"), rate=100.0, rps=100.0)
    assert [bound.padded_batch(replace(plain, server_batch_size_mean=mean)) for mean in (0.4, 2.0, 2.2)] == [1, 2, 3]
    floored = replace(plain, device_floor=floor((1, 500.0)))
    assert bound.served_share(replace(floored, throughput_ips=0.0)) is None
    assert bound.served_share(replace(floored, throughput_ips=0.5)) is not None
    busy_at_limit = replace(floored, server_cpu_percent=CPU_BUSY_PERCENT)
    clear = bound.ServedShare(450.0, bound.FloorEntry(1, 500.0), 0.05)
    assert bound.held_by(busy_at_limit, clear) == bound.Held.DEVICE
    assert bound.held_by(replace(floored, server_cpu_percent=CPU_BUSY_PERCENT - 0.1), clear) == bound.Held.IDLE_DEVICE
    assert [bound.times_text(t) for t in (5.0, 9.94, 10.0, 10.4, 1234.0)] == ["×5.0", "×9.9", "×10", "×10", "×1,234"]


def test_the_floor_sentence_at_exactly_half_is_not_the_serving_paths():
    half = bound.ServedShare(250.0, bound.FloorEntry(1, 500.0), 0.0)
    said = bound.floor_sentence("cpu (Test CPU)", "cpu-off", "at its capacity", half)
    assert said.startswith("the model on the device bounded this answer: cpu-off served 250.0 images/s"), said


def test_the_bound_line_of_a_lower_bound_names_the_load_generator_with_the_configurations_label():
    """`bound_line` straight, as the whole report's tests reach it: a lower bound (the load generator's limit) with a
    floor leads with the load generator, the configuration named by its label; without the cell, the idle device's
    sentence where every cell left it idle, else nothing."""
    steps = [("bracket", 400, 8.0), ("bracket", 440, 12.0, "saturated", "2% of sends left late"),
             ("confirm", 400, 9.0)]
    cells = [replace(c, server_cpu_percent=10.0)  # every cell, the twin's too: the device far from busy
             for c in with_twin([replace(c, device_floor=floor((1, 25000.0))) for c in search(NULL, "s", steps)])]
    answers = answer(cells)
    [d] = answers.devices
    cell = next(c for c in cells if c.search and c.search.role == "confirm")
    labels = {config_of(cell): "the-label"}
    line = bound.bound_line(d, cell, "at its capacity", cells, labels, answers.movements)
    assert line == ("the load generator bounded this answer, not the device: the-label served at least 396.0 images/s, "
                    "2% of cpu (Test CPU) alone (25,000.0 images/s at batch 1).")
    assert "cpu-off served at least" in bound.bound_line(d, cell, "at its capacity", cells, {}, answers.movements)
    assert bound.bound_line(d, None, "at its peak", cells, labels, {}) == (
        "the cpu (Test CPU) did not bound this run (it was ≤ 10% busy), so what it measured is the serving path on "
        "that machine.")
    assert bound.bound_line(d, None, "at its peak", [replace(c, server_cpu_percent=None) for c in cells], labels,
                            {}) == ""
