"""A model version's metadata read back: the TensorFlow that wrote it, unknown when the file does not say."""

from __future__ import annotations

import json

from model_export.metadata import latest_version_dir, read_metadata, tensorflow_version


def test_the_tensorflow_that_wrote_a_version_reads_back_and_is_unknown_without_it(tmp_path):
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "metadata.json").write_text(json.dumps({"tensorflow_version": "2.21.0", "version": 1}))
    assert tensorflow_version(tmp_path / "1") == "2.21.0"
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "metadata.json").write_text(json.dumps({"version": 2}))  # an export from before the key
    (tmp_path / "3").mkdir()  # copied in by hand: no metadata at all
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "metadata.json").write_text("{torn")
    for unknown in ("2", "3", "4"):
        assert tensorflow_version(tmp_path / unknown) is None
    assert read_metadata(tmp_path / "4") == {} and read_metadata(tmp_path / "2") == {"version": 2}


def test_latest_version_is_the_highest_number_not_the_last_name(tmp_path):
    assert latest_version_dir(tmp_path / "absent") is None
    for name in ("2", "10", ".tmp-export-x", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "11").write_text("a file, not a version")
    assert latest_version_dir(tmp_path) == tmp_path / "10"
