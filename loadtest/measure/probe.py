"""One real Predict (a single digit, or one row of inputs made for the model), to tell a live server from
a dead one before and after a cell.

Not for: measuring (`loadtest.measure.locust_run`); the probe's latency is never recorded.
"""

from __future__ import annotations

import json
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from loadtest.evidence.vocab import Check, InputKind, Protocol
from loadtest.measure import plan as plans
from serving.endpoint import ServedEndpoint


@dataclass(frozen=True)
class Probe:
    ok: bool
    model_version: int | None
    error: str  # "" when ok

    def not_answering(self, target: ServedEndpoint) -> str:
        return f"server {target.name} at {target.grpc_target} is not answering ({self.error})"


class Prober:
    """Probes servers over the plan's protocol with the plan's sample digits."""

    def __init__(self, run: plans.RunSettings):
        from loadtest.load.client import Samples  # imports TensorFlow (slow): only when a sweep runs

        self.run = run
        self.samples = Samples.load(Path(run.samples)) if plans.input_kind(run) == InputKind.SAMPLES else None

    def probe(self, endpoint: ServedEndpoint, timeout_s: float = 5.0) -> Probe:
        if self.run.protocol == Protocol.REST:
            return probe_rest(endpoint, timeout_s)
        return self.probe_grpc(endpoint, timeout_s)

    def probe_grpc(self, endpoint: ServedEndpoint, timeout_s: float) -> Probe:
        from loadtest.load.client import GrpcPredictClient, input_source

        try:  # inputs made for any model come from the signature it reports: a model without it fails here
            source = self.samples or input_source(plans.input_kind(self.run), self.run.samples,
                                                  plans.input_options(self.run), endpoint.grpc_target,
                                                  endpoint.model_name, self.run.signature, timeout_s)
        except ValueError as exc:
            return Probe(False, None, str(exc))
        client = GrpcPredictClient(endpoint.grpc_target, endpoint.model_name, self.run.signature, source, 1,
                                   check=Check.SHAPE, timeout_s=timeout_s, variants=1)
        try:
            record = client.call(0)
        finally:
            client.close()
        return Probe(record.ok, client.model_version, "" if record.ok else f"{record.status}: {record.error}")


def probe_rest(endpoint: ServedEndpoint, timeout_s: float) -> Probe:
    """The REST model status page: live, and which version it serves."""
    url = f"{endpoint.rest_url}/v1/models/{endpoint.model_name}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            body = json.loads(response.read())
        versions = [int(v["version"]) for v in body.get("model_version_status", [])]
        return Probe(True, max(versions) if versions else None, "")
    except (OSError, ValueError, KeyError) as exc:
        return Probe(False, None, f"{type(exc).__name__}: {exc}")
