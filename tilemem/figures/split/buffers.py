"""A stage of a split as a report of its own: its variables at their sizes in the stage, and
the buffers a pipelined program adds to it (the activations sent to the next stage, the
gradients back) as classes of their own: ``stage_report``. Used by
``tilemem.figures.split.estimate`` to estimate a stage by the bound when the report's class graph is
not chordal (``searched_bound``), searching only the tiles that can decide the stage
(``bounded``).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...liveness import max_live_all
from ...liveness.classgraph import sorted_interference
from ...model import Csr, Report, symmetric_closure
from ...model.ipuview import ROW_COLUMNS, gathered_names
from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX


def stage_report(r: Report, rows: np.ndarray, size: np.ndarray, bufs: list,
                 names: bool = False, names_of: Report | None = None) -> Report:
    """The report of ``rows`` (ascending, allocated) at sizes ``size``, with, for each
    ``(buffer_rows, start, end)`` of ``bufs``, copies of those rows of ``r`` in a new class
    live over ``[start, end)``: it interferes with every class whose steps overlap that
    interval (the steps' hull: a superset of the program's interference).

    Its classes are those of ``rows``, numbered from 0 in the order of their ids, then the
    buffers' (so a tile's graph is the one ``r`` restricted to the stage would give, in the
    same order); its interference is ``r``'s among them. No constraints or allocation order,
    and names only when asked (``names``: a buffer's copies named ``pipeline/`` and the name
    copied, ``rules.INFERRED_PIPELINE_BUFFER_PREFIX``, as a pipelined program's are): what a
    bound and the levers read, not what a packer needs. A stage of a folded Pod is then its
    share of the Pod, not a copy of all of it. ``names_of``: a report made of the same
    ``rows`` first (the stage with another stash), whose names of them are taken.

    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 0, 0], size=[8, 4, 4],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[1], [0, 2], [1]])
    >>> s = stage_report(r, np.array([0, 1]), np.array([16, 4]), [])
    >>> s.num_vars, s.size.tolist(), s.interference.to_lists()
    (2, [16, 4], [[1], [0]])
    """
    rows = np.asarray(rows, np.int64)
    cls = np.unique(r.eq_class[rows])
    own = sorted_interference(r).induced(cls)   # the report's relation among the stage's
    src, dst = [own.row_ids()], [own.indices]
    steps = r.class_steps[cls] if r.has_class_steps else None
    n = len(cls)
    brows = [np.asarray(b[0], np.int64) for b in bufs]
    if bufs:
        span = np.array([[b[1], b[2]] for b in bufs], np.int64)
        steps = np.concatenate([steps, span])
        for k, (a, b) in enumerate(span.tolist()):
            hit = np.flatnonzero((steps[:, 0] < b) & (steps[:, 1] > a))
            hit = hit[hit != n + k]
            src += [np.full(len(hit), n + k), hit]
            dst += [hit, np.full(len(hit), n + k)]
    classes = n + len(bufs)
    relation = symmetric_closure(classes, np.concatenate(src), np.concatenate(dst))
    take = np.concatenate([rows] + brows)
    m = len(rows)
    cols = {f: getattr(r, f)[take] for f in ROW_COLUMNS}
    cols["size"] = np.concatenate([np.asarray(size, r.size.dtype), r.size[take[m:]]])
    cols["eq_class"] = np.concatenate(
        [np.searchsorted(cls, r.eq_class[rows]),
         np.repeat(np.arange(n, classes, dtype=np.int64), [len(b) for b in brows])])
    cols["allocated"] = np.ones(len(take), bool)
    cols["always_live"][m:] = False
    cols["var_id"] = np.arange(len(take), dtype=np.int64)
    blob, offsets = b"", np.zeros(len(take) + 1, np.int64)
    if names:
        if names_of is None:
            blob, offsets = gathered_names(r, rows)
        else:
            offsets = names_of.name_offsets[:m + 1]
            blob = bytes(names_of.name_blob[:int(offsets[-1])])
        copied, at = gathered_names(r, take[m:],
                                    prefix=INFERRED_PIPELINE_BUFFER_PREFIX.encode())
        blob, offsets = blob + copied, np.concatenate([offsets, offsets[-1] + at[1:]])
    out = replace(r, **cols, name_blob=blob, name_offsets=offsets,
                  element_constraints=Csr.empty(len(take)),
                  region_constraints=Csr.empty(len(take)),
                  allocation_order=Csr.empty(r.num_tiles),
                  interference=relation, class_steps=steps, interference_dropped=None,
                  _tile_index=None, _cache={})
    out._cache["sorted_interference"] = relation
    return out


def searched_bound(stage: Report):
    """``bound(tiles)``: ``(max_live, always_live)`` of ``tiles`` of a stage's own report
    (``max_live_all``, 0.05 s of search a tile; its upper bound where that stops it), and ``bound.cheap(tiles)``: ``(lower, upper,
    always_live, exact)`` without a search (exact where the steps, a chordal graph or the
    bounds settle a tile; ``bounded`` reads it)."""
    def bound(tiles):
        got = max_live_all(stage, tiles, time_limit=0.05 * len(tiles))
        # a tile whose search the time stopped: its upper bound, so that a stage said to fit
        # is never under because the time ran out
        return (np.array([m.max_live_bytes if m.exact else m.upper_bound_bytes for m in got],
                         np.int64),
                np.array([m.always_live_bytes for m in got], np.int64))

    def cheap(tiles):
        got = max_live_all(stage, tiles, time_limit=0)
        return tuple(np.array([getattr(m, f) for m in got], t) for f, t in (
            ("max_live_bytes", np.int64), ("upper_bound_bytes", np.int64),
            ("always_live_bytes", np.int64), ("exact", bool)))
    bound.cheap = cheap
    return bound


def bounded(bound, tiles: np.ndarray, stash: np.ndarray, worst: float, tile_memory: int):
    """``bound(tiles)`` (a stage's ``(max_live, always_live)`` without its stash), searched
    only on the tiles that can matter. ``bound.cheap`` (when the stage has it) gives every
    tile's bound without a search: ``(lower, upper, always_live, exact)``; a tile not exact
    whose upper bound plus its stash is under both the worst tile found (``worst``, or a
    lower bound of this batch's) and tileMemory can be neither the stage's worst tile nor
    over tileMemory: it keeps its lower bound, unsearched. Where a stage joins classes of
    two IPUs (a boundary moved) its tiles' class graphs are not chordal, and a search of
    each spent the time limit on tiles that decide nothing."""
    cheap = getattr(bound, "cheap", None)
    if cheap is None:
        return bound(tiles)
    lo, up, al, exact = cheap(tiles)
    st = stash[tiles]
    below = min(max(worst, float((lo + st).max(initial=0))), tile_memory + 1)
    search = ~exact & (up + st >= below)
    if search.any():
        lo[search], al[search] = bound(tiles[search])
    return lo, al
