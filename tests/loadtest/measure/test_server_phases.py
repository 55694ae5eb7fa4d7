"""Where a cell's requests spent their time in the server, and the device floor it reported: from two
scrapes of its metrics page, figures computed by hand."""

from __future__ import annotations

from dataclasses import replace

from loadtest.measure import device_floor as floors
from loadtest.measure import scrape
from loadtest.measure import server_phases as phases
from serving.deploy.floor_here import why_not_measurable
from serving.endpoint import ServedEndpoint
from serving.protocol.names import REQUEST_PHASES

LATENCY = ":tensorflow:serving:request_latency"
PHASE = ":tensorflow:serving:embedded:request_phase_latency"
QUEUE = ":tensorflow:serving:batching_session:queuing_latency"


def histogram(name: str, labels: str, buckets: dict, total: float) -> list[str]:
    """Lines of one labelled histogram; `buckets` maps le -> cumulative count (the last is the count)."""
    lines = [f'{name}_bucket{{{labels}le="{le}"}} {n}' for le, n in buckets.items()]
    return lines + [f"{name}_count{{{labels.rstrip(',')}}} {max(buckets.values())}",
                    f"{name}_sum{{{labels.rstrip(',')}}} {total}"]


def page(requests: dict, request_sum: float, by_phase: dict[str, tuple[dict, float]] | None = None,
         queue: tuple[dict, float] | None = None, floor: dict | None = None) -> str:
    lines = [f"# TYPE {LATENCY} histogram", *histogram(LATENCY, 'model_name="mnist",API="predict",', requests,
                                                         request_sum)]
    if by_phase is not None:
        lines.append(f"# TYPE {PHASE} histogram")
        for name, (buckets, total) in by_phase.items():
            lines += histogram(PHASE, f'model_name="mnist",API="predict",phase="{name}",', buckets, total)
    if queue is not None:
        lines += [f"# TYPE {QUEUE} histogram", *histogram(QUEUE, 'thread_pool_name="p",', *queue)]
    if floor is not None:
        info = ":tensorflow:serving:embedded:server_info"
        lines += [f"# TYPE {info} gauge", f'{info}{{device="gpu",device_name="Test GPU",runtime="jax"}} 1.0']
        for metric, values in floor.items():
            lines.append(f"# TYPE :tensorflow:serving:embedded:{metric} gauge")
            lines += [f":tensorflow:serving:embedded:{metric}{{batch_size=\"{b}\"}} {v}" for b, v in values.items()]
    return "\n".join(lines) + "\n"


def idle_phases() -> dict:
    return {p: ({"100.0": 0, "1000.0": 0, "+Inf": 0}, 0.0) for p in REQUEST_PHASES}


def test_bucket_quantile_is_the_upper_bound_of_the_bucket_holding_it():
    deltas = {100.0: 90.0, 1000.0: 9.0, 10000.0: 1.0}  # 100 observations
    assert scrape.bucket_quantile(deltas, 0.99, 100) == 1000.0  # the 99th is the last of the 1000 bucket
    assert scrape.bucket_quantile(deltas, 0.5, 100) == 100.0
    assert scrape.bucket_quantile(deltas, 0.99, 101) is None  # too few to have a p99
    assert scrape.bucket_quantile({100.0: 50.0, float("inf"): 50.0}, 0.99, 1) is None  # above every bound


def test_each_phase_over_the_cells_window():
    before = scrape.parse(page({"1000.0": 10, "10000.0": 10, "+Inf": 10}, 5000.0, idle_phases()))
    during = idle_phases()
    # 200 requests, each decode 100 µs (all in le=100) and compute_infer 900 µs on average (197 in le=1000, 3 over it).
    during["decode"] = ({"100.0": 200, "1000.0": 200, "+Inf": 200}, 20000.0)
    during["compute_infer"] = ({"100.0": 0, "1000.0": 197, "+Inf": 200}, 180000.0)
    after = scrape.parse(page({"1000.0": 10, "10000.0": 210, "+Inf": 210}, 5000.0 + 200000.0, during))
    got = phases.server_phases(before, after, "embedded")
    assert got.request_latency.to_dict() == {"mean_us": 1000.0, "p99_us": 10000.0, "count": 200.0}
    assert got.phases["decode"].to_dict() == {"mean_us": 100.0, "p99_us": 100.0, "count": 200.0}
    assert got.phases["compute_infer"].to_dict() == {"mean_us": 900.0, "p99_us": None, "count": 200.0}  # p99 in +Inf
    assert got.phases["queue"].to_dict() == {"mean_us": None, "p99_us": None, "count": 0.0}  # no observations
    assert list(got.phases) == list(REQUEST_PHASES) and got.not_exported == () and got.note == ""
    assert sum(p.mean_us or 0 for p in got.phases.values()) == got.request_latency.mean_us


def test_tf_serving_records_what_it_exports_and_names_the_rest():
    before = scrape.parse(page({"+Inf": 0}, 0.0, queue=({"500.0": 0, "+Inf": 0}, 0.0)))
    after = scrape.parse(page({"+Inf": 50}, 100000.0, queue=({"500.0": 50, "+Inf": 50}, 15000.0)))
    got = phases.server_phases(before, after, "tfserving-container")
    assert got.request_latency.to_dict() == {"mean_us": 2000.0, "p99_us": None, "count": 50.0}  # 50 < 100: no p99
    assert got.to_dict()["phases"] == {"queue": {"mean_us": 300.0, "p99_us": None, "count": 50.0}}
    assert got.note == ("not exported by TF Serving: decode, validate, assemble, compute_input, compute_infer, "
                           "compute_output, deliver, encode, handoff")
    assert phases.server_phases(None, after, "tfserving-container") is None  # not scraped: nothing claimed (written {})


def test_the_floor_the_server_exported():
    text = page({"+Inf": 0}, 0.0, floor={"device_floor_images_per_second": {"1": 2000.0, "8": 12000.0},
                                         "device_floor_latency": {"1": 500.0, "8": 666.0},
                                         "device_round_trip_latency": {}})
    floor = floors.floor_from_snapshot(scrape.parse(text))
    assert floor.to_dict() == {"source": floors.FROM_METRICS, "device": "gpu", "device_name": "Test GPU",
                               "runtime": "jax", "round_trip_us": None,
                               "batches": [{"batch_size": 1, "latency_us": 500.0, "images_per_s": 2000.0},
                                           {"batch_size": 8, "latency_us": 666.0, "images_per_s": 12000.0}]}
    assert floors.floor_from_snapshot(scrape.parse(page({"+Inf": 0}, 0.0))) is None  # a server with none


CONTAINER = ServedEndpoint(name="cpu", kind="tfserving-container", device="cpu", device_name="Test CPU",
                           host="10.0.0.7", grpc_port=8500, rest_port=8501, model_name="mnist",
                           batching_profile="off", container="tfs-cpu")


def test_a_containers_floor_is_unknown_where_it_cannot_be_measured_here():
    assert floors.not_on_this_host(CONTAINER) == "the container runs on 10.0.0.7, not on this host"
    assert floors.not_on_this_host(replace(CONTAINER, host="127.0.0.1")) == ""
    assert why_not_measurable("cpu", None).startswith("TensorFlow does not import")
    assert why_not_measurable("gpu", 0) == "the container serves on a GPU that TensorFlow does not see from here"
    assert why_not_measurable("cpu", 0) == "" and why_not_measurable("gpu", 1) == ""
    source = floors.FloorSource()
    assert source.floor_for(CONTAINER, None).to_dict() == {"source": "unknown",
                                                           "note": "the container runs on 10.0.0.7, not on this host"}
    assert len(source._measured) == 1  # once per configuration, not per cell
    embedded = replace(CONTAINER, kind="embedded", container=None, rest_port=0)  # no server_info to ask
    assert source.floor_for(embedded, scrape.parse(page({"+Inf": 0}, 0.0))).note.startswith(
        "the server reported no device floor")


def test_a_containers_floor_sizes_cover_what_the_server_may_run():
    assert floors.container_floor_sizes({}) == (1, 8, 32, 64, 128, 256)
    assert floors.container_floor_sizes({"max_batch_size": 64, "allowed_batch_sizes": [8, 16, 64]}, (32,)) == (
        1, 8, 16, 32, 64)


GC = ":tensorflow:serving:embedded:gc_pause"


def test_garbage_collections_over_the_cells_window():
    young, full = 'generation="0",', 'generation="2",'
    gc_before = [f"# TYPE {GC} histogram", *histogram(GC, young, {"100.0": 5, "1000.0": 5, "+Inf": 5}, 200.0),
                 *histogram(GC, full, {"100.0": 0, "1000.0": 0, "+Inf": 0}, 0.0)]
    gc_after = [f"# TYPE {GC} histogram", *histogram(GC, young, {"100.0": 9, "1000.0": 9, "+Inf": 9}, 360.0),
                *histogram(GC, full, {"100.0": 0, "1000.0": 1, "+Inf": 1}, 800.0)]
    base = page({"1000.0": 0, "+Inf": 0}, 0.0, idle_phases())
    before = scrape.parse(base + "\n".join(gc_before) + "\n")
    after = scrape.parse(base + "\n".join(gc_after) + "\n")
    got = phases.server_phases(before, after, "embedded").gc_pauses
    # 4 young collections of 40 µs and one full one of 800 µs: 5 pauses, mean 192 µs, the slowest under 1000 µs.
    assert got.to_dict() == {"mean_us": 192.0, "p99_us": None, "count": 5.0, "max_us": 1000.0}
    assert phases.server_phases(before, before, "embedded").gc_pauses.count == 0.0
    plain = scrape.parse(base)
    assert phases.server_phases(plain, plain, "container").gc_pauses is None  # TF Serving exports none
