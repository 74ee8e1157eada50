"""One capacity of the exact search: its kernel model, its state, and resumable runs.

``SearchRun`` caps a ``SearchModel`` at a capacity (window ends and section capacities rounded
down to the lattice's grain, the overflow zone opened when the capacity reaches past
tileMemory), decides what is infeasible before any search (a variable with no legal offset, a
section that cannot hold its members), and runs the compiled kernel in slices until it
finds, exhausts, aborts or is paused by the clock or a node cap.
"""
from __future__ import annotations

import time
import weakref

import numpy as np

from ..kinds import SearchStatus
from ..lattice import aligned_grain
from . import kernel as K
from .state import KernelModel, SearchState
from .sweep import SearchModel

#: Trail buffers free for the next run, largest first (at most ``KEEP_TRAILS``). A large
#: tile's trail grows to about a million records in a descent; allocated afresh and doubled
#: up to that for every run it costs milliseconds a run, and a tile's quick search makes
#: several.
#: The kernel writes every record before reading it, so a buffer is reused as it is.
_FREE_TRAILS: list[np.ndarray] = []
KEEP_TRAILS = 2


def _take_trail(rows: int) -> np.ndarray:
    """A trail of at least ``rows`` records: the largest free one when it is big enough."""
    if _FREE_TRAILS and len(_FREE_TRAILS[0]) >= rows:
        return _FREE_TRAILS.pop(0)
    return np.empty((rows, 3), np.int64)


def _give_back(box: list) -> None:
    """Return a finished run's trail (``box[0]``, the last it grew to) to the free list."""
    _FREE_TRAILS.append(box[0])
    _FREE_TRAILS.sort(key=len, reverse=True)
    del _FREE_TRAILS[KEEP_TRAILS:]


class SearchRun:
    """State of the search for one capacity; ``reset`` starts a new restart."""

    SLICE = 256  # nodes between clock checks (adapts to keep a slice between 10 and 40 ms)

    def __init__(self, sm: SearchModel, cap: int, floor: int = 0):
        """``floor``: no placement starts below it (raised to the lattice's grain, which
        only tightens it): the mirror's form of a capacity (``tilemem.pack.mirror``)."""
        self.sm = sm
        self.cap = cap
        n, S = sm.n, sm.num_sections
        #: decided before any search (SearchStatus: OPTIMAL or INFEASIBLE), or None
        self.verdict: SearchStatus | None = None
        self.node_cap: int | None = None  # max_nodes of the call (None: the clock decides)
        self.try_limit = K.INF  # candidates tried in one restart (see K.R_TRY_LIMIT)
        self.nodes_used = 0
        tm = int(sm.elem_starts[-1])
        # past tileMemory: the overflow zone, searched only when the capacity reaches past it
        self.zone = cap > tm
        g = sm.grain  # ends of left-justified placements are multiples of it
        if self.zone:  # placements may also start at tileMemory, where the zone begins
            g = aligned_grain(np.gcd(g, tm), sm.align)
        hi = np.minimum(sm.hi, cap) // g * g
        lo = sm.lo if floor <= 0 else np.maximum(sm.lo, -(-int(floor) // g) * g)
        self.geo = np.array([sm.ils, int(sm.nrs), tm], np.int64)
        self.zone_cap = cap // g * g if self.zone else None  # see layout.G_ILS
        if sm.domains is not None and not self.zone:
            # the kernel's version with a zone, the zone ending at or below tileMemory (so
            # nothing goes there): each version of the kernel costs ~20 s to compile, and
            # neighbourhoods (the only runs with domains) then need one, not two. What it
            # changes below tileMemory only weakens pruning: no partner look-ahead
            # (partners._partners_ok), a dominance height of tileMemory where it had none.
            self.zone_cap = int(cap)
        self.domains = sm.domains   # None, or each variable's start ranges (kernel.run)
        m0 = _norm0(sm, lo, hi, self.geo, self.zone_cap, self.domains)
        if n and np.any(m0 >= K.INF):
            self.verdict = SearchStatus.INFEASIBLE
            return
        self.hi = hi
        self.m0 = m0
        if n == 0:
            self.verdict = SearchStatus.OPTIMAL
            self.sol = np.zeros(0, np.int64)
            return
        sv = sm.sec_vars
        # per section: its bytes, its least m (and the member with it: the section's witness,
        # propagate._place, a position in sec_vars) and its highest window end
        self.total0, floor0, self.wit0, top = K.section_sums(sm.sec_ptr, sv, sm.size, m0, hi)
        self.sec_cap = np.minimum(top, cap // g * g)
        if self.zone:  # anything may go past tileMemory, up to the capacity
            self.sec_cap[:] = cap // g * g
        if np.any(floor0 + self.total0 > self.sec_cap):
            self.verdict = SearchStatus.INFEASIBLE
            return
        cnt = np.zeros(S + 1, np.int64)
        np.add.at(cnt, sm.span_lo, 1)
        np.add.at(cnt, sm.span_hi - 1, -1)
        self.cuts0 = np.cumsum(cnt)[:max(S - 1, 0)].astype(np.int64)
        # the independent parts at the start
        bounds = np.flatnonzero(self.cuts0 == 0) + 1
        edges = np.concatenate([[0], bounds, [S]])
        self.parts0 = np.stack([edges[:-1], edges[1:]], axis=1).astype(np.int64)
        self.witv0 = sv[self.wit0].astype(np.int64)
        self.wcnt0 = np.bincount(self.witv0, minlength=n).astype(np.int64)
        self.smin0 = _min_tree(self.sec_cap - self.total0)  # every total0 > 0: sizes >= 1
        self.random_key = np.zeros(n, np.int64)  # the "R" key, set before each round
        self.model = KernelModel(
            size=sm.size, align=sm.align, lo=lo, hi=hi, adj_ptr=sm.adj_ptr,
            adj_idx=sm.adj_idx, adj_kind=sm.adj_kind, sec_ptr=sm.sec_ptr, sec_vars=sm.sec_vars,
            sec_cap=self.sec_cap, vsec_ptr=sm.vsec_ptr, vsecs=sm.vsecs, span_lo=sm.span_lo,
            span_hi=sm.span_hi, by_lo=sm.by_lo, lo_idx=sm.lo_idx, width=sm.width,
            area=sm.area, has_elem=sm.has_elem, has_reg=sm.has_reg, need=sm.need,
            elem_starts=sm.elem_starts, rand_key=self.random_key, pair_i=sm.pair_i,
            pair_k=sm.pair_k, pair_kind=sm.pair_kind, geo=self.geo,
            pair_thr=self._pair_thresholds(lo, hi, cap))
        depth = 2 * n + 8
        trail = _take_trail(int(max(4096, 4 * sm.need.max() + 16 * n)))  # grows on demand
        self._trail_box = [trail]   # what goes back to the free list when the run ends
        weakref.finalize(self, _give_back, self._trail_box)
        self.state = SearchState(
            off=np.full(n, -1, np.int64), m=m0.copy(), pre=np.zeros(n, np.int64),
            total=self.total0.copy(), wit=self.wit0.copy(), cuts=self.cuts0.copy(),
            sol=np.full(n, -1, np.int64),
            trail=trail,
            frames=np.zeros((depth, K.NUM_FIELDS), np.int64),
            pieces=np.zeros((S + 2 * n + 8, 2), np.int64),
            reg=np.zeros(K.NUM_REGS, np.int64),
            tmp_vars=np.zeros(n, np.int64), tmp_key=np.zeros(n, np.int64),
            witv=self.witv0.copy(), wcnt=self.wcnt0.copy(), smin=self.smin0.copy())

    def _pair_thresholds(self, lo, hi, cap) -> np.ndarray:
        """Each partner pair's threshold (``partners.pair_thresholds``); -1 (the look-ahead
        looks at the pair) with a zone or domains, where the kernel has no look-ahead
        (``partners._partners_ok``): not computed there, nor compiled for them."""
        sm = self.sm
        if self.zone_cap is not None or self.domains is not None:
            return np.full(len(sm.pair_i), -1, np.int64)
        return K.pair_thresholds(sm.pair_i, sm.pair_k, sm.pair_kind, sm.size, sm.align, lo, hi,
                                 sm.elem_starts, self.geo, int(cap))

    def reset(self):
        st = self.state
        st.off[:] = -1
        st.m[:] = self.m0
        st.pre[:] = 0
        st.total[:] = self.total0
        st.wit[:] = self.wit0
        st.witv[:] = self.witv0
        st.wcnt[:] = self.wcnt0
        st.smin[:] = self.smin0
        st.cuts[:] = self.cuts0
        st.sol[:] = -1
        reg = st.reg
        reg[:] = 0
        reg[K.R_TRY_LIMIT] = self.try_limit
        np_ = len(self.parts0)
        st.pieces[:np_] = self.parts0
        reg[K.R_PT] = np_
        fr = st.frames
        fr[0, :] = 0
        fr[0, K.F_KIND] = K.DECOMP
        fr[0, K.F_P0] = 0
        fr[0, K.F_PN] = np_
        fr[0, K.F_PI] = 0
        fr[0, K.F_MARK] = 0
        reg[K.R_SP] = 0
        reg[K.R_MODE] = K.ENTER

    def spent(self) -> bool:
        """Whether the node cap of the call (``max_nodes``) is used up."""
        return self.node_cap is not None and self.nodes_used >= self.node_cap

    def go(self, heur, limit, deadline):
        """Run one restart to its end, its node limit, the deadline or the call's node cap
        (then PAUSED)."""
        budget = self.SLICE
        reg = self.state.reg
        while True:
            if self.node_cap is not None:
                if self.spent():
                    return K.PAUSED
                # slices end exactly at the cap: how the work is sliced changes nothing
                budget = min(budget, self.node_cap - self.nodes_used)
            t = time.perf_counter()
            before = int(reg[K.R_NODES])
            status = K.run(self.model, self.state, heur, limit, budget, self.zone_cap,
                           self.domains)
            self.nodes_used += int(reg[K.R_NODES]) - before
            if status == K.NEED_TRAIL:
                tr = self.state.trail
                grown = np.empty((2 * len(tr), 3), np.int64)
                used = int(reg[K.R_TL])
                grown[:used] = tr[:used]
                self._trail_box[0] = grown
                self.state = self.state._replace(trail=grown)
                reg = self.state.reg
                continue
            if status != K.PAUSED:
                return status
            now = time.perf_counter()
            if now >= deadline:
                return K.PAUSED
            took = now - t
            if took < 0.01:
                budget *= 2
            elif took > 0.04 and budget > 64:
                budget //= 2

    @property
    def nodes(self) -> int:
        """Nodes of the current restart."""
        return int(self.state.reg[K.R_NODES])

    @property
    def tries(self) -> int:
        """Candidates placed in the current restart (what ``try_limit`` bounds)."""
        return int(self.state.reg[K.R_TRIES])

    def offsets(self) -> np.ndarray:
        if self.sm.n == 0:
            return np.zeros(0, np.int64)
        return self.state.sol.copy()


def _norm0(sm: SearchModel, lo: np.ndarray, hi: np.ndarray, geo: np.ndarray,
           zone_cap, dom) -> np.ndarray:
    """The lowest legal offset of every variable on its own (INF where it has none)."""
    return K.lowest_offsets(sm.size, sm.align, lo, hi, geo, zone_cap, dom)


def _min_tree(leaves: np.ndarray) -> np.ndarray:
    """A min segment tree over ``leaves`` (``propagate._seg_min``): leaves from ``len // 2``,
    padded with INF to a power of two."""
    half = 1
    while half < max(len(leaves), 1):
        half *= 2
    tree = np.full(2 * half, K.INF, np.int64)
    tree[half:half + len(leaves)] = leaves
    h = half
    while h > 1:  # level by level: nodes [h // 2, h) from their children [h, 2h)
        tree[h // 2:h] = np.minimum(tree[h:2 * h:2], tree[h + 1:2 * h:2])
        h //= 2
    return tree
