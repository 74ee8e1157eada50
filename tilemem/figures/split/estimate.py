"""Where to split a program over IPUs: pipeline stages that fit, from one compilation's report.

A program that does not fit one IPU is usually pipelined: its layers, in program order, cut
into consecutive stages, one stage an IPU. From the report of the program compiled for fewer
IPUs (typically one, out of memory), this module estimates every stage's maximum live bytes on
its worst tile and chooses the split that minimises the worst stage.

How a stage is estimated (every inferred rule is named in ``tilemem.rules`` and listed in
``ASSUMPTIONS``, printed with every answer):

1. *Units.* The layers, in program order, from the tensor names (``Units``): the prefix up
   to the first path component that ends in a number (``layer12``, ``encoder/block_3``),
   when at least two prefixes share its stem (a numbered sequence, not one operation's
   ``head/logits/Conv_1``), ordered by their numbers; else the names' first components,
   ordered by where their data first comes alive (the class steps) or by class id; else
   groups of classes in that order.
   Tensors of no unit (the input, the labels, the loss, ...) go with the unit before the step
   where they come alive, or, without steps, with every stage (an upper bound); those of
   one part of the program named as deep as the layers (``embedding/...``, ``head/...``)
   go together, with the unit before that part's first per-sample tensor: its persistent
   state, its backward and its optimiser step with its forward.
2. *Re-mapping.* A stage recompiled on an IPU of as many tiles as the report's IPU maps each
   tensor with the same linear mapping (003: the mapping follows from the number of elements,
   the grain, the minimum per tile, the offset and the number of tiles, none of which the
   split changes): each tensor's bytes stay on the same tile of its IPU.
3. *Peak.* The stage's maximum live bytes per tile is the bound (the heaviest clique of the
   stage's classes) with the report's interference restricted to the stage's variables: a
   stage runs its part of the same program. The report's class graph is the same for every
   stage, so when it is chordal its maximal cliques, found once, give each stage's bound
   exactly (``tilemem.liveness.cliques``); otherwise each stage's report is searched
   (``tilemem.liveness.max_live_all``).
4. *Always-live data.* Per-tile categories stay whole, step-scaled ones (control code, vertex
   state, exchange code) shrink to the stage's share of the tile's variables.
5. *What pipelining adds.* At a boundary, the activation the next stage reads (the tensor
   of the earlier stage most recently defined and still live when the next stage begins) is
   sent forward, and the gradient coming back (the later stage's tensor live when that
   activation is last read that dies first; without steps: the activation's shape) is sent
   back; each copy adds a send buffer on the source and a receive buffer and the copy on the
   destination, mapped and live like the tensor. A stage keeps a stash for the micro-batches
   in flight: of its input (``stash="inputs"``: the backward recomputes the stage's
   activations), or of every tensor of a micro-batch of its layers (come alive after the
   micro-batches begin: not the gradient accumulators) still live when its forward hands
   over to the next stage, with the copy of its input and without the activation sent
   forward when only the next stage reads that (``stash="activations"``: no
   recomputation; needs the class steps). The stash lives while micro-batches are in
   flight (with steps: not over an optimiser step after the micro-batches), mapped like
   the tensors it keeps (``stash_mapping``; ``"linear"``: spread over the IPU). Which
   ones a compilation does are options of the framework, not in the report.
   A weight read by a unit of another stage (a tied embedding read by the head) is told
   by its gradient (``_tied_weights``: made in the other unit, exactly the weight's bytes
   on exactly its tiles, ``rules.INFERRED_GRADIENT_MAPPED_LIKE_WEIGHT``): the reading
   stage holds its copy at its last read, the weight's stage receives the gradient.

What the estimate cannot know, measured against the generator (docs/benchmarks.md,
2026-11-27, transformer family, one-layer stages over 8 IPUs): how the framework maps the
stash (``stash_mapping``; the generator makes both readings: a one-layer stage estimated
under the other reading than the program's is off by up to +18 %, like against linear, or
-17 %, linear against like; the same bytes in both); when a tied weight's copy is first read
and its receive buffer live (the report links no vertex to the weights it reads); the code
of the inter-IPU exchanges (a few hundred bytes a tile).

The search over splits is ``tilemem.figures.split.search``.

>>> from tilemem.generate import generate_report
>>> r = generate_report("mk1", tiles=8, steps=60, seed=1, pressure=1.5)
>>> m = SplitModel(r)
>>> m.units.source, len(m.units.labels), m.units.labels[:3]
('layer names', 7, ['layer0', 'layer1', 'layer2'])
>>> peak, always_live, buffers = m.stage(0, 0, 3, 2)     # layers 0-2, first of 2 stages
>>> bool(peak.max() > always_live.max() > 0), bool(buffers.max() > 0)
(True, True)
"""
from __future__ import annotations

import msgspec
import numpy as np

from ...errors import ReportError
from ...model import Report
from ...model.interference import tile_interference
from ...model.names import tensor_codes, tensors_named_under
from ...rules import (INFERRED_COPY_ON_DESTINATION, INFERRED_COPY_ON_SOURCE,
                     INFERRED_PER_TILE_ALWAYS_LIVE, INFERRED_PIPELINE_BUFFER_PREFIX,
                     INFERRED_STASH_MAPPING, INFERRED_STEP_SCALED_ALWAYS_LIVE, SPLIT_CLOSE_MARGIN,
                     SPLIT_CLOSE_MARGIN_NO_STEPS, inferred_stash_depth)
from ..plan import Plan
from ..verdicts import FitVerdict, fit_verdict
from .units import Units, program_units
from .cross import Crossings
from .buffers import bounded
from .peaks import StagePeak
from ...liveness.cliques import MAX_EXTRA

__all__ = ["SplitModel", "SplitAnswer", "Stage", "Units", "verdict", "ASSUMPTIONS"]

#: What a pipeline stage stashes for the micro-batches in flight (``SplitModel``'s ``stash``).
STASH = ("inputs", "activations")
#: The assumption each says of the stash (one of ``ASSUMPTIONS``: ``"inputs"``'s).
STASH_ASSUMPTIONS = {
    "inputs": "a stage s of N keeps N-1-s copies of its input for the micro-batches in flight "
              "(one-forward-one-backward; the backward recomputes the stage's activations), "
              "live while micro-batches are in flight",
    "activations": "a stage s of N keeps, for the N-1-s micro-batches in flight, every "
                   "activation of its layers still live when its forward hands over to the "
                   "next stage (no recomputation), live while micro-batches are, mapped "
                   "like the activations"}

#: How the stash is mapped (``SplitModel``'s ``stash_mapping``, ``SplitModel.stash_tiles``):
#: like the tensors stashed (the default), or linearly over the IPU's tiles.
STASH_MAPPINGS = ("like", "linear")

#: Tiles whose bound a stage estimate computes first (the most bytes first); then twice as
#: many, and so on, until no tile left could beat the worst found.
FIRST_TILES = 32

ASSUMPTIONS = (
    "each stage is recompiled on an IPU of as many tiles as the report's: every tensor keeps "
    "its linear tile mapping (003), so its bytes stay on the same tile of its IPU",
    "a stage's variables keep their lifetimes and interference (its part of the same "
    "program); its maximum live bytes are the bound, not an allocation",
    "always-live stack, vertex code, control ids and constants stay whole on every tile; "
    "control code, vertex state and exchange code shrink to the stage's share of the tile's "
    "variables",
    "an inter-IPU copy adds a send buffer on the source and a receive buffer and the copy on "
    "the destination, each mapped like the tensor copied (000, 002); with class steps the "
    "buffers live one step, the copy of a stage's input until its first layer is done with "
    "the micro-batch (past the gradient it sends back if that layer has work after it, a "
    "weight update; to its forward if its backward does not read its input: no weights, "
    "only its output kept, an element-wise layer), the gradient's copy like the gradient; "
    "without steps each lives like "
    "the tensor copied",
    STASH_ASSUMPTIONS["inputs"],
    "code of the inter-IPU exchanges and the loss-scaling flags' exchange are not counted",
    "a weight read by a unit of another stage (a tied embedding; told by its gradient, made "
    "there, mapped exactly like it) is copied there, counted at its last read, and its "
    "gradient sent back (a receive buffer and the copy, live like the gradient)",
)


class Stage(msgspec.Struct, rename="camel"):
    """One pipeline stage: its units (layers), its estimated maximum live bytes on its worst
    tile (the bound), of them the always-live part and the buffers pipelining adds there, and
    a verdict (``FitVerdict``): ``fits``, ``close`` (within ``SPLIT_CLOSE_MARGIN`` below
    tileMemory) or ``cannot fit``."""

    ipu: int
    first_unit: str
    last_unit: str
    units: int
    worst_tile: int
    max_live_bytes: int
    always_live_bytes: int
    buffer_bytes: int
    verdict: FitVerdict
    actual_max_live_bytes: int | None = None
    #: a pipelined report's stage (answered per IPU): the plan that fits its tiles that need
    #: less data, by the bound on the report itself (``tilemem.figures.plan``; ``None``
    #: when none does)
    levers: "Plan | None" = None
    #: the largest tensors live at the worst tile's peak, by name (``peaks``; ``None``:
    #: not asked)
    peak: "StagePeak | None" = None


class SplitAnswer(msgspec.Struct, rename="camel"):
    """A split into ``ipus`` stages: ``split_points`` are the first units of stages 1.."""

    ipus: int
    tile_memory: int
    tiles_per_ipu: int
    units_from: str
    units: int
    split_points: list[str]
    split_indices: list[int]
    stages: list[Stage]
    search: str
    fits: bool
    assumptions: list[str]
    note: str = ""

    @property
    def worst(self) -> int:
        return max(s.max_live_bytes for s in self.stages)


def verdict(max_live: int, tile_memory: int, steps: bool = True) -> FitVerdict:
    """``fits``, ``close`` or ``cannot fit`` for an estimated worst tile; ``close``: within
    the estimate's measured error below tileMemory (``SPLIT_CLOSE_MARGIN``, or
    ``SPLIT_CLOSE_MARGIN_NO_STEPS`` for a report without class steps).

    >>> [verdict(b, 1000) for b in (900, 990, 1001)], verdict(900, 1000, steps=False)
    (['fits', 'close', 'cannot fit'], 'close')
    """
    margin = SPLIT_CLOSE_MARGIN if steps else SPLIT_CLOSE_MARGIN_NO_STEPS
    return fit_verdict(max_live, tile_memory, margin)


# ---- the model ---------------------------------------------------------------------------
class SplitModel(Crossings):
    """What every stage estimate of a report needs, computed once (see the module
    docstring). A pipelined report is folded onto one IPU's tiles, the buffers of its
    pipelining left out."""

    def __init__(self, r: Report, stash: str = "inputs",
                 stash_mapping: str = INFERRED_STASH_MAPPING):
        if stash not in STASH:
            raise ValueError(f"stash must be one of {STASH}, not {stash!r}")
        if stash_mapping not in STASH_MAPPINGS:
            raise ValueError(f"stash_mapping must be one of {STASH_MAPPINGS}, "
                             f"not {stash_mapping!r}")
        self.stash_mapping = stash_mapping
        from dataclasses import replace

        tm = r.target
        self.source_ipus = tm.num_ipus
        self.tiles = tm.ipu_tiles
        codes, names = tensor_codes(r)

        def of_cats(want):
            return np.isin(r.category, [k for k, c in enumerate(r.categories) if want(c)])

        old = tensors_named_under(r, INFERRED_PIPELINE_BUFFER_PREFIX)[codes]
        old |= of_cats(lambda c: c == "globalMessage" or c.startswith("globalExchange"))
        # compact per-row columns (a Pod has some 50 M rows): IPUs, steps and units are few
        self.ipu_of_row = np.full(r.num_vars, -1, np.int16)
        np.floor_divide(r.tile, self.tiles, out=self.ipu_of_row, where=r.allocated,
                        casting="unsafe")
        if self.source_ipus > 1:  # per-tile always-live data once (IPU 0's), not per IPU
            old |= (r.always_live & of_cats(lambda c: c in INFERRED_PER_TILE_ALWAYS_LIVE)
                    & (self.ipu_of_row > 0))
        if self.source_ipus > 1 or old.any():
            allocated = r.allocated & ~old
            tile = np.where(allocated, r.tile % self.tiles, -1)
            # the fold keeps the pairs that share a tile (pruned or not as read: the same)
            r = replace(r, tile=tile, allocated=allocated, target=tm.with_tiles(self.tiles),
                        interference=tile_interference(r), _tile_index=None, _cache={k: v for k, v in r._cache.items()
                                                  if k in ("sorted_interference",
                                                           "tensor_keys")})
        self.r = r
        alive = r.allocated & (r.size > 0)
        model = alive & ~r.always_live
        self.start = self.end = None
        if r.has_class_steps:
            steps = r.class_steps
            if len(steps) and int(steps.max()) < np.iinfo(np.int32).max:
                steps = steps.astype(np.int32)
            self.start = steps[r.eq_class, 0]
            self.end = steps[r.eq_class, 1]
        named_al = alive & r.always_live
        self.units = program_units(r, np.flatnonzero(model), self.start, codes, names)
        u = self.units.of_row
        L = self.L = len(self.units.labels)
        if L == 0:
            raise ReportError("no model variables (only always-live data): nothing to split",
                              field="vars")
        self.codes = codes
        # per-sample rows (what a micro-batch is made of, not parameter-shaped: not the
        # gradient accumulators, zeroed for all units before the first micro-batch): where a
        # unit's work begins, the data a stage stashes, the program's input
        from ..whatif.batch import micro_batch_rows

        self.per_sample = np.zeros(r.num_vars, bool)
        self.per_sample[micro_batch_rows(r)] = True
        # unit positions and persistent data (alive from the program's first step)
        if self.start is not None:
            first = int(self.start[model].min())
            self.persistent = model & (self.start <= first)
            self.pos = np.full(L, np.iinfo(np.int64).max)
            late = model & (u >= 0) & ~self.persistent
            np.minimum.at(self.pos, u[late & self.per_sample], self.start[late & self.per_sample])
            none = self.pos == np.iinfo(np.int64).max   # a unit without per-sample data
            if none.any():
                pos = np.full(L, np.iinfo(np.int64).max)
                np.minimum.at(pos, u[late], self.start[late])
                self.pos[none] = pos[none]
        else:
            deg = np.diff(tile_interference(r).indptr)
            cdeg = deg[r.eq_class]
            self.persistent = model & (cdeg >= 0.95 * cdeg[model].max())
            self.pos = None
        # tensors of no unit: anchored to the unit before them (with steps) or everywhere;
        # always-live variables of no unit too (persistent state written alwaysLive, as the
        # embedding may be: 004 leaves the flag to Poplar), as when they are not so written
        al_model = named_al & (u < 0) & of_cats(lambda c: c == "variable")
        shared = (model | al_model) & (u < 0)
        self.anchor = np.full(r.num_vars, -1, np.int32 if L < 2 ** 31 else np.int64)
        if self.pos is not None and shared.any():
            order = np.argsort(self.pos, kind="stable")
            k = np.searchsorted(self.pos[order], self.start[shared], "right") - 1
            self.anchor[shared] = np.where(k >= 0, order[np.maximum(k, 0)], 0)
            self._anchor_groups(shared, codes, names)
        self.anchor[model & (u >= 0)] = u[model & (u >= 0)]
        self.anchor[named_al & (u >= 0)] = u[named_al & (u >= 0)]
        self.everywhere = shared & (self.anchor < 0)
        # always-live data of no unit: kept whole, or shared out by the tile's variables
        other_al = named_al & (u < 0) & ~al_model
        self.step_scaled = other_al & of_cats(lambda c: c in INFERRED_STEP_SCALED_ALWAYS_LIVE)
        self.whole = other_al & ~self.step_scaled
        # per tile, per unit: variables (the share of always-live data) and bytes (the bound)
        T = self.tiles
        counted = model & (self.anchor >= 0)
        key = self.anchor[counted] * T + r.tile[counted]
        self.count = np.zeros((L + 1, T))
        self.count[1:] = np.cumsum(np.bincount(key, minlength=L * T).reshape(L, T), axis=0)
        self.count_all = np.bincount(r.tile[model], minlength=T).astype(float)
        self.count_every = np.bincount(r.tile[self.everywhere & model],
                                       minlength=T).astype(float)
        counted_b = alive & (self.anchor >= 0)
        keyb = self.anchor[counted_b] * T + r.tile[counted_b]
        self.bytes = np.zeros((L + 1, T))
        self.bytes[1:] = np.cumsum(np.bincount(keyb, r.size[counted_b], minlength=L * T)
                                   .reshape(L, T), axis=0)
        self.al_whole = np.bincount(r.tile[self.whole], r.size[self.whole], minlength=T)
        self.al_scaled = np.bincount(r.tile[self.step_scaled], r.size[self.step_scaled],
                                     minlength=T)
        self.every_bytes = np.bincount(r.tile[self.everywhere], r.size[self.everywhere],
                                       minlength=T)
        # the micro-batches' span: from the first per-sample tensor coming alive to the
        # last dying (the stash is live over it); classes of the stage only outside it (an
        # optimiser step after gradient accumulation) never meet the stash
        self.outside = np.zeros(r.num_vars, bool)
        self.span = None
        mb = self.per_sample & ~self.persistent & (self.anchor >= 0)
        # a micro-batch's data: model data of a unit (of the categories a micro-batch is
        # made of) that comes alive after the micro-batches begin, not persistent: not
        # the gradient accumulators, zeroed before them, whatever their shape
        self.of_micro_batch = np.zeros(r.num_vars, bool)
        if self.start is not None and mb.any():
            from ..whatif.batch import PER_SAMPLE_CATEGORIES

            self.span = (int(self.start[mb].min()), int(self.end[mb].max()))
            self.outside = model & ((self.end <= self.span[0]) | (self.start >= self.span[1]))
            self.of_micro_batch = (model & ~self.persistent & (self.anchor >= 0)
                                   & (self.start >= self.span[0])
                                   & of_cats(lambda c: c in PER_SAMPLE_CATEGORIES))
        # each stage's rows without a pass over every row: those of a unit, grouped by unit
        anchored = np.flatnonzero(self.anchor >= 0)
        if r.num_vars < 2 ** 31:
            anchored = anchored.astype(np.int32)
        self._by_anchor = anchored[np.argsort(self.anchor[anchored], kind="stable")]
        self._anchor_ptr = np.searchsorted(self.anchor[self._by_anchor], np.arange(L + 1))
        self._every_rows = np.flatnonzero(self.everywhere)
        self._whole_rows = np.flatnonzero(self.whole)
        self._scaled_rows = np.flatnonzero(self.step_scaled)
        self._crossings()
        self._tied_weights(r.allocated & r.always_live & of_cats(lambda c: c == "variable"))
        self._evals: dict = {}
        self._bound = None     # the report's maximal cliques, on first use
        self._stash_cand = self._stash_ptr = None
        # without steps the handover cannot be placed: the stage input is stashed
        self.stash_asked = stash
        self.stash = stash if self.start is not None else "inputs"

    # ---- one stage -------------------------------------------------------------------------
    def stage(self, s: int, i: int, j: int, n: int) -> tuple[np.ndarray, np.ndarray,
                                                            np.ndarray]:
        """Stage ``s`` of ``n`` holding units ``[i, j)``: per tile of its IPU the estimated
        maximum live bytes, the always-live part and the bytes pipelining adds:
        ``(max_live, always_live, buffers)``."""
        key = (s, i, j, n)
        if key in self._evals:
            return self._evals[key]
        T = self.tiles
        bound, buffers, stash = self._stage_bound(s, i, j, n)
        # the bound tile by tile, those with the most bytes first, until no tile left can
        # beat the worst found (``proxy_tiles`` is an upper bound of every tile's estimate)
        upper = self.proxy_tiles(s, i, j, n)
        order = np.argsort(-upper, kind="stable")
        peak = np.zeros(T, np.int64)
        al = np.zeros(T, np.int64)
        done = 0
        tm = self.r.target.tile_memory
        while done < T:
            batch = np.sort(order[done:done + max(FIRST_TILES, done)])
            # a tile that can be neither the worst nor over tileMemory is not searched
            peak[batch], al[batch] = bounded(bound, batch, stash,
                                              float((peak + stash).max()), tm)
            done += len(batch)
            if done < T and upper[order[done]] <= (peak + stash).max():
                break
        out = (peak + stash.astype(np.int64), al + stash.astype(np.int64),
               (buffers + stash).astype(np.int64))
        self._evals[key] = out
        return out

    def exceeds(self, s: int, i: int, j: int, n: int, limit: int) -> bool:
        """Whether stage ``s``'s estimate is above ``limit`` on some tile (``worst(...) >
        limit``), deciding it on as few tiles as it can: the bound tile by tile in the same
        order as ``stage``, stopping at the first tile above ``limit`` or when no tile left
        can be. That a stage does not fit needs one tile above, not its worst tile."""
        if (s, i, j, n) in self._evals:
            return self.worst(s, i, j, n) > limit
        T = self.tiles
        upper = self.proxy_tiles(s, i, j, n)
        order = np.argsort(-upper, kind="stable")
        if not len(order) or upper[order[0]] <= limit:
            return False
        bound, _, stash = self._stage_bound(s, i, j, n)
        done = 0
        while done < T:
            batch = np.sort(order[done:done + max(FIRST_TILES, done)])
            if np.any(bounded(bound, batch, stash, np.inf, limit)[0] + stash[batch] > limit):
                return True
            done += len(batch)
            if done < T and upper[order[done]] <= limit:
                break
        return False

    def _stage_bound(self, s: int, i: int, j: int, n: int):
        """``(bound, buffers, stash)``: ``bound(tiles)`` gives stage ``s``'s maximum live
        bytes and always-live bytes on ``tiles`` without its stash (the bound on its report:
        its variables at their sizes, its buffers; the caller adds the stash); the bytes
        pipelining adds per tile; the stash per tile.

        The stage's class graph is the report's restricted to its classes, plus its buffers:
        when the report's graph is chordal its maximal cliques, found once, give every
        stage's bound exactly (``ReweightedBound``); else each stage's report is searched.
        The stash is live over the micro-batches (``span``): when some of the stage's
        classes live only outside them (an optimiser step after the gradient accumulation
        loop), the bound is the larger of the stage's bound and, plus the stash, the bound
        of its classes that meet the micro-batches."""
        rows, size, extra, buffers, stash = self._stage_sizes(s, i, j, n)
        full = self._bound_of(rows, size, extra)
        out = self.outside[rows]
        if not stash.any() or not out.any():
            return full, buffers, stash
        a, e = self.span
        inside = self._bound_of(rows[~out], size[~out], [x for x in extra
                                                        if x[1] < e and x[2] > a])

        def bound(tiles):
            p0, al = full(tiles)
            p1, _ = inside(tiles)
            st = stash[tiles].astype(np.int64)
            return np.maximum(p0, p1 + st) - st, al

        def cheap(tiles):   # the same of the two bounds' bounds without a search
            lo0, up0, al, ex0 = full.cheap(tiles)
            lo1, up1, _, ex1 = inside.cheap(tiles)
            st = stash[tiles].astype(np.int64)
            return (np.maximum(lo0, lo1 + st) - st, np.maximum(up0, up1 + st) - st, al,
                    ex0 & ex1)
        if hasattr(full, "cheap") and hasattr(inside, "cheap"):
            bound.cheap = cheap
        return bound, buffers, stash

    def _bound_of(self, rows: np.ndarray, size: np.ndarray, extra: list):
        """``bound(tiles)``: maximum live bytes and always-live bytes on ``tiles`` of the
        report's variables ``rows`` at sizes ``size`` (every other variable left out) with
        the classes ``extra`` added."""
        if self._bound is None:
            from ...liveness.cliques import ReweightedBound

            self._bound = ReweightedBound.of(self.r) or False
        if self._bound:
            from ...liveness.cliques import Extra

            b = self._bound
            whole = np.zeros(self.r.num_vars, np.float64)
            whole[rows] = size
            w = b.node_weights(whole)
            bufs = [Extra(x, a, e) for x, a, e in extra]
            return lambda tiles: b.max_live(w, tiles, bufs)
        from .buffers import searched_bound, stage_report

        # the stage's own report: a folded Pod holds every stage's rows and classes, and a
        # changed copy of all of them a stage (with its buffers' interference) passed 15 GB
        # at 16 IPUs; rows and classes not in the stage weigh nothing in its bound
        return searched_bound(stage_report(self.r, rows, size, extra))

    def _stage_sizes(self, s: int, i: int, j: int, n: int, tile: int | None = None):
        """Stage ``s``'s variables: ``rows`` (ascending: the allocated rows in the stage) and
        their ``size`` there, its buffers as ``(rows, start, end)`` classes (with steps), the
        bytes pipelining adds per tile, the stash per tile; of ``tile`` only when given (the
        rows and buffers there: a stage's peak named at its worst tile, ``peaks``).

        A row's size in the stage is its size times its share (1: a unit of the stage, data
        of every stage or kept whole; the stage's share of the tile's variables: step-scaled
        always-live data) plus the copies pipelining adds of it (without steps, or too many
        buffers: live like the tensor copied)."""
        r, T = self.r, self.tiles
        lo, hi = self._anchor_ptr[i], self._anchor_ptr[j]
        own = self.count[j] - self.count[i] + self.count_every
        share = np.divide(own, self.count_all, out=np.ones(T), where=self.count_all > 0)
        parts = [(self._by_anchor[lo:hi], np.ones(hi - lo)),
                 (self._every_rows, np.ones(len(self._every_rows))),
                 (self._whole_rows, np.ones(len(self._whole_rows))),
                 (self._scaled_rows, share[r.tile[self._scaled_rows]])]
        copies = []        # (rows, times): copies live like the tensor copied
        if self.start is None:  # buffers live like the tensor copied (an upper bound)
            if i > 0:       # the activation comes in, the gradient goes back
                copies += [(self.fwd[i], INFERRED_COPY_ON_DESTINATION),
                           (self.bwd[i], INFERRED_COPY_ON_SOURCE)]
            if j < self.L:  # the activation goes out, the gradient comes back
                copies += [(self.fwd[j], INFERRED_COPY_ON_SOURCE),
                           (self.bwd[j], INFERRED_COPY_ON_DESTINATION)]
        bufs = self._buffers(i, j) if self.start is not None else []
        tied = self._tied_copies(i, j)
        if self.start is not None and len(bufs) + len(tied) <= MAX_EXTRA:
            bufs += [(np.concatenate([rows] * k), a, e) for rows, a, e, k in tied]
        else:   # live like the tensor copied (an upper bound)
            copies += [(rows, k) for rows, _, _, k in tied]
        if tile is not None:
            parts = [(x[r.tile[x] == tile], w[r.tile[x] == tile]) for x, w in parts]
            copies = [(np.asarray(x, np.int64), k) for x, k in copies]
            copies = [(x[r.tile[x] == tile], k) for x, k in copies]
            bufs = [(np.asarray(x, np.int64), a, e) for x, a, e in bufs]
            bufs = [(x[r.tile[x] == tile], a, e) for x, a, e in bufs if (r.tile[x] == tile).any()]
        copies = [(np.asarray(x, np.int64), k) for x, k in copies if k and len(x)]
        copy_rows = np.concatenate([x for x, _ in copies] or [np.zeros(0, np.int64)])
        copy_times = np.concatenate([np.full(len(x), float(k)) for x, k in copies]
                                    or [np.zeros(0)])
        every = np.concatenate([p[0] for p in parts] + [copy_rows])
        times = np.concatenate([p[1] for p in parts] + [copy_times])
        rows, at = np.unique(every, return_inverse=True)
        mult = np.bincount(at.reshape(-1), times, minlength=len(rows))
        size = np.ceil(r.size[rows] * mult).astype(r.size.dtype)
        keep = size > 0
        buffers = np.bincount(r.tile[copy_rows], r.size[copy_rows] * copy_times,
                              minlength=T).astype(np.float64)
        if self.start is not None:
            for x, _, _ in bufs:
                buffers += np.bincount(r.tile[x], r.size[x], minlength=T)
        return rows[keep], size[keep], bufs, buffers, self.stash_tiles(s, i, j, n)

    def stage_report(self, s: int, i: int, j: int, n: int, tile: int | None = None,
                     kept=None, names_of: Report | None = None) -> Report | None:
        """Stage ``s`` of ``n`` holding units ``[i, j)`` as a report of its own, as
        recompiled: its variables at their sizes in the stage, its buffers and its stash as
        classes of their own (the stash live over the micro-batches), with names (the
        buffers' under ``pipeline/``): what the levers are estimated on
        (``splitsearch.with_stage_levers``). ``None`` without class steps (a buffer's or the
        stash's lifetime cannot be placed) or with the stash spread over the IPU
        (``stash_mapping="linear"``: no variable of the report is mapped so).

        With ``tile``: that tile's variables only, and a report always (without steps the
        copies live like the tensor copied, in its size; a stash spread over the IPU left
        out: ``stash_tiles`` gives it), what the names at a stage's peak are read from.
        ``kept``: the rows stashed, if not ``stash_rows``'s (``checkpoint_rows``: a stage that
        recomputes); ``names_of`` (without ``tile``): the stage's report, another stash."""
        from .buffers import stage_report

        like = self.start is not None and self.stash_mapping == "like"
        if tile is None and not like:
            return None
        rows, size, extra, _, _ = self._stage_sizes(s, i, j, n, tile)
        depth = inferred_stash_depth(s, n)
        kept = (self.stash_rows(i, j) if kept is None else kept) if like else np.zeros(0, int)
        kept = kept if tile is None else kept[self.r.tile[kept] == tile]
        if depth and len(kept):
            a, e = self.span if self.span is not None else (
                int(self.start[rows].min()), int(self.end[rows].max()))
            extra = extra + [(np.concatenate([kept] * depth), a, e)]
        return stage_report(self.r, rows, size, extra, names=True, names_of=names_of)

    def with_stash(self, stash: str, stash_mapping: str | None = None) -> "SplitModel":
        """The same model under another reading of the stash (what a stage keeps for the
        micro-batches in flight; how it is mapped, ``None``: as this one), sharing every
        per-report array; its own estimates."""
        import copy

        if stash not in STASH:
            raise ValueError(f"stash must be one of {STASH}, not {stash!r}")
        if stash_mapping not in STASH_MAPPINGS + (None,):
            raise ValueError(f"stash_mapping must be one of {STASH_MAPPINGS}, "
                             f"not {stash_mapping!r}")
        other = copy.copy(self)
        other.stash_mapping = stash_mapping or self.stash_mapping
        other.stash_asked = stash
        other.stash = stash if self.start is not None else "inputs"
        other._evals = {}
        return other

    def worst(self, s, i, j, n) -> int:
        return int(self.stage(s, i, j, n)[0].max())

    def proxy(self, s: int, i: int, j: int, n: int) -> float:
        """A cheap upper bound of stage ``s``'s worst tile (``proxy_tiles``), kept: a split's
        bisection asks for the same stages again at every step."""
        key = ("proxy", s, i, j, n)
        if key not in self._evals:
            self._evals[key] = float(self.proxy_tiles(s, i, j, n).max())
        return self._evals[key]

    def proxy_tiles(self, s: int, i: int, j: int, n: int) -> np.ndarray:
        """A cheap upper bound of stage ``s``'s estimate on every tile: all its bytes live
        at once (always-live data whole, every buffer, the stash)."""
        b = self.bytes[j] - self.bytes[i] + self.al_whole + self.al_scaled + self.every_bytes
        r = self.r
        b = b + self.stash_tiles(s, i, j, n)
        for rows, _, _, k in self._tied_copies(i, j):
            b = b + k * np.bincount(r.tile[rows], r.size[rows], minlength=self.tiles)
        for rows, k in ((self.fwd[i] if i else (), INFERRED_COPY_ON_DESTINATION),
                        (self.bwd[i] if i else (), INFERRED_COPY_ON_SOURCE),
                        (self.fwd[j] if j < self.L else (), INFERRED_COPY_ON_SOURCE),
                        (self.bwd[j] if j < self.L else (), INFERRED_COPY_ON_DESTINATION)):
            rows = np.asarray(rows, np.int64)
            if k and len(rows):
                b = b + k * np.bincount(r.tile[rows], r.size[rows], minlength=self.tiles)
        return b
