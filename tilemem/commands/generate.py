from __future__ import annotations

import click


@click.command()
@click.option("--preset", type=click.Choice(["mk1", "mk2"]), default="mk1", show_default=True,
              help="Target: mk1 (GC2, 1216 x 256 KiB) or mk2 (GC200, 1472 x 624 KiB).")
@click.option("--tiles", type=click.IntRange(min=1), default=None,
              help="Number of tiles (default: the whole IPU).")
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Approximate number of program steps (default: 2000 mk1, 4400 mk2).")
@click.option("--pressure", type=click.FloatRange(min=0, min_open=True), default=1.0,
              show_default=True,
              help="Multiplies tensor sizes: 1 leaves a few tiles out of memory, 0.9 none "
                   "(measured with seed 0 on mk1 and mk2).")
@click.option("--seed", type=int, default=0, show_default=True, help="Random seed.")
@click.option("-o", "--output", "out", required=True, type=click.Path(),
              help="Output report, .json or .capnp.")
def generate(preset, tiles, steps, pressure, seed, out):
    """Generate a realistic lowered-variables report of a Poplar-like training program.

    Tensors spread over tiles with calcLinearTileMapping's rules, Repeat and If/Else control
    flow, always-live code/stack/vertex data in the proportions of a Poplar profile, offsets
    from a first-fit allocator (tiles that do not fit spill past tileMemory). Writes the
    tilemem extension equivalenceClassSteps. Deterministic for a seed.
    """
    from ..load import FORMATS, save_report
    from ..generate import generate_report
    from ..output import console, human_bytes
    from ..summary import highest_end_per_tile

    from .guards import output_path

    output_path(out, FORMATS)
    c = console()
    r = generate_report(preset, tiles=tiles, steps=steps, pressure=pressure, seed=seed,
                        progress=True)
    with c.status(f"writing {out}"):
        save_report(r, out)
    over = int((highest_end_per_tile(r) > r.target.tile_memory).sum())
    c.print(f"{out}: {r.num_tiles:,} tiles, {r.num_vars:,} variables, {r.num_classes:,} classes, "
            f"{human_bytes(int(r.size.sum()))} in all; {over:,} tile(s) out of memory "
            f"(first fit, pressure {pressure:g}, seed {seed})")
