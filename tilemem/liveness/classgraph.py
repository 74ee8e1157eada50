"""The class interference graph: sorted and symmetric, per tile (the classes with bytes on
it), and as a networkx graph on demand.
"""
from __future__ import annotations

import numpy as np
from ..jit import njit

from ..model import Csr, Report
from ..model.frozen import frozen
from ..model.interference import tile_interference


def sorted_interference(r: Report) -> Csr:
    """The interference CSR with every row sorted and unique, symmetric, without self entries.

    tilemem's readers already give that; a ``Csr`` passed to ``Report.from_columns`` may not
    be. Cached per report (the check sorts once), so per-tile calls stay cheap. Of a report
    over several IPUs only the pairs of classes that share a tile
    (``tilemem.model.interference.tile_interference``): the same whether it was read pruned.
    """
    return r.cached("sorted_interference", lambda: _frozen(_normalise(tile_interference(r))))


def _frozen(c: Csr) -> Csr:
    """``c`` with read-only arrays (``tilemem.model.frozen``): the kernels that walk the class
    graph then compile once, whether the report was read from JSON or from a ``.capnp``."""
    return Csr(frozen(c.indptr, np.int64), frozen(c.indices, np.int64))


def _normalise(inter: Csr) -> Csr:
    c = max(inter.num_rows, 1)
    src, dst = inter.row_ids(), inter.indices
    keys = src * c + dst
    if (bool(np.all(keys[1:] > keys[:-1])) and not bool(np.any(src == dst))
            and np.array_equal(np.sort(dst * c + src), keys)):
        return inter
    keep = src != dst
    keys = np.unique(np.concatenate([keys[keep], (dst * c + src)[keep]]))
    return Csr.from_lengths(np.bincount(keys // c, minlength=inter.num_rows), keys % c)


def _tile_nodes(r: Report, tiles: np.ndarray | None):
    """The vertices of every tile's class graph: ``(tile_ptr, node_class, node_weight)``, nodes
    grouped by tile (in the order of ``tiles``) and sorted by class within a tile."""
    if tiles is None:
        m = np.flatnonzero(r.allocated & ~r.always_live)
    else:  # only the rows of those tiles (cheap for one tile of a large report); a row is on
        # one tile, so those of distinct tiles are distinct: no sort of them is needed (the
        # nodes are keyed below), and at a Pod's tile batches that sort was most of the pass
        rows = [r.tile_rows(t) for t in np.unique(tiles)]
        m = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        m = m[~r.always_live[m]]
    c = max(r.num_classes, 1)
    key = r.tile[m] * c + r.eq_class[m]
    ukey, inv = np.unique(key, return_inverse=True)
    weight = np.bincount(inv, weights=r.size[m], minlength=len(ukey)).astype(np.int64)
    node_tile, node_class = ukey // c, ukey % c
    if tiles is None:
        tiles = np.arange(r.num_tiles)
    # nodes are sorted by tile id; reorder the tile groups into the order of ``tiles``
    counts = np.bincount(node_tile, minlength=r.num_tiles)
    starts = np.zeros(r.num_tiles + 1, np.int64)
    np.cumsum(counts, out=starts[1:])
    lengths = counts[tiles]
    tile_ptr = np.zeros(len(tiles) + 1, np.int64)
    np.cumsum(lengths, out=tile_ptr[1:])
    take = (np.repeat(starts[tiles] - tile_ptr[:-1], lengths)
            + np.arange(tile_ptr[-1], dtype=np.int64))
    return tile_ptr, node_class[take], weight[take]


@njit(cache=True)
def _local_graph(g_indptr, g_indices, classes, mark):
    """Induced subgraph on ``classes`` (sorted) as local CSR; ``mark`` is a scratch array of
    length num_classes holding -1 (restored on return). Rows come out sorted because local ids
    follow the sorted class ids."""
    k = len(classes)
    for i in range(k):
        mark[classes[i]] = i
    indptr = np.zeros(k + 1, np.int64)
    total = 0
    for i in range(k):
        c = classes[i]
        total += g_indptr[c + 1] - g_indptr[c]
    buf = np.empty(total, np.int64)
    m = 0
    for i in range(k):
        c = classes[i]
        for j in range(g_indptr[c], g_indptr[c + 1]):
            x = mark[g_indices[j]]
            if x >= 0:
                buf[m] = x
                m += 1
        indptr[i + 1] = m
    for i in range(k):
        mark[classes[i]] = -1
    return indptr, buf[:m]


def class_graph(r: Report, tile: int | None = None):
    """The class interference graph as a ``networkx.Graph`` (built on demand: networkx costs
    ~230 bytes per edge, so prefer the CSR ``report.interference`` for large reports).

    Whole report: nodes are all class ids. With ``tile``: the classes of the tile's allocated
    variables, each with attribute ``bytes`` (its non-always-live bytes on that tile) and
    ``always_live`` (bytes of its always-live variables there).

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 4, 2],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
    ...     interference=[[1], [], [0]])
    >>> g = class_graph(r, 0)
    >>> sorted(g.edges()), g.nodes[0]["bytes"]
    ([(0, 1), (0, 2)], 8)
    """
    import networkx as nx

    inter = tile_interference(r)
    src, dst = inter.row_ids(), inter.indices
    g = nx.Graph()
    if tile is None:
        g.add_nodes_from(range(r.num_classes))
        keep = src < dst
        g.add_edges_from(zip(src[keep].tolist(), dst[keep].tolist()))
        return g
    rows = r.tile_rows(tile)
    classes = np.unique(r.eq_class[rows])
    al = r.always_live[rows]
    cls = r.eq_class[rows]
    for c in classes.tolist():
        on = cls == c
        g.add_node(c, bytes=int(r.size[rows[on & ~al]].sum()),
                   always_live=int(r.size[rows[on & al]].sum()))
    ip, ix = _local_graph(sorted_interference(r).indptr, sorted_interference(r).indices,
                          classes, np.full(max(r.num_classes, 1), -1, np.int64))
    s = np.repeat(np.arange(len(classes)), np.diff(ip))
    keep = s < ix
    g.add_edges_from(zip(classes[s[keep]].tolist(), classes[ix[keep]].tolist()))
    return g

