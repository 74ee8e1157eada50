"""One pipeline stage of a configuration under levers: its report as recompiled (``SplitModel.
stage_report``, or the report itself on one IPU) and the bound of its tiles under any
combination of levers and micro-batch, from one structure (``WhatIfBounds``).

A stage is bounded on a few tiles while the search runs (``SEARCH_TILES``, those with the most
bytes), then the answer is checked on every tile that could reach tileMemory
(``StageBounds.verify``): a lever may raise a tile that had fewer bytes (a shard of the
optimiser state spread over the IPU, a recomputed copy), and a tile found over is added to
the search's tiles.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ReportError
from ...levers import DEFAULT_AMP
from ...model import Report

#: Tiles of a stage the search bounds at first (the most bytes first).
SEARCH_TILES = 48
#: At most this many tiles a stage checks (``verify``) are taken apart and kept; more are
#: taken apart a batch of this many at a time: the class graphs of a Pod stage's tiles,
#: which are not chordal, took tens of GB kept all at once.
VERIFY_KEPT = 256
#: Tiles whose bytes all live at once reach at least this share of tileMemory are checked
#: once a configuration is chosen (the others cannot reach it under a lever that adds less
#: than the rest: the largest a lever adds is an optimiser shard or a gathered weight).
VERIFY_SHARE = 0.6


@dataclass(frozen=True, order=True)
class Choice:
    """The levers a configuration sets for the whole program (the IPUConfig keys are one value
    for all stages; only availableMemoryProportion is per stage)."""

    half_momentum: bool = False
    half_partials: bool = False
    recompute: bool = False
    offload: bool = False
    rts: int = 0
    rts_weights: bool = False
    #: slices of the vocabulary matmul (0: not serialised)
    serialise: int = 0
    #: with ``recompute``: a checkpoint every this many layers of a stage, from its first
    #: (1: every layer's input, ``recompute``; more: ``recompute-at``)
    checkpoint_every: int = 1

    @property
    def names(self) -> tuple[str, ...]:
        """The levers' names (``tilemem.rules.LEVER_ERRORS``' and the cost model's)."""
        rc = "recompute" if self.checkpoint_every <= 1 else "recompute-at"
        out = [n for n, on in (("half-momentum", self.half_momentum),
                               ("half-partials", self.half_partials),
                               (rc, self.recompute), ("offload", self.offload))
               if on]
        if self.rts:
            out.append("rts-weights" if self.rts_weights else "rts")
        if self.serialise:
            out.append("serialise")
        return tuple(out)

    def without(self, name: str) -> "Choice":
        """The same levers with ``name`` dropped."""
        from dataclasses import replace

        if name in ("rts", "rts-weights"):
            return replace(self, rts=0, rts_weights=False)
        if name == "serialise":
            return replace(self, serialise=0)
        if name in ("recompute", "recompute-at"):
            return replace(self, recompute=False, checkpoint_every=1)
        return replace(self, **{name.replace("-", "_"): False})

    def checkpoints(self, numbers, lead: int = 0) -> str | tuple[int, ...] | None:
        """What-if's ``recompute`` on a stage whose layers are numbered ``numbers`` (in
        program order; the first ``lead`` are no layers, each a checkpoint): ``"all"``, the
        layers whose input is a checkpoint (every ``checkpoint_every``-th from the stage's
        first), or ``None``."""
        if not self.recompute:
            return None
        if self.checkpoint_every <= 1 or not len(numbers):
            return "all"
        numbers = list(numbers)
        return tuple(int(x) for x in numbers[:lead] + numbers[lead:][::self.checkpoint_every])


def lever_edits(choice: Choice, amp: float, factor: float, numbers=(), lead: int = 0) -> list:
    """What-if edits of ``choice`` at availableMemoryProportion ``amp`` and the micro-batch
    times ``factor``, on a stage whose layers are numbered ``numbers`` (``lead``: how many
    of them first are no layer: ``Choice.checkpoints``)."""
    from ..whatif.edits import parse_edits

    # the state off chip by what-if's lever, not its pattern: the pattern takes the
    # update's temporaries off too, and counts no weight's state streamed in for its update
    # (how far under that was: docs/benchmarks.md, "config on named shapes")
    return parse_edits(offload_state=choice.offload,
                       micro_batch=None if factor == 1 else float(factor),
                       amp=None if amp == DEFAULT_AMP else str(amp),
                       half_partials=choice.half_partials, half_momentum=choice.half_momentum,
                       rts=choice.rts or None, recompute=choice.checkpoints(numbers, lead),
                       rts_weights=choice.rts_weights, serialise=choice.serialise or 1)


def layer_numbers(labels) -> list[int]:
    """The numbers the labels of layers end with (``layer12``: 12), what-if's
    ``--recompute-at`` names layers by; ``[]`` when one has none."""
    import re

    out = []
    for lab in labels:
        m = re.search(r"(\d+)$", str(lab))
        if m is None:
            return []
        out.append(int(m.group(1)))
    return out


class StageBounds:
    """Stage ``s`` of ``n`` holding units ``[i, j)``: ``bound(choice, amp, factor)`` is the
    maximum live bytes of its search tiles (``tiles``) under those levers."""

    def __init__(self, report: Report, s: int, i: int, j: int, n: int,
                 time_limit: float = 10.0, numbers=(), lead: int = 0, recomputing=None):
        self.report, self.s, self.i, self.j, self.n = report, s, i, j, n
        #: ``recomputing()``: the stage's report as recompiled when it recomputes (its stash
        #: only its checkpoints, ``rules.INFERRED_RECOMPUTING_STAGE_STASHES_CHECKPOINTS``),
        #: or None when its stash is the same either way; its bounds are ``under(choice)``'s,
        #: made on first use and kept on the same tiles as these
        self.recomputing = recomputing
        self._recomputed: StageBounds | None = None
        #: its units' numbers (``layer_numbers``): where checkpoints go; the first ``lead``
        #: are no layers (the part before the first layer, ``units``)
        self.numbers = list(numbers)
        self.lead = lead
        self.time_limit = time_limit
        tm = report.target.tile_memory
        a = report.allocated & (report.tile >= 0)
        self.upper = np.bincount(report.tile[a], report.size[a], minlength=report.num_tiles)
        order = np.argsort(-self.upper, kind="stable")
        self.tiles = np.sort(order[:SEARCH_TILES])
        self.check_tiles = np.flatnonzero(self.upper >= VERIFY_SHARE * tm)
        self._bounds: dict = {}
        self._memo: dict = {}
        self._useful: dict = {}
        #: per micro-batch factor: the report spread onto every tile, and the bounds of the
        #: tiles ``verify`` checks; kept, so that the recomputed and gathered reports made on
        #: it (cached on it) serve the search tiles, their rebuilds and every check
        self._spread: dict = {}
        self._checks: dict = {}

    @property
    def bounds(self):
        return self.bounds_at(1)

    def bounds_at(self, factor: float):
        """The bounds of the search tiles at ``factor`` times the micro-batch: a larger one's
        tensors spread onto more tiles, parts the report does not have
        (``whatif.spread.spread_report``, made on the search tiles only)."""
        key = factor if factor > 1 else 1
        if key not in self._bounds:
            from ..whatif.bounds import WhatIfBounds

            self._bounds[key] = WhatIfBounds(self.spread(key), self.tiles, self.time_limit)
        return self._bounds[key]

    def spread(self, factor: float) -> Report:
        """The stage's report at ``factor`` times the micro-batch, its tensors spread onto
        every tile they would take (``whatif.spread.spread_report``), made once: the search
        tiles' bounds and ``verify``'s are taken from the same report, so its recomputed and
        gathered reports are made once (a whole BERT-Base IPU's take seconds each)."""
        key = factor if factor > 1 else 1
        if key not in self._spread:
            from ..whatif.spread import spread_report

            self._spread[key] = spread_report(self.report, key)
        return self._spread[key]

    def useful(self, name: str) -> bool:
        """Whether lever ``name`` changes something in the stage (a variable it applies to)."""
        if name not in self._useful:
            probe = {"half-momentum": Choice(half_momentum=True),
                     "half-partials": Choice(half_partials=True),
                     "recompute": Choice(recompute=True),
                     "recompute-at": Choice(recompute=True, checkpoint_every=2),
                     "offload": Choice(offload=True),
                     "rts": Choice(rts=2), "rts-weights": Choice(rts=2, rts_weights=True),
                     "serialise": Choice(serialise=4)}
            if name == "amp":
                edits = lever_edits(Choice(), 0.3, 1)
            else:
                edits = lever_edits(probe[name], DEFAULT_AMP, 1, self.numbers, self.lead)
            try:
                self._useful[name] = all(x.variables > 0 for x in self.bounds.matched(edits))
            except ReportError:
                self._useful[name] = False
        return self._useful[name]

    def effective(self, choice: Choice) -> Choice:
        """``choice`` without the levers that change nothing in this stage (a stage without
        numbered layers to recompute, without the vocabulary to serialise): no-ops here."""
        for x in choice.names:
            if not self.useful(x):
                choice = choice.without(x)
        return choice

    def under(self, choice: Choice) -> "StageBounds":
        """The bounds ``choice`` is estimated by (``choice`` without its no-ops): these, or,
        when it recomputes, those of the stage's report whose stash is its checkpoints
        (``recomputing``), on the same tiles."""
        if not choice.recompute or self.recomputing is None:
            return self
        if self._recomputed is None:
            report = self.recomputing()
            if report is None:
                self._recomputed = self
            else:
                other = StageBounds(report, self.s, self.i, self.j, self.n, self.time_limit,
                                    self.numbers, self.lead)
                other._useful = self._useful   # the same levers apply to the same rows
                self._recomputed = other
        other = self._recomputed
        if other is not self and not np.array_equal(other.tiles, self.tiles):
            other.tiles = self.tiles
            other._bounds, other._memo = {}, {}
        return other

    def bound(self, choice: Choice, amp: float, factor: float) -> np.ndarray:
        """The search tiles' maximum live bytes under the levers."""
        choice = self.effective(choice)
        sb = self.under(choice)
        if sb is not self:
            return sb.bound(choice, amp, factor)
        key = (choice, round(amp, 4), factor)
        if key not in self._memo:
            self._memo[key] = self.bounds_at(factor).of_edits(
                lever_edits(choice, amp, factor, self.numbers, self.lead))[0]
        return self._memo[key]

    def worst(self, choice: Choice, amp: float, factor: float) -> tuple[int, int]:
        """``(tile, bytes)`` of the worst search tile."""
        b = self.bound(choice, amp, factor)
        k = int(np.argmax(b))
        return int(self.tiles[k]), int(b[k])

    def tiles_to_check(self, factor: float) -> np.ndarray:
        """The tiles whose bytes all live at once reach ``VERIFY_SHARE`` of tileMemory at
        ``factor`` times the micro-batch (its per-sample parts scaled, and those its tensors
        spread onto: a tile with few bytes may take many)."""
        if factor == 1:
            return self.check_tiles
        from ..whatif.batch import micro_batch_rows
        from ..whatif.spread import spread_parts

        r = self.report
        rows = micro_batch_rows(r)
        rows = rows[r.allocated[rows] & (r.tile[rows] >= 0)]
        extra = np.bincount(r.tile[rows], r.size[rows] * (factor - 1),
                            minlength=r.num_tiles)
        _, t, b = spread_parts(r, factor)
        extra = extra + np.bincount(t, b, minlength=r.num_tiles)
        up = self.upper + np.maximum(extra, 0)
        return np.flatnonzero(up >= VERIFY_SHARE * r.target.tile_memory)

    def verify(self, choice: Choice, amp: float, factor: float, limit: int) -> np.ndarray:
        """Tiles (of those that could reach tileMemory) whose bound under the levers passes
        ``limit`` and are not search tiles: added to them (the bounds rebuilt), and returned."""
        from ..whatif.bounds import WhatIfBounds

        sb = self.under(self.effective(choice))
        if sb is not self:   # checked on that report; a tile found over searched on both
            bad = sb.verify(choice, amp, factor, limit)
            if len(bad):
                self.tiles = sb.tiles
                self._bounds, self._memo = {}, {}
            return bad
        if factor not in self._checks:   # every tile that could reach it, taken apart once
            check = self.tiles_to_check(factor)
            self._checks[factor] = (check, WhatIfBounds(self.spread(factor), check,
                                                        self.time_limit)
                                    if 0 < len(check) <= VERIFY_KEPT else None)
        check, wb = self._checks[factor]
        rest = ~np.isin(check, self.tiles)
        if not rest.any():
            return check[rest]
        # the levers that change nothing here are left out, as ``bound`` leaves them: one
        # that cannot be estimated on this stage (no numbered layers to recompute) raises
        choice = self.effective(choice)
        edits = lever_edits(choice, amp, factor, self.numbers, self.lead)
        todo = check[rest]
        if wb is not None:
            b = wb.of_edits(edits)[0][rest]
        else:   # many tiles: taken apart a batch at a time, and not kept
            b = np.concatenate([
                WhatIfBounds(self.spread(factor), todo[k:k + VERIFY_KEPT],
                             self.time_limit).of_edits(edits)[0]
                for k in range(0, len(todo), VERIFY_KEPT)])
        bad = todo[b > limit]
        if len(bad):
            self.tiles = np.union1d(self.tiles, bad)
            self._bounds, self._memo = {}, {}
        return bad


class Stages:
    """The stages of the split ``cuts`` of ``m``'s units over ``n`` IPUs, each a
    ``StageBounds`` made on first use (``None`` for a stage whose report cannot be made: no
    class steps, the stash spread over the IPU; its levers cannot be estimated): a stage's
    report is a copy of its rows, and the search often needs one stage to rule a split out.
    ``whole``: the report's own ``StageBounds`` (one IPU of a one-IPU report)."""

    def __init__(self, m, r: Report, cuts: list[int], n: int, time_limit: float = 10.0,
                 whole: StageBounds | None = None, lead: int = 0):
        self.m, self.r, self.n, self.time_limit = m, r, n, time_limit
        self.lead = lead
        self.bounds = [0] + list(cuts) + [m.L]
        self.whole = whole
        self._made: dict = {}

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, s: int) -> StageBounds | None:
        if s not in self._made:
            b, n = self.bounds, self.n
            if n == 1 and self.whole is not None:
                self._made[s] = self.whole
            else:
                i, j, m = b[s], b[s + 1], self.m
                report = m.stage_report(s, i, j, n)

                def recomputing(s=s, i=i, j=j):
                    # one report for every way of recomputing: a checkpoint at every layer's
                    # input stashes the most (checkpoints further apart keep a subset), so
                    # each is estimated with at least its own stash
                    return m.stage_report(s, i, j, n, names_of=report,
                                          kept=m.checkpoint_rows(i, j, 1, self.lead))
                self._made[s] = None if report is None else StageBounds(
                    report, s, i, j, n, self.time_limit,
                    layer_numbers(m.units.labels[i:j]), max(0, min(j, self.lead) - i),
                    recomputing if s < n - 1 else None)
        return self._made[s]

    def __iter__(self):
        return (self[s] for s in range(self.n))
