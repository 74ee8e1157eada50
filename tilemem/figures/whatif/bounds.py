"""The bounds of many what-ifs of one report on the same tiles, from one structure: what
``oom``'s next steps and its plan that fits ask (``tilemem.figures.program``,
``tilemem.figures.plan``).

Every edit but recomputation only re-sizes variables (offloading: size 0): the tiles' class
graphs stay as they are, so they are taken apart once (``tilemem.liveness.reweight.
TileCliques``) and each what-if is a weighted maximum over them, equal to ``max_live_all``
on the changed report. Recomputation changes the lifetimes of some classes: its report
(``tilemem.figures.whatif.recompute``, read from the report as compiled) is taken apart once too,
and every combination with it re-sizes that report's rows (a recomputed copy as its row).
Sharding the weights adds their gathered copies, each live around a read
(``tilemem.figures.whatif.gathered``): that report (recomputed first when asked) is taken apart once
too, a copy re-sized as its weight's whole size.
So a whole-IPU ``oom`` takes each tile's graph apart once or twice, not once a what-if.
"""
from __future__ import annotations

import numpy as np

from ...model import Report


class WhatIfBounds:
    """Maximum live bytes of ``tiles`` of ``r`` under what-ifs (``of_sizes``, ``of_edits``),
    in the order of ``tiles``; ``time_limit``: seconds of search a tile whose class graph is
    not chordal, as ``max_live_all``'s."""

    def __init__(self, r: Report, tiles, time_limit: float = 10.0):
        from ...liveness.reweight import TileCliques

        self.r = r
        self.tiles = np.atleast_1d(np.asarray(tiles, np.int64))
        self.time_limit = time_limit
        self._cliques = TileCliques(r, self.tiles, time_limit * max(len(self.tiles), 1))
        self._recomputed: dict = {}

    def of_sizes(self, size: np.ndarray, allocated: np.ndarray | None = None) -> np.ndarray:
        """The bound with the report's rows at ``size`` (not ``allocated``: offloaded)."""
        return self._cliques.max_live(size, allocated)

    def of_edits(self, edits: list) -> tuple[np.ndarray, list]:
        """The bound after ``edits`` (``tilemem.figures.whatif.edits.parse_edits``), as
        ``max_live_all`` on ``apply_recompute(*apply_edits(r, edits), base=r)``'s report,
        and what each edit matched (``Applied``); ``ReportError`` as ``apply_edits``."""
        from .gathered import gathering
        from .edits import (RECOMPUTE, edited_sizes, gathers_weights, recompute_applied,
                             recompute_of)

        size, allocated, applied = edited_sizes(self.r, edits)
        e = next((x for x in edits if x.kind == RECOMPUTE), None)
        g = gathering(self.r) if gathers_weights(edits) else None
        if g is not None and g.changes:
            rc = None if e is None else recompute_of(self.r, e)
            if rc is not None:
                applied = applied + [recompute_applied(self.r, e, rc)]
            out = np.zeros(len(self.tiles), np.int64)
            for pos, lo, n, rk, gk, cliques in self._gathered_parts(
                    None if e is None else e.pattern, rc, g):
                s, a = size[lo:lo + n], allocated[lo:lo + n]
                if rk is not None:
                    s, a = rk.resized(s, a)
                out[pos] = cliques.max_live(*gk.resized(s, a))
            return out, applied
        if e is None:
            return self._cliques.max_live(size, allocated), applied
        rc = recompute_of(self.r, e)
        out = np.zeros(len(self.tiles), np.int64)
        for pos, lo, part, cliques in self._recomputed_parts(e.pattern, rc):
            n = part.base.num_vars   # an IPU's rows of the whole columns, or all of them
            out[pos] = cliques.max_live(*part.resized(size[lo:lo + n], allocated[lo:lo + n]))
        return out, applied + [recompute_applied(self.r, e, rc)]

    def matched(self, edits: list) -> list:
        """What each of ``edits`` matches (``Applied``), as ``of_edits`` says, without the
        bound; ``ReportError`` as ``of_edits``."""
        from .edits import RECOMPUTE, edited_sizes, recompute_applied, recompute_of

        _, _, applied = edited_sizes(self.r, edits)
        e = next((x for x in edits if x.kind == RECOMPUTE), None)
        if e is None:
            return applied
        return applied + [recompute_applied(self.r, e, recompute_of(self.r, e))]

    def _gathered_parts(self, pattern, rc, g) -> list:
        """``(positions in tiles, first row, rows, Recomputation or None, Gathering,
        TileCliques)`` of the report with the weights' gathered copies
        (``tilemem.figures.whatif.gathered``), recomputed first as ``pattern`` says (``None``:
        not): one IPU at a time on an ordered report of several (as ``_recomputed_parts``),
        else the whole report; taken apart once each."""
        key = ("gathered", pattern)
        if key not in self._recomputed:
            from ...liveness.reweight import TileCliques
            from ...model.ipuview import ipu_bounds, tile_ordered

            parts = []
            if self.r.target.num_ipus > 1 and tile_ordered(self.r):
                ipu = self.r.target.ipu_of(self.tiles)
                for k in np.unique(ipu).tolist():
                    pos = np.flatnonzero(ipu == k)
                    gk = g.on_ipu(k)
                    rk = None if rc is None or not rc.changes else rc.on_ipu(k)
                    report = gk.on(gk.base if rk is None else rk.report)
                    parts.append((pos, int(ipu_bounds(self.r)[k]), gk.base.num_vars, rk, gk,
                                  TileCliques(report, self.tiles[pos],
                                              self.time_limit * len(pos))))
                    if rk is not None:
                        rk.__dict__.pop("report", None)
            else:
                base = self.r if rc is None else rc.report
                # once a report: each WhatIfBounds on it (config's search tiles, rebuilt, and
                # its checks) would otherwise add the same copies again
                report = base.cached("gathered_on", lambda: g.on(base))
                parts.append((np.arange(len(self.tiles)), 0, self.r.num_vars, rc, g,
                               TileCliques(report, self.tiles,
                                           self.time_limit * max(len(self.tiles), 1))))
            self._recomputed[key] = parts
        return self._recomputed[key]

    def _recomputed_parts(self, pattern: str, rc) -> list:
        """``(positions in tiles, first row, Recomputation, TileCliques)`` of the recomputed
        report: one IPU at a time on an ordered report of several (each IPU's changed part,
        its tiles' graphs taken apart, then the part let go), else the whole report."""
        if pattern not in self._recomputed:
            from ...liveness.reweight import TileCliques
            from ...model.ipuview import ipu_bounds, tile_ordered

            parts = []
            if self.r.target.num_ipus > 1 and tile_ordered(self.r) and rc.changes:
                ipu = self.r.target.ipu_of(self.tiles)
                for k in np.unique(ipu).tolist():
                    pos = np.flatnonzero(ipu == k)
                    part = rc.on_ipu(k)
                    parts.append((pos, int(ipu_bounds(self.r)[k]), part, TileCliques(
                        part.report, self.tiles[pos], self.time_limit * len(pos))))
                    part.__dict__.pop("report", None)   # kept: the cliques, not the report
            else:
                parts.append((np.arange(len(self.tiles)), 0, rc, TileCliques(
                    rc.report, self.tiles, self.time_limit * max(len(self.tiles), 1))))
            self._recomputed[pattern] = parts
        return self._recomputed[pattern]


def whatif_bounds(r: Report, tiles, time_limit: float = 10.0) -> WhatIfBounds:
    """``WhatIfBounds`` of ``r`` on ``tiles``, kept with the report (its one latest), so
    the next steps and the plan of one ``oom`` share it."""
    tiles = np.atleast_1d(np.asarray(tiles, np.int64))
    held = r._cache.get("whatif_bounds")
    if (held is None or not np.array_equal(held.tiles, tiles)
            or held.time_limit != time_limit):
        held = r._cache["whatif_bounds"] = WhatIfBounds(r, tiles, time_limit)
    return held
