"""Would any allocation of an out-of-memory tile fit? Proofs that none does, on part of a tile.

When a tile's live data fits in tileMemory but no allocation found does, the question is
open. A subset of the tile's variables that cannot be placed below tileMemory under the
rules (alignment, windows, regions, elements, conflicts) proves that the whole tile cannot
either: every allocation of the tile places that subset too. ``prove_no_fit`` tries subsets
that are small enough to decide and tight enough to matter: the heaviest clique of the
conflict graph (variables live together, where the live data peaks), then, when the tile
carries an interval model of its classes (``TileProblem.intervals``, else its class steps),
the variables live in growing windows around that peak. Each is decided by the compiled search
(``tilemem.pack.search``), whose "infeasible" is a proof (it enumerates every placement up to
its dominance rules).

Zero-size variables are left out of the subsets: the search reads them as one byte (the
strictest reading of the rules), so a proof that counted them could be too strict.

``fit_verdict`` names the answer for a tile: "fits", "cannot fit: live data",
"cannot fit: proven on N variables" or "undecided".

>>> from tilemem.model import Report
>>> from tilemem.model.target import Target
>>> t = Target(1, 48, 32, np.array([0, 16, 32]))   # elements of 16; interleaved from 32
>>> r = Report.from_columns(target=t, var_id=range(3), tile=[0] * 3, size=[20, 20, 4],
...     alignment=[16, 16, 4], offset=[0] * 3, category=["variable"] * 3,
...     eq_class=[0, 1, 2], interference=[[1], [0], []])
>>> p = TileProblem.from_report(r, 0)   # 40 live bytes, but the second 20 starts at 32
>>> prove_no_fit(p, time_limit=5)       # and ends at 52: the two conflicting ones never fit
2
"""
from __future__ import annotations

import time

import numpy as np

from ..liveness import TileConflicts
from ..liveness.graphalg import max_weight_clique
from ..model import Csr
from .kinds import PROVEN, SearchStatus, Verdict
from .params import DEFAULT_PARAMS, SolverParams
from .problem import TileProblem

#: Windows tried around the peak (in positions of the interval model), each twice as wide.
WINDOWS = (0, 1, 2, 4, 8, 16, 32)


def fit_verdict(overflow_bytes: int, live_bound: int, tile_memory: int,
                proven_on: int | None) -> str:
    """The answer to "would an allocation of this tile fit?". ``live_bound``: the tile's
    maximum live bytes (the interleaved data's clique past tileMemory is a proof on its
    variables, ``proven_on``, as ``tilemem oom`` reads it: the live data itself fits).

    >>> fit_verdict(0, 100, 128, None), fit_verdict(8, 130, 128, None)
    ('fits', 'cannot fit: live data')
    >>> fit_verdict(8, 120, 128, 451), fit_verdict(8, 120, 128, None)
    ('cannot fit: proven on 451 variables', 'undecided')
    """
    if overflow_bytes == 0:
        return Verdict.FITS.value
    if live_bound > tile_memory:
        return Verdict.LIVE_DATA.value
    if proven_on is not None:
        return PROVEN.format(proven_on)
    return Verdict.UNDECIDED.value


def proof_seconds(params: SolverParams, time_limit: float) -> float:
    """A proof's seconds in a slice of ``time_limit``: its share, at least its floor, at most
    its cap (``SolverParams.proof``).

    >>> proof_seconds(DEFAULT_PARAMS, 10.0), proof_seconds(DEFAULT_PARAMS, 0.1)
    (2.0, 0.2)
    """
    most, share, least = params.proof
    return min(most, max(time_limit * share, least))


def prove_no_fit(p: TileProblem, time_limit: float,
                 params: SolverParams = DEFAULT_PARAMS) -> int | None:
    """The size of a subset of ``p``'s variables proven not to fit below tileMemory, or None
    when none is found within ``time_limit`` seconds (the module docstring), each subset's
    search a share of it (``SolverParams.proof``)."""
    from .search import solve_search

    _, share, least = params.proof
    deadline = time.perf_counter() + time_limit
    tried: set[bytes] = set()
    for subset in _subsets(p):
        key = subset.tobytes()
        if len(subset) < 2 or key in tried:
            continue
        tried.add(key)
        left = deadline - time.perf_counter()
        if left <= 0.01:
            return None
        q = restrict(p, subset)
        r = solve_search(q, time_limit=min(left, max(least, time_limit * share)),
                         capacity=p.capacity, randomized=False)
        if r.status == SearchStatus.INFEASIBLE:
            return len(subset)
    return None


def _subsets(p: TileProblem):
    """The heaviest clique, then the windows around it along the interval model."""
    held = np.flatnonzero(p.size > 0)
    if len(held) < 2:
        return
    ptr, idx = p.conflicts.conflict_csr(held, sort=True)
    clique = max_weight_clique(ptr, idx, p.size[held], node_limit=20_000)
    members = np.sort(held[clique.members])
    yield members
    pos = p.intervals if p.intervals is not None else p.lifetimes
    if pos is None or len(members) == 0:
        return
    lo, hi = pos[:, 0], pos[:, 1]
    point = int(lo[members].max())   # every member is live here
    for k in WINDOWS:
        yield held[(lo[held] <= point + k) & (hi[held] > point - k)]


def restrict(p: TileProblem, keep) -> TileProblem:
    """``p`` with only the variables ``keep`` (local indices, increasing): their windows,
    conflicts and the element / region pairs among them. Whatever holds of every placement of
    ``p`` holds of the restriction of it, so a restriction that cannot be placed below a
    capacity proves that ``p`` cannot be either.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0] * 3, size=[8, 4, 4],
    ...     alignment=[4] * 3, offset=[0, 8, 12], category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0], []], element_constraints=[[2], [], []])
    >>> q = restrict(TileProblem.from_report(r, 0), [0, 2])
    >>> q.rows.tolist(), q.element_pairs.tolist(), q.conflicts.conflicts(0, 1)
    ([0, 2], [[0, 1]], False)
    """
    keep = np.asarray(keep, np.int64)
    new = np.full(p.n, -1, np.int64)
    new[keep] = np.arange(len(keep))
    tc = p.conflicts
    classes, local = np.unique(tc.local_class[keep], return_inverse=True)
    cnew = np.full(len(tc.classes), -1, np.int64)
    cnew[classes] = np.arange(len(classes))
    src, dst = tc.class_adj.row_ids(), tc.class_adj.indices
    ok = (cnew[src] >= 0) & (cnew[dst] >= 0)
    adj = Csr.from_lengths(np.bincount(cnew[src[ok]], minlength=len(classes)), cnew[dst[ok]])
    matrix = None if tc.class_matrix is None else tc.class_matrix[np.ix_(classes, classes)]
    sub = TileConflicts(tile=tc.tile, rows=tc.rows[keep], local_class=local.astype(np.int64),
                        classes=tc.classes[classes], class_adj=adj,
                        always_live=tc.always_live[keep], class_matrix=matrix)

    def pairs(x: np.ndarray) -> np.ndarray:
        if not len(x):
            return x
        both = (new[x[:, 0]] >= 0) & (new[x[:, 1]] >= 0)
        return new[x[both]]

    return TileProblem(
        tile=p.tile, rows=p.rows[keep], size=p.size[keep], align=p.align[keep], lo=p.lo[keep],
        hi=p.hi[keep], conflicts=sub, element_pairs=pairs(p.element_pairs),
        region_pairs=pairs(p.region_pairs), target=p.target, rules=p.rules,
        lifetimes=None if p.lifetimes is None else p.lifetimes[keep],
        intervals=None if p.intervals is None else p.intervals[keep])
