"""Maximum live bytes of some tiles at many sizes of the same variables: each tile's class
graph taken apart once, every re-weighting answered from it (``TileCliques``).

A what-if that only re-sizes variables (offloading: size 0; FP16: half; a smaller
micro-batch) leaves every tile's class graph as it is: its vertices (the classes with
variables on the tile that are not alwaysLive) and edges (interference) do not depend on
sizes. So the work of ``max_live_all`` that does not depend on sizes is done once, per tile:

- a tile whose class graph is chordal (every interval graph is one; a maximum cardinality
  search tells, whatever the weights): its maximal cliques, at most one a vertex (Blair &
  Peyton, as ``tilemem.liveness.cliques``). A vertex in every one of them (persistent state,
  live with everything on the tile) is counted once, not once a clique. The heaviest clique
  for any weights is then ``base + max over cliques``: what ``max_live_all`` finds by its
  perfect elimination ordering, exactly;
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
[[12, 6], [13, 6]]
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..model import Report
from .classgraph import _local_graph, sorted_interference
from .graphalg import _chordal_pass, max_weight_clique
from .maxlive import NODES_PER_SECOND


class TileCliques:
    """The class graphs of ``tiles`` of ``r``, taken apart once (see the module docstring);
    ``max_live(size, allocated)``: every tile's maximum live bytes at those sizes, in the
    order of ``tiles``, as ``max_live_all`` on the report with those sizes would give them.
    ``time_limit``: seconds of search for all the tiles that are not chordal together, for
    each re-weighting, as ``max_live_all``'s."""

    def __init__(self, r: Report, tiles, time_limit: float = 10.0):
        self.r = r
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
        ukey, inv = np.unique(key, return_inverse=True)
        self._rows, self._node_of = rows, inv.reshape(-1)
        self._al_rows = np.flatnonzero(on & r.always_live)
        self._al_pos = pos[r.tile[self._al_rows]]
        self.nodes = len(ukey)
        node_class = ukey % C
        self.tile_ptr = np.zeros(len(self.tiles) + 1, np.int64)
        np.cumsum(np.bincount(ukey // C, minlength=len(self.tiles)), out=self.tile_ptr[1:])
        inter = sorted_interference(r)
        (self.chordal, self.univ, self.mem_ptr, self.mem_of,
         self.tile_cliques) = _tile_cliques(inter.indptr, inter.indices, self.tile_ptr,
                                            node_class, C)
        # the graphs of the tiles that are not chordal, searched at each re-weighting
        self._graphs = {}
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
        peak = _peaks(self.tile_ptr, self.chordal, self.univ, self.mem_ptr, self.mem_of,
                      self.tile_cliques, node_w)
        if self._graphs:
            left = max(0.0, self.time_limit)
            todo = list(self._graphs.items())
            for i, (t, (ip, ix)) in enumerate(todo):
                a, b = self.tile_ptr[t], self.tile_ptr[t + 1]
                budget = left / (len(todo) - i)
                c = max_weight_clique(ip, ix, node_w[a:b],
                                      node_limit=max(1000, int(budget * NODES_PER_SECOND)))
                peak[t] = c.weight
        return peak + al


@njit(cache=True)
def _tile_cliques(g_indptr, g_indices, tile_ptr, node_class, num_classes):
    """Per tile: whether its class graph is chordal; when it is, each node's maximal cliques
    of the tile (numbered from 0 within it), a node in every one flagged ``univ`` instead.
    Returns ``(chordal, univ, mem_ptr, mem_of, cliques)``: node ``x``'s cliques are
    ``mem_of[mem_ptr[x]:mem_ptr[x + 1]]``; ``cliques[t]`` the tile's number of them."""
    nt = len(tile_ptr) - 1
    nodes = len(node_class)
    chordal = np.ones(nt, np.bool_)
    univ = np.zeros(nodes, np.bool_)
    cliques = np.zeros(nt, np.int64)
    count = np.zeros(nodes + 1, np.int64)
    mark = np.full(num_classes, -1, np.int64)
    cap = max(nodes, 16)
    buf_node = np.empty(cap, np.int64)     # (node, clique) memberships, tile by tile
    buf_clq = np.empty(cap, np.int32)
    m = 0
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
            continue
        # Blair & Peyton: v and its earlier neighbours are a maximal clique exactly when the
        # next vertex visited has no more earlier neighbours than v (or v is the last)
        order = np.argsort(pos)
        is_max = np.zeros(n, np.bool_)
        for i in range(n - 1):
            is_max[order[i]] = cand[order[i + 1]] <= cand[order[i]]
        is_max[order[n - 1]] = True
        k = 0
        inside = np.zeros(n, np.int64)   # how many of the tile's cliques hold each vertex
        start = m
        for v in range(n):
            if not is_max[v]:
                continue
            need = m + 1 + ip[v + 1] - ip[v]
            if need > len(buf_node):
                grow = max(need, 2 * len(buf_node))
                nb = np.empty(grow, np.int64)
                nb[:m] = buf_node[:m]
                nc = np.empty(grow, np.int32)
                nc[:m] = buf_clq[:m]
                buf_node, buf_clq = nb, nc
            buf_node[m] = v
            buf_clq[m] = k
            m += 1
            inside[v] += 1
            for j in range(ip[v], ip[v + 1]):
                u = ix[j]
                if pos[u] < pos[v]:
                    buf_node[m] = u
                    buf_clq[m] = k
                    m += 1
                    inside[u] += 1
            k += 1
        cliques[t] = k
        # a vertex in every clique is counted once, as the tile's base
        keep = start
        for q in range(start, m):
            v = buf_node[q]
            if inside[v] == k:
                univ[a + v] = True
            else:
                buf_node[keep] = a + v
                buf_clq[keep] = buf_clq[q]
                keep += 1
                count[a + v + 1] += 1
        m = keep
    mem_ptr = np.zeros(nodes + 1, np.int64)
    for x in range(nodes):
        mem_ptr[x + 1] = mem_ptr[x] + count[x + 1]
    mem_of = np.empty(m, np.int32)
    fill = mem_ptr[:nodes].copy()
    for q in range(m):
        x = buf_node[q]
        mem_of[fill[x]] = buf_clq[q]
        fill[x] += 1
    return chordal, univ, mem_ptr, mem_of, cliques


@njit(cache=True)
def _peaks(tile_ptr, chordal, univ, mem_ptr, mem_of, cliques, node_w):
    """Per chordal tile: the weight of its vertices in every clique plus its heaviest
    clique of the others (0 for the tiles that are not chordal: searched apart)."""
    nt = len(tile_ptr) - 1
    out = np.zeros(nt, np.int64)
    most = 1
    for t in range(nt):
        if cliques[t] > most:
            most = cliques[t]
    acc = np.zeros(most, np.int64)
    for t in range(nt):
        if not chordal[t] or tile_ptr[t + 1] == tile_ptr[t]:
            continue
        acc[:cliques[t]] = 0
        base = 0
        for x in range(tile_ptr[t], tile_ptr[t + 1]):
            w = node_w[x]
            if w == 0:
                continue
            if univ[x]:
                base += w
                continue
            for k in range(mem_ptr[x], mem_ptr[x + 1]):
                acc[mem_of[k]] += w
        best = 0
        for q in range(cliques[t]):
            if acc[q] > best:
                best = acc[q]
        out[t] = base + best
    return out
