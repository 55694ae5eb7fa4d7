"""The report's note on versions: did a TensorFlow at least as new as the one that wrote each model version serve it?

From the records alone where they carry both sides: the server's versions (`ServerLabel.versions`:
a TF Serving image's tag, or the embedded server's TensorFlow) and the TensorFlow that wrote the
model version it served (`model_tensorflow`, recorded by the launcher). Records made before the
launcher recorded it fall back to the version's `metadata.json` under the models directory the
run's plan names, when that directory is here; otherwise the note says the model's TensorFlow is
unknown. Silent when every pair matches; servers that load no SavedModel (the JAX and null
backends) are not checked.

Not for: the comparison itself (`serving.deploy.versions`) or reading metadata (`model_export.metadata`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from loadtest.evidence.records import CellResult
from model_export.metadata import METADATA_FILE, tensorflow_version
from model_export.provenance import REPO
from serving.deploy.versions import MODEL_TENSORFLOW, gap_warning, server_tensorflow

DEFAULT_MODELS_DIR = "models"  # the serving config's default `models_dir`, relative to the repository root


def plan_models_dir(cell: CellResult) -> Path | None:
    """The models directory the run's plan launched servers from; None where the record does not say."""
    launch = cell.provenance.launch()
    if not isinstance(launch.get("models_dir"), str):
        return None
    root = Path(launch["models_dir"] or DEFAULT_MODELS_DIR).expanduser()
    return root if root.is_absolute() else REPO / root


def model_tensorflow(cell: CellResult) -> tuple[str | None, str]:
    """(the TensorFlow that wrote the cell's model version, where that came from: "" for the record)."""
    recorded = cell.server.versions.get(MODEL_TENSORFLOW)
    if recorded:
        return str(recorded), ""
    models_dir = plan_models_dir(cell)
    version = cell.server.model_version or cell.server.versions.get("model_version")
    if models_dir is None or not version:
        return None, ""
    version_dir = models_dir / cell.server.model_name / str(version)
    return tensorflow_version(version_dir), str(version_dir / METADATA_FILE)


def notes(results: Sequence[CellResult]) -> list[str]:
    """One line per model version served by an older TensorFlow than wrote it, and one per model version
    whose TensorFlow is unknown; [] when every server is at least as new as its model."""
    warnings: dict[str, None] = {}  # ordered, deduplicated
    unknown: dict[tuple[str, str], dict[str, None]] = {}
    for cell in results:
        server = server_tensorflow(cell.server.versions)
        if server is None:
            continue
        version = str(cell.server.model_version or cell.server.versions.get("model_version") or "?")
        written_by, source = model_tensorflow(cell)
        if written_by is None:
            unknown.setdefault((cell.server.model_name, version), {})[server[0]] = None
            continue
        warning = gap_warning(cell.server.model_name, version, written_by, *server)
        if warning:
            warnings[f"Warning: {warning}" + (f" (read from {source})" if source else "") + "."] = None
    lines = list(warnings)
    for (model, version), servers in unknown.items():
        verb = "knows" if len(servers) == 1 else "know"
        lines.append(f"Versions: the TensorFlow that wrote model {model} version {version} is not recorded, so "
                     f"whether {' and '.join(servers)} {verb} all its ops is unknown.")
    return lines
