"""The pool's one metrics page: samples summed over the processes' pages, gauges at their largest."""

from __future__ import annotations

from serving.pool.metrics_sum import pool_gauges, sum_pages

PAGE_A = """# HELP :tensorflow:serving:request_count The total number of requests.
# TYPE :tensorflow:serving:request_count counter
:tensorflow:serving:request_count{model_name="mnist",status="OK"} 3
# HELP :tensorflow:serving:request_latency Distribution.
# TYPE :tensorflow:serving:request_latency histogram
:tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",model_name="mnist",le="10.0"} 1.0
:tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",model_name="mnist",le="+Inf"} 3.0
:tensorflow:serving:request_latency_count{API="Predict",entrypoint="GRPC",model_name="mnist"} 3.0
:tensorflow:serving:request_latency_sum{API="Predict",entrypoint="GRPC",model_name="mnist"} 40.5
# HELP :tensorflow:serving:embedded:server_info Info.
# TYPE :tensorflow:serving:embedded:server_info gauge
:tensorflow:serving:embedded:server_info{device_name="Xeon {8481C}",kind="embedded"} 1.0
"""

PAGE_B = """# HELP :tensorflow:serving:request_count The total number of requests.
# TYPE :tensorflow:serving:request_count counter
:tensorflow:serving:request_count{model_name="mnist",status="OK"} 4
:tensorflow:serving:request_count{model_name="mnist",status="INVALID_ARGUMENT"} 2
# HELP :tensorflow:serving:request_latency Distribution.
# TYPE :tensorflow:serving:request_latency histogram
:tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",model_name="mnist",le="10.0"} 0.0
:tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",model_name="mnist",le="+Inf"} 4.0
:tensorflow:serving:request_latency_count{API="Predict",entrypoint="GRPC",model_name="mnist"} 4.0
:tensorflow:serving:request_latency_sum{API="Predict",entrypoint="GRPC",model_name="mnist"} 100.25
# HELP :tensorflow:serving:embedded:server_info Info.
# TYPE :tensorflow:serving:embedded:server_info gauge
:tensorflow:serving:embedded:server_info{device_name="Xeon {8481C}",kind="embedded"} 1.0
# HELP :tensorflow:serving:embedded:device_floor_latency Floor.
# TYPE :tensorflow:serving:embedded:device_floor_latency gauge
:tensorflow:serving:embedded:device_floor_latency{batch_size="1"} 250.0
"""


def test_counters_and_histograms_are_summed_and_gauges_are_not():
    lines = sum_pages([PAGE_A, PAGE_B]).splitlines()
    assert ':tensorflow:serving:request_count{model_name="mnist",status="OK"} 7' in lines  # integers, no _total
    assert ':tensorflow:serving:request_count{model_name="mnist",status="INVALID_ARGUMENT"} 2' in lines
    assert (':tensorflow:serving:request_latency_bucket{API="Predict",entrypoint="GRPC",model_name="mnist",le="10.0"}'
            " 1.0") in lines
    assert ':tensorflow:serving:request_latency_count{API="Predict",entrypoint="GRPC",model_name="mnist"} 7.0' in lines
    assert ':tensorflow:serving:request_latency_sum{API="Predict",entrypoint="GRPC",model_name="mnist"} 140.75' in lines
    assert ':tensorflow:serving:embedded:server_info{device_name="Xeon {8481C}",kind="embedded"} 1.0' in lines
    assert ':tensorflow:serving:embedded:device_floor_latency{batch_size="1"} 250.0' in lines  # from the one page


def test_each_family_is_written_once_with_its_help_and_type():
    page = sum_pages([PAGE_A, PAGE_B, PAGE_A])
    assert page.count("# TYPE :tensorflow:serving:request_count counter") == 1
    assert page.count("# HELP :tensorflow:serving:request_latency Distribution.") == 1
    assert ':tensorflow:serving:request_count{model_name="mnist",status="OK"} 10' in page.splitlines()
    types = [line for line in page.splitlines() if line.startswith("# TYPE")]
    assert [t.split()[2] for t in types] == [":tensorflow:serving:request_count", ":tensorflow:serving:request_latency",
                                             ":tensorflow:serving:embedded:server_info",
                                             ":tensorflow:serving:embedded:device_floor_latency"]


def test_the_supervisors_own_families():
    text = pool_gauges(2, {"frontend": 1, "owner": 0}, "w", "r")
    assert text.splitlines()[2] == "w 2"
    assert 'r{role="frontend"} 1' in text and 'r{role="owner"} 0' in text
