"""The device floor a cell records: what the model alone does on the serving device, per padded batch size.

The embedded server measures its floor once at start, after warm-up (`serving.server.handling.floor`), and
reports it in its `server_info` (REST model metadata) and as gauges on its metrics page
(`serving.protocol.names.DEVICE_FLOOR_*`, labelled `batch_size`). `FloorSource` asks the server_info
once per server and falls back to the gauges of the scrape each cell already makes. A TF Serving
container reports none, so for one the same SavedModel is measured on this host, in a child process (`python -m
serving.deploy.floor_here`: TensorFlow's runtime is never loaded in the load generator's own process), with the
project's own `savedmodel` runtime, but only where that says something about the container's device: the
container runs on this host, TensorFlow imports, and a GPU container's GPU is visible to it. That happens once per
configuration, not once per cell. Anywhere else, or where the child fails or overruns its time, the record says
`{"source": "unknown", "note": why}`.

The record's `device_floor` (`loadtest.evidence.floor_record.DeviceFloorRecord`) is
`serving.server.handling.floor.DeviceFloor.as_dict()`: `{"source", "device", "runtime", "batches": [{"batch_size",
"latency_us", "latency_p99_us", "images_per_s", "runs"}], "round_trip_us", "round_trip_note", "budget_s", ...}`
(from the gauges: batch size, latency and images/s only), with every key the server wrote.

Not for: judging a result against its floor (`loadtest.report.answers.bound`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.evidence.floor_record import DeviceFloorRecord
from loadtest.measure.scrape import Snapshot
from model_export.provenance import REPO
from serving.endpoint import ServedEndpoint, ServerKind
from serving.protocol.names import DEVICE_FLOOR_IMAGES_SUFFIX as FLOOR_IMAGES
from serving.protocol.names import DEVICE_FLOOR_LATENCY_SUFFIX as FLOOR_LATENCY
from serving.protocol.names import DEVICE_ROUND_TRIP_SUFFIX as ROUND_TRIP

UNKNOWN = "unknown"
FROM_METRICS = "embedded server at start, after warm-up (its metrics page)"
MEASURED_HERE = "measured on this host beside the load generator: the container's SavedModel, savedmodel backend"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1", "0.0.0.0")
FLOOR_BUDGET_S = 20.0  # the measurement of a container's floor, all batch sizes together
CHILD_START_S = 120.0  # the child's TensorFlow import and model load, on top of the budget, before it is killed
DEFAULT_BATCHES = (1, 8, 32, 64, 128, 256)


def unknown(note: str) -> DeviceFloorRecord:
    return DeviceFloorRecord(source=UNKNOWN, note=note)


def _labels(text: str) -> dict[str, str]:
    """`batch_size=8,model_name=mnist` (scrape's label text) back into a dict."""
    return dict(part.split("=", 1) for part in text.split(",") if "=" in part)


def floor_from_snapshot(snapshot: Snapshot | None) -> DeviceFloorRecord | None:
    """The floor the embedded server exported on its metrics page; None when it exported none."""
    if snapshot is None:
        return None
    images = {_labels(k).get("batch_size"): v for k, v in snapshot.counters.get(FLOOR_IMAGES, {}).items()}
    latency = {_labels(k).get("batch_size"): v for k, v in snapshot.counters.get(FLOOR_LATENCY, {}).items()}
    batches = [{"batch_size": int(b), "latency_us": latency.get(b), "images_per_s": v}
               for b, v in images.items() if b and b.isdigit() and v == v and v > 0]  # v == v: not NaN
    if not batches:
        return None
    trip = [v for v in snapshot.counters.get(ROUND_TRIP, {}).values() if v == v and v > 0]
    return DeviceFloorRecord.from_dict({
        "source": FROM_METRICS, "device": snapshot.info.get("device", ""),
        "device_name": snapshot.info.get("device_name", ""), "runtime": snapshot.info.get("runtime", ""),
        "batches": sorted(batches, key=lambda e: e["batch_size"]), "round_trip_us": trip[0] if trip else None})


def container_floor_sizes(batching: dict, extra: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The padded batch sizes worth measuring for a container's configuration (from its batching parameters): its
    allowed batch sizes and maximum (batching on), else the defaults, and any request batch sizes asked for (the
    embedded server picks its own: `serving.server.handling.runner.floor_batch_sizes`)."""
    if batching.get("max_batch_size"):
        sizes = {int(s) for s in batching.get("allowed_batch_sizes") or ()} | {int(batching["max_batch_size"])}
    else:
        sizes = set(DEFAULT_BATCHES)
    return tuple(sorted({1, *sizes, *extra}))


def not_on_this_host(target: ServedEndpoint) -> str:
    """Why a container's floor cannot be measured on this host ("" when the container runs here)."""
    if target.host not in LOCAL_HOSTS:
        return f"the container runs on {target.host}, not on this host"
    return ""


def _latest_version(base: Path) -> Path | None:
    versions = sorted((int(p.name), p) for p in base.glob("*") if p.name.isdigit() and p.is_dir())
    return versions[-1][1] if versions else None


def server_info_floor(rest_url: str, model_name: str, timeout_s: float = 3.0) -> dict | None:
    """`server_info["device_floor"]` from the embedded server's REST model metadata; None when it has none."""
    if not rest_url:
        return None
    try:
        with urllib.request.urlopen(f"{rest_url.rstrip('/')}/v1/models/{model_name}/metadata",
                                    timeout=timeout_s) as response:
            floor = json.loads(response.read().decode()).get("server_info", {}).get("device_floor")
    except (OSError, ValueError, AttributeError):
        return None
    return floor if isinstance(floor, dict) else None


def measure_here(target: ServedEndpoint, base: Path, batch_sizes: tuple[int, ...]) -> DeviceFloorRecord:
    """A container's SavedModel measured alone on this host on its device, in a child process; `unknown` with why
    not (the container elsewhere, no SavedModel, TensorFlow missing or blind to its GPU, the child failed)."""
    why = not_on_this_host(target)
    version = _latest_version(base)
    if not why and version is None:
        why = f"no SavedModel version under {base}"
    if why:
        return unknown(why)
    assert version is not None
    line = run_floor_child([sys.executable, "-m", "serving.deploy.floor_here", "--model-name", target.model_name,
                            "--version-dir", str(version), "--device", target.device,
                            "--batch-sizes", ",".join(map(str, batch_sizes)), "--budget-s", str(FLOOR_BUDGET_S),
                            "--source", MEASURED_HERE], FLOOR_BUDGET_S + CHILD_START_S)
    if "floor" in line:
        return DeviceFloorRecord.from_dict(line["floor"])
    return unknown(str(line.get("unknown") or "the floor's process printed no floor"))


def run_floor_child(command: list[str], timeout_s: float) -> dict:
    """The child's JSON line; `{"unknown": why}` where it overran, failed or printed none."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"unknown": f"measuring the container's model here did not finish within {timeout_s:.0f} s (killed)"}
    lines = done.stdout.strip().splitlines()
    try:
        parsed = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        tail = " | ".join(done.stderr.strip().splitlines()[-2:])[-300:] or "no output"
        return {"unknown": f"measuring the container's model here failed (exit {done.returncode}: {tail})"}
    return parsed


@dataclass
class FloorSource:
    """Each cell's `device_floor`: the server's own, else a container's measured here once per configuration."""

    models_base: Path | None = None  # <models_dir>/<model name>; None: the serving config's
    _measured: dict = field(default_factory=dict)

    def floor_for(self, target: ServedEndpoint, after: Snapshot | None) -> DeviceFloorRecord | None:
        """The floor of the server `target` names, `after` its latest scrape (None, written {}, where the server
        reported an empty one)."""
        if target.kind == ServerKind.CONTAINER:
            key: tuple = ("measured", target.name, target.container, target.device, target.batching_profile,
                          repr(sorted(target.batching.items())))
            if key not in self._measured:
                self._measured[key] = self._measure(target)
            return self._measured[key]
        key = ("reported", target.name, target.pid, target.grpc_target, target.batching_profile)
        if key in self._measured:
            return self._measured[key]
        reported = server_info_floor(target.rest_url, target.model_name)
        if reported is not None:  # measured once at the server's start: ask once
            self._measured[key] = DeviceFloorRecord.from_dict(reported) if reported else None
            return self._measured[key]
        from_gauges = floor_from_snapshot(after)
        if from_gauges is not None:
            return from_gauges
        return unknown("the server reported no device floor (neither in its server_info nor on its metrics page: "
                       "a server from before it measured one, or not the embedded server)")

    def _measure(self, target: ServedEndpoint) -> DeviceFloorRecord:
        base = self.models_base
        if base is None:
            from serving.deploy.config import load_config

            base = load_config().model.base_path
        try:
            return measure_here(target, base, container_floor_sizes(target.batching))
        except Exception as exc:  # noqa: BLE001 - a floor that cannot be measured is unknown, never a failed cell
            return unknown(f"measuring the container's model here failed: {exc}")
