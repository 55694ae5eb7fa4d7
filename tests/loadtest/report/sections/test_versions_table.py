"""The report's versions note: a warning when a model version was served by an older TensorFlow than wrote
it, "unknown" when the records cannot say, silence when they match."""

from __future__ import annotations

import json
from dataclasses import replace

from loadtest.evidence.provenance_record import Provenance
from loadtest.report import page as report
from loadtest.report.build import build_report
from loadtest.report.sections import versions_table
from tests.loadtest.report import handmade

OLD_IMAGE = {"image": "tensorflow/serving:2.20.0", "model_version": "1"}


def served_by(server_versions: dict, provenance: dict | None = None):
    label = replace(handmade.server("cpu", "off"), versions=server_versions)
    cell = handmade.cell(label, rate=100.0)
    return replace(cell, provenance=Provenance.from_dict(provenance)) if provenance is not None else cell


def test_a_model_newer_than_its_server_is_one_warning_line():
    cells = [served_by({**OLD_IMAGE, "model_tensorflow": "2.21.0"})] * 3
    assert versions_table.notes(cells) == [
        "Warning: model mnist version 1 was written by TensorFlow 2.21.0; tensorflow/serving:2.20.0 is older: a "
        "SavedModel can use ops it does not know."]


def test_matching_versions_and_servers_that_load_no_savedmodel_are_silent():
    assert versions_table.notes([served_by({"image": "tensorflow/serving:2.21.0", "model_tensorflow": "2.21.0"}),
                           served_by({"tensorflow": "2.21.1", "runtime": "tensorflow", "model_tensorflow": "2.21.0"}),
                           served_by({"runtime": "jax", "jax": "0.11.2"})]) == []


def test_without_the_models_tensorflow_in_the_records_it_is_unknown():
    assert versions_table.notes([served_by(OLD_IMAGE), served_by({"tensorflow": "2.21.0"})]) == [
        "Versions: the TensorFlow that wrote model mnist version 1 is not recorded, so whether "
        "tensorflow/serving:2.20.0 and the embedded server's TensorFlow 2.21.0 know all its ops is unknown."]


def test_older_records_read_the_plans_models_dir_when_it_is_here(tmp_path):
    (tmp_path / "mnist" / "1").mkdir(parents=True)
    (tmp_path / "mnist" / "1" / "metadata.json").write_text(json.dumps({"tensorflow_version": "2.21.0"}))
    plan = {"host": "bench", "plan": {"launch": {"models_dir": str(tmp_path)}}}
    assert versions_table.notes([served_by(OLD_IMAGE, plan)]) == [
        "Warning: model mnist version 1 was written by TensorFlow 2.21.0; tensorflow/serving:2.20.0 is older: a "
        f"SavedModel can use ops it does not know (read from {tmp_path}/mnist/1/metadata.json)."]
    elsewhere = {"host": "bench", "plan": {"launch": {"models_dir": str(tmp_path / "not-here")}}}
    assert versions_table.notes([served_by(OLD_IMAGE, elsewhere)])[0].startswith("Versions: the TensorFlow that wrote")


def test_the_report_shows_the_note_under_its_intro():
    cells = [served_by({**OLD_IMAGE, "model_tensorflow": "2.21.0"})]
    built = build_report(cells)
    assert built.intro[-1].startswith("Warning: model mnist version 1 was written by TensorFlow 2.21.0")
    assert built.intro[-1] in report.render_markdown(built, "report.html")
    silent = build_report([served_by({"image": "tensorflow/serving:2.21.0", "model_tensorflow": "2.21.0"})])
    assert not any("TensorFlow" in line for line in silent.intro)
