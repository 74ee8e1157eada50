"""Compile tilemem's numba kernels into their on-disk cache before the test workers start.

``conftest.py`` runs ``python tests/compile_kernels.py PART`` for each part at once, in
the controlling process only: on a clean clone (CI) every pytest-xdist worker, and every
process a test forks or spawns, would otherwise compile the same kernels for itself (a
quarter of the suite's time went to that). Each part makes a different group of
``tilemem.pack.compiled`` ready: the search has three compiled versions (on a whole tile;
with the overflow zone; on part of a tile, with domains), each a large compilation, one a
part; what every packing run compiles (``pack``: first fit, the guard, the bounds) goes with
the whole tile's, and the stages' kernels (loading, liveness on chordal and general class
graphs, the checker, the plan's re-weighting) and ``alloc``, which may run every version of
the search, with the overflow zone's. A group is compiled by one process at a time (a lock
per group): a part that needs another part's group waits for it and loads it from the cache
rather than compiling it beside it. Arrays read from a ``.capnp`` are read-only, which numba
compiles apart, so the stages run on a report loaded from each format. With the cache
already written (a second run) each part takes a few seconds. A kernel a part misses is
still compiled where it is first used, as before.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mk1-small.json"


def search() -> None:
    """What every packing run compiles, then the search on a whole tile and the quick
    search's probes."""
    from tilemem.pack.compiled import ready

    ready("problem", "pack", "bounds")
    ready("whole")


def zone() -> None:
    """The stages on both formats, then the search's version with the overflow zone, then
    ``alloc``: last, so that it loads the groups the other parts compile by then from the
    cache (or waits for them) rather than compiling them a second time beside them."""
    from tilemem.pack.compiled import ready

    with tempfile.TemporaryDirectory() as tmp:
        two = stages(Path(tmp))
        ready("zone")
        alloc(two)


def part() -> None:
    """The search on part of a tile (its version with domains), then the figures' kernels
    (``figures``): the lightest part takes them."""
    from tilemem.pack.compiled import ready

    ready("part")
    figures()


def figures() -> None:
    """The what-ifs (the micro-batch, recomputation), the plan's re-weighting, ``split`` and
    ``config`` on a small generated transformer that does not fit: kernels of the figures that every
    worker, and every command a test runs in a process of its own, otherwise compiled for
    itself on first use."""
    import tilemem
    from tilemem.generate import generate_report

    r = generate_report("mk1", tiles=16, steps=740, seed=1, model="transformer", pressure=1.6)
    for rep in (tilemem.load(EXAMPLE), r):
        tilemem.what_if(rep, tilemem.Edits(micro_batch=0.5))
        tilemem.what_if(rep, tilemem.Edits(micro_batch=2))
        tilemem.what_if(rep, levers=tilemem.Levers(recompute="all"))
        tilemem.diagnose(rep, repack=False)
    tilemem.split(r, ipus=2)
    tilemem.configure(r, tilemem.ConfigQuery(max_ipus=2, max_micro_batch=1))


def stages(tmp: Path) -> Path:
    """Loading (JSON, and a ``.capnp`` of one IPU and of two), liveness (chordal and general
    class graphs), the checker, the figures and the plan on the bundled report and on a small
    generated one; the 2-IPU report without class steps, written to ``tmp``, for ``alloc``."""
    import tilemem
    from tilemem.generate import generate_report
    from tilemem.load import save_report
    from tilemem.model import Report

    r = tilemem.load(EXAMPLE)
    reports = [r]
    for i, rep in enumerate([r, generate_report("mk1", tiles=4, steps=60, seed=1, ipus=2)]):
        path = tmp / f"r{i}.capnp"
        save_report(rep, path)
        reports.append(tilemem.load(path))
    for rep in reports:
        tilemem.liveness(rep)
        tilemem.check(rep)
        tilemem.report(rep)
        tilemem.diagnose(rep, repack=False)
    # the general (non-chordal) class graph: one tile's classes without lifetimes
    general = Report.from_columns(
        target=r.target, var_id=range(5), tile=[0] * 5, size=[8] * 5, alignment=[4] * 5,
        offset=[0] * 5, category=["variable"] * 5, eq_class=range(5),
        interference=[[1, 4], [0, 2], [1, 3], [2, 4], [3, 0]])
    tilemem.liveness(general)
    two = replace(tilemem.load(tmp / "r1.capnp"), class_steps=None)
    path = tmp / "two.capnp"
    save_report(two, path)
    return path


def alloc(path: Path) -> None:
    """``alloc`` on a 2-IPU ``.capnp`` without class steps (as Poplar writes it), as the
    cluster tests run it, journal and output written: its kernels (the class graph without
    steps, CP-SAT's cliques, the names) were otherwise compiled in the CLI processes of those
    tests, again in each one that ran before the cache was written."""
    import tilemem

    tilemem.allocate(tilemem.load(path), output=path.with_name("out.capnp"),
                     packing=tilemem.Packing(time_limit=0.3, deterministic=True, workers=1))


PARTS = {"search": search, "zone": zone, "part": part}

if __name__ == "__main__":
    PARTS[sys.argv[1]]()
