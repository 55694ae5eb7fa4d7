"""Server-side figures from two scrapes of a TF-Serving-style Prometheus page."""

from __future__ import annotations

import math

from loadtest.measure import scrape


def page(batches: dict, queue_sum: float, queue_count: int, requests_ok: int) -> str:
    """A page in the embedded server's (= TF Serving's) names; `batches` maps le -> cumulative count."""
    name = ":tensorflow:serving:batching_session:processed_batch_size"
    lines = [f"# TYPE {name} histogram"]
    lines += [f'{name}_bucket{{le="{le}"}} {count}' for le, count in batches.items()]
    total = max(batches.values())
    lines += [f"{name}_count {total}", f"{name}_sum {sum_of(batches)}"]
    queue = ":tensorflow:serving:batching_session:queuing_latency"
    lines += [f"# TYPE {queue} histogram", f'{queue}_bucket{{thread_pool_name="p",le="+Inf"}} {queue_count}',
              f'{queue}_count{{thread_pool_name="p"}} {queue_count}',
              f'{queue}_sum{{thread_pool_name="p"}} {queue_sum}']
    count = ":tensorflow:serving:request_count"
    lines += [f"# TYPE {count} counter", f'{count}{{model_name="mnist",status="OK"}} {requests_ok}']
    info = ":tensorflow:serving:embedded:server_info"
    lines += [f"# TYPE {info} gauge",
              f'{info}{{batching_profile="cpu",device="cpu",device_name="AMD EPYC",kind="embedded"}} 1.0']
    return "\n".join(lines) + "\n"


def sum_of(batches: dict) -> float:
    # Every batch in these pages has exactly the size of its bucket's bound: le=1 -> 1, le=2 -> 2, le=4 -> 4.
    sizes = {"1.0": 1, "2.0": 2, "4.0": 4}
    total, below = 0.0, 0
    for le, cumulative in batches.items():
        if le in sizes:
            total += (cumulative - below) * sizes[le]
            below = cumulative
    return total


def test_cell_figures_are_the_deltas_between_scrapes():
    before = scrape.parse(page({"1.0": 4, "2.0": 4, "4.0": 4, "+Inf": 4}, 1000.0, 4, 10))
    # During the cell: 2 batches of 1, 3 of 2, 1 of 4 -> 12 images in 6 batches, mean 2.0;
    # 6 queued tasks that waited 3000 µs in all -> 500 µs mean.
    after = scrape.parse(page({"1.0": 6, "2.0": 9, "4.0": 10, "+Inf": 10}, 4000.0, 10, 16))
    figures = scrape.cell_figures(before, after)
    assert figures.batch_size_mean == 2.0
    assert figures.batch_sizes == {"1": 2.0, "2": 3.0, "4": 1.0}
    assert figures.queue_delay_mean_us == 500.0
    assert figures.scrape.request_count == {"model_name=mnist,status=OK": 6.0}
    assert figures.scrape.server_info["device_name"] == "AMD EPYC"


def test_unscraped_server_gives_empty_figures():
    figures = scrape.cell_figures(None, None)
    assert figures.batch_size_mean is None and figures.batch_sizes == {} and figures.queue_delay_mean_us is None
    idle = scrape.parse(page({"1.0": 0, "+Inf": 0}, 0.0, 0, 0))
    assert scrape.cell_figures(idle, idle).batch_size_mean is None


def test_scrape_of_an_unreachable_server_is_none():
    assert scrape.scrape("http://127.0.0.1:9") is None
    assert scrape.scrape("") is None


def test_prometheus_bucket_deltas_and_means():
    # Cumulative buckets le=1,2,+Inf: before 2,3,3; after 5,9,10 -> during the cell 3,6,7 cumulative,
    # i.e. 3 batches of size <=1, 3 of size 2, 1 larger.
    before = {1.0: 2.0, 2.0: 3.0, math.inf: 3.0}
    after = {1.0: 5.0, 2.0: 9.0, math.inf: 10.0}
    assert scrape.histogram_bucket_deltas(before, after) == {1.0: 3.0, 2.0: 3.0, math.inf: 1.0}
    assert scrape.histogram_bucket_deltas({}, {4.0: 2.0, math.inf: 2.0}) == {4.0: 2.0}
    assert scrape.mean_from_sums(10.0, 40.0, 3.0, 9.0) == 5.0
    assert scrape.mean_from_sums(10.0, 10.0, 3.0, 3.0) is None
