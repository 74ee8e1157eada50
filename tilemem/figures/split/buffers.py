"""A stage of a split as a report of its own: its variables at their sizes in the stage, and
the buffers a pipelined program adds to it (the activations sent to the next stage, the
gradients back) as classes of their own: ``stage_report``. Used by
``tilemem.figures.split.estimate`` to estimate a stage by the bound when the report's class graph is
not chordal.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...liveness.classgraph import sorted_interference
from ...model import Csr, Report, symmetric_closure
from ...model.ipuview import ROW_COLUMNS, gathered_names
from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX


def stage_report(r: Report, rows: np.ndarray, size: np.ndarray, bufs: list,
                 names: bool = False) -> Report:
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
    share of the Pod, not a copy of all of it.

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
        blob, offsets = gathered_names(r, rows)
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
