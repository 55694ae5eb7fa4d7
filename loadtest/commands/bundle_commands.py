"""`mnist-bench device-bundle`: build the offline bundle for a lent accelerator machine.

Not for: what goes in it (`loadtest.bundle.build`) or running it (`loadtest.bundle.device_run`).
"""

from __future__ import annotations

from pathlib import Path

import click

from loadtest.bundle.build import BundleError, WheelPlatforms, build


@click.command("device-bundle")
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=Path("build/device-bundle"),
              show_default=True, help="the bundle's folder (replaced)")
@click.option("--models-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("models"),
              show_default=True)
@click.option("--python-version", default="3.12", show_default=True, help="the target machine's Python (X.Y)")
@click.option("--self-contained", is_flag=True,
              help="also pack what the device image has (JAX, numpy, ...): for a bare Python; no size limit")
def device_bundle(out: Path, models_dir: Path, python_version: str, self_contained: bool) -> None:
    """The project, the newest model, TF's protos and the missing wheels, for an offline GPU machine."""
    wheel_platforms = WheelPlatforms(python_version=python_version)
    if self_contained:
        wheel_platforms = WheelPlatforms(python_version=python_version, image_packages=frozenset(), limit_bytes=None)
    try:
        manifest = build(out, models_dir, wheel_platforms)
    except BundleError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"device bundle: {out} ({manifest.size_bytes / 2**20:.1f} MiB, Python {manifest.python_version}, "
               f"model version {manifest.model_version}, {len(manifest.wheels)} wheels, {manifest.protos} proto "
               f"modules; left out as the image has them: {', '.join(manifest.left_out_for_the_image) or 'none'})")
    click.echo(f"source: {manifest.source.get('commit', 'unknown')}{'-dirty' if manifest.source.get('dirty') else ''}")
    click.echo(f"on the machine: python3 {out}/run.py --out OUT_DIR  [--budget-min 9 --devices gpu,cpu "
               f"--batches 1,32 --target-rps N --prices FILE]")
