"""A TF Serving container's device floor, measured on the container's host in a process of its own.

The container reports none. Its SavedModel is loaded by the embedded server's default runtime (TensorFlow, as in the
container) on the container's device and measured alone (`serving.server.handling.floor.measure_floor`), with that
runtime's trivial round trip. The load generator runs this module as a child process
(`python -m serving.deploy.floor_here ...`): TensorFlow's runtime (~4 s to import, ~500 MB) is loaded there, never
in the load generator's own process, which reads TensorFlow's generated protos only
(`serving.protocol.generated`). The child prints one JSON line: `{"floor": DeviceFloor.as_dict()}`, or
`{"unknown": why}` where measuring here would say nothing about the container (TensorFlow does not import, or a GPU
container's GPU is not visible to it).

Not for: deciding whether the container runs on this host (`loadtest.measure.device_floor`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

NO_TENSORFLOW = ("TensorFlow does not import in the load generator's environment, so the container's model could "
                 "not be measured alone here")
GPU_NOT_SEEN = "the container serves on a GPU that TensorFlow does not see from here"


def why_not_measurable(device: str, gpus: int | None) -> str:
    """Why this host's TensorFlow cannot stand in for the container's device ("" when it can); `gpus`: the GPUs
    TensorFlow sees, None when it does not import."""
    if gpus is None:
        return NO_TENSORFLOW
    if device == "gpu" and gpus == 0:
        return GPU_NOT_SEEN
    return ""


def tensorflow_gpus() -> int | None:
    """The GPUs TensorFlow sees here; None when TensorFlow does not import."""
    try:
        import tensorflow as tf
    except Exception:  # noqa: BLE001 - any import failure means the same: no TensorFlow here
        return None
    return len(tf.config.list_physical_devices("GPU"))


def savedmodel_floor(model_name: str, version_dir: Path, device: str, batch_sizes: Sequence[int], budget_s: float,
                     source: str) -> dict:
    """The SavedModel at `version_dir` alone on `device` per batch size, within `budget_s` (`DeviceFloor.as_dict`)."""
    from serving.server.handling.floor import measure_floor
    from serving.server.runtimes import DEFAULT_BACKEND, runtime_of
    from serving.server.runtimes.model_spec import DEFAULT_SIGNATURE, BackendOptions

    runtime = runtime_of(DEFAULT_BACKEND)
    model = runtime.load(model_name, int(version_dir.name), version_dir, BackendOptions(device=device))
    try:
        trip, note = runtime.round_trip(device)
        floor = measure_floor(model, DEFAULT_SIGNATURE, tuple(batch_sizes), budget_s, trip, device=device,
                              runtime=runtime.name, round_trip_note=note, source=source)
    finally:
        model.unload()
    return floor.as_dict()


def floor_line(model_name: str, version_dir: Path, device: str, batch_sizes: Sequence[int], budget_s: float,
               source: str) -> dict:
    """What the child prints: the floor, or why it is unknown."""
    why = why_not_measurable(device, tensorflow_gpus())
    if why:
        return {"unknown": why}
    return {"floor": savedmodel_floor(model_name, version_dir, device, batch_sizes, budget_s, source)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m serving.deploy.floor_here", description=__doc__.splitlines()[0])
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--version-dir", required=True, type=Path)
    parser.add_argument("--device", required=True, choices=("cpu", "gpu"))
    parser.add_argument("--batch-sizes", required=True, help="comma-separated padded batch sizes")
    parser.add_argument("--budget-s", required=True, type=float)
    parser.add_argument("--source", required=True, help="what the record's `source` says measured it")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.batch_sizes.split(",") if s]
    line = floor_line(args.model_name, args.version_dir, args.device, sizes, args.budget_s, args.source)
    print(json.dumps(line), flush=True)
    return 0


__all__ = ["floor_line", "savedmodel_floor", "why_not_measurable"]


if __name__ == "__main__":
    sys.exit(main())
