"""Maximum live bytes of some tiles at many sizes of the same variables: each tile's class
graph taken apart once, every re-weighting answered from it (``TileCliques``).

A what-if that only re-sizes variables (offloading: size 0; FP16: half; a smaller
micro-batch) leaves every tile's class graph as it is: its vertices (the classes with
variables on the tile that are not alwaysLive) and edges (interference) do not depend on
sizes. So the work of ``max_live_all`` that does not depend on sizes is done once, per tile:

- a tile whose class graph is chordal (every interval graph is one; a maximum cardinality
  search tells, whatever the weights): its maximal cliques, at most one a vertex (Blair &
  Peyton, as ``tilemem.liveness.cliques``), numbered in the search's order; a vertex's
  cliques are then mostly runs of consecutive numbers (all of them for an interval graph
  in a consecutive order), kept as ``[lo, hi)`` pairs, so a re-weighting is a difference
  array summed once a tile instead of a sum a clique a vertex. The heaviest clique for any
  weights is the heaviest of these sums: what ``max_live_all`` finds by its perfect
  elimination ordering, exactly;
- a tile whose class graph is not chordal (loop-carried classes, a pipelined report's
  buffers): its graph is kept and searched again for each re-weighting with
  ``max_weight_clique``, as ``max_live_all`` does (same bounds, same budget).

This holds for any interference, interval or not: it is per tile what ``max_live_all`` does,
with the size-free part done once. (``tilemem.liveness.cliques`` does the same from the
report's one class graph when that is chordal, for many tiles and added classes.)

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=range(5), tile=[0, 0, 0, 1, 1], size=[8, 4, 2, 6, 6],
...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5,
...     eq_class=[0, 1, 2, 0, 2], interference=[[1], [0, 2], [1]])     # a path 0 - 1 - 2
>>> tc = TileCliques(r, [0, 1])
>>> tc.max_live(r.size).tolist(), tc.max_live(np.array([0, 4, 9, 6, 6])).tolist()
([12, 6], [13, 6])
"""
from __future__ import annotations

import hashlib
import time

import numpy as np
from ..jit import njit

from ..model import Report, sorted_unique
from .classgraph import _local_graph, sorted_interference
from .graphalg import _chordal_pass, max_weight_clique
from .maxlive import NODES_PER_SECOND
from .sorting import argsort


class TileCliques:
    """The class graphs of ``tiles`` of ``r``, taken apart once (see the module docstring);
    ``max_live(size, allocated)``: every tile's maximum live bytes at those sizes, in the
    order of ``tiles``, as ``max_live_all`` on the report with those sizes would give them.
    ``time_limit``: seconds of search for all the tiles that are not chordal together, for
    each re-weighting, as ``max_live_all``'s; a tile whose search it stops gets the search's
    proven upper bound (never under), and a tile asked again at the same weights gets what
    it got."""

    def __init__(self, r: Report, tiles, time_limit: float = 10.0):
        # the report is not kept: only what re-weighting needs (a part built for these
        # cliques, an IPU's recomputed report say, can then go)
        self.tiles = np.atleast_1d(np.asarray(tiles, np.int64))
        self.time_limit = time_limit
        T, C = r.num_tiles, max(r.num_classes, 1)
        pos = np.full(T, -1, np.int64)
        pos[self.tiles] = np.arange(len(self.tiles))
        on = r.allocated & (r.tile >= 0)
        on[on] = pos[r.tile[on]] >= 0
        rows = np.flatnonzero(on & ~r.always_live)
        # nodes: (position of the tile in ``tiles``, class), sorted so
        key = pos[r.tile[rows]] * C + r.eq_class[rows]
        ukey, inv = sorted_unique(key, return_inverse=True)
        self._rows, self._node_of = rows, inv.reshape(-1)
        self._al_rows = np.flatnonzero(on & r.always_live)
        self._al_pos = pos[r.tile[self._al_rows]]
        self.nodes = len(ukey)
        node_class = ukey % C
        self.tile_ptr = np.zeros(len(self.tiles) + 1, np.int64)
        np.cumsum(np.bincount(ukey // C, minlength=len(self.tiles)), out=self.tile_ptr[1:])
        inter = sorted_interference(r)
        (self.chordal, self.mem_ptr, self.mem_of,
         self.tile_cliques) = _tile_cliques(inter.indptr, inter.indices, self.tile_ptr,
                                            node_class, C)
        # the graphs of the tiles that are not chordal, searched at each re-weighting, and
        # what each search found, by tile and weights
        self._graphs = {}
        self._searched: dict = {}
        mark = np.full(C, -1, np.int64)
        for t in np.flatnonzero(~self.chordal).tolist():
            a, b = self.tile_ptr[t], self.tile_ptr[t + 1]
            self._graphs[t] = _local_graph(inter.indptr, inter.indices, node_class[a:b], mark)

    def max_live(self, size: np.ndarray, allocated: np.ndarray | None = None) -> np.ndarray:
        """Maximum live bytes (always-live bytes included) of every tile of ``tiles`` with
        the variables at ``size`` (one a row of the report), those not ``allocated`` (default:
        the report's) weighing nothing."""
        w = size if allocated is None else np.where(allocated, size, 0)
        node_w = np.rint(np.bincount(self._node_of, w[self._rows],
                                     minlength=self.nodes)).astype(np.int64)
        al = np.rint(np.bincount(self._al_pos, w[self._al_rows],
                                 minlength=len(self.tiles))).astype(np.int64)
        peak = _peaks(self.tile_ptr, self.chordal, self.mem_ptr, self.mem_of,
                      self.tile_cliques, node_w)
        if self._graphs:
            # ``time_limit`` for all of them, what is left shared among the tiles left (as
            # ``max_live_all`` shares it)
            deadline = time.monotonic() + max(0.0, self.time_limit)
            todo = []
            for t, g in self._graphs.items():
                a, b = self.tile_ptr[t], self.tile_ptr[t + 1]
                # by a digest: a Pod stage's tile has thousands of classes, and a search
                # asks for thousands of weightings
                key = (t, hashlib.blake2b(node_w[a:b].tobytes(), digest_size=16).digest())
                if key in self._searched:   # a search asks for the same weights again
                    peak[t] = self._searched[key]
                else:
                    todo.append((t, g, key))
            for i, (t, (ip, ix), key) in enumerate(todo):
                a, b = self.tile_ptr[t], self.tile_ptr[t + 1]
                budget = max(0.0, deadline - time.monotonic()) / (len(todo) - i)
                c = max_weight_clique(ip, ix, node_w[a:b],
                                      node_limit=max(1000, int(budget * NODES_PER_SECOND)))
                # a search its budget stopped: its proven upper bound, so that an estimate
                # read as "fits" is never under because the time ran out
                peak[t] = self._searched[key] = c.upper
        return peak + al


@njit(cache=True)
def _tile_cliques(g_indptr, g_indices, tile_ptr, node_class, num_classes):
    """Per tile: whether its class graph is chordal; when it is, its maximal cliques
    (numbered from 0 within the tile, in the search's order) and, for each node, the runs of
    consecutive cliques holding it. Returns ``(chordal, mem_ptr, mem_of, cliques)``: node
    ``x``'s runs are the pairs ``[lo, hi)`` of ``mem_of[mem_ptr[x]:mem_ptr[x + 1]]``;
    ``cliques[t]`` the tile's number of cliques."""
    nt = len(tile_ptr) - 1
    nodes = len(node_class)
    chordal = np.ones(nt, np.bool_)
    cliques = np.zeros(nt, np.int64)
    mem_ptr = np.zeros(nodes + 1, np.int64)
    mark = np.full(num_classes, -1, np.int64)
    out = np.empty(max(nodes, 16), np.int32)      # every node's list, node by node
    m = 0
    raw_v = np.empty(16, np.int64)                # one tile's (vertex, clique) memberships
    raw_q = np.empty(16, np.int32)
    for t in range(nt):
        a = tile_ptr[t]
        b = tile_ptr[t + 1]
        n = b - a
        if n == 0:
            continue
        ip, ix = _local_graph(g_indptr, g_indices, node_class[a:b], mark)
        pos, cand, ch = _chordal_pass(ip, ix, np.ones(n, np.int64))
        if not ch:
            chordal[t] = False
            for x in range(a, b):
                mem_ptr[x + 1] = m
            continue
        # Blair & Peyton: v and its earlier neighbours are a maximal clique exactly when the
        # next vertex visited has no more earlier neighbours than v (or v is the last)
        order = argsort(pos)
        is_max = np.zeros(n, np.bool_)
        for i in range(n - 1):
            is_max[order[i]] = cand[order[i + 1]] <= cand[order[i]]
        is_max[order[n - 1]] = True
        k = 0
        r = 0
        inside = np.zeros(n + 1, np.int64)   # how many cliques hold each vertex
        for v in range(n):
            if not is_max[v]:
                continue
            need = r + 1 + ip[v + 1] - ip[v]
            if need > len(raw_v):
                grow = max(need, 2 * len(raw_v))
                nv = np.empty(grow, np.int64)
                nv[:r] = raw_v[:r]
                nq = np.empty(grow, np.int32)
                nq[:r] = raw_q[:r]
                raw_v, raw_q = nv, nq
            raw_v[r] = v
            raw_q[r] = k
            r += 1
            inside[v + 1] += 1
            for j in range(ip[v], ip[v + 1]):
                u = ix[j]
                if pos[u] < pos[v]:
                    raw_v[r] = u
                    raw_q[r] = k
                    r += 1
                    inside[u + 1] += 1
            k += 1
        cliques[t] = k
        # each vertex's cliques in order (a counting sort by vertex keeps clique order)
        start = np.zeros(n + 1, np.int64)
        for v in range(n):
            start[v + 1] = start[v] + inside[v + 1]
        fill = start[:n].copy()
        by = np.empty(r, np.int32)
        for e in range(r):
            v = raw_v[e]
            by[fill[v]] = raw_q[e]
            fill[v] += 1
        for v in range(n):   # its cliques as runs of consecutive numbers [lo, hi)
            if m + 2 * inside[v + 1] > len(out):
                grow = max(m + 2 * inside[v + 1], 2 * len(out))
                no = np.empty(grow, np.int32)
                no[:m] = out[:m]
                out = no
            e = start[v]
            while e < start[v + 1]:
                lo = by[e]
                e += 1
                while e < start[v + 1] and by[e] == by[e - 1] + 1:
                    e += 1
                out[m] = lo
                out[m + 1] = by[e - 1] + 1
                m += 2
            mem_ptr[a + v + 1] = m
    # nodes of empty or skipped tiles: empty lists
    for x in range(nodes):
        if mem_ptr[x + 1] < mem_ptr[x]:
            mem_ptr[x + 1] = mem_ptr[x]
    return chordal, mem_ptr, out[:m].copy(), cliques


@njit(cache=True)
def _peaks(tile_ptr, chordal, mem_ptr, mem_of, cliques, node_w):
    """Per chordal tile: its heaviest clique, each node's weight added to its runs of
    cliques (a difference array summed once); 0 for the tiles that are not chordal
    (searched apart)."""
    nt = len(tile_ptr) - 1
    out = np.zeros(nt, np.int64)
    most = 1
    for t in range(nt):
        if cliques[t] > most:
            most = cliques[t]
    diff = np.zeros(most + 1, np.int64)
    for t in range(nt):
        if not chordal[t] or tile_ptr[t + 1] == tile_ptr[t]:
            continue
        k = cliques[t]
        diff[:k + 1] = 0
        for x in range(tile_ptr[t], tile_ptr[t + 1]):
            w = node_w[x]
            if w == 0:
                continue
            for e in range(mem_ptr[x], mem_ptr[x + 1], 2):
                diff[mem_of[e]] += w
                diff[mem_of[e + 1]] -= w
        run = 0
        best = 0
        for q in range(k):
            run += diff[q]
            if q == 0 or run > best:
                best = run
        out[t] = best
    return out
