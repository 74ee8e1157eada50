"""Liveness: which variables of a tile conflict, how many bytes must be live at once, and when.

Two variables of one tile conflict (may not share a byte) when either is alwaysLive, or they
are in the same equivalence class, or their classes interfere (004; FACTS.md). So the bytes live
together are the always-live bytes of the tile plus a *clique* of its class conflict graph
(vertices: the classes with variables on the tile that are not always-live, weighted by those
variables' bytes; edges: interference). The heaviest clique is the **maximum live bytes**: no
allocator can fit the tile in fewer bytes (alignment gaps aside).

- ``max_live`` / ``max_live_all``: that maximum and the peak live set. Exact and fast where the
  structure allows it: program steps known and consistent with the interference (the
  ``equivalenceClassSteps`` extension): a sweep over steps; a chordal graph (every interval graph
  is one): a perfect elimination ordering, linear time (``tilemem.liveness.graphalg``); otherwise bounds
  and a branch and bound under a time limit. ``MaxLive.exact`` says whether the figure is proven.
- ``always_live_bytes``: per tile. ``class_graph``: the interference as a networkx graph (on
  demand; CSR inside for speed). ``timeline``: class lifetimes ``[start, end)`` for drawing maps
  as time x address: the steps when present, else an interval model recovered from the graph.
- ``tile_conflicts``: the per-tile conflict structure every packer reads (``TileConflicts``,
  with the compiled conflict test ``conflicts_with`` / ``conflict_row``).
- ``step_profile`` / ``max_over_tiles``: live bytes over program steps.

One module a question: ``conflicts`` (who conflicts), ``maxlive`` (how many bytes must be live
at once; ``cliques``: the same for many re-weightings of one report from its one class graph, ``reweight``: from each tile's graph, any interference), ``timelines`` (when: class lifetimes and the report's interval model), ``steps``
(live bytes over program steps), on ``classgraph`` (the interference as a graph), ``sweep``
(the one live-bytes sweep over intervals), ``graphalg`` and ``intervals`` (graph algorithms).

>>> from tilemem.model import Report
>>> r = Report.from_columns(var_id=[0, 1, 2, 3, 4], tile=[0] * 5, size=[100, 8, 16, 32, 4],
...     alignment=[4] * 5, offset=[0] * 5, category=["stack"] + ["variable"] * 4,
...     eq_class=[0, 1, 2, 3, 1], always_live=[1, 0, 0, 0, 0],
...     interference=[[], [2], [3], []])            # classes 1-2 and 2-3 interfere, 1-3 do not
>>> m = max_live(r, 0)
>>> m.always_live_bytes, m.max_live_bytes, m.exact, m.peak_classes.tolist()
(100, 148, True, [2, 3])
>>> m.peak_rows.tolist()                          # always-live rows included (see MaxLive)
[0, 2, 3]
>>> timeline(r, 0).tolist()       # per class [start, end): 1-2 and 2-3 overlap, 1-3 do not
[[0, 1], [1, 3], [2, 4], [3, 4]]
"""
from __future__ import annotations

from .classgraph import class_graph, sorted_interference
from .conflicts import (ConflictArrays, TileConflicts, clear_row, conflict, conflict_row,
                        conflicts_with, tile_conflicts)
from .maxlive import NODES_PER_SECOND, MaxLive, always_live_bytes, max_live, max_live_all
from .steps import StepProfile, live_rows_at, max_over_tiles, step_profile
from .timelines import class_intervals, timeline

__all__ = ["ConflictArrays", "MaxLive", "NODES_PER_SECOND", "StepProfile", "TileConflicts",
           "always_live_bytes", "class_graph", "class_intervals", "clear_row", "conflict",
           "conflict_row", "conflicts_with", "live_rows_at", "max_live", "max_live_all",
           "max_over_tiles", "sorted_interference", "step_profile", "tile_conflicts",
           "timeline"]
