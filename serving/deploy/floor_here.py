"""A TF Serving container's device floor, measured in the calling process: the container reports none.

The container's SavedModel is loaded by the embedded server's default runtime (TensorFlow, as in the
container) on the container's device and measured alone (`serving.server.handling.floor.measure_floor`), with that
runtime's trivial round trip. The load generator calls this where the container runs on its own host.

Not for: deciding whether measuring here says anything about the container (`loadtest.measure.device_floor`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from serving.server.handling.floor import measure_floor
from serving.server.runtimes import DEFAULT_BACKEND, runtime_of
from serving.server.runtimes.model_spec import DEFAULT_SIGNATURE, BackendOptions


def savedmodel_floor(model_name: str, version_dir: Path, device: str, batch_sizes: Sequence[int], budget_s: float,
                     source: str) -> dict:
    """The SavedModel at `version_dir` alone on `device` per batch size, within `budget_s` (`DeviceFloor.as_dict`)."""
    runtime = runtime_of(DEFAULT_BACKEND)
    model = runtime.load(model_name, int(version_dir.name), version_dir, BackendOptions(device=device))
    try:
        trip, note = runtime.round_trip(device)
        floor = measure_floor(model, DEFAULT_SIGNATURE, tuple(batch_sizes), budget_s, trip, device=device,
                              runtime=runtime.name, round_trip_note=note, source=source)
    finally:
        model.unload()
    return floor.as_dict()


__all__ = ["savedmodel_floor"]
