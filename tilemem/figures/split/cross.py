"""What crosses the boundaries of a split (``tilemem.figures.split.estimate``'s ``SplitModel``): the
parts of the program that belong with a unit though named for none (``_anchor_groups``),
weights read by another unit than their own (``_tied_weights``), the activation sent forward
and the gradient sent back at each boundary (``_crossings``), and the buffers and copies a
stage holds for them (``_buffers``, ``_tied_copies``), and what a stage keeps for the
micro-batches in flight (``stash_rows``, ``stash_tiles``). A mixin: these read and set the
model's columns, worked out once in ``SplitModel.__init__``."""
from __future__ import annotations

import numpy as np

from ...model.interference import tile_interference
from ...rules import INFERRED_COPY_ON_DESTINATION, inferred_stash_depth


class Crossings:
    """``SplitModel``'s boundary methods (see the module docstring)."""

    def _anchor_groups(self, shared: np.ndarray, codes: np.ndarray, names: list) -> None:
        """Tensors of no unit that belong to one part of the program (the embedding, the
        head: their names' prefix as deep as the layers', ``embedding/...``) go with the
        unit before that part's forward work (where its first per-sample tensor comes alive),
        not each with the unit before its own step: its persistent state and its weight
        update come alive before or after every layer (step 0, after the last backward), its
        backward after the last layer's forward, yet the stage that holds the part holds
        them. A part without per-sample data keeps the per-tensor rule."""
        if self.units.source != "layer names":
            return
        depth = self.units.labels[0].count("/") + 1
        keys, g_code = np.unique(np.array(["/".join(n.split("/")[:depth]) for n in names],
                                          object), return_inverse=True)
        g_row = g_code.reshape(-1)[codes]
        fwd = shared & self.per_sample & ~self.persistent
        big = np.iinfo(np.int64).max
        g_start = np.full(len(keys), big)
        np.minimum.at(g_start, g_row[fwd], self.start[fwd])
        t = g_start[g_row[shared]]
        order = np.argsort(self.pos, kind="stable")
        k = np.searchsorted(self.pos[order], t, "right") - 1
        self.anchor[shared] = np.where(t < big, order[np.maximum(k, 0)], self.anchor[shared])

    def _tied_weights(self, al_state: np.ndarray) -> None:
        """Weights read by a unit other than their own (a tied embedding read by the head):
        ``tied``, ``(a, b, weight rows, gradient rows)``, the weight of unit ``a`` whose
        gradient is made in unit ``b``. Told by the gradient: a tensor of ``b``, not
        persistent, with exactly the bytes of a weight of another unit on exactly its tiles
        (a weight gradient is mapped like its weight), while no weight of ``b`` is so.
        Split apart, the weight is copied to ``b``'s stage every micro-batch and the
        gradient back to ``a``'s."""
        r = self.r
        self.tied = []
        state = (self.persistent | al_state) & (self.anchor >= 0)
        grads = (r.allocated & ~r.always_live & (r.size > 0) & ~self.persistent
                 & (self.anchor >= 0))
        if not state.any() or not grads.any():
            return
        # a gradient has its weight's bytes, so only tensors whose bytes some tensor of the
        # other side has can pair: the rest are left out before the sort by tensor (at a
        # Pod's scale every non-persistent row is a candidate gradient, and that sort and the
        # loop over its tensors were most of the model's set-up)
        k = int(self.codes.max()) + 1 if len(self.codes) else 0

        def totals(mask):
            c = self.codes[mask]
            return (np.bincount(c, minlength=k) > 0,
                    np.bincount(c, r.size[mask], minlength=k))
        has_s, bytes_s = totals(state)
        has_g, bytes_g = totals(grads)
        state &= (has_s & np.isin(bytes_s, bytes_g[has_g]))[self.codes]
        grads &= (has_g & np.isin(bytes_g, bytes_s[has_s]))[self.codes]
        if not state.any() or not grads.any():
            return

        def tensors(mask):   # per tensor: its rows, its (tile, bytes) layout, its unit
            rows = np.flatnonzero(mask)
            rows = rows[np.lexsort((r.tile[rows], self.codes[rows]))]
            _, first = np.unique(self.codes[rows], return_index=True)
            ends = np.append(first, len(rows))
            for k in range(len(first)):
                t = rows[ends[k]:ends[k + 1]]
                tiles = np.unique(r.tile[t], return_inverse=True)
                layout = (tiles[0].tobytes(),
                          np.bincount(tiles[1], r.size[t]).astype(np.int64).tobytes())
                yield t, layout, int(self.anchor[t[0]])

        weights: dict = {}
        for t, layout, u in tensors(state):
            weights.setdefault(layout, []).append((u, t))
        for g, layout, u in tensors(grads):
            like = weights.get(layout, ())
            if like and all(wu != u for wu, _ in like):
                self.tied.append((like[0][0], u, np.sort(like[0][1]), np.sort(g)))

    # ---- what crosses each boundary --------------------------------------------------------
    def _crossings(self) -> None:
        """Per boundary ``j`` (first unit of a stage): ``fwd[j]`` the rows of the activation
        sent forward, ``bwd[j]`` of the gradient sent back; ``input0`` the program's input
        (stashed by the first stage). Worked out per tensor (a tensor's variables share a
        lifetime), from the rows that are model data and not persistent."""
        r, L = self.r, self.L
        cand = np.flatnonzero(r.allocated & ~r.always_live & (r.size > 0) & ~self.persistent)
        order = np.argsort(self.codes[cand], kind="stable")
        rows = cand[order]
        tcode, first = np.unique(self.codes[rows], return_index=True)
        ptr = np.append(first, len(rows))
        lead = rows[first]                      # a row of each tensor: its class, its unit
        t_bytes = np.add.reduceat(r.size[rows], first) if len(rows) else np.zeros(0)
        t_unit = self.anchor[lead]
        t_named = self.units.of_row[lead] >= 0

        def rows_of(k):
            return np.sort(rows[ptr[k]:ptr[k + 1]])

        def largest(mask):
            k = np.flatnonzero(mask)
            if not len(k):
                return np.zeros(0, np.int64)
            return rows_of(int(k[np.argmax(t_bytes[k])]))

        self.fwd = [np.zeros(0, np.int64)] * (L + 1)
        self.bwd = [np.zeros(0, np.int64)] * (L + 1)
        if self.start is None:
            # no steps: the activation is a per-sample tensor of an earlier unit that a
            # vertex of unit j reads (an element or region constraint between the two:
            # fields of one vertex, 004) or of unit j - 1, live through most of unit j's
            # classes
            from ..whatif.batch import SHAPE_TOLERANCE

            per = np.zeros(len(tcode), bool)
            ms = np.flatnonzero(self.per_sample)
            pos = np.searchsorted(tcode, self.codes[ms])
            ok = (pos < len(tcode)) & (tcode[np.minimum(pos, len(tcode) - 1)]
                                       == self.codes[ms])
            per[pos[ok]] = True
            pairs = [c.row_ids() for c in (r.element_constraints, r.region_constraints)]
            src = np.concatenate(pairs)
            dst = np.concatenate([r.element_constraints.indices, r.region_constraints.indices])
            # constraint entries and candidate rows grouped by unit (one pass each)
            by_dst = np.argsort(self.anchor[dst], kind="stable")
            dst_ptr = np.searchsorted(self.anchor[dst][by_dst], np.arange(L + 1))
            by_row = np.argsort(self.anchor[rows], kind="stable")
            row_ptr = np.searchsorted(self.anchor[rows][by_row], np.arange(L + 1))

            def most_live_through(cand, j, near=1.0):
                """Of tensors ``cand``, the largest of those interfering with most classes
                of unit j (with ``near`` of the most)."""
                j_cls = np.unique(r.eq_class[rows[by_row[row_ptr[j]:row_ptr[j + 1]]]])
                hits = np.array([np.isin(tile_interference(r).row(int(r.eq_class[lead[c]])),
                                         j_cls).sum() for c in cand])
                best = cand[hits >= near * hits.max()]
                return rows_of(int(best[np.argmax(t_bytes[best])]))

            # the program's input: the largest per-sample tensor of no unit live through
            # at least half as many of unit 0's classes as the most (the labels may be more)
            cand0 = np.flatnonzero(per & (t_unit < 0))
            self.input0 = (most_live_through(cand0, 0, 0.5) if len(cand0)
                           else largest(t_unit < 0))
            for j in range(1, L):
                mine = by_dst[dst_ptr[j]:dst_ptr[j + 1]]
                read = np.unique(self.codes[src[mine]])
                k = np.searchsorted(tcode, read)
                k = k[(k < len(tcode)) & (tcode[np.minimum(k, len(tcode) - 1)] == read)]
                near = np.zeros(len(tcode), bool)
                near[k] = True
                near &= per & (t_unit < j) & (t_unit >= 0)
                # of those and unit j - 1's per-sample tensors: the one live through most
                # of unit j's classes (its forward; a gradient of j - 1 is made after them)
                cand = np.flatnonzero(near | (per & (t_unit == j - 1)))
                if not len(cand):
                    cand = np.flatnonzero(t_unit == j - 1)
                if len(cand):
                    self.fwd[j] = most_live_through(cand, j)
                # the gradient sent back has the activation's shape: unit j's per-sample
                # tensor of its bytes (within SHAPE_TOLERANCE), else the activation's rows
                xb = r.size[self.fwd[j]].sum()
                same = per & (t_unit == j) & (np.abs(t_bytes - xb) <= SHAPE_TOLERANCE * xb)
                self.bwd[j] = largest(same) if same.any() else self.fwd[j]
            return
        s, e = self.start[lead], self.end[lead]
        t0 = self.pos[0]
        at_t0 = ~t_named & (s < t0) & (e > t0)
        per = at_t0 & self.per_sample[lead]
        self.input0 = largest(per if per.any() else at_t0)
        self.back = np.zeros(L + 1, np.int64)
        self.copy_end = np.zeros(L + 1, np.int64)
        reads_input = self._reads_input(t_unit, self.per_sample[lead], s, e)
        for j in range(1, L):
            t = self.pos[j]
            live = (t_unit < j) & (t_unit >= 0) & (s < t) & (e > t)
            if not live.any():
                continue
            x = largest(live & (s == s[live].max()))
            self.fwd[j] = x
            last_use = int(self.end[x].max()) - 1
            back = (t_unit >= j) & (s <= last_use) & (e > last_use)
            g = largest(back & (e == e[back].min())) if back.any() else np.zeros(0, np.int64)
            self.bwd[j] = g
            # when the later stage is done with a micro-batch: the earlier stage's backward
            # begins (its last unit's first class after the gradient is made)
            tg = int(self.start[g].min()) if len(g) else last_use
            later = (t_unit == j - 1) & (s > tg)
            self.back[j] = int(s[later].min()) if later.any() else last_use + 1
            # the copy of the stage input: read until the stage's first unit is done with
            # the micro-batch: past the gradient it sends back only if that unit has work
            # after it (a weight update, which reads the input), else until the gradient
            after = (t_unit == j) & (s > tg) & (s < self.back[j])
            self.copy_end[j] = self.back[j] if after.any() else tg + 1
            if not reads_input[j]:   # its forward is the last to read it
                mine = (t_unit == j) & self.per_sample[lead]
                if mine.any():
                    self.copy_end[j] = min(int(self.copy_end[j]), int(s[mine].min()) + 1)

    def _reads_input(self, t_unit, per, s, e) -> np.ndarray:
        """Per unit, whether its backward may read its input (``figures.whatif.recompute``'s
        rule): a unit with weights (persistent state: the weight gradient is computed from
        the input) or that keeps more than its output across the turn to the backward (a
        normalisation's statistics). An element-wise unit keeps its output alone, and its
        gradient reads that."""
        from ..whatif.recompute import turn_step

        L = self.L
        out = np.ones(L + 1, bool)
        rows = np.flatnonzero(self.per_sample)
        if not len(rows):
            return out
        turn = turn_step(self.r, rows)
        a = self.anchor[self.persistent]
        weighted = np.bincount(a[a >= 0], minlength=L + 1)[:L + 1] > 0
        kept = per & (t_unit >= 0) & (s <= turn) & (e > turn)
        n_kept = np.bincount(t_unit[kept], minlength=L + 1)[:L + 1]
        return weighted | (n_kept > 1)

    def _buffers(self, i: int, j: int):
        """The buffers stage ``[i, j)`` holds for its boundaries, with steps: ``(rows,
        [start, end))`` each, a class of its own live over that interval (the rows give the
        mapping and the bytes). A send buffer lives from packing to the exchange, a receive
        buffer from the exchange to unpacking, the copy from then until its stage is done
        with the micro-batch (see ``_crossings``)."""
        out = []
        if i > 0 and len(self.fwd[i]):
            p, back = int(self.pos[i]), int(self.back[i])
            out += [(self.fwd[i], p, p + 1),
                    (self.fwd[i], p, max(int(self.copy_end[i]), p + 1))]
            if len(self.bwd[i]):
                out.append((self.bwd[i], back - 1, back))
        if j < self.L and len(self.fwd[j]):
            p, back = int(self.pos[j]), int(self.back[j])
            out.append((self.fwd[j], p - 1, p))
            if len(self.bwd[j]):
                e = int(self.end[self.bwd[j]].max())
                out += [(self.bwd[j], back, back + 1), (self.bwd[j], back, max(e, back + 1))]
        return out

    def _tied_copies(self, i: int, j: int) -> list:
        """The copies stage ``[i, j)`` receives of tied weights (``tied``): ``(rows,
        start, end, times)``. With steps: the gradient, on the weight's stage, a receive
        buffer and the copy (``INFERRED_COPY_ON_DESTINATION``) live like the gradient; the
        weight, on the stage reading it, its copy at its last read, the backward step
        before the gradient is made (when its first read and the receive buffer's step
        are, the report does not say: not counted). Without steps ``start`` and ``end``
        are ``None``: both a receive buffer and the copy, live like the tensor copied."""
        out = []
        for a, b, w, g in self.tied:
            if (i <= a < j) == (i <= b < j):
                continue
            k = INFERRED_COPY_ON_DESTINATION
            if self.start is None:
                out.append((w if i <= b < j else g, None, None, k))
            elif i <= b < j:   # the copy, read last by the backward before the gradient
                g0 = int(self.start[g].min())
                out.append((w, g0 - 1, g0, 1))
            else:
                out.append((g, int(self.start[g].min()), int(self.end[g].max()), k))
        return out

    # ---- what a stage keeps for the micro-batches in flight -------------------------------
    def stash_tiles(self, s: int, i: int, j: int, n: int) -> np.ndarray:
        """Stage ``s``'s stash, bytes per tile: ``stash_mapping="like"``, each stashed
        tensor's copies on its own tiles (a stash made as slices of the stashed tensor:
        PopART's ``createSliceableTensorFromSlice`` or one clone a slice); ``"linear"``, one
        new tensor of all of them mapped linearly over the IPU's tiles (003's linear
        mapping, at most the bytes over the tiles rounded up on a tile; a stash made by
        ``createSliceableTensor`` of its own shape). Which one a framework does is not in
        the report (see ``STASH_MAPPINGS``)."""
        T = self.tiles
        depth = inferred_stash_depth(s, n)
        b = self._stash_bytes(i, j)
        if self.stash_mapping == "linear":
            return np.full(T, np.ceil(depth * float(b.sum(dtype=np.int64)) / T))
        return depth * b.astype(np.float64)

    def _stash_bytes(self, i: int, j: int) -> np.ndarray:
        """Bytes per tile of ``stash_rows(i, j)``, kept (not the rows: a split's search asks
        for most of the (i, j) pairs, and on a Pod the rows of each are millions). Made for
        every ``i`` of a ``j`` at once (``_stash_bytes_to``)."""
        key = ("stash-bytes", i, j)
        if key not in self._evals:
            if self.stash == "inputs" or j >= self.L or not 0 <= i < j:
                rows = self._stash_rows_of(i, j)
                self._evals[key] = _narrow(np.bincount(self.r.tile[rows], self.r.size[rows],
                                                       minlength=self.tiles))
            else:
                # this start, and the others a split may ask for at this handover: every
                # unit of a small model, the cut grid's of a large one (``cut_grid``)
                g = cut_grid(self.L)
                starts = sorted({i} | {int(k) for k in g[g < j]
                                       if ("stash-bytes", int(k), j) not in self._evals})
                for k, b in zip(starts, self._stash_bytes_to(j, starts)):
                    self._evals[("stash-bytes", k, j)] = b
        return self._evals[key]

    def _stash_bytes_to(self, j: int, starts) -> list[np.ndarray]:
        """``_stash_bytes(i, j)`` for each ``i`` of ``starts`` (each below ``j``): the rows
        live at the handover to ``j``
        taken apart once, their bytes per unit and tile summed from the last unit back; the
        two corrections of ``_stash_rows_of`` (the activation sent forward, the stage's
        input) are a layer's rows each, set apart per ``i``."""
        r, T = self.r, self.tiles
        cand, ptr = self._stash_candidates()
        t = int(self.pos[j])
        live = cand[ptr[0]:ptr[j]]
        live = live[(self.start[live] < t) & (self.end[live] > t)]
        unit = self.anchor[live]
        per_unit = np.bincount(unit * T + r.tile[live], r.size[live],
                               minlength=j * T).reshape(j, T)
        after = np.cumsum(per_unit[::-1], axis=0)[::-1]   # after[i]: units i .. j - 1

        def stashed(rows, i):   # which of ``rows`` are among the live rows of units [i, j)
            a = self.anchor[rows]
            return (self.of_micro_batch[rows] & (a >= i) & (a < j)
                    & (self.start[rows] < t) & (self.end[rows] > t))

        def tile_bytes(rows):
            return np.bincount(r.tile[rows], r.size[rows], minlength=T)

        out = np.unique(self.fwd[j])
        drop = bool(len(out)) and int(self.end[out].max()) <= int(self.back[j])
        got = []
        for i in starts:
            b = after[i].astype(np.float64)
            if drop:
                b = b - tile_bytes(out[stashed(out, i)])
            inp = np.unique(self.fwd[i]) if i else np.zeros(0, np.int64)
            if len(inp) and int(self.end[inp].max()) > t:
                held = stashed(inp, i) & ~(drop & np.isin(inp, out))
                b = b + tile_bytes(inp[~held])
            got.append(_narrow(b))
        return got

    def _stash_candidates(self) -> tuple[np.ndarray, np.ndarray]:
        """A micro-batch's rows of the units, by unit, and where each unit's begin (once)."""
        if self._stash_cand is None:
            a = self.anchor
            cand = np.flatnonzero(self.of_micro_batch)
            cand = cand[np.argsort(a[cand], kind="stable")]
            self._stash_cand = cand
            self._stash_ptr = np.searchsorted(a[cand], np.arange(self.L + 1))
        return self._stash_cand, self._stash_ptr

    def stash_rows(self, i: int, j: int) -> np.ndarray:
        """The rows stage ``[i, j)`` keeps a copy of per micro-batch in flight: its input, or
        (``stash="activations"``, a stage before the last) the micro-batch's data of its
        units (``of_micro_batch``: come alive after the micro-batches begin, so not the
        gradient accumulators, whatever their shape) still live when it hands over to unit
        ``j``, with its input's copy and without the activation it sends forward when only
        the next stage's backward reads that."""
        key = ("stash", i, j)
        if key not in self._evals:
            self._evals[key] = self._stash_rows_of(i, j)
        return self._evals[key]

    def checkpoint_rows(self, i: int, j: int, every: int = 1, lead: int = 0) -> np.ndarray:
        """The rows stage ``[i, j)`` keeps per micro-batch in flight when it recomputes its
        forward pass from checkpoints: the input of every ``every``-th of its units from its
        first that is a layer (the stage's own input among them), and, of its units before
        ``lead`` (no layers, so not recomputed: an embedding), what ``stash_rows`` keeps of
        them (``rules.INFERRED_RECOMPUTING_STAGE_STASHES_CHECKPOINTS``)."""
        units = range(max(i, lead), j, max(1, every))
        parts = [self.input0 if k == 0 else self.fwd[k] for k in units]
        if i < lead:   # what they keep includes the input (of the program, or the stage)
            parts.append(self._stash_rows_of(i, min(j, lead)))
        return np.unique(np.concatenate(parts or [np.zeros(0, np.int64)])).astype(np.int64)

    def _stash_rows_of(self, i: int, j: int) -> np.ndarray:
        """``stash_rows``, not kept."""
        inp = self.input0 if i == 0 else self.fwd[i]
        if self.stash == "inputs" or j >= self.L:
            return inp
        cand, ptr = self._stash_candidates()
        t = int(self.pos[j])
        rows = cand[ptr[i]:ptr[j]]
        rows = rows[(self.start[rows] < t) & (self.end[rows] > t)]
        # the activation sent forward is stashed where it is read: by the next stage
        # (its copy), and by this one only if it is read once this stage's backward
        # has begun; this stage's input (its copy) is stashed here if still read
        out = self.fwd[j]
        if len(out) and int(self.end[out].max()) <= int(self.back[j]):
            rows = np.setdiff1d(rows, out)
        inp = self.fwd[i] if i else np.zeros(0, np.int64)
        if len(inp) and int(self.end[inp].max()) > t:
            rows = np.union1d(rows, inp)
        return rows


def _narrow(b: np.ndarray) -> np.ndarray:
    """Bytes per tile (whole numbers) as int32 where they fit: kept for many stages."""
    return b.astype(np.int32 if b.max(initial=0) < 2**31 else np.int64)


#: Above this many units, a split's cuts are searched on a grid of as many unit boundaries
#: (``cut_grid``): a stage's stash is made per handover and start, and a program of
#: thousands of units (the generator's families) would ask for millions of them.
CUT_GRID = 128


def cut_grid(L: int, n: int = 1) -> np.ndarray:
    """The unit boundaries a cut of ``L`` units into ``n`` stages may take: every one up to
    ``CUT_GRID`` units (or ``n``), else ``CUT_GRID`` (or ``n``) of them evenly spaced."""
    k = max(CUT_GRID, n)
    if L <= k:
        return np.arange(L + 1)
    return np.unique(np.round(np.linspace(0, L, k + 1)).astype(np.int64))
