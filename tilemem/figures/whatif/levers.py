"""What each memory lever of Graphcore's memory guide would change in a report: the variables
it touches, told by lifetime, layout and structure first and by names only as a hint (names
differ between frameworks), and the sizes they would take (``tilemem what-if``'s ``--amp``,
``--half-partials``, ``--half-momentum``, ``--rts``; ``tilemem.figures.whatif.edits`` applies them).

- *partial sums* of convolutions and matmuls (``partials_rows``): model data (``variable``),
  neither persistent nor alwaysLive, short-lived (a class live for at most ``SHORT_STEPS``
  program steps, when the report has class steps), and element-constrained on some tile to
  an exchange buffer (``message``, ``rearrangement``: the convolution's vertex reads the
  exchanged input and writes the partials in the same cycle, so 004's ``elem(*a) !=
  elem(*b)``); or element-constrained to other model data with a name that says "partial"
  (a weight-update's partials, written beside the weight gradient). Reductions' partials have
  no such constraint and are not planned under availableMemoryProportion.
- *optimiser state* (``optimiser_state_rows``): persistent training state
  (``tilemem.figures.whatif.batch.persistent_rows``: alwaysLive model data, or live from the first
  step to the last) whose name is an optimiser's (``OPTIMISER_HINT``); the *first-order
  momentum* is the part of it named so (``FIRST_ORDER_HINT``). The weights are persistent
  too and nothing in a report's structure tells them apart, so here names decide, among
  tensors the lifetime already marks as state.
- the optimiser's *temporaries* (``optimiser_temporary_rows``): not persistent, named as
  the optimiser's (bias-corrected moments, the update).

What each lever does to them (the Poplar memory guide's chapter on common memory
optimisations):

- ``amp``: availableMemoryProportion bounds a convolution's or matmul's temporaries, and
  Poplar plans them to use the share it allows: partial sums scale by ``new / was`` (``was``:
  the value the report was compiled with, Poplar's default 0.6 unless told), per pipeline
  stage (a tile's IPU) when one value a stage is given;
- ``half_partials``: partial sums in FP16 rather than FP32: half the bytes (assumes they are
  FP32 in the report, Poplar's default partials type);
- ``half_momentum``: the first-order momentum in FP16: half the bytes (assumes FP32 now);
- ``rts``: the optimiser state sharded over ``N`` replicas: each replica keeps ``1/N`` of it,
  as one flat tensor linearly over its IPU (``tilemem.rules.INFERRED_RTS_LINEAR``):
  the state's bytes of an IPU divided by ``N`` and spread evenly over its tiles. Being live
  throughout, the share adds to every live set of a tile: it is carried by the tile's state
  variables (or, on a tile without any, its largest alwaysLive variable), which leaves the
  bound as a new variable's would. The optimiser's temporaries shrink by ``N`` in place.
  With ``weights`` (``--rts-weights``) the weights are sharded too: those a convolution or
  matmul reads join the share, and each read gets a whole copy of its weight live around it
  (``tilemem.figures.whatif.gathered``, a lifetime change applied with recomputation's,
  ``whatif.apply_recompute``). A report without class steps has no lifetimes to change: the
  rest of the persistent model data (``weight_rows``) joins the share, except, on each tile,
  the largest weight's part, which stays whole (one gathered weight taken live at the tile's
  peak: an upper estimate when a smaller one is; an under one when two are gathered at once).
- ``serialise``: the vocabulary matmul, its gradients and the embedding's update in ``N``
  slices one after the other (``serialise_rows``): the partial sums of the matmuls named as
  the vocabulary's (``VOCAB_HINT``), the vocabulary weight's gradient (named so,
  ``WEIGHT_GRAD_HINT``) and the embedding's optimiser temporaries take ``1/N`` of their
  bytes, on the tiles they are on now; the logits, the weights and their state stay whole.
"""
from __future__ import annotations

import re

import numpy as np

from ...model import Report
from ...model.names import tensor_codes
from ...rules import (INFERRED_DEFAULT_AMP, INFERRED_FIRST_ORDER_NAME,
                     INFERRED_OPTIMISER_NAME, INFERRED_PARTIALS_EXCHANGE_CATEGORIES,
                     INFERRED_PARTIALS_MAX_STEPS, INFERRED_PARTIALS_NAME, INFERRED_VOCAB_NAME,
                     INFERRED_WEIGHT_GRAD_NAME)
from .batch import cached_rows, category_rows, persistent_rows

#: The inferred readings (``tilemem.rules``), under this module's names.
SHORT_STEPS = INFERRED_PARTIALS_MAX_STEPS
EXCHANGE_CATEGORIES = INFERRED_PARTIALS_EXCHANGE_CATEGORIES
#: Name hints (case-insensitive, on the name without ``#tile``).
PARTIALS_HINT = re.compile(INFERRED_PARTIALS_NAME, re.I)
OPTIMISER_HINT = re.compile(INFERRED_OPTIMISER_NAME, re.I)
FIRST_ORDER_HINT = re.compile(INFERRED_FIRST_ORDER_NAME, re.I)
VOCAB_HINT = re.compile(INFERRED_VOCAB_NAME, re.I)
WEIGHT_GRAD_HINT = re.compile(INFERRED_WEIGHT_GRAD_NAME, re.I)
#: The availableMemoryProportion a report is taken to be compiled with unless told.
DEFAULT_AMP = INFERRED_DEFAULT_AMP

#: What each lever assumes, said with its answer.
ASSUMES = {
    "amp": ("--amp: convolution and matmul partial sums (short-lived model data "
            "element-constrained to an exchange buffer, or named partial) scale by new / old "
            "availableMemoryProportion (old: {was:g}, --amp-was to change), per IPU when one "
            "value an IPU is given; the exchange and code a plan changes are not estimated"),
    "half-partials": ("--half-partials: those partial sums are FP32 now and take half the "
                      "bytes in FP16, on the same tiles"),
    "half-momentum": ("--half-momentum: persistent state named as first-order momentum "
                      "(momentum, velocity, first moment, accl1, /m) is FP32 now and takes "
                      "half the bytes"),
    "rts": ("--rts {n}: each replica keeps 1/{n} of the persistent state named as an "
            "optimiser's, spread evenly over its IPU's tiles (one flat shard mapped "
            "linearly, inferred), and its update temporaries at 1/{n} in place; the weights "
            "stay whole (unless --rts-weights); the code and buffers of the reduce-scatter "
            "and all-gather between replicas are not estimated (they add a little on every "
            "tile)"),
    "offload-state": ("the optimiser state off chip: the persistent state named as an "
                      "optimiser's leaves its tiles but, on each tile, that of the one weight "
                      "with the most state there, streamed in for its update (taken live "
                      "throughout: an upper estimate); the update's temporaries stay"),
    "serialise": ("--serialise {n}: the partial sums of the matmuls named as the "
                  "vocabulary's (logits, lm_head, word embedding), the vocabulary weight's "
                  "gradient and the embedding's optimiser temporaries take 1/{n} of their "
                  "bytes on the tiles they are on now (one slice live at a time); the logits, "
                  "the weights and their state stay whole; a slice mapped over other tiles "
                  "than the whole was is not estimated"),
    "micro-batch": ("--micro-batch: what is per sample (activations, their gradients, the "
                    "buffers that carry them, a pipeline's stash and copies between stages) "
                    "scales on the tiles it is on now; weights, optimiser state and tensors "
                    "of their bytes on their tiles (weight gradients, accumulators) stay; a "
                    "compiler that maps a smaller tensor onto fewer tiles puts more on each "
                    "of them than estimated, and less elsewhere"),
    "rts-weights": ("--rts-weights: the weights a convolution or matmul reads (its weight: "
                    "the largest persistent tensor named as a prefix of its name, on its IPU, "
                    "or the one its gradient's matmul makes the gradient of; not the weight "
                    "gradient's matmul, whose result is mapped like the weight) or that is "
                    "sent whole to another IPU in the forward pass are sharded so too, and "
                    "gathered whole for each read: a copy on the weight's tiles live from the "
                    "read's exchange to its compute set; other weights (read by a slice or "
                    "an add, biases) stay whole; each gather's code is not estimated (under "
                    "by a few %). Without class steps: on each tile the largest weight's "
                    "part stays whole throughout (one gathered weight taken live at the "
                    "peak), the rest joins the 1/{n} share"),
}


def _named(r: Report, rx) -> np.ndarray:
    codes, names = tensor_codes(r)
    hit = np.fromiter((bool(rx.search(n)) for n in names), bool, count=len(names))
    return hit[codes]


def _once(r: Report, name: str, make) -> np.ndarray:
    """``make(r)`` once a report, read-only: each lever's rows are asked by every combination
    the plan tries."""
    return cached_rows(r, "levers." + name, make)


def partials_rows(r: Report) -> np.ndarray:
    """Rows of convolution and matmul partial sums (see the module docstring)."""
    return _once(r, "partials_rows", _partials_rows)


def _partials_rows(r: Report) -> np.ndarray:
    data = category_rows(r, ("variable",))
    var = data & r.allocated & ~r.always_live & ~persistent_rows(r)
    if r.has_class_steps:
        # per class, then per row (not a Pod's rows x 2 of steps)
        short = (r.class_steps[:, 1] - r.class_steps[:, 0]) <= SHORT_STEPS
        var &= short[r.eq_class]
    ec = r.element_constraints
    src, dst = ec.row_ids(), ec.indices
    exchange = category_rows(r, EXCHANGE_CATEGORIES)
    by_exchange = np.zeros(r.num_vars, bool)
    by_exchange[src[exchange[dst]]] = True
    to_data = np.zeros(r.num_vars, bool)
    to_data[src[data[dst]]] = True
    row_ok = var & (by_exchange | (to_data & _named(r, PARTIALS_HINT)))
    # a tensor is partials if its parts are so on some tile (a constraint exists only where
    # both tensors have a part)
    codes, _ = tensor_codes(r)
    tensor_ok = np.zeros(int(codes.max()) + 1 if len(codes) else 0, bool)
    tensor_ok[codes[row_ok]] = True
    return np.flatnonzero(tensor_ok[codes] & var)


def optimiser_state_rows(r: Report) -> np.ndarray:
    """Persistent rows named as an optimiser's state."""
    return _once(r, "optimiser_state_rows", _optimiser_state_rows)


def _optimiser_state_rows(r: Report) -> np.ndarray:
    return np.flatnonzero(persistent_rows(r) & _named(r, OPTIMISER_HINT))


def first_order_rows(r: Report) -> np.ndarray:
    """The optimiser state named as first-order momentum."""
    return _once(r, "first_order_rows", _first_order_rows)


def _first_order_rows(r: Report) -> np.ndarray:
    rows = optimiser_state_rows(r)
    return rows[_named(r, FIRST_ORDER_HINT)[rows]]


def optimiser_temporary_rows(r: Report) -> np.ndarray:
    """Model data named as the optimiser's that is not persistent (its update's
    temporaries)."""
    return _once(r, "optimiser_temporary_rows", _optimiser_temporary_rows)


def _optimiser_temporary_rows(r: Report) -> np.ndarray:
    var = category_rows(r, ("variable",)) & r.allocated & ~r.always_live
    return np.flatnonzero(var & ~persistent_rows(r) & _named(r, OPTIMISER_HINT))


def serialise_rows(r: Report) -> np.ndarray:
    """The rows ``--serialise`` slices: the vocabulary matmuls' partial sums, the vocabulary
    weight's gradient and the embedding's optimiser temporaries (see the module
    docstring)."""
    return _once(r, "serialise_rows", _serialise_rows)


def _serialise_rows(r: Report) -> np.ndarray:
    vocab = _named(r, VOCAB_HINT)
    out = np.zeros(r.num_vars, bool)
    out[partials_rows(r)] = True
    out[optimiser_temporary_rows(r)] = True
    var = category_rows(r, ("variable",)) & r.allocated & ~r.always_live & ~persistent_rows(r)
    out |= var & _named(r, WEIGHT_GRAD_HINT)
    return np.flatnonzero(out & vocab)


def ipu_of_rows(r: Report, rows: np.ndarray) -> np.ndarray:
    return r.target.ipu_of(r.tile[rows])


def amp_sizes(r: Report, size: np.ndarray, amps: tuple, was: float):
    """Partial sums' rows and their sizes at availableMemoryProportion ``amps`` (one value,
    or one an IPU) compiled at ``was``."""
    rows = partials_rows(r)
    a = np.asarray(amps, float)
    f = a[np.minimum(ipu_of_rows(r, rows), len(a) - 1)] if len(a) > 1 else np.full(len(rows), a[0])
    return rows, np.ceil(size[rows] * f / was).astype(size.dtype)


def weight_rows(r: Report) -> np.ndarray:
    """Persistent model data not named as an optimiser's state: the weights."""
    return _once(r, "weight_rows", _weight_rows)


def _weight_rows(r: Report) -> np.ndarray:
    var = category_rows(r, ("variable",))
    return np.flatnonzero(persistent_rows(r) & var & ~_named(r, OPTIMISER_HINT))


def _union_rows(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """``np.union1d`` of two sets of row numbers below ``n``, by a mask rather than a sort
    (a Pod's weight rows are millions)."""
    mask = np.zeros(n, bool)
    mask[a] = True
    mask[b] = True
    return np.flatnonzero(mask)


def _largest_weight(r: Report, size: np.ndarray, allocated: np.ndarray, ipu: np.ndarray,
                    k: int) -> np.ndarray:
    """Per IPU, the bytes of its largest weight (``weight_rows`` of one tensor)."""
    w = weight_rows(r)
    w = w[allocated[w]]
    if not len(w):
        return np.zeros(k)
    codes, _ = tensor_codes(r)
    c = codes[w]
    m = int(c.max()) + 1
    per = np.bincount(ipu[r.tile[w]].astype(np.int64) * m + c, size[w], minlength=k * m)
    return per.reshape(k, m).max(axis=1)


def offload_state_rows(r: Report, allocated: np.ndarray) -> np.ndarray:
    """Rows the optimiser state off chip takes off their tiles: the optimiser's state
    (``optimiser_state_rows``, allocated) but, on each tile, that of the one weight with the
    most state bytes there, which is streamed in for the weight's update (its moments loaded
    from their remote buffers, live on chip until stored back), so a tile holds at least the
    largest; a weight's state told by its tensors' names less their last component
    (``embedding/tokens/adam/firstMoment`` and ``.../secondMoment``: one weight's). The
    update's temporaries (the bias-corrected moments) are not state: they stay."""
    st = optimiser_state_rows(r)
    st = st[allocated[st]]
    if not len(st):
        return st
    codes, names = tensor_codes(r)
    parent = np.unique(np.array([n.rsplit("/", 1)[0] for n in names], object),
                       return_inverse=True)[1].astype(np.int64)
    w = parent[codes[st]]
    m = int(w.max()) + 1
    key = r.tile[st].astype(np.int64) * m + w
    u, inv = np.unique(key, return_inverse=True)
    per = np.bincount(inv, r.size[st])
    tile = u // m
    order = np.lexsort((-per, tile))   # each tile's weight of the most state first
    first = order[np.r_[True, tile[order][1:] != tile[order][:-1]]]
    kept = np.zeros(len(u), bool)
    kept[first] = True
    return st[~kept[inv]]


def rts_sizes(r: Report, size: np.ndarray, allocated: np.ndarray, n: int,
              weights: bool = False, gathered: np.ndarray | None = None):
    """Rows whose sizes change when ``n`` replicas share the optimiser state (``weights``:
    the weights too), and their sizes (see the module docstring); ``(rows, sizes,
    state_rows)``. ``gathered``: the rows of the weights gathered for their reads
    (``tilemem.figures.whatif.gathered.Gathering.weights``), all sharded; ``None`` or none: the
    largest weight part of each tile stays whole."""
    state = optimiser_state_rows(r)
    state = state[allocated[state]]
    if weights:
        if gathered is not None and len(gathered):   # gathered for each read, all shared
            state = _union_rows(state, gathered[allocated[gathered]], r.num_vars)
        else:   # no lifetimes to change: the largest weight part of each tile stays whole,
            # a weight gathered for a pass, taken live throughout
            w = weight_rows(r)
            w = w[allocated[w]]
            order = np.lexsort((-size[w], r.tile[w]))
            w = w[order]
            first = (np.r_[True, r.tile[w][1:] != r.tile[w][:-1]] if len(w)
                     else np.zeros(0, bool))
            state = _union_rows(state, w[~first], r.num_vars)
    temp = optimiser_temporary_rows(r)
    temp = temp[allocated[temp]]
    new = size.copy()
    new[temp] = np.ceil(size[temp] / n).astype(size.dtype)
    T = r.num_tiles
    per_tile = np.bincount(r.tile[state], size[state], minlength=T)
    in_use = np.zeros(T, bool)
    in_use[r.tile[allocated & (r.tile >= 0)]] = True
    ipu = r.target.ipu_of(np.arange(T))
    k = int(ipu.max()) + 1
    share_ipu = np.bincount(ipu, per_tile, minlength=k) / n
    tiles_ipu = np.bincount(ipu[in_use], minlength=k)
    # one weight's update at a time also holds the reduce-scattered gradient's shard and,
    # unless the weights are sharded (updated on their shard), the updated weights' shard
    # before their all-gather: new tensors, 1/n of the weight each, laid out like the state's
    # shard. The largest weight's, taken live throughout (an upper estimate of one update's)
    share_ipu = share_ipu + (1 if weights else 2) * _largest_weight(r, size, allocated, ipu, k) / n
    share = np.where(in_use, share_ipu[ipu] / np.maximum(tiles_ipu[ipu], 1), 0.0)
    # the tile's state variables carry its share, in proportion to their sizes
    ratio = np.where(per_tile > 0, share / np.maximum(per_tile, 1), 0.0)
    new[state] = np.ceil(size[state] * ratio[r.tile[state]]).astype(size.dtype)
    # a tile without state: its largest alwaysLive variable carries the share
    bare = np.flatnonzero(in_use & (per_tile == 0) & (share > 0))
    if len(bare):
        al = np.flatnonzero(r.always_live & allocated)
        if len(al):
            order = np.lexsort((-size[al], r.tile[al]))
            al = al[order]
            first = al[np.r_[True, r.tile[al][1:] != r.tile[al][:-1]]]
            carrier = np.full(T, -1)
            carrier[r.tile[first]] = first
            c = carrier[bare]
            c = c[c >= 0]
            new[c] = size[c] + np.ceil(share[r.tile[c]]).astype(size.dtype)
    changed = np.flatnonzero(new != size)
    return changed, new[changed], state
