from __future__ import annotations

import click


@click.command()
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
def convert(source, dest):
    """Convert SOURCE to DEST by extension (.json or .capnp). Lossless both ways."""
    from ..load import load_report, save_report

    save_report(load_report(source), dest)
