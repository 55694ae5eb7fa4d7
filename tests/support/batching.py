"""BatchingParameters files for tests, written by the project's own config code."""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format

from serving.deploy.config import BatchingProfile


def write_batching_file(path: Path, **fields) -> Path:
    """A BatchingParameters text proto, as TF Serving reads it, written by the project's own config code."""
    fields["allowed_batch_sizes"] = tuple(fields.get("allowed_batch_sizes", ()))
    profile = BatchingProfile(name=path.stem, enable_batching=True, **fields)
    path.write_text(text_format.MessageToString(profile.to_proto()))
    return path
