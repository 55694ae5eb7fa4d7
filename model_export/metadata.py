"""A model version's `metadata.json`: its name, the key naming the TensorFlow that wrote the version, reading it back.

The export (`model_export.export`) writes `<model>/<version>/metadata.json`; among its keys,
`tensorflow_version` is the TensorFlow that wrote the SavedModel. A server older than that may
not know every op the SavedModel uses, so the launcher, `mnist-bench k8s` and the report read it
back here and compare it with the server's (`serving.deploy.versions`). A version exported before
a key existed, or copied in by hand without the file, reads as unknown (None), never as a guess.

Not for: writing the export (`model_export.export`) or judging servers (`serving.deploy.versions`).
"""

from __future__ import annotations

import json
from pathlib import Path

METADATA_FILE = "metadata.json"
TENSORFLOW_VERSION = "tensorflow_version"  # the key: `tf.__version__` of the process that wrote the SavedModel


def read_metadata(version_dir: Path) -> dict:
    """The version's metadata; {} when the file is missing, unreadable or not a JSON object."""
    try:
        raw = json.loads((Path(version_dir) / METADATA_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return raw if isinstance(raw, dict) else {}


def tensorflow_version(version_dir: Path) -> str | None:
    """The TensorFlow that wrote this model version ("2.21.0"); None when its metadata does not say."""
    value = read_metadata(version_dir).get(TENSORFLOW_VERSION)
    return value if isinstance(value, str) and value.strip() else None


def latest_version_dir(base: Path) -> Path | None:
    """The highest-numbered version directory under `base` (`<models_dir>/<model>`): the one TF Serving's
    default version policy serves; None when there is none."""
    if not Path(base).is_dir():
        return None
    versions = [(int(p.name), p) for p in Path(base).iterdir() if p.name.isdigit() and p.is_dir()]
    return max(versions)[1] if versions else None
