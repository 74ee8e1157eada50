"""Compile tilemem's numba kernels into their on-disk cache before the test workers start.

``conftest.py`` runs ``python tests/compile_kernels.py PART`` for each part at once, in
the controlling process only: on a clean clone (CI) every pytest-xdist worker, and every
process a test forks or spawns, would otherwise compile the same kernels for itself (a
quarter of the suite's time went to that).

Two parts, one a core, and nothing compiled twice. The search has three compiled versions
of ``tilemem.pack.compiled`` (``whole``: on a whole tile; ``zone``: with the overflow zone;
``part``: on part of a tile, with domains) that share most of their code; numba writes a
function's cache only once it is compiled, so two versions compiled side by side each
compile the shared code (a third of the step's CPU went to that). So one part compiles the
whole tile's version, shared code included, then the overflow zone's; the other meanwhile
compiles what the search does not share (the packer's ``pack`` and ``bounds``,
loading, liveness on chordal and general class graphs, the checker, the figures) and only
then asks for ``whole`` (waiting for its lock, then loading it) before the version on part
of a tile and ``alloc``, which may run every version. Each part starts with a group of the
packer's that the other's first steps run (the search's warm-up builds a tile's
``problem``; the stages pack with first fit, ``pack``), so neither compiles it beside the
other. Arrays read from a ``.capnp`` are read-only,
which numba compiles apart, so the stages run on a report loaded from each format. With
the cache already written (a second run) each part takes a few seconds. A kernel a part
misses is still compiled where it is first used, as before.
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mk1-small.json"


def search() -> None:
    """The tile's problem (which the search's warm-up builds first), the search on a whole
    tile (with the code its versions share) and the quick search's probes, then its version
    with the overflow zone."""
    from tilemem.pack.compiled import ready

    ready("problem")
    ready("whole")
    ready("zone")


def stages() -> None:
    """The packer's groups, the stages on both formats and the figures, then (once the whole
    tile's version is cached) the search on part of a tile, then ``alloc``: last, so that it
    loads every group from the cache."""
    from tilemem.pack.compiled import ready

    for g in ("pack", "bounds"):
        ready(g)   # one at a time: ``ready`` of several starts a process for each
    with tempfile.TemporaryDirectory() as tmp:
        two = stage_reports(Path(tmp))
        figures()
        ready("whole")   # waits for the other part's lock, then loads it
        ready("part")
        alloc(two)


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


def stage_reports(tmp: Path) -> Path:
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


PARTS = {"search": search, "stages": stages}

if __name__ == "__main__":
    PARTS[sys.argv[1]]()
