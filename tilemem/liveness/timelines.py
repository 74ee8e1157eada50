"""Class lifetimes for drawing and searching: the report's steps, or an interval model of
the class graph recovered from the interference alone (per tile, or once for the report).
"""
from __future__ import annotations

import numpy as np

from ..model import Report
from .classgraph import _local_graph, sorted_interference
from .graphalg import interval_order


def timeline(r: Report, tile: int | None = None) -> np.ndarray | None:
    """Class lifetimes as ``(num_classes, 2)`` intervals ``[start, end)``, or ``None``.

    - With the ``equivalenceClassSteps`` extension: those program steps (whatever ``tile``).
    - Otherwise, when the class graph (restricted to the classes of ``tile``'s allocated
      variables if given) is an interval graph: an interval model of it found by LexBFS sweeps
      (``tilemem.liveness.graphalg.interval_order``; every model returned is verified) or, when
      they fail, by the exact test of ``tilemem.liveness.intervals.interval_model``, over
      positions; classes outside the tile get ``[-1, -1]``. The order of program points is
      recovered only up to what the graph determines (e.g. mirror images are equally valid).
    - ``None`` when no interval model was found (e.g. If/Else branches make the graph
      non-interval): a time x address map cannot be drawn.

    Always-live variables are live throughout; draw them over the whole time axis.
    """
    if r.class_steps is not None:
        return r.class_steps.copy()
    inter = sorted_interference(r)
    if tile is None:
        classes = np.arange(r.num_classes, dtype=np.int64)
        ip, ix = inter.indptr, inter.indices
    else:
        classes = np.unique(r.eq_class[r.tile_rows(tile)])
        ip, ix = _local_graph(inter.indptr, inter.indices, classes,
                              np.full(max(r.num_classes, 1), -1, np.int64))
    model = interval_order(ip, ix)
    if model is None:  # no LexBFS sweep found one: the exact test decides
        from .intervals import interval_model

        model = interval_model(ip, ix)
    if model is None:
        return None
    out = np.full((r.num_classes, 2), -1, np.int64)
    out[classes] = model
    return out


def class_intervals(r: Report) -> np.ndarray | None:
    """An interval model of the whole report's class graph, ``(num_classes, 2)`` intervals
    ``[start, end)`` over clique positions (two classes interfere exactly when their
    intervals overlap: ``tilemem.liveness.intervals.interval_model``, verified), recovered from
    the interference alone and cached per report; ``None`` when the graph is not an interval
    graph (e.g. If/Else branches).

    Restricted to the classes of one tile it is an interval model of that tile's class graph
    (an induced subgraph of an interval graph), so the packers read each tile's ordered
    maximal cliques off it with a sweep instead of recognising every tile's graph again
    (0.15-0.3 s a tile on the generated Mk2 report; its whole class graph, 3,483 classes and
    1.5 M edges, takes ~0.5 s once). Classes are numbered canonically first (colour
    refinement from each class's bytes and variable count), so that renumbering the classes
    of a report does not change which model comes out.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2], tile=[0, 1, 1], size=[4, 8, 4],
    ...     alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3, eq_class=[0, 1, 2],
    ...     interference=[[1], [0, 2], [1]])        # a path 0 - 1 - 2: intervals
    >>> iv = class_intervals(r)
    >>> def meet(a, b):
    ...     return bool(iv[a, 0] < iv[b, 1] and iv[b, 0] < iv[a, 1])
    >>> meet(0, 1), meet(1, 2), meet(0, 2)
    (True, True, False)
    """
    return r.cached("class_intervals", lambda: _class_intervals(r))


def _class_intervals(r: Report) -> np.ndarray | None:
    from .intervals import canonical_numbering, interval_model

    g = sorted_interference(r)
    k = g.num_rows
    if k == 0:
        return np.zeros((0, 2), np.int64)
    labels = np.stack([np.bincount(r.eq_class, weights=r.size, minlength=k),
                       np.bincount(r.eq_class, minlength=k)], axis=1)
    canon, indptr, indices = canonical_numbering(g.indptr, g.indices, labels)
    model = interval_model(indptr, indices)   # over the canonical numbers
    if model is None:
        return None
    out = np.empty_like(model)
    out[canon] = model
    return out

