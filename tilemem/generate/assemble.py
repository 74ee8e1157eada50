"""The generator's assembly: a built ``Program`` (its tensors, steps, loops and branches) made
into a report's columns -- tensors mapped onto tiles (``mapping``), their lifetimes and the
classes' interference (``lifetimes``), always-live code and stacks (``tiledata``), sizes
calibrated so that at pressure 1 a few tiles are out of memory with first-fit offsets -- whole,
or IPU by IPU (``pieces``: a Pod's report is never held whole). ``generate_report`` (the
package) drives it.
"""
from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np
from ..jit import njit

from ..model import CATEGORIES, Csr, Report
from ..figures.summary import highest_end_per_tile
from ..model.target import Target
from ..model.overlap import overlap_relation
from ..rules import INFERRED_DEFAULT_AMP as DEFAULT_AVAILABLE_MEMORY_PROPORTION
from ..levers import Levers
from .lifetimes import Lifetimes, live_segments
from .mapping import GRAIN_BY_DTYPE, MIN_BYTES_PER_TILE, map_tensors
from .builder import Program
from .tiledata import (ALIGNMENT, ALWAYS_LIVE_CATEGORIES, CODE_CATEGORIES,
                       GLOBAL_EXCHANGE_CATEGORIES, SUMMARY_STACK_PER_TILE,
                       always_live_items, step_tiles, step_tiles_of_pieces)


#: Calibration at pressure 1: the tile at this quantile of estimated demand is filled to
#: ``FILL`` of its memory (the estimate ignores gaps, which first fit adds).
CALIBRATION_QUANTILE = 0.95
FILL = 0.91
#: Then refined on first-fit results of a sample of tiles: at pressure 1 this share of tiles
#: is out of memory (at least one tile of the sample).
TARGET_OVER = 0.05
SAMPLE_TILES = 48
REFINE_STEPS = 8
CAT_CODE = {c: i for i, c in enumerate(CATEGORIES)}


class _Assembler:
    def __init__(self, program: Program, target: Target, rng: np.random.Generator,
                 always_live_state: bool = False, per_weight: dict | None = None):
        self.p = program
        self.per_weight = per_weight   # bytes per item weight by category (None: calibrate)
        self.t = target
        self.item_seed = int(rng.integers(1 << 62))
        # tensors are mapped onto the tiles of their own IPU (one IPU: all tiles)
        T = self.tpi = target.num_tiles // program.ipus
        ts = program.tensors
        self.bpt = np.array([x.bpt for x in ts])
        self.scaled = np.array([x.scaled for x in ts])
        self.dtype = np.array([x.dtype for x in ts], np.int64)
        # the type a tensor is laid out by (grain, minimum per tile): a lever that changes a
        # type after calibration keeps the elements where they were (``levers``)
        self.layout_dtype = self.dtype.copy()
        self.role = np.array([x.role for x in ts], dtype=object)
        self.ipu = np.array([x.ipu for x in ts], np.int64)
        self.cov_tiles = np.maximum(1, np.round(np.array([x.coverage for x in ts]) * T))
        self.offset = np.array([x.offset % T if x.offset >= 0
                                else zlib.crc32((x.place or x.name).encode()) % T for x in ts],
                               np.int64)
        self.ascending = np.array([x.ascending for x in ts])
        self.tensor_always_live = np.array([x.always_live for x in ts], bool)
        self.clone_of = np.array([x.clone_of for x in ts], np.int64)
        self.interleaved = np.array([x.interleaved for x in ts])
        # lifetimes -> classes
        self.lt = Lifetimes()
        S = program.num_steps
        self.tensor_class = np.array(
            [self.lt.class_of(live_segments(x.define, x.uses, program.loops, program.branches))
             for x in ts], np.int64)
        self.seg_ptr, self.seg_start, self.seg_end = self.lt.arrays()
        self.num_steps = S
        # always-live data: one class per category (as in 004's extract), live throughout
        al_cats = ALWAYS_LIVE_CATEGORIES + (GLOBAL_EXCHANGE_CATEGORIES
                                            if "GlobalExchange" in program.step_kind else ())
        self.al_class = {c: self.lt.class_of([(0, S)], key=c) for c in al_cats}
        # one IPU: every pair sharing a step; several: per IPU, when the tiles are known
        self.interference = self.lt.interference() if program.ipus == 1 else None
        self.class_steps = self.lt.hulls()
        self.tensor_cat = np.array([CAT_CODE[x.category] for x in ts], np.int16)
        self.persistent = np.array([x.persistent for x in ts], bool)
        # the other reading of persistent training state: alwaysLive (the weights and the
        # optimiser state), the sizes and offsets unchanged
        self.tensor_always_live |= self.persistent & always_live_state
        self.tensor_align = np.array([16 if x.interleaved else x.alignment for x in ts],
                                     np.int64)

    # ---- sizes ----------------------------------------------------------------------------
    def parts(self, scale: float, ipu: int | None = None):
        """Tile parts of every tensor at ``scale``: ``(tensor, tile, bytes)``, grouped by
        tensor in tensor order; with ``ipu``, those of that IPU only (the same parts, in the
        same order: a tensor's mapping does not depend on the others), so that a Pod's
        parts need never be held at once."""
        # model tensors: bpt is the mean over the whole chip (IPU), so a tensor mapped to
        # fewer tiles is denser there; unscaled ones (flags, scalars): bpt bytes on each tile
        total = np.where(self.scaled, self.bpt * scale * self.tpi, self.bpt * self.cov_tiles)
        elems = np.maximum(1, np.round(total / self.dtype)).astype(np.int64)
        min_elems = np.maximum(-(-elems // self.cov_tiles.astype(np.int64)),
                               MIN_BYTES_PER_TILE // self.layout_dtype)
        grain = np.array([GRAIN_BY_DTYPE[d] for d in self.layout_dtype.tolist()], np.int64)
        c = self.clone_of >= 0
        if c.any():   # a clone has its source's elements on each tile, whatever its type
            src = self.clone_of[c]
            elems[c], min_elems[c], grain[c] = elems[src], min_elems[src], grain[src]
        ipus = self.p.ipus
        if ipu is not None and ipus > 1:
            # the tensors of this IPU and those on every IPU (the same mapping on each)
            mine = np.flatnonzero((self.ipu == ipu) | (self.ipu < 0))
            owner, tile, n = map_tensors(self.tpi, elems[mine], min_elems[mine], grain[mine],
                                         self.offset[mine], self.ascending[mine])
            owner = mine[owner]
            return owner, tile + ipu * self.tpi, n * self.dtype[owner]
        owner, tile, n = map_tensors(self.tpi, elems, min_elems, grain, self.offset,
                                     self.ascending)
        ipu = self.ipu[owner]
        if ipus > 1:
            # a tensor on every IPU: the same mapping on each IPU's tiles
            rep = np.where(ipu < 0, ipus, 1)
            idx = np.repeat(np.arange(len(owner)), rep)
            k = np.arange(len(idx)) - np.repeat(np.cumsum(rep) - rep, rep)
            owner, tile, n = owner[idx], tile[idx], n[idx]
            ipu = np.where(ipu[idx] < 0, k, ipu[idx])
            tile = tile + ipu * self.tpi
        return owner, tile, n * self.dtype[owner]

    def ipu_parts(self, scale: float):
        """``parts(scale, k)`` for every IPU ``k`` in turn (one IPU: all parts at once)."""
        if self.p.ipus == 1:
            yield self.parts(scale)
            return
        for k in range(self.p.ipus):
            yield self.parts(scale, k)

    def peak(self, tile, size, cls, tiles: tuple[int, int] | None = None) -> np.ndarray:
        """Per tile, the most bytes live at one step (exact for this program: every step's
        live set is a clique of the interference relation), for the tiles ``tiles``
        (``(first, count)``, default all), which must hold every part given.

        The running sum over steps is taken at the steps where something starts or ends on
        the tile only (a sort of those events, not a dense tiles x steps array: 23,552 tiles
        x 70,400 steps would be 13 GB). The sums are added in the order a dense array's
        cumulative sum adds them (adding the empty steps' zeros changes no bit), so the
        result is the same to the bit."""
        first_tile, T = (0, self.t.num_tiles) if tiles is None else tiles
        S1 = self.num_steps + 1
        nseg = np.diff(self.seg_ptr)[cls]
        idx = np.repeat(np.arange(len(cls)), nseg)
        first = np.zeros(len(cls) + 1, np.int64)
        np.cumsum(nseg, out=first[1:])
        seg = self.seg_ptr[cls][idx] + (np.arange(len(idx)) - first[idx])
        w = size[idx].astype(float)
        row = (tile[idx] - first_tile) * S1
        m = len(idx)
        keys, inv = np.unique(np.concatenate([row + self.seg_start[seg], row + self.seg_end[seg]]),
                              return_inverse=True)
        inv = inv.reshape(-1)
        del row, seg, idx
        diff = (np.bincount(inv[:m], w, minlength=len(keys))
                - np.bincount(inv[m:], w, minlength=len(keys)))
        return _segment_peaks(keys // S1, keys % S1, diff, T)

    def calibrate(self, always_live: np.ndarray) -> float:
        """Scale at which the ``CALIBRATION_QUANTILE`` tile's estimated need is ``FILL``."""
        t = self.t
        cap = FILL * t.tile_memory
        icap = FILL * (t.tile_memory - t.interleaved_memory_start)
        scale = 1.0
        for _ in range(6):
            need = always_live / cap
            for k, (owner, tile, size) in enumerate(self.ipu_parts(scale)):
                span = self._span(k)
                cls = self.tensor_class[owner]
                here = (always_live[span[0]:span[0] + span[1]]
                        + self.peak(tile, size, cls, span)) / cap
                il = self.interleaved[owner]
                if icap > 0 and il.any():
                    here = np.maximum(here, self.peak(tile[il], size[il], cls[il], span) / icap)
                need[span[0]:span[0] + span[1]] = here
            q = float(np.quantile(need, CALIBRATION_QUANTILE))
            if abs(q - 1.0) < 0.005:
                break
            scale /= q
        return scale

    def _span(self, k: int) -> tuple[int, int]:
        """``(first tile, tiles)`` of the ``k``-th piece of ``ipu_parts``."""
        return (0, self.t.num_tiles) if self.p.ipus == 1 else (k * self.tpi, self.tpi)

    def _need(self, scale: float) -> np.ndarray:
        """``peak`` of every tile, IPU by IPU."""
        need = np.zeros(self.t.num_tiles)
        for k, (owner, tile, size) in enumerate(self.ipu_parts(scale)):
            span = self._span(k)
            need[span[0]:span[0] + span[1]] = self.peak(tile, size, self.tensor_class[owner],
                                                        span)
        return need

    def _sample_parts(self, scale: float, sample: np.ndarray):
        """The parts on the tiles ``sample``, IPU by IPU."""
        got = []
        for owner, tile, size in self.ipu_parts(scale):
            keep = np.isin(tile, sample)
            got.append((owner[keep], tile[keep], size[keep]))
        return tuple(np.concatenate(x) for x in zip(*got))

    def refine(self, scale: float, items) -> float:
        """Smallest scale near ``scale`` at which first fit overflows ``TARGET_OVER`` of a
        sample of tiles (the estimate above ignores gaps, which vary from tile to tile)."""
        T = self.t.num_tiles
        need = self._need(scale)
        ranked = np.argsort(need, kind="stable")
        sample = np.sort(ranked[np.unique(np.linspace(0, T - 1, min(T, SAMPLE_TILES))
                                          .round().astype(np.int64))])
        sub_items = items.take(np.flatnonzero(np.isin(items.tile, sample)))

        def over_at(s: float) -> np.ndarray:
            owner, tile, size = self._sample_parts(s, sample)
            r = self.build(owner, tile, size, sub_items, names=False)
            ends = highest_end_per_tile(r.with_offsets(first_fit_offsets(r)))
            return ends[sample] > self.t.tile_memory

        want = max(TARGET_OVER, 1.0 / len(sample))
        lo, hi = scale * 0.7, scale * 1.4
        # tiles that first fit overflows well below the estimated scale overflow by their
        # constraints (a variable first fit cannot place in its region), not by the
        # pressure: the share is judged on the other tiles
        over_lo = over_at(lo)
        odd = over_lo if want <= over_lo.mean() < 1 else np.zeros_like(over_lo)

        def over_share(s: float) -> float:
            return float(over_at(s)[~odd].mean())

        share_lo = float(over_lo[~odd].mean())
        share_hi = over_share(hi)
        if share_lo >= want or share_hi < want:
            return lo if share_lo >= want else hi
        for _ in range(REFINE_STEPS):
            mid = (lo * hi) ** 0.5
            share = over_share(mid)
            if share >= want:
                hi, share_hi = mid, share
            else:
                lo, share_lo = mid, share
        # a cliff (many tiles alike) above the target: rather just below it, if some overflow
        return lo if share_hi > 3 * want and share_lo > 0 else hi

    # ---- the report -----------------------------------------------------------------------
    def calibrated(self, progress: bool) -> float:
        """The scale of model tensors at pressure 1 (``calibrate``, then ``refine``)."""
        T = self.t.num_tiles
        # calibrated on the reading without alwaysLive model tensors (their first-fit order
        # differs), so that both readings of a program have the same variables
        always_live = self.tensor_always_live
        self.tensor_always_live = np.zeros_like(always_live)
        try:
            return self._calibrated(progress, T)
        finally:
            self.tensor_always_live = always_live

    def _calibrated(self, progress: bool, T: int) -> float:
        with _phase(progress, "calibrating tensor sizes to the tile memory"):
            items = self._items_at(1.0)
            always_live = np.bincount(items.tile, items.size, minlength=T)
            del items   # a Pod's items are millions: one set at a time
            scale = self.calibrate(always_live)
            return self.refine(scale, self._items_at(scale))

    def report(self, pressure: float, progress: bool, levers: Levers | None = None,
               scale: float | None = None) -> Report:
        if scale is None:
            scale = self.calibrated(progress)
        if levers is not None:   # after calibration: the rest of the program stays as it was
            self.resize(levers)
        with _phase(progress, "mapping tensors, naming variables, constraints"):
            owner, tile, size = self.parts(scale * pressure)
            r = self.build(owner, tile, size, self._items(owner, tile), names=True)
        return r.with_offsets(first_fit_offsets(r, progress))

    def pieces(self, pressure: float, progress: bool, levers: Levers | None = None,
               scale: float | None = None):
        """``report``'s report one IPU at a time, in IPU order: each a ``Report`` of that
        IPU's rows (numbered from 0, ordered by tile), its offsets, its constraints, and its
        interference pairs (those of classes sharing one of its tiles: the report's relation
        is their union). Only one IPU's variables, names and pairs are held at a time."""
        if scale is None:
            scale = self.calibrated(progress)
        if levers is not None:
            self.resize(levers)
        with _phase(progress, "always-live data of every tile"):
            items = self._items_at(scale * pressure)
        item_ipu = items.tile // self.tpi
        for k, (owner, tile, size) in enumerate(self.ipu_parts(scale * pressure)):
            sub = items.take(np.flatnonzero(item_ipu == k))
            with _phase(progress, f"IPU {k}: naming variables, constraints, interference"):
                r = self.build(owner, tile, size, sub, names=True)
            del owner, tile, size, sub
            yield r.with_offsets(first_fit_offsets(r, progress))

    def resize(self, levers: Levers) -> None:
        """The sizes the levers change (``tilemem.levers``): partial sums by the
        availableMemoryProportion of their stage and in half with FP16 partials, the
        first-order momentum in half; the same elements on the same tiles."""
        stage = np.maximum(self.ipu, 0)
        amp = np.array([levers.amp_of(int(k)) for k in range(self.p.ipus)])
        partials = self.role == "partials"
        factor = np.where(partials, amp[stage] / DEFAULT_AVAILABLE_MEMORY_PROPORTION, 1.0)
        half = np.zeros(len(factor), bool)
        if levers.half_partials:
            half |= partials
        if levers.half_momentum:
            half |= self.role == "momentum"
        half &= self.dtype == 4
        self.bpt = self.bpt * np.where(half, 0.5 * factor, factor)
        self.dtype = np.where(half, 2, self.dtype)

    def build(self, owner, tile, size, items, names: bool) -> Report:
        """The report of these tensor parts and always-live items (offsets 0)."""
        p, t = self.p, self.t
        T = t.num_tiles
        n_p, n_a = len(owner), len(items.tile)
        n = n_p + n_a
        category = np.concatenate([self.tensor_cat[owner],
                                   np.fromiter(map(CAT_CODE.__getitem__, items.category),
                                               np.int16, count=n_a)])
        eq_class = np.concatenate([self.tensor_class[owner],
                                   np.fromiter(map(self.al_class.__getitem__, items.category),
                                               np.int64, count=n_a)])
        alignment = np.concatenate([self.tensor_align[owner],
                                    np.fromiter((ALIGNMENT.get(c, 4) for c in items.category),
                                                np.int64, count=n_a)])
        code = np.isin(category, [CAT_CODE[c] for c in CODE_CATEGORIES])
        tile_all = np.concatenate([tile, items.tile])
        size_all = np.concatenate([size, items.size])
        always_live = np.concatenate([self.tensor_always_live[owner], np.ones(n_a, bool)])
        interleaved = np.concatenate([self.interleaved[owner], np.zeros(n_a, bool)])

        if names:
            tnames = [x.name + "#" for x in p.tensors]
            name_list = [tnames[o] + str(k) for o, k in zip(owner.tolist(), tile.tolist())]
            name_list += [lab + "#" + str(k) for lab, k in zip(items.label, items.tile.tolist())]
        else:
            name_list = [""] * n

        # the parts of a tensor, wherever they are (one IPU's, or a sample's, are grouped by
        # IPU first)
        by_tensor = np.argsort(owner, kind="stable")
        part_ptr = np.zeros(len(p.tensors) + 1, np.int64)
        np.cumsum(np.bincount(owner, minlength=len(p.tensors)), out=part_ptr[1:])
        elem = _pair_rows(p.element_pairs, part_ptr, by_tensor, tile, n)
        region = _pair_rows(p.region_pairs, part_ptr, by_tensor, tile, n)

        # Poplar-like allocation order: code, other always-live data, interleaved variables,
        # then the rest; each group by decreasing size. AlwaysLive model tensors (a
        # transformer's state) go with the variables, as in the reading without the flag:
        # both readings then have the same offsets
        item = np.concatenate([np.zeros(n_p, bool), np.ones(n_a, bool)])
        group = np.where(code, 0, np.where(item, 1, np.where(interleaved, 2, 3)))
        rows = np.arange(n)
        order = np.lexsort((rows, -size_all, group, tile_all))
        allocation_order = Csr.from_lengths(np.bincount(tile_all, minlength=T), order)

        inter, dropped = self._interference(tile_all, eq_class)
        report = _by_tile(Report.from_columns(
            target=t, var_id=rows, tile=tile_all, size=size_all, alignment=alignment,
            offset=np.zeros(n, np.int64), category=category, eq_class=eq_class,
            interference=inter, names=name_list, always_live=always_live,
            executable=code, vertex_code=category == CAT_CODE["vertexCode"],
            is_constant=category == CAT_CODE["constant"], in_interleaved_mem=interleaved,
            element_constraints=elem, region_constraints=region,
            allocation_order=allocation_order, class_steps=self.class_steps))
        if dropped is None:
            return report

        return replace(report, interference_dropped=dropped)

    def _interference(self, tile, eq_class):
        """The classes sharing a step; over several IPUs only the pairs that share a tile
        (``tilemem.model.interference``), found IPU by IPU, so the pairs of classes of
        different IPUs (most of them, and growing with the square of the IPUs) are never
        built: ``(Csr, dropped)``, ``dropped`` ``None`` (not pruned) or -1 (pruned, the pairs
        left out never counted)."""
        if self.interference is not None:
            return self.interference, None
        from ..model import symmetric_closure
        from ..model.interference import SharedTiles

        k = self.lt.num_classes
        shares = SharedTiles.of(tile, eq_class, np.ones(len(tile), bool), k)
        seg_ptr, seg_start, seg_end = self.lt.arrays()   # with the always-live classes
        seg_cls = np.repeat(np.arange(k), np.diff(seg_ptr))
        ipu_of = tile // self.tpi
        src, dst = [], []
        for ipu in np.unique(ipu_of).tolist():   # one IPU's piece: that IPU alone
            here = np.zeros(k, bool)
            here[eq_class[ipu_of == ipu]] = True
            seg = here[seg_cls]
            rel = overlap_relation(k, seg_cls[seg], seg_start[seg], seg_end[seg])
            a = rel.row_ids()
            keep = (a < rel.indices) & shares.mask(a, rel.indices)
            src.append(a[keep])
            dst.append(rel.indices[keep])
            del rel, a, keep
        return symmetric_closure(k, np.concatenate(src), np.concatenate(dst)), -1

    def _items(self, owner, tile):
        """Always-live items; the same random draws for the same mapping."""
        return self._items_of(step_tiles(self.p, owner, tile, self.t.num_tiles))

    def _items_at(self, scale: float):
        """``_items`` of the parts at ``scale``, taken IPU by IPU."""
        tiles = step_tiles_of_pieces(
            self.p, ((owner, tile) for owner, tile, _ in self.ipu_parts(scale)),
            self.t.num_tiles)
        lengths = np.fromiter(map(len, tiles), np.int64, count=len(tiles))
        flat = np.concatenate(tiles).astype(np.int64, copy=False)
        del tiles   # the pairs once, not as a list of arrays beside their concatenation
        return self._items_of((lengths, flat))

    def _items_of(self, tiles_of_step):
        return always_live_items(self.p, tiles_of_step, self.t.num_tiles,
                                 np.random.default_rng(self.item_seed), SUMMARY_STACK_PER_TILE,
                                 tiles_per_ipu=self.tpi, per_weight=self.per_weight)


def _by_tile(r: Report) -> Report:
    """Over several IPUs, ``r`` with its rows ordered by (IPU, tile)
    (``tilemem.model.ipuview``, as ``save_report`` writes them), numbered afresh: var ``i``
    is row ``i``, as the generator numbers them; within a tile the rows keep their order, so
    allocation order and offsets are unchanged. One IPU's report is left as it is."""

    from ..model.ipuview import order_by_tile

    if r.target.num_ipus == 1:
        return r

    out = order_by_tile(r)
    return out if out is r else replace(out, var_id=np.arange(r.num_vars, dtype=np.int64))


@njit(cache=True)
def _segment_peaks(tile, step, diff, num_tiles):
    """Per tile, the largest running sum of ``diff`` (sorted by tile then step), and 0 where
    the tile has no event or its first is after step 0 (the steps before it hold 0)."""
    out = np.zeros(num_tiles)
    i, n = 0, len(tile)
    while i < n:
        t = tile[i]
        run = 0.0
        best = 0.0 if step[i] > 0 else -np.inf
        while i < n and tile[i] == t:
            run += diff[i]
            if run > best:
                best = run
            i += 1
        out[t] = best
    return out


def _phase(progress: bool, text: str):
    """A spinner on stderr while a phase runs (when ``progress``)."""
    import contextlib

    if not progress:
        return contextlib.nullcontext()
    from rich.console import Console

    return Console(stderr=True).status(text)


def _pair_rows(pairs, part_ptr: np.ndarray, by_tensor: np.ndarray, tile: np.ndarray,
               n: int) -> Csr:
    """Constraint lists (both directions) between the parts of two tensors on common tiles;
    ``by_tensor[part_ptr[a]:part_ptr[a + 1]]`` are the rows of tensor ``a``'s parts."""
    src, dst = [], []
    for a, b in dict.fromkeys(pairs):
        if a == b:
            continue
        ra = by_tensor[part_ptr[a]:part_ptr[a + 1]]
        rb = by_tensor[part_ptr[b]:part_ptr[b + 1]]
        _, ia, ib = np.intersect1d(tile[ra], tile[rb], assume_unique=True, return_indices=True)
        src += [ra[ia], rb[ib]]
        dst += [rb[ib], ra[ia]]
    if not src:
        return Csr.empty(n)
    s, d = np.concatenate(src), np.concatenate(dst)
    key = np.unique(s * n + d)
    return Csr.from_pairs(n, key // n, key % n)


def first_fit_offsets(r: Report, progress: bool = False) -> np.ndarray:
    """Offsets of a Poplar-like allocator: first fit per tile in ``allocationOrderByTile``
    (``tilemem.pack.replay``)."""
    from ..pack.replay import replay_first_fit

    if not progress:
        return replay_first_fit(r)
    from rich.console import Console
    from rich.progress import Progress

    with Progress(transient=True, console=Console(stderr=True)) as bar:
        task = bar.add_task("allocating tiles (first fit)", total=r.num_tiles)
        return replay_first_fit(r, advance=lambda k: bar.advance(task, k))
