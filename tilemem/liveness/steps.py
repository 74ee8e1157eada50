"""Live bytes over program steps (the Graph Analyser's liveness report): per tile
(``step_profile``), the rows live at a step, and the maximum over tiles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import Report
from .maxlive import always_live_bytes
from .sweep import live_sweep
from .timelines import timeline


@dataclass(frozen=True)
class StepProfile:
    """Live bytes of one tile over program steps (the Graph Analyser's liveness report).

    ``live_bytes[k]`` is live in the steps ``[start[k], start[k + 1])`` (the last entry, after
    every lifetime ended, holds the always-live bytes alone). Always-live bytes are included:
    they are the floor of the curve. ``kind`` says where the steps come from: ``"steps"`` (the
    report's ``equivalenceClassSteps``) or ``"points"`` (positions of an interval model
    reconstructed from the interference by ``timeline``: the order of program points is
    recovered only up to what the interference determines). ``unplaced_rows``: variables
    that are not always-live but whose class has an empty interval; they are on no step
    (``max_live`` counts such a class alone).

    A step's live set counts every variable whose lifetime covers it. When the steps overlap
    more than the interference says (If/Else branches share steps but not memory) the peak
    can exceed ``max_live``'s maximum live bytes, which follows the interference.
    """

    tile: int
    kind: str
    start: np.ndarray
    live_bytes: np.ndarray
    always_live_bytes: int
    unplaced_rows: np.ndarray

    @property
    def peak_index(self) -> int:
        return int(np.argmax(self.live_bytes)) if len(self.live_bytes) else 0

    @property
    def peak_step(self) -> int | None:
        """First step of the highest live bytes (``None`` for a tile with nothing on steps)."""
        return int(self.start[self.peak_index]) if len(self.start) else None

    @property
    def peak_steps(self) -> tuple[int, int] | None:
        """``[first, end)`` steps of the first segment with the highest live bytes."""
        if len(self.start) < 2:
            return None
        k = self.peak_index
        return int(self.start[k]), int(self.start[min(k + 1, len(self.start) - 1)])

    @property
    def peak_bytes(self) -> int:
        return int(self.live_bytes.max()) if len(self.live_bytes) else self.always_live_bytes

    def at(self, step) -> np.ndarray:
        """Live bytes at the given step(s) (always-live bytes before the first segment)."""
        k = np.searchsorted(self.start, np.asarray(step), side="right") - 1
        if not len(self.live_bytes):
            return np.full(np.shape(k), self.always_live_bytes, np.int64)
        return np.where(k >= 0, self.live_bytes[np.maximum(k, 0)], self.always_live_bytes)


def _row_lifetimes(r: Report, tile: int):
    """``(rows, life, kind)``: the tile's allocated rows and their class's ``[start, end)``
    (from ``timeline``), or ``None`` without a timeline."""
    rows = r.tile_rows(tile)
    if r.class_steps is not None:
        return rows, r.class_steps[r.eq_class[rows]], "steps"
    life = timeline(r, tile)
    if life is None:
        return None
    return rows, life[r.eq_class[rows]], "points"


def step_profile(r: Report, tile: int) -> StepProfile | None:
    """Live bytes over the program steps of ``tile``; ``None`` when there is no timeline
    (no ``equivalenceClassSteps`` and the interference has no interval model): no curve can
    be drawn then without inventing an order.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=[0, 1, 2, 3], tile=[0] * 4, size=[100, 8, 16, 32],
    ...     alignment=[4] * 4, offset=[0] * 4, category=["stack"] + ["variable"] * 3,
    ...     eq_class=[0, 1, 2, 3], always_live=[1, 0, 0, 0], interference=[[], [2], [3], []],
    ...     class_steps=[[0, 0], [0, 4], [2, 6], [5, 9]])
    >>> p = step_profile(r, 0)
    >>> p.kind, p.start.tolist(), p.live_bytes.tolist()
    ('steps', [0, 2, 4, 5, 6, 9], [108, 124, 116, 148, 132, 100])
    >>> p.peak_step, p.peak_steps, p.peak_bytes, p.at([3, 100]).tolist()
    (5, (5, 6), 148, [124, 100])
    """
    found = _row_lifetimes(r, tile)
    if found is None:
        return None
    rows, life, kind = found
    always = r.always_live[rows]
    al = int(r.size[rows[always]].sum())
    on = ~always & (life[:, 1] > life[:, 0])
    s, e, w = life[on, 0], life[on, 1], r.size[rows[on]]
    times = np.unique(np.concatenate([s, e]))
    live = live_sweep(s, e, w, times)[0] + al
    return StepProfile(tile=int(tile), kind=kind, start=times.astype(np.int64), live_bytes=live,
                       always_live_bytes=al, unplaced_rows=rows[~always & ~on])


def live_rows_at(r: Report, tile: int, step: int) -> np.ndarray:
    """Rows of ``tile`` live at ``step`` (always-live rows included), by the same timeline as
    ``step_profile``; sorted. Empty without a timeline."""
    found = _row_lifetimes(r, tile)
    if found is None:
        return np.zeros(0, np.int64)
    rows, life, _ = found
    live = r.always_live[rows] | ((life[:, 0] <= step) & (step < life[:, 1]))
    return np.sort(rows[live])


def max_over_tiles(r: Report, tiles=None, block: int = 64):
    """The maximum over tiles of the live bytes at every program step, and which tile holds
    it: ``(start, live_bytes, tile)`` as in ``StepProfile`` (segments of constant value).
    Only with the report's own ``equivalenceClassSteps`` (``None`` otherwise): orders
    reconstructed per tile from the interference are not one program's steps.

    >>> from tilemem.model import Report
    >>> from tilemem.model.target import MK1
    >>> r = Report.from_columns(target=MK1.with_tiles(2), var_id=[0, 1, 2], tile=[0, 1, 1],
    ...     size=[8, 4, 16], alignment=[4] * 3, offset=[0] * 3, category=["variable"] * 3,
    ...     eq_class=[0, 1, 2], interference=[[], [], []],
    ...     class_steps=[[0, 3], [0, 5], [4, 6]])
    >>> [a.tolist() for a in max_over_tiles(r)]
    [[0, 3, 4, 5, 6], [8, 4, 20, 16, 0], [0, 1, 1, 1, 0]]
    """
    if r.class_steps is None:
        return None
    tiles = r.tiles_in_use() if tiles is None else np.asarray(tiles, np.int64)
    indptr, _ = r._tiles()
    al = always_live_bytes(r)
    steps = r.class_steps
    # one time axis for all tiles: every start and end of a class used by a live variable
    used = r.allocated & ~r.always_live
    life = steps[r.eq_class[used]]
    ok = life[:, 1] > life[:, 0]
    times = np.unique(life[ok].ravel())
    if len(times) == 0:
        return times, np.zeros(0, np.int64), np.zeros(0, np.int64)
    best = np.full(len(times), -1, np.int64)
    who = np.zeros(len(times), np.int64)
    for b in range(0, len(tiles), block):     # a dense (tiles x times) grid, a block at a time
        chunk = tiles[b:b + block]
        # ``tile_rows``: an index of rows, or a range where the rows are ordered by tile
        rows = np.concatenate([r.tile_rows(t) for t in chunk.tolist()]
                              + [np.zeros(0, np.int64)])
        local = np.repeat(np.arange(len(chunk)), indptr[chunk + 1] - indptr[chunk])
        keep = ~r.always_live[rows]
        rows, local = rows[keep], local[keep]
        lf = steps[r.eq_class[rows]]
        on = lf[:, 1] > lf[:, 0]
        rows, local, lf = rows[on], local[on], lf[on]
        n = len(times)
        grid = live_sweep(lf[:, 0], lf[:, 1], r.size[rows], times, group=local,
                          groups=len(chunk))
        grid += al[chunk][:, None]
        k = np.argmax(grid, axis=0)
        top = grid[k, np.arange(n)]
        better = top > best
        best[better] = top[better]
        who[better] = chunk[k[better]]
    return times.astype(np.int64), best, who

