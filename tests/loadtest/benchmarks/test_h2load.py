"""h2load, the C reference: the gRPC body it posts, its command line, and reading its summary back."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtest.benchmarks import h2load

# Printed by h2load nghttp2/1.52.0 (Debian's nghttp2-client) against the embedded server, 1 s run.
SAMPLE = """
finished in 1.20s, 4050.00 req/s, 613.09KB/s
requests: 4050 total, 4050 started, 4050 done, 4050 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 4050 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 613.09KB (627801) total, 627.38KB (642434) headers (space savings 24.85%), 0B (0) data
                     min         max         mean         sd        +/- sd
time for request:      113us      7.76ms       242us       391us    97.53%
time for connect:        0us         0us         0us         0us     0.00%
"""


def test_grpc_frame_is_the_length_prefixed_message():
    assert h2load.grpc_frame(b"abc") == b"\x00\x00\x00\x00\x03abc"
    assert h2load.grpc_frame(b"x" * 300)[:5] == b"\x00\x00\x00\x01\x2c"


def test_summary_is_read_with_its_units():
    result = h2load.parse_output(SAMPLE, cpu_s=0.081)
    assert (result.requests, result.succeeded, result.failed, result.rps) == (4050, 4050, 0, 4050.0)
    assert (result.min_ms, result.max_ms, result.mean_ms, result.sd_ms) == (0.113, 7.76, 0.242, 0.391)
    assert result.cpu_us_per_request == pytest.approx(20.0)
    broken = SAMPLE.replace("4050 succeeded, 0 failed, 0 errored", "4040 succeeded, 7 failed, 3 errored")
    assert h2load.parse_output(broken).failed == 10


def test_no_summary_is_an_error_naming_what_was_printed():
    with pytest.raises(h2load.H2loadError, match="printed no summary"):
        h2load.parse_output("connect failed\n")


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load is not installed (make h2load)")
def test_command_posts_grpc_to_the_predict_method(tmp_path: Path):
    command = h2load.h2load_command("127.0.0.1:8500", tmp_path / "b.bin", duration_s=5, warmup_s=0.5, rps=100,
                                    cpu="1")
    assert command[:3] == ["taskset", "-c", "1"] and command[-1] == \
        "http://127.0.0.1:8500/tensorflow.serving.PredictionService/Predict"
    joined = " ".join(command)
    assert "content-type: application/grpc" in joined and "te: trailers" in joined
    assert "--duration 5000ms" in joined and "--warm-up-time 500ms" in joined and "--rps 100" in joined
    assert "--rps" not in " ".join(h2load.h2load_command("h:1", tmp_path / "b", duration_s=1, warmup_s=1))


def test_rounds_are_compared_pairwise_and_summarised_with_their_range():
    from loadtest.benchmarks.reference import differences, spread

    assert differences([0.50, 0.47, 0.52], [0.25, 0.24, 0.26]) == pytest.approx([0.25, 0.23, 0.26])
    assert spread([0.25, 0.23, 0.26]) == "0.250 ms (0.230–0.260)"
    assert spread([80.0, 95.5, 120.0], "µs", 0) == "96 µs (80–120)"
