"""serving/protocol/names.py: the ready line the server writes is the one harnesses parse."""

from __future__ import annotations

import pytest

from serving.protocol import names


def test_ready_line_round_trips():
    line = names.format_ready_line(kind="embedded", grpc="127.0.0.1:8500", rest="127.0.0.1:8501", model="mnist",
                                   version=3, device="cpu", device_name="Intel(R) Xeon(R) 8481C", batching="on",
                                   runtime="jax", runtime_versions="jax=0.10.2,jaxlib=0.10.2")
    assert line.startswith(names.READY_PREFIX)
    assert names.parse_ready_line(line + "\n") == {
        "kind": "embedded", "grpc": "127.0.0.1:8500", "rest": "127.0.0.1:8501", "model": "mnist", "version": "3",
        "device": "cpu", "device_name": "Intel(R) Xeon(R) 8481C", "batching": "on",
        "runtime": "jax", "runtime_versions": "jax=0.10.2,jaxlib=0.10.2", "workers": "1"}


def test_ready_line_of_an_older_server_parses_without_a_runtime():
    line = ('serving ready kind=embedded grpc=127.0.0.1:8500 rest=127.0.0.1:8501 model=mnist version=3 device=cpu '
            'device_name="AMD EPYC" batching=off')
    fields = names.parse_ready_line(line)
    assert fields["batching"] == "off" and fields["runtime"] is None and fields["runtime_versions"] is None


def test_null_runtime_with_spaces_and_no_versions_round_trips():
    line = names.format_ready_line(kind="embedded", grpc="h:1", rest="h:2", model="m", version=1, device="cpu",
                                   device_name="x", batching="off", runtime="none (null backend)", runtime_versions="")
    fields = names.parse_ready_line(line)
    assert fields["runtime"] == "none (null backend)" and fields["runtime_versions"] == ""


def test_other_lines_are_not_ready_lines():
    with pytest.raises(ValueError, match="not a ready line"):
        names.parse_ready_line("serving starting")


def test_metric_suffixes_are_the_ends_of_the_full_names():
    for full, suffix in ((names.PROCESSED_BATCH_SIZE, names.PROCESSED_BATCH_SIZE_SUFFIX),
                         (names.QUEUING_LATENCY, names.QUEUING_LATENCY_SUFFIX),
                         (names.REQUEST_LATENCY, names.REQUEST_LATENCY_SUFFIX),
                         (names.REQUEST_COUNT, names.REQUEST_COUNT_SUFFIX),
                         (names.SERVER_INFO, names.SERVER_INFO_SUFFIX)):
        assert full.startswith(names.METRIC_PREFIX) and full.endswith(suffix)
