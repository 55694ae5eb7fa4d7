"""`make bench-loadgen`'s tool ceiling (`loadtest.benchmarks.tool_ceiling_bench`), short: the null server on core 0,
one Locust process on core 1, at request batch 1 and 32, each beside h2load against the same server."""

from __future__ import annotations

import re
import shutil

import pytest

from loadtest.benchmarks import tool_ceiling_bench
from loadtest.benchmarks.loadgen import LoadgenOptions

pytestmark = pytest.mark.integration

LINE = re.compile(r"request batch +(\d+): (ours|h2load) +([\d,]+) req/s, "
                  r"CPU a request: \w+ +(\d+) µs, server +(\d+) µs")


@pytest.mark.skipif(shutil.which("h2load") is None, reason="h2load (Debian's nghttp2-client) not installed")
def test_each_request_batch_reads_req_s_and_cpu_a_request_on_both_sides_beside_h2load(exported_model, tmp_path):
    lines: list[str] = []
    options = LoadgenOptions(model_base_path=exported_model.base_path, samples=exported_model.samples_path,
                             seconds=1.5)
    tool_ceiling_bench.run(options, tmp_path, lines.append)
    found = [LINE.search(line) for line in lines[1:]]
    assert all(found), lines
    rows = [(int(m[1]), m[2], float(m[3].replace(",", "")), int(m[4]), int(m[5])) for m in found if m]
    assert [(batch, who) for batch, who, *_ in rows] == [(1, "ours"), (1, "h2load"), (32, "ours"), (32, "h2load")]
    assert all(rps > 0 and client_us > 0 and server_us > 0 for *_, rps, client_us, server_us in rows), rows
