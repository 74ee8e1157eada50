"""Compile tilemem's numba kernels into their on-disk cache before the test workers start.

``conftest.py`` runs ``python tests/compile_kernels.py PART`` for each part at once, in
the controlling process only: on a clean clone (CI) every pytest-xdist worker, and every
process a test forks or spawns, would otherwise compile the same kernels for itself (a
quarter of the suite's time went to that). Each part reaches a different group of kernels
(the pool's own warm-up, less the search on part of a tile; that search's own version of the
kernel and the other stages), so the two compile side by side on two cores; with the cache
already written (a second run) each takes a few seconds. A kernel a part misses is still
compiled where it is first used, as before.
"""
from __future__ import annotations

import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mk1-small.json"


def search() -> None:
    """The whole-tile search, first fit, the guard and the quick search's probes: the pool's
    own warm-up, less the search on part of a tile."""
    from tilemem.pack.tasks import _warm_up

    _warm_up(part=False)


def stages() -> None:
    """The search on part of a tile (its own compiled version of the kernel), then loading,
    liveness, the checker and the figures on the bundled report."""
    import tilemem
    from tilemem.pack.search import warm_up

    warm_up(whole=False)
    r = tilemem.load(EXAMPLE)
    tilemem.liveness(r, tiles=[0, 1])
    tilemem.check(r)
    tilemem.report(r)


PARTS = {"search": search, "stages": stages}

if __name__ == "__main__":
    PARTS[sys.argv[1]]()
