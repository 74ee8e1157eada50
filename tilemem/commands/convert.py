from __future__ import annotations

import click


@click.command()
@click.argument("source", type=click.Path())
@click.argument("dest", type=click.Path())
def convert(source, dest):
    """Convert SOURCE to DEST: DEST's format by its extension (.json or .capnp), SOURCE's by
    its content. Lossless both ways (names that are not valid UTF-8 excepted: they are kept
    with U+FFFD, and a warning says so)."""
    from ..api import load
    from ..load import FORMATS
    from .guards import nothing_to_analyse, output_path

    output_path(dest, FORMATS, option="DEST")
    if dest.lower().endswith(".capnp") and _is_json(source):
        # JSON to capnp streams: bounded memory whatever the report's size
        from ..load.stream import convert_json_to_capnp

        r = convert_json_to_capnp(source, dest)
    else:   # the API's load, then its save
        r = load(source)
        r.save(dest)
    empty = nothing_to_analyse(r)
    if empty:
        click.echo(f"wrote {dest} ({source}: {empty})")


def _is_json(path) -> bool:
    from ..load import file_format

    return file_format(path) == "json"
