"""A larger micro-batch's tensors on the tiles they spread onto (``what-if --micro-batch F``,
``F > 1``).

By the linear tile mapping's rule (003's ``calcLinearTileMapping``, which Poplar's planners and
``mapTensorLinearly`` follow), a tensor on fewer tiles than its IPU has holds its minimum per
tile on each (``batch.micro_batch_sizes``): twice as large, it takes twice as many tiles with as
many bytes on each, up to every tile of its IPU, then more on each. The report has no variable
of it on the tiles it would spread onto, so ``spread_report`` adds one there (a copy of one of
its rows, in its class: the same lifetime), holding the part the tile takes at the larger
micro-batch; the micro-batch edit then scales the report's own rows (the other reading: a
tensor planned onto its tiles, whatever its size, takes more bytes on each), and leaves the
copies as they are. Each tile takes the larger of the two readings: the report cannot tell a
tensor at its minimum from one planned onto a subset.

Copies are made on ``tiles`` only (those a bound is asked of: at a large factor a tensor
spreads over every tile). On a report kept to the pairs of classes that share a tile (several
IPUs, ``model.interference.prunes``) a copy's class may never have shared the tile's: the
copies then take classes of their own, interfering with every class whose steps their source's
overlap (the steps' hull: a superset), or, without class steps, are not made.

>>> import numpy as np
>>> from tilemem.model import Report
>>> from tilemem.model.target import MK1
>>> r = Report.from_columns(target=MK1.with_tiles(4, tiles_per_ipu=4), var_id=range(3),
...     tile=[0, 1, 3], size=[64, 32, 8], alignment=[4] * 3, offset=[0] * 3,
...     category=["variable"] * 3, eq_class=[0, 0, 1], interference=[[1], [0]],
...     names=["x#0", "x#1", "y#3"],
...     class_steps=np.array([[2, 4], [3, 6]]))
>>> s = spread_report(r, 2.0, tiles=range(4))
>>> r.target.ipu_tiles, spread_rows(s)   # x: 96 bytes -> 192, 64 a tile: on tiles 0, 1, 2
(4, 3)
>>> sorted((s.name(i), int(s.size[i]), int(s.eq_class[i])) for i in range(3, s.num_vars))
[('x#2', 64, 0), ('y#0', 8, 1)]

(y: 8 bytes on one tile, 16 at twice the micro-batch: 8 on tile 3 and 8 on the next, tile 0.)
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from ...jit import njit

from ...model import Csr, Report, sorted_unique
from ...model.frozen import frozen
from ...model.names import base_name, tensor_codes
from .batch import micro_batch_rows, persistent_rows, tensor_run

#: The cache key under which a spread report keeps the number of the report's own rows.
SPREAD_KEY = "batch.spread_from"


def spread_rows(r: Report) -> int:
    """The number of ``r``'s own rows when ``r`` is a ``spread_report`` (the copies follow
    them), else ``r.num_vars``."""
    return int(r._cache.get(SPREAD_KEY, r.num_vars))


def spread_report(r: Report, factor: float, tiles=None) -> Report:
    """``r`` with its per-sample tensors' parts on the tiles of ``tiles`` (default all) they
    spread onto at ``factor`` times the micro-batch (see the module docstring); ``r`` itself
    when none does (``factor <= 1``, every tensor on every tile already)."""
    src, new_tile, new_size = spread_parts(r, factor, tiles)
    if not len(src):
        return r
    from ...model.interference import prunes

    if prunes(r.target) and not r.has_class_steps:
        return r   # a copy's class cannot be told to interfere with the tile's
    return _with_copies(r, src, new_tile, new_size, own_class=not prunes(r.target))


def spread_parts(r: Report, factor: float, tiles=None):
    """``(source row, tile, bytes)`` of the parts ``spread_report`` adds (none at
    ``factor <= 1``)."""
    none = np.zeros(0, np.int64)
    if factor <= 1:
        return none, none, none
    rows = micro_batch_rows(r)
    rows = rows[r.allocated[rows]]
    T = r.target.ipu_tiles
    if not len(rows) or T <= 1:
        return none, none, none
    codes, _ = tensor_codes(r)
    tile = r.tile[rows]
    group = codes[rows].astype(np.int64) * (r.target.num_ipus + 1) + tile // T
    order = np.lexsort((tile, group))
    wanted = np.zeros(r.num_tiles, np.bool_)
    wanted[np.arange(r.num_tiles) if tiles is None
           else np.asarray(list(tiles) if not isinstance(tiles, np.ndarray) else tiles,
                           np.int64)] = True
    return _spread(frozen(group[order], np.int64), frozen(tile[order], np.int64),
                   frozen(r.size[rows][order], np.int64), frozen(rows[order], np.int64), T,
                   float(factor), frozen(wanted))


@njit(cache=True)
def _spread(group, tile, size, rows, T, factor, wanted):
    """``(source row, tile, bytes)`` of each part of a tensor (rows sorted by tensor, then
    tile) on a tile of ``wanted`` it does not hold, at ``factor`` times its bytes."""
    n = len(group)
    src = np.empty(0, np.int64)
    out_t = np.empty(0, np.int64)
    out_s = np.empty(0, np.int64)
    a = 0
    buf_src = [0]
    buf_t = [0]
    buf_s = [0]
    while a < n:
        b, total, chunk, start, last, descending = tensor_run(group, tile, size, a, T)
        k = b - a
        if k < T and chunk > 0:
            base = (tile[a] // T) * T
            first = (tile[last] if descending else tile[start]) - base
            big = int(np.ceil(total * factor))
            per = max(chunk, -(-big // T))
            used = min(T, -(-big // per))
            held = np.zeros(T, np.bool_)
            for i in range(a, b):
                held[tile[i] - base] = True
            for j in range(used):
                t = (first - j) % T if descending else (first + j) % T
                if held[t] or not wanted[base + t]:
                    continue
                buf_src.append(rows[a])
                buf_t.append(base + t)
                buf_s.append(per if j < used - 1 else big - (used - 1) * per)
        a = b
    if len(buf_src) > 1:   # (each list starts with a typed placeholder)
        src = np.array(buf_src[1:], np.int64)
        out_t = np.array(buf_t[1:], np.int64)
        out_s = np.array(buf_s[1:], np.int64)
    return src, out_t, out_s


def _with_copies(r: Report, src: np.ndarray, tile: np.ndarray, size: np.ndarray,
                 own_class: bool) -> Report:
    """``r`` with a copy of each row of ``src`` on ``tile`` at ``size`` after its own rows:
    in its source's class (``own_class``), else in a class a source class, interfering with
    every class whose steps its source's overlap."""
    n, k = r.num_vars, len(src)
    take = np.concatenate([np.arange(n), src])
    eq = r.eq_class[take].copy()
    interference, steps = r.interference, r.class_steps
    if not own_class:
        C = r.num_classes
        cls, inv = np.unique(r.eq_class[src], return_inverse=True)
        eq[n:] = C + inv.reshape(-1)
        hull = r.class_steps
        span = hull[cls]
        steps = np.concatenate([hull, span])
        pairs_s, pairs_d = [interference.row_ids()], [interference.indices]
        for c, (a, b) in enumerate(span.tolist()):
            hit = np.flatnonzero((steps[:, 0] < b) & (steps[:, 1] > a))
            hit = hit[hit != C + c]
            pairs_s += [np.full(len(hit), C + c), hit]
            pairs_d += [hit, np.full(len(hit), C + c)]
        s, d = np.concatenate(pairs_s), np.concatenate(pairs_d)
        N = C + len(cls)
        key = sorted_unique(s * N + d)   # the whole interference: one sort
        interference = Csr.from_pairs(N, key // N, key % N)
    # a source row lends its tensor's name to many copies: each name read once
    bases = {i: base_name(r.name(i)) for i in np.unique(src).tolist()}
    names = [f"{bases[i]}#{t}".encode() for i, t in zip(src.tolist(), tile.tolist())]
    first, last = int(r.name_offsets[0]), int(r.name_offsets[-1])
    blob = np.concatenate([np.frombuffer(r.name_blob, np.uint8, count=last - first,
                                         offset=first),
                           np.frombuffer(b"".join(names), np.uint8)])
    offsets = np.concatenate([np.asarray(r.name_offsets, np.int64) - first,
                              last - first + np.cumsum([len(x) for x in names],
                                                       dtype=np.int64)])
    ao = r.allocation_order
    order = Csr.from_pairs(ao.num_rows, np.concatenate([ao.row_ids(), tile]),
                           np.concatenate([ao.indices, np.arange(n, n + k)]))
    cols = {f: getattr(r, f)[take] for f in
            ("alignment", "category", "allocated", "is_constant", "always_live",
             "executable", "vertex_code", "lowest_256kb", "in_interleaved_mem")}
    out = replace(
        r, **cols, tile=np.concatenate([r.tile, tile]),
        var_id=np.concatenate([r.var_id, r.var_id.max() + 1 + np.arange(k)]),
        size=np.concatenate([r.size, size.astype(r.size.dtype)]),
        offset=np.concatenate([r.offset, np.zeros(k, r.offset.dtype)]), eq_class=eq,
        interference=interference, name_blob=blob, name_offsets=offsets,
        element_constraints=_grown(r.element_constraints, k),
        region_constraints=_grown(r.region_constraints, k),
        allocation_order=order, class_steps=steps, _tile_index=None, _cache={})
    out._cache[SPREAD_KEY] = n
    # the copies are per-sample parts of the report's own per-sample tensors (not told again
    # from the spread tensors' extents), never persistent
    per = np.concatenate([micro_batch_rows(r), np.arange(n, n + k)])
    per.setflags(write=False)
    out._cache["batch.micro_batch_rows"] = per
    pers = np.concatenate([persistent_rows(r), np.zeros(k, bool)])
    pers.setflags(write=False)
    out._cache["batch.persistent_rows"] = pers
    return out


def _grown(csr: Csr, k: int) -> Csr:
    """``csr`` with ``k`` more rows, empty."""
    return Csr.from_lengths(np.concatenate([csr.lengths(), np.zeros(k, np.int64)]),
                            csr.indices)
