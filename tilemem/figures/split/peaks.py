"""What is live at a split's stage peaks, by name: at each stage's worst tile, the largest
tensors live together at that tile's peak in the stage as recompiled, the buffers the split
adds among them (named ``pipeline/`` and the name of the tensor copied or stashed,
``rules.INFERRED_PIPELINE_BUFFER_PREFIX``).

Computed after the search, once a stage, on the worst tile only: the stage's variables and
buffers on that tile (``SplitModel.stage_report(..., tile=)``) and the bound's live set there
(``tilemem.liveness.max_live_all``, as ``tilemem oom`` finds a tile's peak). A tensor's
variables on the tile are one entry (its name without the ``#tile`` suffix, as ``oom`` groups
them), largest first.

>>> from tilemem.generate import generate_report
>>> from tilemem.figures.split.search import best_split
>>> from tilemem.figures.split.estimate import SplitModel
>>> m = SplitModel(generate_report("mk1", tiles=8, steps=60, seed=1, pressure=1.5))
>>> a = with_peak_tensors(m, best_split(m, 2))
>>> p = a.stages[1].peak
>>> p.tile == a.stages[1].worst_tile, 0 < len(p.tensors) <= TOP
(True, True)
>>> sum(t.bytes for t in p.tensors) <= p.live_bytes
True
"""
from __future__ import annotations

import msgspec
import numpy as np

from ...model.names import base_name
from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX

#: Tensors named at a stage's peak.
TOP = 5
#: Seconds of search for a stage's worst tile's live set when the graph of the tile's
#: classes is not chordal (a stage's buffers make it so); the heaviest set found is still
#: live together (``StagePeak.exact`` says which). Short: what names the peak must cost
#: little beside the search (the estimate's own search of a tile gets 0.05 s,
#: ``buffers.searched_bound``).
TIME_LIMIT = 0.2


class PeakTensor(msgspec.Struct, rename="camel"):
    """A tensor live at a stage's peak: its name (``pipeline/...``: a buffer or the stash the
    split adds), its category (its largest variable's there), its bytes on the tile, in how
    many variables."""

    name: str
    category: str
    bytes: int
    variables: int


class StagePeak(msgspec.Struct, rename="camel"):
    """A stage's worst tile's peak in the stage as recompiled: the bytes live there (the
    bound of that tile's variables and buffers, always-live included; ``exact``: proven the
    maximum, else the heaviest set found) and the largest tensors live together at it."""

    tile: int
    live_bytes: int
    exact: bool
    tensors: list[PeakTensor]


def stage_peak(m, s: int, i: int, j: int, n: int, tile: int, top: int = TOP) -> StagePeak:
    """The peak of stage ``s`` of ``n`` (units ``[i, j)``) of the ``SplitModel`` ``m`` on
    ``tile`` (see the module docstring). A stash spread over the IPU (``stash_mapping=
    "linear"``: not a variable of the report) is one more entry when the peak is while the
    micro-batches are in flight (``SplitModel.span``), its bytes on the tile added."""
    from ...liveness import max_live_all

    rep = m.stage_report(s, i, j, n, tile=tile)
    ml = max_live_all(rep, [tile], time_limit=TIME_LIMIT)[0]
    rows = np.asarray(ml.peak_rows, np.int64)
    groups: dict[str, list] = {}     # name -> [bytes, variables, its largest's category]
    for k in rows[np.argsort(-rep.size[rows], kind="stable")].tolist():
        g = groups.setdefault(base_name(rep.name(k)), [0, 0, rep.category_name(k)])
        g[0] += int(rep.size[k])
        g[1] += 1
    live = int(ml.max_live_bytes)
    if m.start is not None and m.stash_mapping == "linear" and len(ml.peak_classes):
        st = int(m.stash_tiles(s, i, j, n)[tile])
        life = rep.class_steps[np.asarray(ml.peak_classes, np.int64)]
        a, e = m.span if m.span is not None else (0, 0)
        if st and life[:, 0].max() < e and life[:, 1].min() > a:   # the peak meets it
            groups[INFERRED_PIPELINE_BUFFER_PREFIX + "stash"] = [st, 1, "variable"]
            live += st
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))[:top]
    return StagePeak(tile=int(tile), live_bytes=live, exact=bool(ml.exact),
                     tensors=[PeakTensor(name=k, category=v[2], bytes=v[0], variables=v[1])
                              for k, v in ranked])


def with_peak_tensors(m, a):
    """``a`` (a ``SplitAnswer`` of ``m``) with each stage's ``peak`` (``stage_peak`` at its
    worst tile)."""
    b = [0] + list(a.split_indices) + [m.L]
    for s, st in enumerate(a.stages):
        st.peak = stage_peak(m, s, b[s], b[s + 1], a.ipus, st.worst_tile)
    return a
