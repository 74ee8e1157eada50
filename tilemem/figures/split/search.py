"""The search for ``tilemem split``: the split of a report's units into stages that minimises
the worst stage's estimate (``tilemem.figures.split.estimate`` makes the estimate), the fewest stages
that fit, and a report already pipelined answered per IPU.

Every contiguous split is evaluated exactly when there are few (dynamic programming over the
stages, ``EXACT_EVALUATIONS``); otherwise the split minimising a cheap upper bound (all of a
stage's bytes live at once, ``SplitModel.proxy``) is found by bisection on the worst stage
and then improved by moving the worst stage's boundaries while the exact estimate improves
(up to ``REFINE_MAX_UNITS`` units).

>>> from tilemem.generate import generate_report
>>> m = SplitModel(generate_report("mk1", tiles=8, steps=60, seed=1, pressure=1.5))
>>> a = best_split(m, 2)
>>> len(a.stages), a.stages[0].first_unit, a.stages[1].last_unit == m.units.labels[-1]
(2, 'layer0', True)
"""
from __future__ import annotations

import numpy as np

from ...errors import ReportError
from ...model import Report
from ...rules import SPLIT_CLOSE_MARGIN, SPLIT_CLOSE_MARGIN_NO_STEPS
from .cuts import balanced_cuts, source_cuts, unit_ipu_bytes
from .estimate import (ASSUMPTIONS, FIRST_TILES, STASH_ASSUMPTIONS, SplitAnswer, SplitModel, Stage,
                    verdict)

#: ``SplitAnswer.search`` of a pipelined report answered per IPU (``current_split``).
OWN_SPLIT = "the report's own split"

#: Stage evaluations the exact search may spend (n stages x L(L+1)/2 ranges at most).
EXACT_EVALUATIONS = 600
#: Rounds of the improvement after the cheap search (each: the worst stage's boundaries
#: moved by one unit, two stages estimated again per move).
REFINE_ROUNDS = 2
#: Above this many units the improvement is skipped: one unit is then under 1 % of a
#: stage, less than the estimate's own error, and each move costs two stages' bounds.
REFINE_MAX_UNITS = 200


# ---- the search ----------------------------------------------------------------------------
def _exact(m: SplitModel, n: int, fixed=()) -> list[int]:
    """Boundaries minimising the worst stage, every split considered that keeps ``fixed``
    as cuts (dynamic programming over stages: the worst of the first s stages ending at
    unit j)."""
    L = m.L
    INF = np.iinfo(np.int64).max
    fixed = sorted(fixed)

    def allowed(i, j):   # no stage across a boundary that must stay a cut
        return not any(i < c < j for c in fixed)

    best = {(0, j): (m.worst(0, 0, j, n) if allowed(0, j) else INF, 0)
            for j in range(1, L - n + 2)}
    for s in range(1, n):
        for j in range(s + 1, L - n + s + 2):
            opts = [(max(best[(s - 1, i)][0], m.worst(s, i, j, n)), i)
                    for i in range(s, j)
                    if (s - 1, i) in best and best[(s - 1, i)][0] < INF and allowed(i, j)]
            best[(s, j)] = min(opts) if opts else (INF, 0)
    cuts, j = [], L
    for s in range(n - 1, 0, -1):
        j = best[(s, j)][1]
        cuts.append(j)
    return cuts[::-1]


def _greedy(m: SplitModel, n: int, c: float) -> list[int] | None:
    cuts, i = [], 0
    for s in range(n - 1):
        j = i + 1
        while j < m.L - (n - 1 - s) and m.proxy(s, i, j + 1, n) <= c:
            j += 1
        if m.proxy(s, i, j, n) > c:
            return None
        cuts.append(j)
        i = j
    return cuts if m.proxy(n - 1, i, m.L, n) <= c else None


def _cheap_then_refined(m: SplitModel, n: int, fixed=()) -> list[int]:
    if fixed:
        cuts = balanced_cuts(m, n, fixed)
    else:
        lo, hi = 0.0, m.proxy(0, 0, m.L, n) * 2 + 1
        cuts = [round(k * m.L / n) for k in range(1, n)]
        for _ in range(40):
            mid = (lo + hi) / 2
            got = _greedy(m, n, mid)
            if got is None:
                lo = mid
            else:
                hi, cuts = mid, got
    # improve with exact estimates: move the worst stage's boundaries while it helps
    def worst_of(cs):
        b = [0] + cs + [m.L]
        return max(m.worst(s, b[s], b[s + 1], n) for s in range(n))
    best = worst_of(cuts)
    for _ in range(REFINE_ROUNDS if m.L <= REFINE_MAX_UNITS else 0):
        b = [0] + cuts + [m.L]
        w = [m.worst(s, b[s], b[s + 1], n) for s in range(n)]
        s = int(np.argmax(w))
        tried = []
        if s > 0 and b[s + 1] - b[s] > 1 and cuts[s - 1] not in fixed:
            tried.append(cuts[:s - 1] + [cuts[s - 1] + 1] + cuts[s:])
        if s < n - 1 and b[s + 1] - b[s] > 1 and cuts[s] not in fixed:
            tried.append(cuts[:s] + [cuts[s] - 1] + cuts[s + 1:])
        scored = [(worst_of(t), t) for t in tried]
        if not scored or min(scored)[0] >= best:
            break
        best, cuts = min(scored)
    return cuts


def best_split(m: SplitModel, n: int) -> SplitAnswer:
    """The split of ``m``'s units into ``n`` stages with the smallest worst stage (see the
    module docstring for the search)."""
    if n < 1:
        raise ReportError(f"--ipus {n}: at least one IPU", field="ipus")
    if n > m.L:
        raise ReportError(f"--ipus {n} is more IPUs than the {m.L} units ({m.units.source}) "
                          "to split", field="ipus")
    # a report compiled over several IPUs: its boundaries stay cuts (``cuts``)
    fixed = source_cuts(m)
    if n <= len(fixed):
        raise ReportError(f"--ipus {n}: the report is already split over {len(fixed) + 1} "
                          "IPUs; ask for that many or more", field="ipus")
    if n == 1:
        cuts, how = [], "one stage"
    elif n * m.L * (m.L + 1) // 2 <= EXACT_EVALUATIONS:
        cuts, how = _exact(m, n, fixed), "exact: every split"
    else:
        cuts = _cheap_then_refined(m, n, fixed)
        how = "bisection on an upper bound" + (", then improved" if m.L <= REFINE_MAX_UNITS
                                               else "")
    if fixed:
        how += f" keeping the report's {len(fixed) + 1} IPUs' boundaries"
    return answer(m, n, cuts, how)


def answer(m: SplitModel, n: int, cuts: list[int], how: str) -> SplitAnswer:
    """The answer for boundaries ``cuts`` (first units of stages 1..)."""
    tm = m.r.target.tile_memory
    b = [0] + list(cuts) + [m.L]
    stages = []
    for s in range(n):
        peak, al, buf = m.stage(s, b[s], b[s + 1], n)
        t = int(np.argmax(peak))
        stages.append(Stage(ipu=s, first_unit=m.units.labels[b[s]],
                            last_unit=m.units.labels[b[s + 1] - 1], units=b[s + 1] - b[s],
                            worst_tile=t, max_live_bytes=int(peak[t]),
                            always_live_bytes=int(al[t]), buffer_bytes=int(buf[t]),
                            verdict=verdict(int(peak[t]), tm, m.start is not None)))
    return SplitAnswer(
        ipus=n, tile_memory=tm, tiles_per_ipu=m.tiles, units_from=m.units.source,
        units=m.L, split_points=[m.units.labels[c] for c in cuts], split_indices=list(cuts),
        stages=stages, search=how, fits=all(s.max_live_bytes <= tm for s in stages),
        assumptions=[_mapped(STASH_ASSUMPTIONS[m.stash], m.stash_mapping)
                     if x == STASH_ASSUMPTIONS["inputs"] else x for x in ASSUMPTIONS]
        + ([] if m.start is not None else
           ["no class steps: tensors of no unit counted on every stage; the gradient sent "
            "back has the shape of the activation"]
           + (["no class steps: the stash is the stage input, not the activations asked for "
               "(telling which are live at the handover needs the steps)"]
              if m.stash_asked != m.stash else []))
        + ([] if m.source_ipus == 1 else
           [f"the report was compiled over {m.source_ipus} IPUs: their boundaries stay "
            "boundaries of stages (a report keeps interference only between classes that "
            "share a tile, so no stage joining two of its IPUs could be estimated)"]))


def with_stage_levers(m: SplitModel, a: SplitAnswer, time_limit: float = 10.0) -> SplitAnswer:
    """``a`` (an estimated split) with, on each stage whose estimate is over tileMemory, the
    levers it needs (``Stage.levers``): oom's plan that fits its tiles over tileMemory by the
    estimate, by the bound on the stage's own report as recompiled, with its buffers and
    stash (``SplitModel.stage_report``). A stage without such a report (no class steps, the
    stash spread over the IPU) is left without.

    The levers are what the user compiles, and whether the framework then recomputes a
    stage's activations (stashing only its input) or keeps them is not in the report: with
    class steps they are chosen on the larger reading, every activation still live at the
    handover stashed (``config``'s), so that their *fits* holds either way. Read as the stage
    input alone, a stage compiled without recomputation left tiles over tileMemory under a
    *fits* (docs/benchmarks.md, "config3")."""
    from ..plan import plan_that_fits

    tm = m.r.target.tile_memory
    b = [0] + list(a.split_indices) + [m.L]
    lm = m.with_stash("activations") if m.stash == "inputs" and m.start is not None else m
    for s, st in enumerate(a.stages):
        if st.max_live_bytes <= tm:
            continue
        stage = lm.stage_report(s, b[s], b[s + 1], a.ipus)
        if stage is None:
            continue
        need = np.flatnonzero(lm.stage(s, b[s], b[s + 1], a.ipus)[0] > tm)
        # fits only under tileMemory by more than the stage estimate's error and its levers'
        st.levers = plan_that_fits(stage, need, time_limit=time_limit,
                                   base_margin=SPLIT_CLOSE_MARGIN if m.start is not None
                                   else SPLIT_CLOSE_MARGIN_NO_STEPS)
    return a


def _mapped(assumption: str, mapping: str) -> str:
    """The stash's assumption as the model maps the stash (``SplitModel.stash_tiles``)."""
    if mapping != "linear":
        return assumption
    return (assumption.replace(", mapped like the activations", "")
            + ", spread evenly over the IPU's tiles (asked for: --stash-mapping linear)")


def fewest_ipus(m: SplitModel, most: int | None = None) -> SplitAnswer:
    """The fewest stages whose best split fits every stage under tileMemory (by the
    estimate), up to ``most`` (default: one a unit); the last tried when none does."""
    most = min(most or m.L, m.L)
    a = None
    for n in range(len(source_cuts(m)) + 1, most + 1):
        # one stage (the report itself) out of memory: told by its first tile found above
        # tileMemory; its worst tile is not shown
        if n == 1 < most and m.exceeds(0, 0, m.L, 1, m.r.target.tile_memory):
            continue
        a = best_split(m, n)
        if a.fits:
            return a
    return a


# ---- a report already pipelined ------------------------------------------------------------
def current_split(m: SplitModel, r: Report, time_limit: float = 10.0) -> SplitAnswer:
    """A pipelined report answered per IPU: its stages (each unit on the IPU holding most of
    its bytes) estimated as ``best_split`` would, beside each IPU's actual maximum live bytes
    (the bound on the report itself), the tightest stage named, which boundary unit to
    move to its lighter neighbour (when moving it lowers the worse of the two), and the
    levers each stage needs (``Stage.levers``: oom's plan that fits, on its tiles that need
    less data by that bound)."""
    from ..plan import plan_that_fits

    n, L = m.source_ipus, m.L
    ipu = unit_ipu_bytes(m, r).argmax(axis=1)
    if np.any(np.diff(ipu) < 0) or len(np.unique(ipu)) != n:
        raise ReportError(f"the units ({m.units.source}) are not in consecutive stages over "
                          f"the report's {n} IPUs: cannot tell its split", field="tilesPerIPU")
    cuts = [int(np.searchsorted(ipu, k)) for k in range(1, n)]
    a = answer(m, n, cuts, OWN_SPLIT)
    for st, (own, worst, need) in zip(a.stages, _ipu_bounds(r, time_limit)):
        st.actual_max_live_bytes = worst
        # the levers this stage needs: oom's plan that fits, on its own tiles, from its own
        # IPU's variables (a view: each lever's rows found among one IPU's, not the Pod's)
        st.levers = plan_that_fits(own, need, time_limit=time_limit) if len(need) else None
    tight = int(np.argmax([st.actual_max_live_bytes for st in a.stages]))
    moves = []
    b = [0] + cuts + [L]
    for nb, new in ((tight - 1, b[tight] + 1), (tight + 1, b[tight + 1] - 1)):
        if not 0 <= nb < n or b[tight + 1] - b[tight] < 2:
            continue
        k = min(nb, tight)
        moved = cuts[:k] + [new] + cuts[k + 1:]
        bb = [0] + moved + [L]
        pair = max(m.worst(x, bb[x], bb[x + 1], n) for x in (k, k + 1))
        unit = m.units.labels[b[tight] if nb < tight else b[tight + 1] - 1]
        moves.append((pair, unit, nb))
    now = max(a.stages[x].max_live_bytes for x in range(max(tight - 1, 0), min(tight + 2, n)))
    a.note = f"tightest stage: IPU {tight} ({a.stages[tight].actual_max_live_bytes:,} bytes " \
             f"on its worst tile)"
    if moves and min(moves)[0] < now:
        pair, unit, nb = min(moves)
        a.note += (f"; move {unit} to IPU {nb}: the worse of the two stages then "
                   f"{pair:,} bytes by the estimate (now {now:,})")
    return a


def _ipu_bounds(r: Report, time_limit: float):
    """For each IPU of ``r``: ``(view, worst, over)``, its variables (``ipu_view`` of a
    report ordered by tile, else ``r``), the largest maximum live bytes of its tiles (the
    bound) and its tiles whose bound is over tileMemory.

    IPU by IPU on a report ordered by tile (one IPU's temporaries at a time), and only on the
    tiles that can decide either. A tile's bytes all live at once bound its bound above, and
    so does the highest end of the report's own allocation where the checker accepts it
    (variables live together do not overlap there); the tiles above tileMemory by that are
    bounded, then the others in order of it until none left could beat the worst found.
    ``time_limit`` is shared out by the tiles bounded."""
    from ...check import check_allocation
    from ...liveness import max_live_all
    from ...liveness.maxlive import steps_consistent
    from ...model.ipuview import ipu_view, tile_ordered
    from ..summary import highest_end_per_tile

    tm, tpi, n = r.target.tile_memory, r.target.ipu_tiles, r.target.num_ipus
    broken = check_allocation(r, limit=1).tile_violations > 0
    views = n > 1 and tile_ordered(r)
    if views:   # on the report, which every view then shares: one pass, not one an IPU
        steps_consistent(r)
    for k in range(n):
        v = ipu_view(r, k) if views else r
        t0, t1 = k * tpi, min((k + 1) * tpi, r.num_tiles)
        a = v.allocated & (v.tile >= t0) & (v.tile < t1)
        upper = np.bincount(v.tile[a] - t0, v.size[a], minlength=t1 - t0)
        ends = highest_end_per_tile(v)[t0:t1]
        upper = np.where(broken[t0:t1], upper, np.minimum(upper, ends))
        order = np.argsort(-upper, kind="stable")
        done, worst, over = 0, 0, []
        first = max(int((upper > tm).sum()), FIRST_TILES)
        while done < len(order) and (done == 0 or upper[order[done]] > worst):
            batch = np.sort(order[done:done + max(first, done)]) + t0
            got = max_live_all(v, batch, time_limit=time_limit * len(batch)
                               / max(r.num_tiles, 1))
            live = np.array([x.max_live_bytes for x in got], np.int64)
            worst = max(worst, int(live.max()))
            over.append(batch[live > tm])
            done += len(batch)
        yield v, worst, np.sort(np.concatenate(over)) if over else np.zeros(0, np.int64)


def fewest_by_upper_bound(m: SplitModel | list[SplitModel], most: int
                          ) -> tuple[int, list[int]] | None:
    """The fewest stages (up to ``most``) with a split whose every stage fits under
    tileMemory by ``SplitModel.proxy`` (all of a stage's bytes live at once: an upper bound
    of its estimate, so the split fits by the estimate too), and that split; ``None`` when
    none does. Given several models of one report (its readings of the stash), a split that
    fits by every one. Cheap: no bound is computed (``tilemem oom``'s next step)."""
    models = m if isinstance(m, list) else [m]
    m = _Worst(models) if len(models) > 1 else models[0]
    tm = models[0].r.target.tile_memory
    for n in range(1, min(most, m.L) + 1):
        cuts = [] if n == 1 else _greedy(m, n, tm)
        if cuts is not None and (n > 1 or m.proxy(0, 0, m.L, 1) <= tm):
            return n, cuts
    return None


class _Worst:
    """The largest ``proxy`` of several models of one report, for ``_greedy``."""

    def __init__(self, models: list[SplitModel]):
        self.models, self.L = models, models[0].L

    def proxy(self, s: int, i: int, j: int, n: int) -> float:
        return max(x.proxy(s, i, j, n) for x in self.models)
