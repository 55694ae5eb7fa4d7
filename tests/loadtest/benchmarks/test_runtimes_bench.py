"""The runtimes bench's printed summary: a row per runtime x batching, and JAX/TensorFlow ratios computed by hand."""

from __future__ import annotations

from loadtest.benchmarks.serving_path.runtime_compare import RuntimeRow, RuntimesSummary, format_summary


def row(backend: str, runtime: str, batching: str, b1: float, b64: float) -> RuntimeRow:
    return RuntimeRow(backend=backend, runtime=runtime, runtime_versions=f"{runtime}=1.0", batching=batching,
                      b1_images_per_s=b1, b1_p99_latency_ms=10.0, b64_images_per_s=b64, b64_p99_latency_ms=5.0,
                      server_cpu_us_per_image_b64=40.0, errors=0, wrong_answers=0)


def test_summary_prints_each_server_and_the_ratios():
    summary = RuntimesSummary(
        rows=(row("savedmodel", "tensorflow", "off", 2000, 20000), row("savedmodel", "tensorflow", "on", 4000, 20000),
              row("jax", "jax", "off", 3000, 30000), row("jax", "jax", "on", 2000, 25000)),
        device="cpu", device_name="AMD EPYC", server_cpu="0", client_cpu="1", duration_s=3.0,
        utc="2026-11-23T00:00:00Z")
    text = format_summary(summary)
    assert "jax / tensorflow, batching off: b1 1.50x, b64 1.50x" in text
    assert "jax / tensorflow, batching on: b1 0.50x, b64 1.25x" in text
    assert "30,000" in text and "jax: jax=1.0; tensorflow: tensorflow=1.0" in text
