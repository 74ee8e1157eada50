"""What-if recomputation: the report as it would be with activations recomputed in the backward
pass from checkpoints, told by lifetime, with layers from the names as a hint.

From the report's class steps (``equivalenceClassSteps``; without them the lifetimes cannot
be changed and the question is refused):

1. the activations kept for the backward pass are the per-sample model data
   (``tilemem.figures.whatif.batch.micro_batch_rows``, category ``variable``) whose lifetime spans
   the turn from the forward to the backward pass: the step that the most per-sample classes
   span (``turn``); they are nested around it, the first layer's outermost;
2. each is given to its layer (``tilemem.figures.split.units.program_units``: numbered name
   prefixes in program order, the hint); a layer's *output* is its kept tensor defined last,
   the next layer's input: a checkpoint when that layer's input is one (every layer, or the
   layers given, and on a pipelined report every stage's first layer: the layer's kept
   tensors are on another IPU than the previous layer's; the first layer's input is never a
   layer's output and stays as it is);
3. every other kept activation of a layer is recomputed: its forward copy lives from its
   definition to the end of its layer's forward pass (the last definition of a kept tensor
   of the layer; a layer's output to the next layer's first, as the next layer, or the copy
   to the next pipeline stage, reads it), and a recomputed copy lives from the
   recomputation of its segment (a checkpoint to the next) to its last use in the backward
   (its original lifetime's end). The recomputation runs between two steps of the report
   (times are in half steps): after the backward before it, just before the segment's last
   layer's backward first reads its kept data (a layer's backward reads its output first).
   Numbered names of the pipeline's plumbing (``pipeline/stage0/stash``, ...) are no
   layers. The recomputation reads the segment's checkpoint again: a checkpoint the report lets die
   in the forward (a stage's input, a first layer's input, when that layer's backward does
   not read it: the last per-sample data defined before the layer's first, live there)
   lives to it; a checkpoint kept as the previous layer's output, where the next layer's
   backward does not read its input (no weights, only its output kept: an elementwise
   layer), lives to it too and is then recomputed with its own segment;
4. the changed report (its steps in half steps): those rows in classes of their forward
   lifetimes, a copy of each in a class of its recomputed lifetime, both interfering with every class whose steps they share
   (the original interference elsewhere); the bound is that report's maximum live bytes.

A pipeline stage's stash (kept per-sample data of no layer, live around all of its IPU's kept
activations) that holds at least half their bytes stashes the activations: a framework then
stashes the checkpoints only, so it keeps their share (``_stash_resized``); a smaller stash
(the stage input alone) stays. The recomputation's own temporaries are estimated by those of
the segment's last layer (its forward's data not kept: partial sums, exchange buffers; on
each tile the largest part), live again at the recomputation, where the rest of the
segment's recomputed data is; what it does not estimate (said with the answer,
``ASSUMES``): an earlier replayed layer's larger temporaries, and the code of the replayed
compute sets.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from ...jit import njit

from ...errors import ReportError
from ...liveness.sorting import search_left
from ...model import Csr, Report, sorted_unique
from ...model.interference import SharedTiles, prunes
from ...model.names import names_inserted

_NONE = np.zeros(0, np.int64)

ASSUMES = ("--recompute{at}: the per-sample data live across the turn from the forward to the "
           "backward pass is what is kept for the backward, layers are numbered name "
           "prefixes, a layer's last-defined kept tensor is the next layer's input; the rest "
           "is recomputed (its forward copy living to the end of its layer's forward, a "
           "recomputed copy from the segment's recomputation to its last backward use); a "
           "checkpoint lives to its segment's recomputation, which reads it; a layer without "
           "weights that keeps only its output does not read its input in its backward; the "
           "recomputation's temporaries are its last layer's (the largest part a tile), its "
           "code is not estimated; a pipeline stage's "
           "stash that holds its activations keeps the checkpoints' share")


def turn_step(r: Report, rows: np.ndarray) -> int:
    """The step the most classes of ``rows`` span: the forward pass's turn to the backward.
    Classes of a few steps (``rules.INFERRED_PARTIALS_MAX_STEPS``: a matmul's partial sums,
    an exchange's buffers) are not counted: the last layer's backward temporaries would
    otherwise put the turn inside it, and take them for activations kept across it."""
    from ...rules import INFERRED_PARTIALS_MAX_STEPS

    cls = np.unique(r.eq_class[rows])
    s, e = r.class_steps[cls, 0], r.class_steps[cls, 1]
    long = (e - s) > INFERRED_PARTIALS_MAX_STEPS
    if long.any():
        s, e = s[long], e[long]
    n = int(e.max()) + 1
    cover = np.cumsum(np.bincount(s, minlength=n + 1) - np.bincount(e, minlength=n + 1))
    return int(np.argmax(cover))


@dataclass(frozen=True)
class Recomputation:
    """``recomputation``'s answer, what it is made of: the ``rows`` recomputed, with the
    forward (``fwd``) and recomputed (``bwd``) lifetimes, in half steps, of each and of its
    copy; each stash cut to its checkpoints' share (``stash_rows`` at ``stash_keep /
    stash_total`` of their bytes); the checkpoints whose lifetimes grow to their
    recomputation (``moved``, at ``moved_lifetimes``, no copy); and of ``base``, the report as
    compiled. ``report``: the changed report (built when asked; ``on_ipu`` gives one IPU's
    part of it, so a Pod's whole changed report need not be); ``resized`` gives its sizes
    for other sizes of the original rows."""

    base: Report
    rows: np.ndarray
    fwd: tuple = (_NONE, _NONE)
    bwd: tuple = (_NONE, _NONE)
    stash_rows: np.ndarray = field(default_factory=lambda: _NONE)
    stash_keep: np.ndarray = field(default_factory=lambda: _NONE)
    stash_total: np.ndarray = field(default_factory=lambda: _NONE)
    moved: np.ndarray = field(default_factory=lambda: _NONE)
    moved_lifetimes: tuple = (_NONE, _NONE)
    #: how many of ``rows`` (the last ones) are the replay's temporaries, estimated (made
    #: again, not activations recomputed)
    temporaries: int = 0
    #: one IPU's view of a Pod: its interference built from the view's own classes
    local: bool = False

    @property
    def recomputed(self) -> np.ndarray:
        """The activations recomputed (``rows`` without the replay's temporaries)."""
        return self.rows[:len(self.rows) - self.temporaries]

    @property
    def changes(self) -> bool:
        return bool(len(self.rows) or len(self.moved))

    @cached_property
    def report(self) -> Report:
        """The changed report: the recomputed rows in classes of their forward lifetimes,
        a copy of each (rows ``copies``) in classes of its recomputed lifetime, the moved
        checkpoints in classes of theirs (see the module docstring)."""
        if not self.changes:
            return self.base
        return _with_lifetimes(self.base, self.rows, self.fwd, self.bwd,
                               self._cut(self.base.size),
                               (self.moved, self.moved_lifetimes), half_steps=True,
                               local=self.local)

    @property
    def copies(self) -> np.ndarray:
        """The rows of ``report`` that are the recomputed copies."""
        n = self.base.num_vars
        return np.arange(n, n + len(self.rows)) if self.changes else _NONE

    def _cut(self, size: np.ndarray) -> np.ndarray:
        s = size.copy()
        st = self.stash_rows
        s[st] = np.ceil(size[st] * self.stash_keep / self.stash_total).astype(s.dtype)
        return s

    def resized(self, size: np.ndarray, allocated: np.ndarray):
        """``(size, allocated)`` of every row of ``report`` when the original rows have
        ``size`` and ``allocated``: each stash cut by the same share, a copy as its row."""
        if not self.changes:
            return size, allocated
        take = np.concatenate([np.arange(len(size)), self.rows])
        return self._cut(size)[take], allocated[take]

    def on_ipu(self, k: int) -> "Recomputation":
        """The same recomputation on IPU ``k`` of an ordered report
        (``tilemem.model.ipuview.ipu_view``): its rows, stashes and checkpoints, renumbered
        to the view's rows. Its ``report`` holds that IPU's variables and their copies only,
        with the interference of its own classes (conflicts are asked within a tile, and a
        tile is one IPU's)."""
        from ...model.ipuview import ipu_bounds, ipu_view

        b = ipu_bounds(self.base)
        lo, hi = int(b[k]), int(b[k + 1])

        def inside(x):
            return (x >= lo) & (x < hi)
        m, ms, mv = inside(self.rows), inside(self.stash_rows), inside(self.moved)
        temporaries = int(m[len(self.rows) - self.temporaries:].sum())
        return Recomputation(
            ipu_view(self.base, k), self.rows[m] - lo, (self.fwd[0][m], self.fwd[1][m]),
            (self.bwd[0][m], self.bwd[1][m]), self.stash_rows[ms] - lo,
            self.stash_keep[ms], self.stash_total[ms], self.moved[mv] - lo,
            (self.moved_lifetimes[0][mv], self.moved_lifetimes[1][mv]),
            temporaries=temporaries, local=True)


def recomputation(r: Report, checkpoints) -> Recomputation:
    """The report with activations recomputed (``checkpoints``: ``"all"``, or the layer
    numbers whose input is a checkpoint), with what it is made of (``Recomputation``: the
    rows given forward lifetimes, the rows added for their recomputed copies, each stash's
    cut); computed once per report and checkpoints."""
    key = "recomputation:" + ("all" if checkpoints == "all"
                              else ",".join(map(str, sorted({int(x) for x in checkpoints}))))
    return r.cached(key, lambda: _recomputation(r, checkpoints))


def _recomputation(r: Report, checkpoints) -> Recomputation:
    from .batch import micro_batch_rows
    from ...model.names import tensor_codes
    from ..split.units import program_units

    if not r.has_class_steps:
        raise ReportError("--recompute: the report has no equivalenceClassSteps (the "
                          "lifetimes to change)", field="--recompute")
    var = np.isin(r.category, [k for k, c in enumerate(r.categories) if c == "variable"])
    cand = micro_batch_rows(r)
    cand = cand[var[cand]]
    if not len(cand):
        raise ReportError("--recompute: no per-sample model data in the report",
                          field="--recompute")
    start, end = r.class_steps[r.eq_class, 0], r.class_steps[r.eq_class, 1]
    turn = turn_step(r, cand)
    kept = cand[(start[cand] <= turn) & (end[cand] > turn)]
    codes, names = tensor_codes(r)
    units = _layers_only(program_units(r, kept, start, codes, names))
    layer = units.of_row[kept]
    if not (layer >= 0).any() or units.source != "layer names":
        raise ReportError("--recompute: no numbered layers among the activations kept for "
                          "the backward pass", field="--recompute")
    U = len(units.labels)
    numbers = [int(m.group(1)) if (m := re.search(r"(\d+)$", lab)) else None
               for lab in units.labels]
    tpi = r.target.ipu_tiles   # recorded, or inferred where Poplar leaves it out
    every, every_layer = kept, layer
    kept, layer = kept[layer >= 0], layer[layer >= 0]
    # each layer's output: its kept tensor defined last (the first row of those)
    by = np.lexsort((kept, -start[kept], layer))
    head = by[np.r_[True, layer[by][1:] != layer[by][:-1]]]
    out_code = np.full(U, -1)
    last_start = np.full(U, -1)
    out_code[layer[head]] = codes[kept[head]]
    last_start[layer[head]] = start[kept[head]]
    if checkpoints == "all":
        ckpt_in = np.ones(U, bool)
    else:
        want = {int(x) for x in checkpoints}
        top = max((n for n in numbers if n is not None), default=-1)
        bad = sorted(x for x in want if not 0 <= x <= top)
        if bad:
            raise ReportError(f"--recompute-at: layer {bad[0]} is not among the report's "
                              f"layers ({units.labels[0]} .. {units.labels[-1]})",
                              field="--recompute-at")
        ckpt_in = np.array([n in want for n in numbers])
    ckpt_in[0] = True
    # a pipelined report: every stage's first layer starts from its input (a checkpoint);
    # a layer's IPU: the one holding most of its kept rows (the lowest of a tie)
    ipu_row = r.tile[kept] // tpi
    K = int(ipu_row.max()) + 1
    held = np.bincount(layer * K + ipu_row, minlength=U * K).reshape(U, K)
    ipu = np.where(held.any(axis=1), held.argmax(axis=1), -1)
    ckpt_in[1:] |= (ipu[1:] != ipu[:-1]) & (ipu[1:] >= 0) & (ipu[:-1] >= 0)
    # a layer's output is kept when the next layer's input is a checkpoint, on the same IPU
    # (the next stage starts from a copy of it: the last layer of a stage is recomputed)
    keep_out = np.zeros(U, bool)
    keep_out[:-1] = ckpt_in[1:] & (ipu[1:] == ipu[:-1])
    keep_out[-1] = True
    is_out = codes[kept] == out_code[layer]
    again = kept[~(is_out & keep_out[layer])]
    lay = layer[~(is_out & keep_out[layer])]
    none = np.zeros(0, np.int64)
    stash = _stash_cut(r, every, every_layer, again, start, end, tpi)
    # each segment's last layer, and when its recomputation runs
    seg_last = np.zeros(U, np.int64)
    nxt = U - 1
    for u in range(U - 1, -1, -1):
        seg_last[u] = nxt
        if ckpt_in[u]:
            nxt = u - 1
    # Times in half steps (a report's step s is 2s, [s, e) is [2s, 2e - 1)): a segment's recomputation runs between
    # two of the report's steps, after the backward that precedes it and before its last
    # layer's backward first reads its kept data (a layer's backward reads its output
    # first), at the half step before that read. What it reads (the checkpoint) lives to it,
    # what it writes (the copies) from it, and what the read step computes sees no
    # checkpoint.
    never = np.iinfo(np.int64).max
    first_read = np.full(U, never)
    np.minimum.at(first_read, layer, end[kept] - 1)
    first_read = np.maximum(np.where(first_read == never, turn + 1, first_read), turn + 1)
    replay_of = 2 * first_read[seg_last] - 1          # per layer: its segment's recomputation
    replay = replay_of[lay]
    fwd_end = np.maximum(last_start[lay] + 1, start[again] + 1)
    # a layer's output recomputed is still read by what follows it in the forward: the next
    # layer (its first kept tensor's definition), or the copy to the next pipeline stage
    first_start = np.full(U + 1, never)
    np.minimum.at(first_start, layer, start[kept])
    first_start[first_start == never] = -1
    out_again = (codes[again] == out_code[lay]) & (first_start[lay + 1] >= 0)
    fwd_end[out_again] = np.maximum(fwd_end[out_again], first_start[lay + 1][out_again] + 1)
    # a checkpoint kept as a layer's output that the next layer's backward does not read:
    # read by the next segment's recomputation, then recomputed in its own segment's, just
    # before its layer's backward first reads it; in between (the next layer's backward)
    # it is not live
    only = np.zeros(U, bool)
    only[:-1] = keep_out[:-1] & ~_reads_its_input(r, units.of_row, kept, layer, codes, U)[1:]
    ck = kept[is_out & only[layer]]
    ck_lay = layer[is_out & only[layer]]
    ck_end = replay_of[np.minimum(ck_lay + 1, U - 1)] + 1
    ck_again = replay_of[ck_lay]
    gap = (ck_end < ck_again) & (ck_again < 2 * end[ck] - 1) & (ck_end > 2 * start[ck])
    ck, ck_end, ck_again = ck[gap], ck_end[gap], ck_again[gap]
    read = _checkpoints_read_again(r, cand, every, units.of_row, start, end, ckpt_in, ipu,
                                   replay_of + 1, tpi)
    if not len(again) and not len(ck) and not len(read[0]):
        return Recomputation(r, none)
    temp, temp_at = _replayed_temporaries(r, units.of_row, every, start, end, turn,
                                          seg_last, replay_of, again, read[0])
    fwd = (2 * np.concatenate([start[again], start[ck], start[temp]]),
           np.concatenate([2 * fwd_end - 1, ck_end, 2 * end[temp] - 1]))
    bwd = (np.concatenate([np.minimum(replay, 2 * end[again] - 2), ck_again, temp_at]),
           np.concatenate([2 * end[again] - 1, 2 * end[ck] - 1, temp_at + 1]))
    return Recomputation(r, np.concatenate([again, ck, temp]), fwd, bwd, *stash,
                         moved=read[0], moved_lifetimes=read[1], temporaries=len(temp))


def _replayed_temporaries(r: Report, of_row, kept, start, end, turn, seg_last, replay_of,
                          again, read):
    """The temporaries of each recomputed segment's last layer, as ``(rows, at)``: its
    forward's data that is not kept (partial sums, exchange buffers), on each tile the
    largest part, live again at the segment's recomputation (``at``, half steps), when the
    segment's other recomputed data is: its replay ends with that layer."""
    is_kept = np.zeros(r.num_vars, bool)
    is_kept[kept] = True
    is_kept[read] = True
    lay = of_row
    last = np.unique(seg_last[np.unique(lay[again])]) if len(again) else np.zeros(0, np.int64)
    mine = np.flatnonzero(np.isin(lay, last) & r.allocated & ~r.always_live & ~is_kept
                          & (end <= turn) & (start < end))
    if not len(mine):
        none = np.zeros(0, np.int64)
        return none, none
    # the largest part on each tile of each layer
    order = np.lexsort((-r.size[mine], r.tile[mine], lay[mine]))
    mine = mine[order]
    first = np.r_[True, (r.tile[mine][1:] != r.tile[mine][:-1])
                  | (lay[mine][1:] != lay[mine][:-1])]
    mine = mine[first]
    return mine, replay_of[lay[mine]]


def _reads_its_input(r: Report, of_row, kept, layer, codes, U) -> np.ndarray:
    """Per layer, whether its backward may read its input: a layer with weights (persistent
    state: the weight gradient is computed from the input) or that keeps more than its output
    for the backward (a normalisation's statistics: its gradient reads the input again). An
    elementwise layer keeps its output alone, and its gradient reads that."""
    from .batch import persistent_rows

    p = np.flatnonzero(persistent_rows(r))
    lp = of_row[p]
    state = np.bincount(lp[lp >= 0], minlength=U)[:U] > 0
    span = int(codes.max()) + 1
    pairs = np.unique(layer * span + codes[kept])   # (layer, tensor) pairs of kept data
    n_kept = np.bincount(pairs // span, minlength=U)[:U]
    return state | (n_kept > 1)


def _checkpoints_read_again(r: Report, cand, kept, of_row, start, end, ckpt_in, ipu,
                            replay_at, tpi):
    """The checkpoints the report does not keep across the turn, with the lifetimes the
    recomputation gives them, as ``(rows, (start, end))``: the recomputation of a segment
    reads its checkpoint again, so a checkpoint lives through its segment's recomputation
    (to ``replay_at``, per layer, in half steps; the intervals returned are in half steps). A report keeps a layer's input across the turn
    when the layer's backward reads it, or when it is the previous layer's output; a
    pipeline stage's input, read by an elementwise first layer, is neither: it dies in the
    forward pass unless recomputation reads it again.

    A segment's checkpoint is told by lifetime: of the per-sample rows ``cand`` of no
    segment's first layer ``u`` on its IPU, live where that layer's first per-sample data is
    defined, the last defined (what the layer reads first). Kept rows (``kept``: live
    across the turn) already live long enough."""
    never = np.iinfo(np.int64).max
    U = len(ckpt_in)
    lay = of_row[cand]
    mine = lay >= 0
    first = np.full(U, never)
    np.minimum.at(first, lay[mine], start[cand][mine])
    is_kept = np.zeros(r.num_vars, bool)
    is_kept[kept] = True
    # the candidates IPU by IPU (a layer's checkpoint is on its own IPU), each IPU's by
    # start: a layer walks back from its first definition to the last live one, not over
    # its IPU's rows (a Pod's layers each scanning a million rows took minutes)
    cand_ipu = r.tile[cand] // tpi
    n_ipus = max(int(cand_ipu.max(initial=0)), int(ipu.max(initial=0))) + 1
    groups = {}

    def group(k):   # IPU k's candidates (k < 0: every IPU's), by start
        if k not in groups:
            pick = np.arange(len(cand)) if k < 0 else np.flatnonzero(cand_ipu == k)
            pick = pick[np.argsort(start[cand[pick]], kind="stable")]
            c = cand[pick]
            groups[k] = (c, start[c], end[c], lay[pick])
        return groups[k]
    rows, ends = [], []
    for u in np.flatnonzero(ckpt_in & (first < never)).tolist():
        f = first[u]
        c, cs, ce, cl = group(int(ipu[u]) if ipu[u] < n_ipus else -1)
        read = c[_last_live_before(cs, ce, cl, f, u)]
        if not len(read):
            continue
        again = int(replay_at[u])
        if is_kept[read].any() or 2 * end[read].max() - 1 >= again:
            continue
        rows.append(read)
        ends.append(np.full(len(read), again))
    if not rows:
        none = np.zeros(0, np.int64)
        return none, (none, none)
    rows = np.concatenate(rows).astype(np.int64)
    ends = np.concatenate(ends)
    rows, first_of = np.unique(rows, return_index=True)   # a row of two segments: its first
    return rows, (2 * start[rows], np.maximum(ends[first_of], 2 * end[rows] - 1))


@njit(cache=True)
def _last_live_before(start, end, layer, f, u):
    """Positions (in ``start``'s ascending order) of the rows live at ``f`` (``start < f <
    end``) of another layer than ``u`` whose start is the latest among those."""
    j = search_left(start, f) - 1
    while j >= 0 and not (end[j] > f and layer[j] != u):
        j -= 1
    if j < 0:
        return np.zeros(0, np.int64)
    lo = j
    while lo > 0 and start[lo - 1] == start[j]:
        lo -= 1
    n = 0
    for i in range(lo, j + 1):
        if end[i] > f and layer[i] != u:
            n += 1
    out = np.empty(n, np.int64)
    n = 0
    for i in range(lo, j + 1):
        if end[i] > f and layer[i] != u:
            out[n] = i
            n += 1
    return out


def _layers_only(units):
    """``units`` without the numbered names of the program's plumbing: over three or more
    IPUs the stashes ``pipeline/stage0/stash``, ``pipeline/stage1/stash``, ... look like a
    numbered sequence of layers, and as layers they would be recomputed (a stash given a
    forward and a backward lifetime) instead of cut to the checkpoints' share. The plumbing
    is told as ``tilemem split`` tells an earlier pipelining's buffers
    (``rules.INFERRED_PIPELINE_BUFFER_PREFIX``)."""
    from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX

    real = np.array([not lab.startswith(INFERRED_PIPELINE_BUFFER_PREFIX)
                     for lab in units.labels], bool)
    if real.all():
        return units
    new = np.where(real, np.cumsum(real) - 1, -1)
    of_row = np.where(units.of_row >= 0, new[np.maximum(units.of_row, 0)], -1)
    return type(units)([lab for lab, k in zip(units.labels, real.tolist()) if k], of_row,
                       units.source)


def _stash_cut(r: Report, kept, layer, again, start, end, tpi):
    """Each pipeline stage's stash of activations cut to its checkpoints, as ``(rows, keep,
    total)``: the rows keep ``keep / total`` of their bytes. A stash is kept per-sample data
    of no layer on an IPU, live around every kept activation of the IPU's layers (a FIFO
    over the micro-batches in flight); when it holds at least half the bytes of those
    activations it stashes them (a stash of the stage input alone holds far less, and
    stays), and keeps only the checkpoints' share after recomputation."""
    rows, keep, total = [], [], []
    ipu_of = r.tile // tpi
    loose = kept[layer < 0]
    recomputed_row = np.zeros(r.num_vars, bool)
    recomputed_row[again] = True
    for k in (np.unique(ipu_of[kept]).tolist() if len(loose) else []):
        mine = kept[(layer >= 0) & (ipu_of[kept] == k)]
        if not len(mine):
            continue
        lo, hi = start[mine].min(), end[mine].max()
        st = loose[(ipu_of[loose] == k) & (start[loose] <= lo) & (end[loose] >= hi)]
        t = int(r.size[mine].sum())
        if not len(st) or r.size[st].sum() < 0.5 * t:
            continue
        rows.append(st)
        keep.append(np.full(len(st), int(r.size[mine[~recomputed_row[mine]]].sum())))
        total.append(np.full(len(st), t))
    cat = (lambda xs: np.concatenate(xs).astype(np.int64) if xs else np.zeros(0, np.int64))
    return cat(rows), cat(keep), cat(total)


def _with_lifetimes(r: Report, rows: np.ndarray, fwd, bwd, size=None, moved=None,
                    half_steps: bool = False, local: bool = False,
                    suffix: str | None = None) -> Report:
    """``r`` with ``rows`` in classes of the ``fwd`` intervals (``None``: in their own
    classes) and a copy of each in classes of the ``bwd`` intervals (named
    ``head/recompute/tail`` from the row's ``head/tail``, or the row's name and ``suffix``
    when given), and the rows of ``moved`` (``(rows, (start, end))``, no copy) in classes
    of their intervals; new classes interfere with every
    class whose steps they share. ``half_steps``: the intervals are in half steps (the
    report's steps [s, e) are [2s, 2e - 1)), and so are the steps of the report returned. ``local``: ``r`` is one
    IPU's view of a Pod (``tilemem.model.ipuview``), whose interference is the whole Pod's:
    only its own classes' is kept, and the new classes are matched against those (the rest
    is never asked on its tiles)."""
    from dataclasses import replace

    none = np.zeros(0, np.int64)
    moved_rows, moved_iv = moved if moved is not None else (none, (none, none))
    C = r.num_classes
    hull = r.class_steps
    if half_steps:   # live at the steps [s, e) and between them, not after the last read
        hull = np.stack([2 * hull[:, 0], 2 * hull[:, 1] - 1], 1)
    nf = 0 if fwd is None else len(rows)
    iv = np.concatenate([np.stack(fwd, 1).reshape(-1, 2) if nf else np.zeros((0, 2), np.int64),
                         np.stack(bwd, 1), np.stack(moved_iv, 1).reshape(-1, 2)]
                        ).astype(np.int64)
    uniq, inv = np.unique(iv, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    new_cls = C + inv
    steps = np.concatenate([hull, uniq])
    n_cls = C + len(uniq)
    n, k = r.num_vars, len(rows)
    take = np.concatenate([np.arange(n), rows])
    eq = r.eq_class[take].copy()
    if nf:
        eq[rows] = new_cls[:k]
    eq[n:] = new_cls[nf:nf + k]
    eq[moved_rows] = new_cls[nf + k:]
    # over several IPUs only the pairs of classes that share a tile, as the report keeps its
    # own (``tilemem.model.interference``): conflicts are asked within a tile, and a new class
    # overlaps in time with most classes of every other IPU
    shares = (SharedTiles.of(r.tile[take], eq, r.allocated[take], n_cls)
              if prunes(r.target) else None)
    # interference of the new classes: shared steps with any class (old ones by their hulls)
    if local:   # the view's own classes, their entries and no other IPU's
        from ...liveness.classgraph import sorted_interference

        own = np.unique(r.eq_class[r.allocated])
        # symmetric and sorted (the view shares the Pod's, made once): so is the result
        lengths, entries = sorted_interference(r).gather(own)
        src, dst = [np.repeat(own, lengths)], [entries]
        pool = np.concatenate([own, np.arange(C, n_cls)])
    else:
        src, dst = [r.interference.row_ids()], [r.interference.indices]
        pool = np.arange(n_cls)
    lo_of, hi_of = steps[pool, 0], steps[pool, 1]
    for c, (a, b) in enumerate(uniq.tolist()):
        hit = pool[(lo_of < b) & (hi_of > a)]
        hit = hit[hit != C + c]
        if shares is not None:
            hit = hit[shares.mask(np.full(len(hit), C + c), hit)]
        src += [np.full(len(hit), C + c), hit]
        dst += [hit, np.full(len(hit), C + c)]
    s, d = np.concatenate(src), np.concatenate(dst)
    key = sorted_unique(s * n_cls + d)
    interference = Csr.from_pairs(n_cls, key // n_cls, key % n_cls)
    # the copies' names after the report's own, in one blob (no string a variable):
    # ``head/recompute/tail`` unless a suffix is given
    extra, lengths = names_inserted(r, rows, "/recompute" if suffix is None else suffix,
                                    suffix is None)
    # (a view's names are a slice of the whole blob: only that slice is copied)
    first, last = int(r.name_offsets[0]), int(r.name_offsets[-1])
    blob = np.concatenate([np.frombuffer(r.name_blob, np.uint8, count=last - first,
                                         offset=first),
                           np.frombuffer(extra, np.uint8)])
    offsets = np.concatenate([r.name_offsets - first,
                              last - first + np.cumsum(lengths, dtype=np.int64)])
    ao = r.allocation_order
    order = Csr.from_pairs(ao.num_rows, np.concatenate([ao.row_ids(), r.tile[rows]]),
                           np.concatenate([ao.indices, np.arange(n, n + k)]))
    cols = {f: getattr(r, f)[take] for f in
            ("tile", "alignment", "category", "allocated", "is_constant", "always_live",
             "executable", "vertex_code", "lowest_256kb", "in_interleaved_mem")}
    out = replace(
        r, **cols, var_id=np.concatenate([r.var_id, r.var_id.max() + 1 + np.arange(k)]),
        size=(r.size if size is None else size)[take],
        offset=np.concatenate([r.offset, np.zeros(k, np.int64)]), eq_class=eq,
        interference=interference, name_blob=blob, name_offsets=offsets,
        element_constraints=_grown(r.element_constraints, k),
        region_constraints=_grown(r.region_constraints, k),
        allocation_order=order, class_steps=steps,
        interference_dropped=None if shares is None else -1,
        _tile_index=None, _cache={})
    if local:   # built from a symmetric, sorted relation, both directions added: no check
        out._cache["sorted_interference"] = interference
    return out


def _grown(csr: Csr, k: int) -> Csr:
    """``csr`` with ``k`` more rows, empty."""
    return Csr.from_lengths(np.concatenate([csr.lengths(), np.zeros(k, np.int64)]),
                            csr.indices)

