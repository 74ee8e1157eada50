"""What a smaller micro-batch shrinks, told from the report's structure, not its names.

A micro-batch half as large halves what is per sample: activations, their gradients, the
buffers that carry them. It does not change what is per parameter: weights and optimiser
state (*persistent*: live for the whole program), and what has their shape -- weight
gradients, gradient accumulators (loop-carried, weight-sized), whatever a framework names
them. So the criterion (inferred, ``rules.INFERRED_PARAMETER_SHAPED``):

- *persistent* tensors: alwaysLive model data (not code, stack or other categories Poplar
  keeps for the program itself, only ``variable``), or, with class steps, a class live from
  the program's first step to its last (``PERSISTENT_SLACK``); without steps, a class that
  interferes with nearly every other class (``PERSISTENT_DEGREE`` of the most interfering
  one);
- *parameter-shaped* tensors: the same tiles as a persistent tensor (first tile and number of
  tiles) and within ``SHAPE_TOLERANCE`` of its bytes (the same shape in another type is
  mapped by the same rule onto the same tiles);
- a micro-batch edit scales every other non-always-live ``variable``, ``message``,
  ``rearrangement`` and ``outputEdge`` tensor;
- and a pipeline's buffers (``rules.INFERRED_PIPELINE_BUFFER_PREFIX``: a stage's stash, the
  copies between IPUs and their ``globalMessage`` send and receive buffers), which carry
  micro-batches: a stash can be live over the whole program (a pipeline without gradient
  accumulation updates the weights between its micro-batches) and so look persistent, but
  it holds micro-batches' activations. A buffer of exactly a persistent tensor's bytes (on
  any tiles) carries that tensor, not micro-batches: a weight sent to the stage that reads
  it (a tied embedding). Names are the only hint here, so a report whose framework names
  them otherwise keeps them as persistent (over by their half).

>>> from tilemem.model import Report
>>> import numpy as np
>>> r = Report.from_columns(var_id=range(6), tile=[0, 1, 0, 1, 0, 1],
...     size=[40, 40, 40, 40, 8, 8], alignment=[4] * 6, offset=[0] * 6,
...     category=["variable"] * 6, eq_class=[0, 0, 1, 1, 2, 3],
...     interference=[[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]],
...     always_live=[1, 1, 0, 0, 0, 0], names=["w#0", "w#1", "acc#0", "acc#1", "x#0", "y#1"],
...     class_steps=np.array([[0, 10], [3, 8], [4, 6], [1, 7]]))
>>> micro_batch_rows(r).tolist()    # w persistent, acc (any name) shaped like it: x, y scale
[4, 5]
"""
from __future__ import annotations

import numpy as np
from ...jit import njit

from ...model import Report
from ...model.frozen import frozen
from ...model.interference import tile_interference
from ...model.names import tensor_codes, tensors_named_under
from ...rules import INFERRED_PIPELINE_BUFFER_PREFIX

#: Inferred: two tensors on the same tiles whose bytes differ by at most this share have the
#: same shape (a weight and its gradient, its accumulator).
SHAPE_TOLERANCE = 0.02
#: With class steps: a class live from within this share of the program's steps of its
#: first step to within it of its last is persistent (the steps that stream state in and
#: out at either end are not the training loop).
PERSISTENT_SLACK = 0.01
#: Without class steps: a class interfering with at least this share of the most interfering
#: class's neighbours is live for (nearly) the whole program.
PERSISTENT_DEGREE = 0.95
#: Categories of per-sample data (002's categories): model variables and the exchange
#: buffers that carry them.
PER_SAMPLE_CATEGORIES = ("variable", "message", "rearrangement", "outputEdge")


def persistent_rows(r: Report) -> np.ndarray:
    """Whether each row is persistent training state (see the module docstring). Computed
    once a report (every lever asks; at Pod scale a pass is seconds), read-only."""
    return cached_rows(r, "batch.persistent_rows", _persistent_rows)


def cached_rows(r: Report, key: str, make) -> np.ndarray:
    """``make(r)``, computed once a report and kept read-only (rows many what-ifs ask: at Pod
    scale a pass over the rows is seconds, and a caller writing into the shared array would
    change every later answer)."""
    def frozen():
        a = make(r)
        a.setflags(write=False)
        return a
    return r.cached(key, frozen)


def _persistent_rows(r: Report) -> np.ndarray:
    data = r.allocated & category_rows(r, ("variable",))
    out = data & r.always_live
    model = data & ~r.always_live
    if not model.any():
        return out
    if r.has_class_steps:
        out |= _persistent_by_steps(frozen(r.eq_class, np.int64), frozen(model),
                                    frozen(r.class_steps, np.int64), PERSISTENT_SLACK)
    else:
        deg = np.diff(tile_interference(r).indptr)[r.eq_class]
        out |= model & (deg >= PERSISTENT_DEGREE * deg[model].max())
    return out


def category_rows(r: Report, names) -> np.ndarray:
    """Whether each row's category is one of ``names`` (a table of the report's few
    categories read at every row: ``np.isin`` of a Pod's rows is seconds). Every lever's
    rows are told by category with it."""
    table = np.array([c in names for c in r.categories], bool)
    return table[r.category] if len(table) else np.zeros(r.num_vars, bool)


@njit(cache=True)
def _persistent_by_steps(eq_class, model, class_steps, slack_share):
    """The ``model`` rows whose class is live from within ``slack_share`` of the model rows'
    steps of their first step to within it of their last (see the module docstring): two
    passes over the rows, not a gather of every row's steps."""
    n = len(eq_class)
    first = np.iinfo(np.int64).max
    last = np.iinfo(np.int64).min
    for i in range(n):
        if model[i]:
            c = eq_class[i]
            if class_steps[c, 0] < first:
                first = class_steps[c, 0]
            if class_steps[c, 1] > last:
                last = class_steps[c, 1]
    slack = slack_share * (last - first)
    out = np.zeros(n, np.bool_)
    for i in range(n):
        if model[i]:
            c = eq_class[i]
            out[i] = class_steps[c, 0] <= first + slack and class_steps[c, 1] >= last - slack
    return out


def micro_batch_rows(r: Report) -> np.ndarray:
    """Rows a smaller micro-batch shrinks: per-sample tensors that are neither persistent
    nor parameter-shaped (see the module docstring). Computed once a report, read-only."""
    return cached_rows(r, "batch.micro_batch_rows", _micro_batch_rows)


def _micro_batch_rows(r: Report) -> np.ndarray:
    code, _ = tensor_codes(r)
    k = int(code.max()) + 1 if len(code) else 0
    first, ntiles, total = _tensor_extents(frozen(code, np.int64), frozen(r.tile, np.int64),
                                           frozen(r.size, np.int64), frozen(r.allocated), k)
    pers = np.zeros(k, bool)
    pers[code[persistent_rows(r)]] = True
    # parameter-shaped: a persistent tensor on the same tiles with nearly the same bytes
    shaped = pers.copy()
    sig = {}
    for c in np.flatnonzero(pers).tolist():
        sig.setdefault((int(first[c]), int(ntiles[c])), []).append(float(total[c]))
    for c in np.flatnonzero(~pers & (ntiles > 0)).tolist():
        for t in sig.get((int(first[c]), int(ntiles[c])), ()):
            if abs(total[c] - t) <= SHAPE_TOLERANCE * t:
                shaped[c] = True
                break
    per_sample = category_rows(r, PER_SAMPLE_CATEGORIES)
    buffers = _pipeline_buffers(r, code)
    if buffers.any() and pers.any():
        # a buffer of exactly a persistent tensor's bytes carries that tensor to another
        # stage (on other tiles, so not told by its tiles as the parameter-shaped are; its
        # bytes exactly, as a copy has them: a network's many weights would match
        # activations within a tolerance)
        b = np.unique(code[buffers])
        kept = pers.copy()
        kept[b] = False   # a stash looks persistent: it is no tensor a buffer could carry
        sent = np.zeros(k, bool)
        sent[b[np.isin(total[b], total[kept])]] = True
        buffers &= ~sent[code]
        per_sample &= ~sent[code]
    return np.flatnonzero(r.allocated & ~r.always_live
                          & ((per_sample & ~shaped[code]) | buffers))


def _pipeline_buffers(r: Report, code: np.ndarray) -> np.ndarray:
    """Rows of a pipeline's buffers (see the module docstring), told by their names."""
    carried = category_rows(r, PER_SAMPLE_CATEGORIES + ("globalMessage",))
    return carried & tensors_named_under(r, INFERRED_PIPELINE_BUFFER_PREFIX)[code]


@njit(cache=True)
def _tensor_extents(code, tile, size, allocated, k):
    """Per tensor code, over the allocated rows: its first tile, its number of variables (one
    a tile) and its bytes (as floats, compared with a tolerance); one pass over the rows."""
    first = np.full(k, np.iinfo(np.int64).max, np.int64)
    count = np.zeros(k, np.int64)
    total = np.zeros(k, np.int64)
    for i in range(len(code)):
        if allocated[i]:
            c = code[i]
            if tile[i] < first[c]:
                first[c] = tile[i]
            count[c] += 1
            total[c] += size[i]
    return first, count, total.astype(np.float64)


def micro_batch_sizes(r: Report, size: np.ndarray, rows: np.ndarray,
                      factor: float) -> np.ndarray:
    """The sizes of ``rows`` (per-sample rows, ``micro_batch_rows``) at ``factor`` times the
    micro-batch, by the linear tile mapping's rule (003's ``calcLinearTileMapping``, which
    Poplar's planners and ``mapTensorLinearly`` follow): every tile a tensor uses holds the
    same whole number of grains, at least the minimum per tile, and no more than the tensor
    needs to fit on the IPU's tiles. So a tensor on fewer tiles than its IPU has holds its
    minimum on each (its largest part, ``rules.INFERRED_MIN_PER_TILE_IS_LARGEST_PART``): a
    smaller one keeps that many bytes on each tile, on fewer tiles, the first ones in the mapping's
    order (ascending from the first tile of the run of tiles it covers, descending when the
    part at the run's start is the smaller, the remainder's), and the last takes what is
    left. A tensor on every tile of its IPU is spread by the tiles: its minimum is not in the
    report; taken as below its parts, which scale with it (the measured error,
    ``rules.LEVER_ERRORS["micro-batch"]``, covers a tensor near its minimum). The report
    cannot tell a tensor at its minimum from one planned onto a subset of the tiles, whatever
    its size (which keeps its tiles, fewer bytes on each): each part takes the larger of the
    two readings. A larger micro-batch (``factor > 1``) scales every part (a tensor planned
    onto its tiles, or on all of them); the tiles a tensor at its minimum spreads onto are
    ``spread.spread_report``'s copies, left as they are.

    >>> from tilemem.model import Report
    >>> r = Report.from_columns(var_id=range(5), tile=[2, 3, 4, 5, 0], size=[64, 64, 64, 16, 8],
    ...     alignment=[4] * 5, offset=[0] * 5, category=["variable"] * 5, eq_class=[0] * 5,
    ...     interference=[[]], names=["x#2", "x#3", "x#4", "x#5", "y#0"])
    >>> micro_batch_sizes(r, r.size, np.arange(5), 0.5).tolist()  # x: 208 -> 104 bytes
    [64, 40, 32, 8, 4]

    (x at its minimum: 64 and 40 on its first two tiles; planned onto its four: 32, 32, 32,
    8; the larger on each.)
    """
    rows = np.asarray(rows, np.int64)
    if factor >= 1 or not len(rows):
        out = np.ceil(size[rows] * factor).astype(size.dtype)
        # a spread report's copies (``spread.spread_report``) hold their parts at the larger
        # micro-batch already
        copies = rows >= r._cache.get("batch.spread_from", r.num_vars)
        out[copies] = size[rows[copies]]
        return out
    codes, _ = tensor_codes(r)
    T = r.target.ipu_tiles
    tile = r.tile[rows]
    ipus = r.target.num_ipus
    group = codes[rows].astype(np.int64) * (ipus + 1) + tile // T
    order = np.lexsort((tile, group))
    out = np.empty(len(rows), size.dtype)
    out[order] = _linear_sizes(frozen(group[order], np.int64), frozen(tile[order] % T, np.int64),
                               frozen(size[rows][order], np.int64), T, float(factor))
    return out


@njit(cache=True, inline="always")
def tensor_run(group, tile, size, a, T):
    """The tensor whose rows (sorted by tensor, then tile; ``tile`` within one IPU of ``T``
    tiles) start at row ``a``: ``(b, total, chunk, start, last, descending)``, its rows
    ``[a, b)``, its bytes, its largest part, and (mapped on fewer tiles than ``T``) the row
    after the widest gap between its tiles (where the run of tiles it covers starts), the row
    before it, and whether the run descends (the part at its start is the remainder)."""
    n = len(group)
    b = a
    while b < n and group[b] == group[a]:
        b += 1
    k = b - a
    total = 0
    chunk = 0
    for i in range(a, b):
        total += size[i]
        if size[i] > chunk:
            chunk = size[i]
    start, gap = a, tile[a] + T - tile[b - 1]
    for i in range(a + 1, b):
        if tile[i] - tile[i - 1] > gap:
            start, gap = i, tile[i] - tile[i - 1]
    last = a + (start - a + k - 1) % k
    return b, total, chunk, start, last, size[start] < size[last]


@njit(cache=True)
def _linear_sizes(group, tile, size, T, factor):
    """Per row (sorted by tensor, then tile): its size when its tensor is ``factor`` times as
    large, mapped by the linear rule (``micro_batch_sizes``)."""
    n = len(group)
    out = np.zeros(n, np.int64)
    a = 0
    while a < n:
        b, total, chunk, start, last, descending = tensor_run(group, tile, size, a, T)
        k = b - a
        if k >= T or chunk == 0:   # spread by the tiles: every part scales
            for i in range(a, b):
                out[i] = int(np.ceil(size[i] * factor))
            a = b
            continue
        # at its minimum, its largest part, on the run of tiles ``tensor_run`` finds
        left = int(np.ceil(total * factor))
        for j in range(k):
            i = a + (start - a + (k - 1 - j if descending else j)) % k
            take = min(chunk, left)
            # the larger of the two readings: at its minimum (fewer tiles, as many bytes on
            # each) or planned onto these tiles (fewer bytes on each)
            out[i] = max(take, int(np.ceil(size[i] * factor)))
            left -= take
        a = b
    return out
