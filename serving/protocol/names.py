"""Names the server and the load test must agree on: RPC method, metrics page, metric names, ready line.

Each is spelled once here. The server writes them (`serving.server`), the deploy tools and the
load test read them (`serving.deploy.process`, `loadtest.load.client`, `loadtest.measure.scrape`),
and TF Serving itself uses the same spellings, so one client and one scraper work against both.

Not for: protocol messages (`serving.protocol.protos`), tensor encoding (`serving.protocol.tensors`)
or anything either side computes from these names.
"""

from __future__ import annotations

import re

# The gRPC method a Predict call invokes (tensorflow_serving/apis/prediction_service.proto).
PREDICT_METHOD = "/tensorflow.serving.PredictionService/Predict"

# TF Serving's default Prometheus path (PrometheusExporter::kPrometheusPath), on the REST port.
METRICS_PATH = "/monitoring/prometheus/metrics"

# TF Serving's metric names ('/' turned into ':' by its PrometheusExporter).
METRIC_PREFIX = ":tensorflow:serving:"
REQUEST_COUNT = ":tensorflow:serving:request_count"
REQUEST_LATENCY = ":tensorflow:serving:request_latency"
RUNTIME_LATENCY = ":tensorflow:serving:runtime_latency"
QUEUING_LATENCY = ":tensorflow:serving:batching_session:queuing_latency"
INPUT_BATCH_SIZE = ":tensorflow:serving:batching_session:input_batch_size"
PROCESSED_BATCH_SIZE = ":tensorflow:serving:batching_session:processed_batch_size"
PADDING_SIZE = ":tensorflow:serving:batching_session:padding_size"
WRAPPED_RUN_COUNT = ":tensorflow:serving:batching_session:wrapped_run_count"
SERVER_INFO = ":tensorflow:serving:embedded:server_info"  # the embedded server's own gauge; TF Serving has none

# The embedded server's own metrics (TF Serving has none of these). Per request, where its time went:
# a µs histogram per phase (label `phase`, one of REQUEST_PHASES), Triton's names where Triton has one
# (queue, compute_input, compute_infer, compute_output). A request's phases sum to its request_latency.
REQUEST_PHASE_LATENCY = ":tensorflow:serving:embedded:request_phase_latency"
REQUEST_PHASES = ("decode", "validate", "queue", "assemble", "compute_input", "compute_infer", "compute_output",
                  "deliver", "encode", "handoff")
# `handoff`: with --workers above 1 and a device owner (serving.pool), the frontend -> owner -> frontend hops
# (shared memory and a socket message each way); 0 in a server that runs the model in its own process.
# The device's own floor, measured once at start after warm-up: the model alone on its device per
# padded batch size (gauges labelled `batch_size`: median latency in µs, images/s) and the bare round
# trip of a trivial computation to the device and back (µs).
DEVICE_FLOOR_LATENCY = ":tensorflow:serving:embedded:device_floor_latency"
DEVICE_FLOOR_IMAGES = ":tensorflow:serving:embedded:device_floor_images_per_second"
DEVICE_ROUND_TRIP = ":tensorflow:serving:embedded:device_round_trip_latency"
# A pooled server's (serving.pool) frontend processes up now, and how often the supervisor restarted one
# (label `role`: frontend or owner); the names say workers, as `--workers` does.
POOL_FRONTENDS = ":tensorflow:serving:embedded:workers"
POOL_RESTARTS = ":tensorflow:serving:embedded:worker_restarts"
# Each Python garbage collection's pause in the server process (µs histogram, label `generation`).
GC_PAUSE = ":tensorflow:serving:embedded:gc_pause"

# The same names without their prefix, as a scraper that accepts any prefix matches them (name.endswith).
PROCESSED_BATCH_SIZE_SUFFIX = "batching_session:processed_batch_size"
QUEUING_LATENCY_SUFFIX = "batching_session:queuing_latency"
REQUEST_LATENCY_SUFFIX = "serving:request_latency"
REQUEST_COUNT_SUFFIX = "serving:request_count"
SERVER_INFO_SUFFIX = "embedded:server_info"
REQUEST_PHASE_LATENCY_SUFFIX = "embedded:request_phase_latency"
DEVICE_FLOOR_LATENCY_SUFFIX = "embedded:device_floor_latency"
DEVICE_FLOOR_IMAGES_SUFFIX = "embedded:device_floor_images_per_second"
DEVICE_ROUND_TRIP_SUFFIX = "embedded:device_round_trip_latency"
GC_PAUSE_SUFFIX = "embedded:gc_pause"

# The one stdout line the embedded server prints once it serves; harnesses wait for it and parse it.
# `runtime` (what runs the model: "tensorflow", "jax", "none (null backend)") and `runtime_versions`
# ("jax=0.10.2,jaxlib=0.10.2") come last and are optional, so lines from older servers still parse
# (they parse to None).
READY_PREFIX = "serving ready "
READY_RE = re.compile(
    r"serving ready kind=(?P<kind>\S+) grpc=(?P<grpc>\S+) rest=(?P<rest>\S+) model=(?P<model>\S+) "
    r'version=(?P<version>\S+) device=(?P<device>\S+) device_name="(?P<device_name>[^"]*)" '
    r"batching=(?P<batching>\S+)"
    r'(?: runtime="(?P<runtime>[^"]*)" runtime_versions=(?P<runtime_versions>\S*))?'
    r"(?: workers=(?P<workers>\d+))?")


def format_ready_line(*, kind: str, grpc: str, rest: str, model: str, version: int, device: str,
                      device_name: str, batching: str, runtime: str, runtime_versions: str, workers: int = 1) -> str:
    """The ready line for these fields (`grpc`/`rest` are host:port; `workers`: gRPC frontend processes)."""
    return (f"{READY_PREFIX}kind={kind} grpc={grpc} rest={rest} model={model} version={version} "
            f'device={device} device_name="{device_name}" batching={batching} '
            f'runtime="{runtime}" runtime_versions={runtime_versions} workers={workers}')


def parse_ready_line(line: str) -> dict[str, str]:
    """The fields of a ready line; ValueError for any other line."""
    match = READY_RE.match(line.strip())
    if not match:
        raise ValueError(f"not a ready line: {line!r}")
    return match.groupdict()
