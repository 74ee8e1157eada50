"""What-if ``--rts N --rts-weights``: the weights sharded over the replicas, each gathered whole
only while a pass reads it, told by structure and lifetime, with names as a hint.

With the weights sharded, a replica keeps ``1/N`` of a weight matrix; a pass that reads the
weight all-gathers it whole first (a temporary mapped as the weight was), and the copy lives
from the gather to the pass's read. So the gathered weight is not live throughout, as the
weight was, but only around its reads: at the weight update (every weight gradient live) no
gathered weight is, and where a pass reads two weights, both are.

From the report as compiled without the lever (with class steps; without them the lifetimes
cannot be changed and ``tilemem.figures.whatif.levers.rts_sizes`` keeps, on each tile, its largest
weight part whole throughout instead):

1. the *reads* are the convolutions and matmuls (``levers.partials_rows``: partial sums
   element-constrained to the exchange buffer that fed them, the vertex reading both in one
   cycle); a read's pass is that buffer's lifetime, from the exchange to the compute set that
   reads it. The gather runs just before the exchange, after the step before it: what is
   live there is live at the exchange too (but the shard it reads), so the pass's lifetime is
   the gathered copy's;
2. a read's weight: of the weights (``levers.weight_rows``, less a pipeline's stashes, which
   are persistent too) whose name, less its last component, is a prefix of the read's name
   (the hint: a framework names a matmul's weight after the matmul), the largest on the
   read's IPU (a matmul's weight matrix is its largest parameter: not its bias). The weight
   gradient's matmul reads the activations and the output gradient, not the weight: it is
   told by its result, mapped like the weight (the same bytes on the same tiles), which its
   partial sums are element-constrained to, or, where they share no tile (a constraint
   exists only where both have a part), which is defined at their last step. A read no
   weight's name covers takes the weight of the one gradient matmul whose name shares the
   longest prefix with it (a tied weight: the head's logits read the embedding, the logits'
   gradient matmul makes the embedding's gradient); two such (attention's scores among
   the weighted matmuls of a block): none;
3. a weight no matmul reads, sent whole to another IPU in the forward pass (an exchange
   buffer, ``globalMessage``, mapped like it, live before the turn to the backward pass,
   ``recompute.turn_step``: a tied weight copied to the head's IPU), is read there;
4. each read weight joins the sharded state (every part of it, ``rts_sizes``), and for each
   read a copy of its parts at their whole size, on their tiles, lives over the read's pass
   (a class of its own interfering with every class whose steps it shares; never alwaysLive).
   A weight no read was found for (one read by a slice or an add, a bias) stays whole, as a
   framework keeps the small per-feature parameters.
"""
from __future__ import annotations

from dataclasses import dataclass
import numpy as np

from ...model import Report

_NONE = np.zeros(0, np.int64)


@dataclass(frozen=True)
class Gathering:
    """The weights' gathered copies of ``base`` (see the module docstring): ``weights``, the
    rows of the read weights (sharded); for each copy, its source row ``src`` and its pass,
    the rows of the exchange buffer read with it (``reader``, a row of the same class as the
    pass)."""

    base: Report
    weights: np.ndarray
    src: np.ndarray
    reader: np.ndarray
    #: one IPU's view of a Pod (``on_ipu``): its interference built from its own classes
    local: bool = False

    @property
    def changes(self) -> bool:
        return bool(len(self.src))

    def on(self, r: Report) -> Report:
        """``r`` (``base`` or a report of the same first rows with other sizes, or with rows
        and classes added after them, as recomputation's) with the gathered copies added
        after its rows: each in a class of its reader's lifetime, in ``r``'s steps, at the
        source's size in ``base`` (whole)."""
        from dataclasses import replace

        from .recompute import _with_lifetimes

        if not self.changes:
            return r
        steps = r.class_steps[r.eq_class[self.reader]]
        out = _with_lifetimes(r, self.src, None, (steps[:, 0], steps[:, 1]),
                              suffix=GATHERED_SUFFIX, local=self.local)
        # a copy is a temporary, though its weight may be written alwaysLive
        live = out.always_live.copy()
        live[r.num_vars:] = False
        return replace(out, size=np.concatenate([r.size, self.base.size[self.src]]),
                       always_live=live)   # the cache: the interference's, not sizes

    def resized(self, size: np.ndarray, allocated: np.ndarray):
        """``(size, allocated)`` of every row of ``on(r)`` when ``r``'s rows have ``size``
        and ``allocated``: a copy whole at its source's size in ``base``, allocated where its
        source is."""
        if not self.changes:
            return size, allocated
        return (np.concatenate([size, self.base.size[self.src]]),
                np.concatenate([allocated, allocated[self.src]]))

    def on_ipu(self, k: int) -> "Gathering":
        """The same gathering on IPU ``k`` of an ordered report
        (``tilemem.model.ipuview.ipu_view``), renumbered to the view's rows: a weight and the
        read that gathers it are on one IPU (a read's weight is looked for on its IPU), so a
        Pod's whole report with the copies need not be built."""
        from ...model.ipuview import ipu_bounds, ipu_view

        b = ipu_bounds(self.base)
        lo, hi = int(b[k]), int(b[k + 1])
        m = (self.src >= lo) & (self.src < hi) & (self.reader >= lo) & (self.reader < hi)
        w = self.weights[(self.weights >= lo) & (self.weights < hi)]
        return Gathering(ipu_view(self.base, k), w - lo, self.src[m] - lo,
                         self.reader[m] - lo, local=True)


def gathering(r: Report) -> Gathering:
    """``r``'s weights gathered for their reads (``Gathering``), once a report."""
    return r.cached("gathered_weights", lambda: _gathering(r))


#: What a gathered copy's name adds to its weight's.
GATHERED_SUFFIX = "/gathered"


def _gathering(r: Report) -> Gathering:
    from . import levers
    from ...model.names import tensor_codes

    if not r.has_class_steps:
        return Gathering(r, _NONE, _NONE, _NONE)
    w = levers.weight_rows(r)
    w = w[r.allocated[w]]
    reads = _reads(r, levers.partials_rows(r))
    if not len(w) or not len(reads[0]):
        return Gathering(r, _NONE, _NONE, _NONE)
    codes, names = tensor_codes(r)
    tpi = r.target.ipu_tiles
    # a pipeline's stash is persistent too, but the plumbing, not a weight (its names are
    # told as ``split`` tells an earlier pipelining's buffers)
    from ...model.names import tensors_named_under
    from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX

    plumbing = tensors_named_under(r, INFERRED_PIPELINE_BUFFER_PREFIX)
    w = w[~plumbing[codes[w]]]
    if not len(w):
        return Gathering(r, _NONE, _NONE, _NONE)
    # the weights by (stem, IPU): the largest tensor of a stem is the one a matmul reads
    wcodes, first = np.unique(codes[w], return_index=True)
    wbytes = np.bincount(codes[w], r.size[w], minlength=len(names))
    stem_of = {}
    for c, row in zip(wcodes.tolist(), w[first].tolist()):
        name = names[c]
        if "/" not in name:
            continue
        key = (name.rsplit("/", 1)[0], int(r.tile[row]) // tpi)
        best = stem_of.get(key)
        if best is None or wbytes[c] > wbytes[best]:
            stem_of[key] = c
    p_tensor, p_row, x_row = reads
    partners = _data_partners(r, codes, p_tensor)
    rows_of = _rows_by_code(codes, np.flatnonzero(
        _code_mask(len(names), [wcodes, *partners.values()])[codes] & r.allocated))
    # (a mask, not ``np.isin`` against a Pod's millions of weight rows at every read)
    is_weight = np.zeros(r.num_vars, bool)
    is_weight[w] = True
    layout_of = {}

    def layout(c):   # a tensor's bytes on each of its tiles
        if c not in layout_of:
            rows = rows_of.get(c, _NONE)
            t, inv = np.unique(r.tile[rows], return_inverse=True)
            layout_of[c] = (t, np.bincount(inv, r.size[rows], minlength=len(t)))
        return layout_of[c]

    def signature(c):
        t, b = layout(c)
        return t.tobytes() + b"|" + b.tobytes()
    weight_of_layout = {signature(c): c for c in wcodes.tolist()}
    # the weight gradients' matmuls: a result mapped like a weight (the same bytes on the
    # same tiles); they read the activations and the output gradient, not the weight
    grad_of = {}
    for pc in p_tensor.tolist():
        for o in partners.get(pc, _NONE).tolist():
            c = weight_of_layout.get(signature(o))
            if c is not None:
                grad_of[pc] = c
    # a constraint exists only where both tensors have a part on a tile: a gradient whose
    # tiles the partial sums miss is told by time instead, defined where they are reduced
    # (their last step)
    made_at = _gradients_by_start(r, codes, w, wcodes, weight_of_layout, signature, rows_of)
    p_end = r.class_steps[r.eq_class[p_row], 1] - 1
    for pc, prow, end in zip(p_tensor.tolist(), p_row.tolist(), p_end.tolist()):
        c = made_at.get((int(end), int(r.tile[prow]) // tpi))
        if c is not None:
            grad_of.setdefault(pc, c)
    ipu_of = dict(zip(p_tensor.tolist(), (r.tile[p_row] // tpi).tolist()))
    src, reader = [], []
    for pc, prow, xrow in zip(p_tensor.tolist(), p_row.tolist(), x_row.tolist()):
        if pc in grad_of:
            continue
        parts = names[pc].split("/")
        ipu = int(r.tile[prow]) // tpi
        c = next((stem_of[k] for k in (("/".join(parts[:j]), ipu)
                                       for j in range(len(parts) - 1, 0, -1))
                  if k in stem_of), None)
        if c is None:   # a weight named otherwise (tied): its gradient's matmul's
            c = _by_gradient(parts, names, {g: x for g, x in grad_of.items()
                                            if ipu_of[g] == ipu})
        if c is None:
            continue
        mine = rows_of[c]
        mine = mine[is_weight[mine]]
        src.append(mine)
        reader.append(np.full(len(mine), xrow))
    # a weight no matmul reads may be sent whole to another IPU in the forward pass (a tied
    # weight, for the head's matmul there): an exchange buffer mapped like it, live before
    # the turn to the backward pass (after it, such a buffer brings its gradient back)
    read = {int(codes[x[0]]) for x in src}
    alone = [c for c in wcodes.tolist() if c not in read]
    if alone:
        for c, xrow in _sent_forward(r, codes, alone, signature, rows_of).items():
            mine = rows_of[c]
            mine = mine[is_weight[mine]]
            src.append(mine)
            reader.append(np.full(len(mine), xrow))
    if not src:
        return Gathering(r, _NONE, _NONE, _NONE)
    src, reader = np.concatenate(src), np.concatenate(reader)
    weights = np.flatnonzero(_code_mask(len(names), [codes[src]])[codes] & r.allocated)
    return Gathering(r, weights, src.astype(np.int64), reader.astype(np.int64))


def _code_mask(n: int, parts) -> np.ndarray:
    """Which of ``n`` tensor codes are in any of ``parts``: a lookup table, so that testing
    a Pod's rows is one gather, not a sort."""
    mask = np.zeros(n, bool)
    for p in parts:
        mask[np.asarray(p, np.int64)] = True
    return mask


def _gradients_by_start(r: Report, codes, w, wcodes, weight_of_layout, signature,
                        rows_of) -> dict:
    """``{(step, IPU): weight}``: where a tensor mapped like a weight (its gradient), not
    persistent, starts."""
    from .batch import category_rows

    span = len(rows_of) and int(codes.max()) + 1
    wbytes = set(np.bincount(codes[w], r.size[w], minlength=span)[wcodes].tolist())
    var = category_rows(r, ("variable",)) & r.allocated
    var[w] = False
    cand = np.flatnonzero(var)
    total = np.bincount(codes[cand], r.size[cand], minlength=span)
    maybe = np.flatnonzero(np.isin(total, list(wbytes)) & (total > 0))
    if not len(maybe):
        return {}
    rows_of.update(_rows_by_code(codes, cand[_code_mask(span, [maybe])[codes[cand]]]))
    tpi = r.target.ipu_tiles
    out = {}
    for g in maybe.tolist():
        c = weight_of_layout.get(signature(g))
        if c is not None:
            row = rows_of[g][0]
            out[(int(r.class_steps[r.eq_class[row], 0]), int(r.tile[row]) // tpi)] = c
    return out


def _sent_forward(r: Report, codes: np.ndarray, weights: list, signature, rows_of: dict
                  ) -> dict:
    """Of ``weights`` (tensor codes), those an exchange buffer mapped like them (the same
    bytes on the same tiles) carries before the turn to the backward pass: ``{weight: a row
    of the buffer}``."""
    from .batch import micro_batch_rows
    from .batch import category_rows
    from .recompute import turn_step

    cand = micro_batch_rows(r)
    if not len(cand):
        return {}
    turn = turn_step(r, cand)
    buf = np.flatnonzero(category_rows(r, ("globalMessage",))
                         & r.allocated)
    buf = buf[r.class_steps[r.eq_class[buf], 1] <= turn]
    if not len(buf):
        return {}
    want = {signature(c): c for c in weights}
    bc = np.unique(codes[buf])
    by_code = _rows_by_code(codes, np.flatnonzero(_code_mask(int(codes.max()) + 1, [bc])[codes]
                                                  & r.allocated))
    out = {}
    for b in bc.tolist():
        rows = by_code[b]
        t, inv = np.unique(r.tile[rows], return_inverse=True)
        sig = t.tobytes() + b"|" + np.bincount(inv, r.size[rows], minlength=len(t)).tobytes()
        c = want.get(sig)
        if c is not None and c not in out:
            out[c] = int(rows[0])
    return out


def _by_gradient(parts: list, names: list, grad_of: dict):
    """The weight of a read no weight's name covers: that of the one weight gradient's
    matmul whose name shares the longest prefix with the read's (a tied weight: the head's
    logits read the embedding, whose gradient the logits' weight-gradient matmul makes);
    ``None`` when no gradient shares a prefix, or two share the longest (a matmul without
    weights among weighted ones: attention's scores)."""
    best, hits = 0, set()
    for g, c in grad_of.items():
        other = names[g].split("/")
        k = 0
        while k < min(len(parts), len(other)) - 1 and parts[k] == other[k]:
            k += 1
        if k > best:
            best, hits = k, {c}
        elif k == best and k:
            hits.add(c)
    return next(iter(hits)) if len(hits) == 1 else None


def _rows_by_code(codes: np.ndarray, rows: np.ndarray) -> dict:
    order = np.argsort(codes[rows], kind="stable")
    rows = rows[order]
    cut = np.flatnonzero(np.r_[True, codes[rows][1:] != codes[rows][:-1], True])
    return {int(codes[rows[a]]): rows[a:b] for a, b in zip(cut[:-1], cut[1:])}


def _reads(r: Report, partials: np.ndarray):
    """The convolutions and matmuls, one a partial-sums tensor: ``(tensor code, a row of
    it, a row of the exchange buffer it is element-constrained to)``."""
    from .batch import category_rows
    from .levers import EXCHANGE_CATEGORIES
    from ...model.names import tensor_codes

    codes, _ = tensor_codes(r)
    ec = r.element_constraints
    a, b = ec.row_ids(), ec.indices
    a, b = np.concatenate([a, b]), np.concatenate([b, a])   # either direction
    is_partials = np.zeros(r.num_vars, bool)
    is_partials[partials] = True
    exchange = category_rows(r, EXCHANGE_CATEGORIES)
    hit = is_partials[a] & exchange[b]
    a, b = a[hit], b[hit]
    if not len(a):
        return _NONE, _NONE, _NONE
    pc, first = np.unique(codes[a], return_index=True)
    return pc, a[first], b[first]


def _data_partners(r: Report, codes: np.ndarray, p_tensor: np.ndarray) -> dict:
    """Per partial-sums tensor of ``p_tensor``, the other model data tensors its rows are
    element-constrained to (what the matmul writes: its output, or a weight gradient)."""
    from .batch import category_rows

    ec = r.element_constraints
    a, b = ec.row_ids(), ec.indices
    a, b = np.concatenate([a, b]), np.concatenate([b, a])
    hit = (_code_mask(int(codes.max()) + 1, [p_tensor])[codes[a]]
           & category_rows(r, ("variable",))[b])
    ca, cb = codes[a[hit]], codes[b[hit]]
    keep = ca != cb
    span = int(codes.max()) + 1
    pairs = np.unique(ca[keep] * span + cb[keep])
    pa, pb = pairs // span, pairs % span
    cut = np.flatnonzero(np.r_[True, pa[1:] != pa[:-1], True]) if len(pa) else np.zeros(1, int)
    return {int(pa[x]): pb[x:y] for x, y in zip(cut[:-1], cut[1:])}
