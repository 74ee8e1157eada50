"""Compile tilemem's numba kernels into their on-disk cache before the test workers start.

``conftest.py`` runs ``python tests/compile_kernels.py PART`` for each part at once, in
the controlling process only: on a clean clone (CI) every pytest-xdist worker, and every
process a test forks or spawns, would otherwise compile the same kernels for itself, and
that compiling took more of the suite's time than the tests. Each part reaches a different
group of kernels (the search's, the rest of the stages'), so the two compile side by side
on two cores; with the cache already written (a second run) each takes a few seconds.

What a part does is what a user does: load the bundled report, ask the answers, allocate.
A kernel a part misses is still compiled where it is first used, as before.
"""
from __future__ import annotations

import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mk1-small.json"


def _tile(**columns):
    """A one-tile problem of tilemem's model from its columns."""
    from tilemem.model import Report
    from tilemem.pack.problem import TileProblem

    return TileProblem.from_report(Report.from_columns(**columns), 0)


def _small():
    """Three variables with element and region partners: every branch of the kernels."""
    import numpy as np
    from tilemem.model.target import Target

    return _tile(target=Target(1, 64, 32, np.array([0, 16, 32, 48])), var_id=[0, 1, 2],
                 tile=[0] * 3, size=[8, 8, 4], alignment=[4] * 3, offset=[0] * 3,
                 category=["variable"] * 3, eq_class=[0, 0, 1], interference=[[], []],
                 element_constraints=[[2], [], []], region_constraints=[[], [2], []],
                 executable=[True, False, False])


def search() -> None:
    """The whole-tile search, first fit, the guard and the quick search's probes (what the
    pool's own warm-up compiles, less the search on part of a tile)."""
    import numpy as np
    from tilemem.pack.firstfit import first_fit
    from tilemem.pack.guard import self_check
    from tilemem.pack.quick import quick_search
    from tilemem.pack.search import solve_search

    p = _small()
    self_check(p, first_fit(p))
    solve_search(p, time_limit=60, hint=np.zeros(3, np.int64))
    # a chain a - b - c of sizes 4, 4, 8, fitting and not (the probes' overflow zone)
    for capacity in (64, 8):
        from tilemem.model.target import Target

        q = _tile(target=Target(1, capacity, capacity // 2, np.array([0, capacity // 2])),
                  var_id=range(3), tile=[0] * 3, size=[4, 4, 8], alignment=[4] * 3,
                  offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
                  interference=[[1], [0, 2], [1]])
        hint = first_fit(q)
        quick_search(q, hint, 12, 0.05)
        for mirrored in (False, True):
            solve_search(q, time_limit=0.05, hint=hint, capacity=12, probe=True,
                         mirrored=mirrored)


def stages() -> None:
    """The search on part of a tile (its own compiled version of the kernel), then loading,
    liveness, the checker and the figures on the bundled report."""
    import numpy as np
    import tilemem
    from tilemem.pack.search.restrict import solve_restricted

    solve_restricted(_small(), np.array([0, 8, 64]), np.array([2]), 64, time_limit=60)
    r = tilemem.load(EXAMPLE)
    tilemem.liveness(r, tiles=[0, 1])
    tilemem.check(r)
    tilemem.report(r)


PARTS = {"search": search, "stages": stages}

if __name__ == "__main__":
    PARTS[sys.argv[1]]()
