"""Maximum live bytes of the same variables at many other sizes, from the class graph's
maximal cliques found once.

A tile's class graph is the report's one class graph restricted to the classes on the tile,
so every clique of it lies in a maximal clique of the report's graph; with non-negative
weights the tile's heaviest clique is the heaviest of those maximal cliques restricted to the
tile. When the report's class graph is chordal it has at most one maximal clique a class,
found by one maximum cardinality search (``graphalg``); then re-weighting the variables (a
pipeline stage's part of the program, a what-if) needs one pass over each tile's classes
and the cliques holding them, instead of a search of every tile's graph again. The answer is
the maximum ``max_live_all`` proves, exactly: both are the heaviest clique.

Classes added to the graph for one evaluation (a pipeline's buffers: ``Extra``, live over a
range of class steps and interfering with every class whose steps overlap it) are handled
exactly too: a clique holding some of them is those (pairwise overlapping) and a clique of
the classes overlapping every one of them.

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=range(5), tile=[0, 0, 0, 1, 1], size=[8, 4, 2, 6, 6],
...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
...     eq_class=[0, 1, 2, 0, 2], interference=[[1], [0, 2], [1]])     # a path 0 - 1 - 2
>>> b = ReweightedBound.of(r)
>>> b.max_live(b.node_weights(r.size), np.array([0, 1]))[0].tolist()   # {0, 1}; 0 and 2 apart
[12, 6]
>>> b.max_live(b.node_weights(np.array([0, 4, 9, 6, 6])), np.array([0]))[0].tolist()
[13]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ..jit import njit

from ..model import Report
from .classgraph import sorted_interference
from .graphalg import _chordal_pass

#: Most classes added for one evaluation (one bit each of a class's mask, for every clique
#: of them: at most 63 cliques of added classes).
MAX_EXTRA = 6


@dataclass(frozen=True)
class Extra:
    """A class added for one evaluation: copies of ``rows`` (on their tiles, at the report's
    sizes) live over the class steps ``[start, end)``; it interferes with every class, added
    or not, whose steps overlap that range (``steps[c, 0] < end`` and ``steps[c, 1] >
    start``)."""

    rows: np.ndarray
    start: int
    end: int


class ReweightedBound:
    """The maximal cliques of a report's class graph (chordal), and the variables' tiles and
    classes: ``max_live`` of any sizes of the same variables. ``of(r)`` is ``None`` when the
    graph is not chordal (its maximal cliques may then be too many to list)."""

    def __init__(self, r: Report, clique_ptr: np.ndarray, clique_of: np.ndarray,
                 cliques: int):
        self.r = r
        #: ``clique_of[clique_ptr[c]:clique_ptr[c + 1]]``: the maximal cliques holding class c
        self.clique_ptr, self.clique_of, self.cliques = clique_ptr, clique_of, cliques
        T, C = r.num_tiles, max(r.num_classes, 1)
        rows = np.flatnonzero(r.allocated & ~r.always_live)
        key = r.tile[rows] * C + r.eq_class[rows]
        ukey, inv = np.unique(key, return_inverse=True)
        self._rows, self._node_of = rows, inv.reshape(-1)
        self.nodes = len(ukey)
        self.node_class = ukey % C
        self.tile_ptr = np.zeros(T + 1, np.int64)
        np.cumsum(np.bincount(ukey // C, minlength=T), out=self.tile_ptr[1:])
        self._al_rows = np.flatnonzero(r.allocated & r.always_live)

    @classmethod
    def of(cls, r: Report) -> "ReweightedBound | None":
        inter = sorted_interference(r)
        C = r.num_classes
        if C == 0:
            return cls(r, np.zeros(1, np.int64), np.zeros(0, np.int64), 0)
        pos, cand, chordal = _chordal_pass(inter.indptr, inter.indices, np.ones(C, np.int64))
        if not chordal:
            return None
        # Blair & Peyton: in a maximum cardinality search of a chordal graph, a vertex and
        # its earlier neighbours are a maximal clique exactly when the next vertex visited
        # has no more earlier neighbours than it (or it is the last)
        order = np.argsort(pos)
        earlier = (cand - 1)[order]
        is_max = np.ones(C, bool)
        is_max[order[:-1]] = earlier[1:] <= earlier[:-1]
        clique_id = np.full(C, -1, np.int64)
        clique_id[is_max] = np.arange(int(is_max.sum()))
        src, dst = inter.row_ids(), inter.indices
        keep = is_max[src] & (pos[dst] < pos[src])
        lead = np.flatnonzero(is_max)
        member = np.concatenate([dst[keep], lead])
        owner = np.concatenate([clique_id[src[keep]], clique_id[lead]])
        by = np.argsort(member, kind="stable")
        ptr = np.zeros(C + 1, np.int64)
        np.cumsum(np.bincount(member, minlength=C), out=ptr[1:])
        return cls(r, ptr, owner[by], len(lead))

    def node_weights(self, size: np.ndarray) -> "Weights":
        """The variables at sizes ``size`` (one a row of the report; 0: not on its tile):
        the weight of every (tile, class) and the always-live bytes of every tile."""
        r = self.r
        w = np.bincount(self._node_of, size[self._rows], minlength=self.nodes)
        al = np.bincount(r.tile[self._al_rows], size[self._al_rows], minlength=r.num_tiles)
        return Weights(np.rint(w).astype(np.int64), np.rint(al).astype(np.int64))

    def max_live(self, w: "Weights", tiles: np.ndarray, extra: list[Extra] = ()
                 ) -> tuple[np.ndarray, np.ndarray]:
        """``(max_live_bytes, always_live_bytes)`` of ``tiles`` with the variables weighing
        ``w`` and the classes ``extra`` added (they need the report's class steps), as
        ``max_live_all``'s ``MaxLive`` would give them."""
        tiles = np.asarray(tiles, np.int64)
        masks, groups, group_w = self._extra(list(extra), tiles)
        peak = _peaks(self.tile_ptr, self.node_class, w.node, self.clique_ptr, self.clique_of,
                      self.cliques, tiles, masks, len(groups), group_w)
        return peak + w.always_live[tiles], w.always_live[tiles]

    def _extra(self, extra: list[Extra], tiles: np.ndarray):
        """Every clique of the added classes (pairwise overlapping), a mask a class of the
        cliques it overlaps every member of, and each clique's bytes on each of ``tiles``."""
        C = max(self.r.num_classes, 1)
        if not extra:
            return np.zeros(C, np.uint64), [], np.zeros((0, len(tiles)), np.int64)
        if len(extra) > MAX_EXTRA:
            raise ValueError(f"at most {MAX_EXTRA} added classes, not {len(extra)}")
        steps = self.r.class_steps
        if steps is None:
            raise ValueError("added classes need the report's class steps")
        r = self.r
        span = np.array([[e.start, e.end] for e in extra], np.int64)
        k = len(extra)
        hits = (span[:, None, 0] < span[None, :, 1]) & (span[:, None, 1] > span[None, :, 0])
        adj = hits | hits.T
        groups = [[b for b in range(k) if g >> b & 1] for g in range(1, 1 << k)]
        groups = [g for g in groups if all(adj[a, b] for a in g for b in g if a != b)]
        over = [(steps[:, 0] < e.end) & (steps[:, 1] > e.start) for e in extra]
        masks = np.zeros(len(steps), np.uint64)
        for q, g in enumerate(groups):
            inside = np.logical_and.reduce([over[b] for b in g])
            masks[inside] |= np.uint64(1 << q)
        on = np.zeros((k, r.num_tiles), np.int64)
        for b, e in enumerate(extra):
            on[b] = np.bincount(r.tile[e.rows], r.size[e.rows], minlength=r.num_tiles)
        group_w = np.array([on[g].sum(axis=0)[tiles] for g in groups], np.int64)
        return masks, groups, group_w.reshape(len(groups), len(tiles))


@dataclass(frozen=True)
class Weights:
    """``ReweightedBound.node_weights``: bytes of every (tile, class) node, and of every
    tile's always-live variables."""

    node: np.ndarray
    always_live: np.ndarray


@njit(cache=True)
def _peaks(tile_ptr, node_class, node_w, clique_ptr, clique_of, cliques, tiles, masks,
           groups, group_w):
    """Per tile of ``tiles``: the heaviest maximal clique restricted to the tile's classes,
    or a clique of added classes (``groups``, bytes ``group_w``) with the heaviest clique of
    the classes overlapping all of them (``masks``)."""
    out = np.zeros(len(tiles), np.int64)
    acc = np.zeros((groups + 1, max(cliques, 1)), np.int64)
    for n in range(len(tiles)):
        t = tiles[n]
        acc[:] = 0
        for x in range(tile_ptr[t], tile_ptr[t + 1]):
            w = node_w[x]
            if w == 0:
                continue
            c = node_class[x]
            for k in range(clique_ptr[c], clique_ptr[c + 1]):
                acc[0, clique_of[k]] += w
            m = masks[c]
            q = 0
            while m:
                if m & np.uint64(1):
                    for k in range(clique_ptr[c], clique_ptr[c + 1]):
                        acc[q + 1, clique_of[k]] += w
                m >>= np.uint64(1)
                q += 1
        best = acc[0].max()
        for q in range(groups):
            v = group_w[q, n] + acc[q + 1].max()
            if v > best:
                best = v
        out[n] = best
    return out
